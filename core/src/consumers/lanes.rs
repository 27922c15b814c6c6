//! Lanes (one source's blocks in one tier) and the counters every model keeps per lane.

use serde::{Deserialize, Serialize};

use super::Hashes;

/// The lanes holding one block, in insertion order (inline up to 2: a block usually sits in a
/// GPU and a CPU lane). Kept as packed `source << 32 | tier` in the crate's [`Hashes`] vector
/// type: one `SmallVec` type less (wasm size). Used by llm-d, the ideal model and the
/// violation index.
#[derive(Clone, Debug, Default)]
pub(crate) struct LaneList(Hashes);

impl LaneList {
    fn pack(lane: LaneKey) -> u64 {
        (lane.source as u64) << 32 | lane.tier as u64
    }

    fn unpack(k: u64) -> LaneKey {
        LaneKey {
            source: (k >> 32) as u32,
            tier: k as u32,
        }
    }

    /// Add `lane`; false if it was already there.
    pub(crate) fn add(&mut self, lane: LaneKey) -> bool {
        let k = Self::pack(lane);
        if self.0.contains(&k) {
            return false;
        }
        self.0.push(k);
        true
    }

    /// Remove `lane`; false if it was not there.
    pub(crate) fn remove(&mut self, lane: LaneKey) -> bool {
        let k = Self::pack(lane);
        match self.0.iter().position(|x| *x == k) {
            Some(p) => {
                self.0.remove(p);
                true
            }
            None => false,
        }
    }

    /// Whether a lane of source `source` is there.
    pub(crate) fn has_source(&self, source: u32) -> bool {
        self.0.iter().any(|k| (k >> 32) as u32 == source)
    }

    /// Whether no lane is there.
    pub(crate) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Remove source `source`'s lanes, in list order, counting each in `book` (when given) as
    /// one indexed block less (`AllBlocksCleared`).
    pub(crate) fn drop_source(&mut self, source: u32, book: Option<&mut LaneBook>) {
        self.drop_where(|l| l.source == source, book);
    }

    /// Remove the lanes for which `gone` holds, in list order, counting each in `book` (when
    /// given) as one indexed block less.
    pub(crate) fn drop_where(
        &mut self,
        gone: impl Fn(LaneKey) -> bool,
        mut book: Option<&mut LaneBook>,
    ) {
        let mut i = 0;
        while let Some(k) = self.0.get(i).copied() {
            let l = Self::unpack(k);
            if gone(l) {
                self.0.remove(i);
                if let Some(b) = book.as_deref_mut() {
                    b.bump(l, LaneCounts::indexed_by(-1));
                }
            } else {
                i += 1;
            }
        }
    }
}

/// One lane of a consumer's index: blocks of one source in one tier.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct LaneKey {
    /// Interned source id.
    pub source: u32,
    /// Interned tier id.
    pub tier: u32,
}

/// Counters of a lane.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LaneCounts {
    /// Blocks currently indexed (reachable or not).
    pub indexed: i64,
    /// Blocks currently held pending.
    pub pending: i64,
    /// Blocks dropped so far (cumulative: orphans, truncations, overflow).
    pub dropped: i64,
    /// Blocks indexed but unreachable (misrooted), currently.
    pub unreachable: i64,
}

impl LaneCounts {
    /// A delta of `n` indexed blocks (see [`LaneBook::bump`]).
    pub(crate) fn indexed_by(n: i64) -> Self {
        LaneCounts {
            indexed: n,
            ..LaneCounts::default()
        }
    }

    /// A delta of `n` pending blocks.
    pub(crate) fn pending_by(n: i64) -> Self {
        LaneCounts {
            pending: n,
            ..LaneCounts::default()
        }
    }

    /// A delta of `n` dropped blocks.
    pub(crate) fn dropped_by(n: i64) -> Self {
        LaneCounts {
            dropped: n,
            ..LaneCounts::default()
        }
    }
}

/// Per-lane counters kept incrementally by every model (cheap snapshots): a small map sorted
/// by lane (a trace has few lanes; a sorted vector needs no tree code).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Lanes {
    entries: Vec<(LaneKey, LaneCounts)>,
}

impl Lanes {
    /// No lanes.
    pub fn new() -> Self {
        Lanes::default()
    }

    /// The counters of `lane`, if it was ever touched.
    pub fn get(&self, lane: &LaneKey) -> Option<&LaneCounts> {
        let i = self.entries.binary_search_by_key(lane, |e| e.0).ok()?;
        self.entries.get(i).map(|e| &e.1)
    }

    /// Whether `lane` was ever touched.
    pub fn contains_key(&self, lane: &LaneKey) -> bool {
        self.get(lane).is_some()
    }

    /// The lanes and their counters, sorted by lane.
    pub fn iter(&self) -> impl Iterator<Item = (&LaneKey, &LaneCounts)> + '_ {
        self.entries.iter().map(|(k, v)| (k, v))
    }

    /// Number of lanes.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether no lane was touched.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The counters of `lane`, created at zero if new.
    fn entry(&mut self, lane: LaneKey) -> &mut LaneCounts {
        let i = match self.entries.binary_search_by_key(&lane, |e| e.0) {
            Ok(i) => i,
            Err(i) => {
                self.entries.insert(i, (lane, LaneCounts::default()));
                i
            }
        };
        // In range: found or just inserted at `i`.
        &mut self.entries[i].1
    }
}

/// A model's lane counters plus, while the replay engine records, the lanes changed by the
/// current event (so that recording costs no copy of the counters per event).
#[derive(Clone, Debug, Default)]
pub(crate) struct LaneBook {
    lanes: Lanes,
    /// Lanes bumped since the last [`LaneBook::take_changes`], with their counters before
    /// (`None`: the lane did not exist). Only kept while `logging`.
    // A plain `Vec` (its buffer is reused from event to event): one SmallVec type less.
    touched: Vec<(LaneKey, Option<LaneCounts>)>,
    pub(super) logging: bool,
}

impl LaneBook {
    /// Add `d` to one lane's counters (a delta, not a closure: one copy of this code).
    pub(crate) fn bump(&mut self, key: LaneKey, d: LaneCounts) {
        if self.logging && !self.touched.iter().any(|t| t.0 == key) {
            self.touched.push((key, self.lanes.get(&key).copied()));
        }
        let c = self.lanes.entry(key);
        c.indexed += d.indexed;
        c.pending += d.pending;
        c.dropped += d.dropped;
        c.unreachable += d.unreachable;
    }

    /// The counters.
    pub(crate) fn lanes(&self) -> &Lanes {
        &self.lanes
    }

    /// Start or stop logging changes.
    pub(super) fn set_logging(&mut self, on: bool) {
        self.logging = on;
        self.touched.clear();
    }

    /// Append the lanes whose counters differ from before the logged changes (sorted by lane,
    /// with their new counters) to `out` and forget the log.
    pub(super) fn take_changes(&mut self, out: &mut Vec<(LaneKey, LaneCounts)>) {
        let from = out.len();
        for (k, before) in self.touched.drain(..) {
            let after = self.lanes.get(&k).copied();
            if after != before {
                out.push((k, after.unwrap_or_default()));
            }
        }
        if let Some(new) = out.get_mut(from..) {
            crate::sort::insertion_sort_by(new, |a, b| a.0 < b.0);
        }
    }
}
