//! The routing-precondition watcher without the `preconditions` feature: the same interface,
//! doing nothing (the rules exist but never fire; see `core/Cargo.toml`).

use crate::analysis::Finding;
use crate::consumers::{AnyConsumer, EventVerdict};
use crate::event::KvEvent;
use crate::trace::Trace;

pub(crate) use super::watch::{At, Context, SILENT_SOURCE_FACTOR};

/// The watcher: nothing to watch.
#[derive(Debug, Default)]
pub(crate) struct Preconditions;

impl Preconditions {
    pub(crate) fn event(&mut self, _: &Trace, _: At, _: &KvEvent) {}

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
