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

/// No waiter (the end of a list).
const NONE: u32 = u32::MAX;

/// The children waiting for a parent, by the parent's block id: one list per parent, linked
/// through one vector of waiters whose freed slots are reused. A waiter costs its row and a
/// link, with no allocation of its own (a `Vec` per parent cost a heap block per waiter: on
/// the anchor stream of `docs/performance.md` every event waits, for a parent that only ever
/// comes on the other tier, about 170 bytes and a `malloc` each). The lists' ends are in a
/// vector by parent id (ids are dense), grown only as far as the largest parent that waited:
/// a hash map there cost a probe per waiter pushed and per block stored.
pub(super) struct Waiting {
    /// Parent block id → its list's first and last slot (`NONE`: no list).
    lists: Vec<(u32, u32)>,
    /// Number of parents with a list.
    parents: usize,
    /// The waiters (`None`: a free slot) and, per slot, the next slot of its list (or of the
    /// free list).
    slots: Vec<Option<Waiter>>,
    next: Vec<u32>,
    /// The first free slot.
    free: u32,
}

impl Default for Waiting {
    fn default() -> Self {
        Waiting {
            lists: Vec::new(),
            parents: 0,
            slots: Vec::new(),
            next: Vec::new(),
            free: NONE,
        }
    }
}

impl Waiting {
    /// Whether no child waits.
    pub(super) fn is_empty(&self) -> bool {
        self.parents == 0
    }

    /// Whether children wait for block `id`.
    pub(super) fn waits_for(&self, id: u32) -> bool {
        self.lists.get(id as usize).is_some_and(|l| l.0 != NONE)
    }

    /// Add `w` at the end of `parent`'s list.
    pub(super) fn push(&mut self, parent: u32, w: Waiter) {
        let at = if self.free == NONE {
            self.slots.push(Some(w));
            self.next.push(NONE);
            (self.slots.len() - 1) as u32
        } else {
            let at = self.free;
            self.free = self.next[at as usize];
            self.slots[at as usize] = Some(w);
            self.next[at as usize] = NONE;
            at
        };
        let i = parent as usize;
        if i >= self.lists.len() {
            self.lists.resize(i + 1, (NONE, NONE));
        }
        let list = &mut self.lists[i];
        if list.0 == NONE {
            *list = (at, at);
            self.parents += 1;
        } else {
            let prev = std::mem::replace(&mut list.1, at);
            self.next[prev as usize] = at;
        }
    }

    /// Move `parent`'s waiters, in order, to `out`; false if none waits for it.
    pub(super) fn take(&mut self, parent: u32, out: &mut Vec<Waiter>) -> bool {
        let Some(list) = self.lists.get_mut(parent as usize) else {
            return false;
        };
        let mut at = std::mem::replace(list, (NONE, NONE)).0;
        if at == NONE {
            return false;
        }
        self.parents -= 1;
        while at != NONE {
            let i = at as usize;
            if let Some(w) = self.slots[i].take() {
                out.push(w);
            }
            at = std::mem::replace(&mut self.next[i], self.free);
            self.free = i as u32;
        }
        true
    }

    /// Every waiter left, with its parent's id, to be taken from the end ([`Leftovers::pop`]);
    /// leaves `self` empty. The waiters stay in their slots: a copy of them all cost their size
    /// again at the end of a trace where every event waits (one-event batches whose parents are
    /// never stored).
    pub(super) fn take_all(&mut self) -> Leftovers {
        let mut parent = vec![NONE; self.slots.len()];
        for (p, &(first, _)) in self.lists.iter().enumerate() {
            let mut at = first;
            while at != NONE {
                if let Some(x) = parent.get_mut(at as usize) {
                    *x = p as u32;
                }
                at = self.next.get(at as usize).copied().unwrap_or(NONE);
            }
        }
        let slots = std::mem::take(&mut self.slots);
        *self = Waiting::default();
        Leftovers { slots, parent }
    }
}

/// The waiters left at the end (see [`Waiting::take_all`]).
#[derive(Default)]
pub(super) struct Leftovers {
    slots: Vec<Option<Waiter>>,
    /// Per slot: its waiter's parent id.
    parent: Vec<u32>,
}

impl Leftovers {
    /// Slots left (free ones included).
    pub(super) fn len(&self) -> usize {
        self.slots.len()
    }

    /// Whether none is left.
    pub(super) fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }

    /// The last waiter left and its parent's id, giving the memory back as it goes.
    pub(super) fn pop(&mut self) -> Option<(u32, Waiter)> {
        loop {
            let slot = self.slots.pop()?;
            let parent = self.parent.pop().unwrap_or(NONE);
            if self.slots.len().is_multiple_of(65_536) {
                self.slots.shrink_to_fit();
                self.parent.shrink_to_fit();
            }
            if let Some(w) = slot {
                return Some((parent, w));
            }
        }
    }
}

/// Which lanes hold one block (usually one or two: inline) and whether it was ever stored.
#[derive(Clone, Default)]
pub(super) struct Held {
    /// `(engine, tier)` as a [`LaneKey`] (its `source` field holds the engine id: the models'
    /// lane-list type, one `SmallVec` type less).
    pub(super) lanes: crate::consumers::LaneList,
    pub(super) ever: bool,
    /// How many waiters have this block as their child (`Waiter::child_id`; in the padding).
    pub(super) waiters: u32,
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
    /// Whether a pair has block `id` as its parent (in any of `engines` engines).
    pub(super) fn names(&self, id: u32, engines: u32) -> bool {
        !self.0.is_empty()
            && (0..engines).any(|e| {
                let at = self.0.partition_point(|p| (p.0 .0, p.0 .1) < (e, id));
                self.0.get(at).is_some_and(|p| (p.0 .0, p.0 .1) == (e, id))
            })
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
    pub(super) fn clear_source(&mut self, s: u32) -> Vec<u32> {
        let Some(list) = self.by_source.get_mut(s as usize) else {
            return Vec::new();
        };
        let ids = std::mem::take(list);
        for id in &ids {
            if let Some(h) = self.held.get_mut(*id as usize) {
                h.lanes.drop_source(s, None);
            }
        }
        ids
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
