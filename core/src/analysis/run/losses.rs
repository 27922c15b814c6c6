//! Per-consumer loss bookkeeping: unreachable prefixes and their cascades.

use super::super::findings::RootAt;
use super::super::UnreachablePrefix;
use crate::consumers::VerdictKind;

type HashMap<K, V> = hashbrown::HashMap<K, V, rustc_hash::FxBuildHasher>;

/// Per-consumer loss bookkeeping during a run.
#[derive(Clone, Debug, Default)]
pub(crate) struct LossTrack {
    /// Lost block → root lost event (only while events are delivered).
    /// Keyed by `(group, hash)`: a lost block of one KV group does not cascade into another.
    pub(crate) root_of: HashMap<(u32, u64), u32>,
    /// Unreachable prefixes, by root event (ascending: a root is created at the event being
    /// processed). Its cascade (later events lost because of it) is `events - 1`.
    pub(crate) roots: Vec<UnreachablePrefix>,
    /// Where each root is (parallel to `roots`).
    pub(crate) root_at: Vec<RootAt>,
    /// Final verdict counts (kept up to date as pending events resolve).
    pub(crate) counts: [usize; VerdictKind::COUNT],
    /// Every event with a lost block and the root event it was lost under, ascending by event.
    pub(crate) lost_events: Vec<(u32, u32)>,
}

impl LossTrack {
    pub(crate) fn root(&self, event: usize) -> Option<&UnreachablePrefix> {
        let i = self.roots.binary_search_by_key(&event, |r| r.event).ok()?;
        self.roots.get(i)
    }

    /// Events lost later because `event` was lost.
    pub(crate) fn cascade(&self, event: usize) -> usize {
        self.root(event).map_or(0, |r| r.events.saturating_sub(1))
    }
}
