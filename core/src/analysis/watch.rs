//! What the routing-precondition watcher gets from the analysis run: where an event is
//! ([`At`]) and, once the events are done, what its findings need ([`Context`]). Shared by
//! the watcher (`preconditions/`) and its stand-in without the `preconditions` feature
//! (`preconditions/off.rs`).

use crate::analysis::EventIndex;
use crate::consumers::{AnyConsumer, ConsumerConfig, ConsumerKind, Interner};
use crate::trace::Trace;

/// The default `silent-source` factor: a source silent for more than this many times its
/// median interval between batches, while other sources publish, is reported.
pub const SILENT_SOURCE_FACTOR: u32 = 10;

/// Where an event is: what a finding points at.
#[derive(Clone, Copy, Debug)]
#[cfg_attr(not(feature = "preconditions"), allow(dead_code))]
pub(crate) struct At {
    /// Global event index.
    pub(crate) event: usize,
    /// The batch's line (msgpack: batch number).
    pub(crate) line: u64,
    /// Position in the batch.
    pub(crate) pos: u32,
    /// Interned source.
    pub(crate) source: u32,
    /// The batch's record index.
    pub(crate) record: u32,
}

/// What the findings need from the run.
#[cfg_attr(not(feature = "preconditions"), allow(dead_code))]
pub(crate) struct Context<'a> {
    pub(crate) trace: &'a Trace,
    pub(crate) index: &'a EventIndex,
    pub(crate) consumers: &'a [AnyConsumer],
    pub(crate) kinds: &'a [ConsumerKind],
    pub(crate) consumer_config: &'a ConsumerConfig,
    pub(crate) interner: &'a Interner,
    pub(crate) silent_factor: u32,
}
