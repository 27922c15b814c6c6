//! The violation index's state: which lanes hold each block, and the children waiting for a
//! parent.

use crate::consumers::{Hashes, LaneKey};

#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum Scope {
    Lane,
    Source,
    Global,
}

/// A child waiting for its parent.
pub(super) struct Waiter {
    pub(super) child: usize,
    /// The analysis' block id of its first block.
    pub(super) child_id: u32,
    /// Its source (for the finding) and engine (`(source, dp_rank)`, for the lanes).
    pub(super) source: u32,
    pub(super) engine: u32,
    /// Its KV group and the parent's hash.
    pub(super) group: u32,
    pub(super) parent: u64,
    pub(super) tier: u32,
    pub(super) job: u32,
    /// Where it is: its batch record, position and line (the index may no longer hold it).
    pub(super) record: u32,
    pub(super) pos: u32,
    pub(super) line: u64,
    pub(super) scope: Scope,
    pub(super) promotion: bool,
    pub(super) hashes: Hashes,
}

/// Which lanes hold one block (usually one or two: inline) and whether it was ever stored.
#[derive(Clone, Default)]
pub(super) struct Held {
    /// `(engine, tier)` as a [`LaneKey`] (its `source` field holds the engine id: the models'
    /// lane-list type, one `SmallVec` type less).
    pub(super) lanes: crate::consumers::LaneList,
    pub(super) ever: bool,
}

/// Primary-tier inversions' classes by (engine, parent block id, child's first hash), sorted by
/// key: inversions are rare, and a sorted list costs the lean npm build less code than a hash
/// map type of its own.
#[derive(Default)]
pub(super) struct PrimaryPairs(Vec<((u32, u32, u64), crate::analysis::ReorderClass)>);

impl PrimaryPairs {
    pub(super) fn insert(&mut self, key: (u32, u32, u64), class: crate::analysis::ReorderClass) {
        match self.0.binary_search_by_key(&key, |e| e.0) {
            Ok(k) => {
                if let Some(e) = self.0.get_mut(k) {
                    e.1 = class;
                }
            }
            Err(k) => self.0.insert(k, (key, class)),
        }
    }
    pub(super) fn get(&self, key: &(u32, u32, u64)) -> Option<&crate::analysis::ReorderClass> {
        let k = self.0.binary_search_by_key(key, |e| e.0).ok()?;
        self.0.get(k).map(|e| &e.1)
    }
}

pub(super) fn lane(source: u32, tier: u32) -> LaneKey {
    LaneKey { source, tier }
}

/// Lane presence for the violation index (what each tier of each engine holds), by the
/// analysis' `(group, hash)` block id. An engine is a `(source, dp_rank)` publisher.
#[derive(Default)]
pub(super) struct Presence {
    pub(super) held: Vec<Held>,
    /// Per engine: blocks it stored since its last clear (may include removed ones).
    pub(super) by_source: Vec<Vec<u32>>,
}

impl Presence {
    pub(super) fn slot(&mut self, id: u32) -> Option<&mut Held> {
        let i = id as usize;
        if i >= self.held.len() {
            self.held.resize(i + 1, Held::default());
        }
        self.held.get_mut(i)
    }
    /// Store `id` into lane `(s, t)`; false if the lane already held it.
    pub(super) fn add(&mut self, id: u32, s: u32, t: u32) -> bool {
        let Some(h) = self.slot(id) else {
            return true;
        };
        h.ever = true;
        if !h.lanes.add(lane(s, t)) {
            return false;
        }
        if let Some(list) = self.by_source.get_mut(s as usize) {
            list.push(id);
        } else {
            self.by_source.resize(s as usize + 1, Vec::new());
            if let Some(list) = self.by_source.get_mut(s as usize) {
                list.push(id);
            }
        }
        true
    }
    /// Remove `id` from lane `(s, t)`; false if the lane did not hold it.
    pub(super) fn remove(&mut self, id: Option<u32>, s: u32, t: u32) -> bool {
        let Some(h) = id.and_then(|id| self.held.get_mut(id as usize)) else {
            return false;
        };
        h.lanes.remove(lane(s, t))
    }
    pub(super) fn clear_source(&mut self, s: u32) {
        let Some(list) = self.by_source.get_mut(s as usize) else {
            return;
        };
        for id in std::mem::take(list) {
            if let Some(h) = self.held.get_mut(id as usize) {
                h.lanes.drop_source(s, None);
            }
        }
    }
    pub(super) fn scope_missing(&self, id: Option<u32>, s: u32, t: u32) -> Option<Scope> {
        let Some(h) = id.and_then(|id| self.held.get(id as usize)) else {
            return Some(Scope::Global);
        };
        if h.lanes.contains(lane(s, t)) {
            None
        } else if h.lanes.has_source(s) {
            Some(Scope::Lane)
        } else if !h.lanes.is_empty() {
            Some(Scope::Source)
        } else {
            Some(Scope::Global)
        }
    }
    /// Whether lane `(s, t)` holds `id`.
    pub(super) fn holds(&self, id: u32, s: u32, t: u32) -> bool {
        self.held
            .get(id as usize)
            .is_some_and(|h| h.lanes.contains(lane(s, t)))
    }
    pub(super) fn ever(&self, id: Option<u32>) -> bool {
        id.and_then(|id| self.held.get(id as usize))
            .is_some_and(|h| h.ever)
    }
}
