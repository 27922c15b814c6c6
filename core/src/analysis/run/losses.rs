//! Per-consumer loss bookkeeping: unreachable prefixes and their cascades.

use crate::analysis::roots::Root;
use crate::consumers::VerdictKind;

type HashMap<K, V> = hashbrown::HashMap<K, V, rustc_hash::FxBuildHasher>;

/// Per-consumer loss bookkeeping during a run.
#[derive(Clone, Debug, Default)]
pub(crate) struct LossTrack {
    /// Lost block → root lost event (only while events are delivered), keyed by `(group,
    /// hash)`: a lost block of one KV group does not cascade into another. Group 0 blocks the
    /// run has interned (every block and parent an event names) are kept densely by their
    /// interner id (`u32::MAX`: none), 4 bytes per id instead of a map entry (a trace can lose
    /// every block: one-event batches whose parents are never stored); others in `other`.
    root_of: Vec<u32>,
    root_of_other: HashMap<(u32, u64), u32>,
    /// Unreachable prefixes, compact, by root event (ascending: a root is created at the
    /// event being processed). Its cascade (later events lost because of it) is `events - 1`.
    pub(crate) roots: Vec<Root>,
    /// Final verdict counts (kept up to date as pending events resolve).
    pub(crate) counts: [usize; VerdictKind::COUNT],
    /// Every event with a lost block and the root event it was lost under, ascending by event
    /// (only for [`crate::analysis::analyze`]: the replay's lens reads them).
    pub(crate) lost_events: Vec<(u32, u32)>,
    /// How many blocks each of `lost_events` lost (parallel to it): the loss summary's block
    /// count without a list of every lost block (kept only where `compare` needs the hashes).
    pub(crate) lost_counts: Vec<u32>,
    /// Streaming: events with a lost block and their lost blocks, in total, and the events
    /// among them still pending at delivery, with their lost block counts (only a pending event
    /// can be replayed later, which takes it out of the totals).
    pub(crate) lost_total: (usize, usize),
    pub(crate) lost_pending: Vec<(u32, u32)>,
}

impl LossTrack {
    /// The root lost event of lost block `hash` of group `group`, if it is lost; `id` is its
    /// interner id (`Interner::get(hash)`).
    pub(crate) fn root_of_id(&self, id: Option<u32>, group: u32, hash: u64) -> Option<u32> {
        match (group, id) {
            (0, Some(id)) => self
                .root_of
                .get(id as usize)
                .copied()
                .filter(|r| *r != u32::MAX),
            _ => self.root_of_other.get(&(group, hash)).copied(),
        }
    }

    /// Record that lost block `hash` (interner id `id`) of group `group` was lost under root
    /// event `root`.
    pub(crate) fn set_root_of_id(&mut self, id: Option<u32>, group: u32, hash: u64, root: u32) {
        match (group, id) {
            (0, Some(id)) => {
                let i = id as usize;
                if i >= self.root_of.len() {
                    self.root_of.resize(i + 1, u32::MAX);
                }
                if let Some(r) = self.root_of.get_mut(i) {
                    *r = root;
                }
            }
            _ => {
                self.root_of_other.insert((group, hash), root);
            }
        }
    }

    /// Whether lost block `id` (group 0, an interner id) is recorded.
    pub(crate) fn holds(&self, id: u32) -> bool {
        self.root_of
            .get(id as usize)
            .is_some_and(|r| *r != u32::MAX)
    }

    /// Forget the lost blocks (the roots are all that is needed once the events are done).
    pub(crate) fn clear_root_of(&mut self) {
        self.root_of = Vec::new();
        self.root_of_other = HashMap::default();
    }
}
