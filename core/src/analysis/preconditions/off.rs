//! The routing-precondition watcher without the `preconditions` feature: the same interface,
//! doing nothing (the rules exist but never fire; see `core/Cargo.toml`).

use crate::analysis::{EventIndex, Finding};
use crate::consumers::{AnyConsumer, ConsumerConfig, ConsumerKind, EventVerdict, Interner};
use crate::event::KvEvent;
use crate::trace::TraceBatch;

/// The default `silent-source` factor (see the feature's module).
pub const SILENT_SOURCE_FACTOR: u32 = 10;

/// Where an event is.
#[derive(Clone, Copy, Debug)]
#[allow(dead_code)]
pub(crate) struct At {
    pub(crate) event: usize,
    pub(crate) line: u64,
    pub(crate) pos: u32,
    pub(crate) source: u32,
    pub(crate) record: u32,
}

/// The watcher: nothing to watch.
#[derive(Debug, Default)]
pub(crate) struct Preconditions;

impl Preconditions {
    pub(crate) fn event(&mut self, _: &TraceBatch, _: At, _: &KvEvent) {}

    pub(crate) fn verdict(
        &mut self,
        _: &AnyConsumer,
        _: At,
        _: &KvEvent,
        _: &[u64],
        _: &EventVerdict,
    ) {
    }

    pub(crate) fn findings(&mut self, _: &Context<'_>) -> Vec<Finding> {
        Vec::new()
    }
}

/// What the findings would need from the run.
#[allow(dead_code)]
pub(crate) struct Context<'a> {
    pub(crate) index: &'a EventIndex,
    pub(crate) consumers: &'a [AnyConsumer],
    pub(crate) kinds: &'a [ConsumerKind],
    pub(crate) consumer_config: &'a ConsumerConfig,
    pub(crate) interner: &'a Interner,
    pub(crate) silent_factor: u32,
}
