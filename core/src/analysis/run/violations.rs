//! The violation index's state: which lanes hold each block, and the children waiting for a
//! parent.

use crate::analysis::EventLoc;
use crate::consumers::{Cell, Hashes, Spill};

#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum Scope {
    Lane,
    Source,
    Global,
}

/// A child waiting for its parent, as [`Waiting`] keeps it: 64 bytes (on the anchor stream of
/// `docs/performance.md` every event waits, on the orphans trace of `scripts/bench-memory.sh`
/// too), its hashes aside unless it names exactly one block.
#[derive(Clone, Copy)]
pub(super) struct Waiter {
    /// Where it is: its batch record, position, source, tier, DP rank and job (the index may
    /// no longer hold it).
    pub(super) loc: EventLoc,
    pub(super) line: u64,
    /// The parent's hash.
    pub(super) parent: u64,
    /// Its first hash (0 if it names none); its only one unless [`How`] says otherwise.
    pub(super) first: u64,
    /// Its event index.
    pub(super) child: u32,
    /// The analysis' block id of its first block.
    pub(super) child_id: u32,
    /// Its KV group.
    pub(super) group: u32,
    pub(super) how: How,
}

impl Waiter {
    /// Whether it was published by the same engine (source and DP rank) as `loc`.
    pub(super) fn same_engine(&self, loc: &EventLoc) -> bool {
        (self.loc.source, self.loc.dp_rank) == (loc.source, loc.dp_rank)
    }
}

/// A waiter's scope (bits 29-30) and promotion flag (bit 31), and (bits 0-28, set by
/// [`Waiting::push`]) 0 if [`Waiter::first`] is its only hash, else the slot of its hashes in
/// [`Waiting::more`] plus one.
#[derive(Clone, Copy)]
pub(super) struct How(u32);

const SLOT_BITS: u32 = (1 << 29) - 1;

impl How {
    pub(super) fn new(scope: Scope, promotion: bool) -> How {
        How((scope as u32) << 29 | (promotion as u32) << 31)
    }
    pub(super) fn scope(self) -> Scope {
        match self.0 >> 29 & 3 {
            0 => Scope::Lane,
            1 => Scope::Source,
            _ => Scope::Global,
        }
    }
    pub(super) fn promotion(self) -> bool {
        self.0 >> 31 != 0
    }
}

/// No waiter (the end of a list; a free slot's source).
const NONE: u32 = u32::MAX;

/// A free slot.
const FREE: Waiter = Waiter {
    loc: EventLoc {
        record: 0,
        pos: 0,
        source: NONE,
        tier: 0,
        dp_rank: 0,
        job: 0,
    },
    line: 0,
    parent: 0,
    first: 0,
    child: 0,
    child_id: 0,
    group: 0,
    how: How(0),
};

/// Hash lists of waiters naming other than one block.
#[derive(Default)]
struct More(Spill);

impl More {
    /// The hashes of `w`, taken out of `self` if kept there.
    fn take(&mut self, w: &Waiter) -> Hashes {
        match w.how.0 & SLOT_BITS {
            0 => Hashes::from_slice(&[w.first]),
            slot => self.0.take(slot - 1),
        }
    }
}

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
    /// The waiters ([`FREE`]: a free slot) and, per slot, the next slot of its list (or of the
    /// free list).
    slots: Vec<Waiter>,
    next: Vec<u32>,
    more: More,
    /// The first free slot (`NONE`: none).
    free: u32,
}

impl Default for Waiting {
    fn default() -> Self {
        Waiting {
            lists: Vec::new(),
            parents: 0,
            slots: Vec::new(),
            next: Vec::new(),
            more: More::default(),
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

    /// Add a new waiter `w` naming `hashes` (its first in [`Waiter::first`]) at the end of
    /// `parent`'s list.
    pub(super) fn push(&mut self, parent: u32, mut w: Waiter, hashes: &Hashes) {
        if hashes.len() != 1 {
            // A slot per waiter alive: far below 2^29 (each costs 64 bytes and more).
            w.how.0 |= (self.more.0.put(hashes.clone()) + 1) & SLOT_BITS;
        }
        self.wait(parent, w);
    }

    /// Put `w` (taken from a list) back at the end of `parent`'s list.
    pub(super) fn wait(&mut self, parent: u32, w: Waiter) {
        let at = if self.free == NONE {
            self.slots.push(FREE);
            self.next.push(NONE);
            (self.slots.len() - 1) as u32
        } else {
            let at = self.free;
            self.free = std::mem::replace(&mut self.next[at as usize], NONE);
            at
        };
        self.slots[at as usize] = w;
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

    /// The hashes of `w` (taken from a list and not put back).
    pub(super) fn hashes(&mut self, w: &Waiter) -> Hashes {
        self.more.take(w)
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
            let w = std::mem::replace(&mut self.slots[i], FREE);
            if w.loc.source != NONE {
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
        let more = std::mem::take(&mut self.more);
        *self = Waiting::default();
        Leftovers {
            slots,
            parent,
            more,
        }
    }
}

/// The waiters left at the end (see [`Waiting::take_all`]).
#[derive(Default)]
pub(super) struct Leftovers {
    slots: Vec<Waiter>,
    /// Per slot: its waiter's parent id.
    parent: Vec<u32>,
    more: More,
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

    /// The last waiter left, its parent's id and its hashes, giving the memory back as it goes.
    pub(super) fn pop(&mut self) -> Option<(u32, Waiter, Hashes)> {
        loop {
            let slot = self.slots.pop()?;
            let parent = self.parent.pop().unwrap_or(NONE);
            if self.slots.len().is_multiple_of(65_536) {
                self.slots.shrink_to_fit();
                self.parent.shrink_to_fit();
            }
            if slot.loc.source != NONE {
                return Some((parent, slot, self.more.take(&slot)));
            }
        }
    }
}

/// Which lanes hold one block and whether it was ever stored, in 16 bytes: one lane inline
/// (almost every block sits in one lane of the violation index), more than one in
/// [`Presence::more`]. A row per block id (the ids of parents never stored included): on the
/// 2M-orphan trace of `scripts/bench-memory.sh` a 32-byte row with an inline list of two lanes
/// cost 64 bytes an event.
#[derive(Clone, Copy, Default)]
pub(super) struct Held {
    /// The lanes `(engine, tier)`, packed as `engine << 32 | tier` (see [`Presence::more`]).
    lane: Cell,
    /// How many waiters have this block as their child (`Waiter::child_id`).
    pub(super) waiters: u32,
    pub(super) ever: bool,
}

impl Held {
    /// Whether no lane holds the block.
    pub(super) fn is_empty(&self) -> bool {
        self.lane.is_empty()
    }
}

fn pack(s: u32, t: u32) -> u64 {
    (s as u64) << 32 | t as u64
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

/// Lane presence for the violation index (what each tier of each engine holds), by the
/// analysis' `(group, hash)` block id. An engine is a `(source, dp_rank)` publisher.
#[derive(Default)]
pub(super) struct Presence {
    pub(super) held: Vec<Held>,
    /// The lanes of the blocks held in more than one, packed (see [`Held::lane`]).
    more: Spill,
    /// Per engine: blocks it stored since its last clear (may include removed ones).
    pub(super) by_source: Vec<Vec<u32>>,
}

impl Presence {
    /// Room for `blocks` block ids (a whole-trace run's, see `Run::new`).
    pub(super) fn reserve(&mut self, blocks: usize) {
        self.held.reserve_exact(blocks);
    }

    pub(super) fn slot(&mut self, id: u32) -> Option<&mut Held> {
        let i = id as usize;
        if i >= self.held.len() {
            self.held.resize(i + 1, Held::default());
        }
        self.held.get_mut(i)
    }
    /// Store `id` into lane `(s, t)`; false if the lane already held it.
    pub(super) fn add(&mut self, id: u32, s: u32, t: u32) -> bool {
        self.slot(id);
        let Some(h) = self.held.get_mut(id as usize) else {
            return true;
        };
        h.ever = true;
        if !self.more.insert(&mut h.lane, pack(s, t)) {
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
    /// Remove `id` from engine `s`'s lane of tier `t` (every lane of `s` when `t` is `None`);
    /// false if none held it.
    fn remove_lanes(&mut self, id: u32, s: u32, t: Option<u32>) -> bool {
        self.held
            .get_mut(id as usize)
            .is_some_and(|h| !self.more.remove(&mut h.lane, s, t).is_empty())
    }
    /// Remove `id` from lane `(s, t)`; false if the lane did not hold it.
    pub(super) fn remove(&mut self, id: Option<u32>, s: u32, t: u32) -> bool {
        let Some(id) = id else {
            return false;
        };
        self.remove_lanes(id, s, Some(t))
    }
    pub(super) fn clear_source(&mut self, s: u32) -> Vec<u32> {
        let Some(list) = self.by_source.get_mut(s as usize) else {
            return Vec::new();
        };
        let ids = std::mem::take(list);
        for id in &ids {
            self.remove_lanes(*id, s, None);
        }
        ids
    }
    /// The lanes holding `id`, packed (`engine << 32 | tier`).
    fn lanes(&self, id: u32) -> &[u64] {
        self.held
            .get(id as usize)
            .map_or(&[], |h| self.more.values(&h.lane))
    }
    pub(super) fn scope_missing(&self, id: Option<u32>, s: u32, t: u32) -> Option<Scope> {
        let lanes = id.map_or(&[][..], |id| self.lanes(id));
        if lanes.contains(&pack(s, t)) {
            None
        } else if lanes.iter().any(|k| (k >> 32) as u32 == s) {
            Some(Scope::Lane)
        } else if !lanes.is_empty() {
            Some(Scope::Source)
        } else {
            Some(Scope::Global)
        }
    }
    /// Whether lane `(s, t)` holds `id`.
    pub(super) fn holds(&self, id: u32, s: u32, t: u32) -> bool {
        self.lanes(id).contains(&pack(s, t))
    }
    pub(super) fn ever(&self, id: Option<u32>) -> bool {
        id.and_then(|id| self.held.get(id as usize))
            .is_some_and(|h| h.ever)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn waiter(child: u32, hashes: &[u64], scope: Scope, promotion: bool) -> (Waiter, Hashes) {
        let w = Waiter {
            loc: EventLoc {
                record: 8,
                pos: 9,
                source: 2,
                tier: 6,
                dp_rank: 3,
                job: 7,
            },
            line: 10,
            parent: 5,
            first: hashes.first().copied().unwrap_or_default(),
            child,
            child_id: child + 1,
            group: 4,
            how: How::new(scope, promotion),
        };
        (w, hashes.iter().copied().collect())
    }

    type Fields = (u32, u32, u64, u64, bool, bool, Vec<u64>);

    fn fields(w: &Waiter, hashes: &Hashes) -> Fields {
        let l = &w.loc;
        let rest = (l.source, l.dp_rank, w.group, l.tier, l.job, l.record, l.pos);
        assert_eq!(rest, (2, 3, 4, 6, 7, 8, 9));
        let scope = w.how.scope() == Scope::Global;
        let h = hashes.to_vec();
        let f = (
            w.child,
            w.child_id,
            w.parent,
            w.line,
            scope,
            w.how.promotion(),
            h,
        );
        assert_eq!(w.first, f.6.first().copied().unwrap_or_default());
        f
    }

    #[test]
    fn waiters_are_64_byte_rows_that_give_back_every_field() {
        assert_eq!(std::mem::size_of::<Waiter>(), 64);
        let mut ws = Waiting::default();
        let cases = [
            waiter(0, &[11], Scope::Global, false),
            waiter(1, &[12, 13, 14], Scope::Source, true),
            waiter(2, &[], Scope::Lane, true),
            waiter(3, &[15, 16], Scope::Global, false),
        ];
        let want: Vec<_> = cases.iter().map(|(w, h)| fields(w, h)).collect();
        for (k, (w, h)) in cases.into_iter().enumerate() {
            ws.push(k as u32 % 2, w, &h);
        }
        // One taken and put back keeps its hashes.
        let mut out = Vec::new();
        assert!(ws.take(1, &mut out) && !ws.take(1, &mut Vec::new()));
        assert_eq!(out.len(), 2);
        ws.wait(1, out[0]);
        let h = ws.hashes(&out[1]);
        assert_eq!(fields(&out[1], &h), want[3]);
        assert!(out[1].how.scope() == Scope::Global);
        out.clear();
        assert!(ws.take(1, &mut out));
        let h = ws.hashes(&out[0]);
        assert_eq!(fields(&out[0], &h), want[1]);
        assert!(out[0].how.scope() == Scope::Source);
        // The freed hash lists and slots are reused.
        let (w, h) = waiter(4, &[17, 18], Scope::Lane, false);
        ws.push(1, w, &h);
        assert_eq!((ws.more.0.len(), ws.slots.len()), (2, 4));
        let mut left = ws.take_all();
        let mut rest = Vec::new();
        while let Some((p, w, h)) = left.pop() {
            rest.push((p, fields(&w, &h), w.how.scope() == Scope::Lane));
        }
        rest.sort_by_key(|r| r.1 .0);
        assert_eq!(rest.len(), 3);
        assert_eq!((rest[0].0, &rest[0].1), (0, &want[0]));
        assert_eq!((rest[1].0, &rest[1].1, rest[1].2), (0, &want[2], true));
        assert_eq!((rest[2].0, rest[2].1 .6.clone()), (1, vec![17, 18]));
    }

    #[test]
    fn a_block_in_several_lanes_spills_and_comes_back_inline() {
        assert_eq!(std::mem::size_of::<Held>(), 16);
        let mut p = Presence::default();
        assert!(p.add(5, 0, 0));
        assert!(!p.add(5, 0, 0));
        assert!(p.add(5, 0, 1));
        assert!(p.add(5, 1, 0));
        assert!(!p.add(5, 1, 0));
        assert_eq!(p.more.len(), 1);
        assert!(p.holds(5, 0, 1) && p.holds(5, 1, 0) && !p.holds(5, 1, 1));
        assert!(p.scope_missing(Some(5), 0, 0).is_none());
        assert!(p.scope_missing(Some(5), 1, 1) == Some(Scope::Lane));
        assert!(p.scope_missing(Some(5), 2, 0) == Some(Scope::Source));
        assert!(p.scope_missing(Some(4), 0, 0) == Some(Scope::Global));
        assert!(p.scope_missing(Some(9), 0, 0) == Some(Scope::Global));
        // Engine 0 cleared: one lane left, inline again.
        assert_eq!(p.clear_source(0), vec![5, 5]);
        assert!(p.more.len() == 0 && p.holds(5, 1, 0) && !p.holds(5, 0, 0));
        assert!(p.remove(Some(5), 1, 0));
        assert!(!p.remove(Some(5), 1, 0));
        assert!(p.held[5].is_empty() && p.ever(Some(5)) && !p.ever(Some(4)));
        // Two lanes, one removed: inline.
        assert!(p.add(6, 0, 0) && p.add(6, 0, 1));
        assert!(p.remove(Some(6), 0, 0));
        assert!(p.more.len() == 0 && p.holds(6, 0, 1));
    }
}
