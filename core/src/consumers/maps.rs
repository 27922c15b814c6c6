//! The models' small data structures: dense block ids ([`Interner`], [`EventIds`]), the one
//! hash-map type ([`Map`]) and what is built on it ([`SlabMap`], [`HashChain`]).

use super::id_table::IdTable;
use crate::event::KvEvent;

/// An event's block hashes, normalised to u64 (inline up to 2: no allocation for the usual
/// one-block event). Also llm-d's request keys per engine hash: one `SmallVec` type for both.
pub(crate) type Hashes = smallvec::SmallVec<[u64; 2]>;

/// Dense ids for block hashes (stored, removed or named as a parent), in order of first
/// appearance: one hash lookup per hash per event, after which per-block state lives in
/// vectors indexed by id, which keeps the blocks of one chain next to each other in memory.
/// The analysis shares one interner between the violation index, the models and the replay
/// tables; a model used on its own ([`Consumer::apply`]) keeps a private one.
///
/// A streaming analysis gives back the ids of blocks nothing refers to any more
/// ([`Interner::release`]; see `analysis/run/recycle.rs`) and new hashes take them again, so
/// that with a bounded live set (LRU churn) the id space, hence every per-id vector, stays
/// bounded too.
#[derive(Clone, Debug, Default)]
pub struct Interner {
    /// Hash → id, 4 bytes a slot (see [`IdTable`]).
    ids: IdTable,
    hashes: Vec<u64>,
    /// Released ids, taken again before new ones.
    free: Vec<u32>,
}

impl Interner {
    /// Room for `n` ids in the table of hashes (the table of ids, 4 bytes a slot, still grows:
    /// its rehash is the cheapest of these). The tables with a row per block id grow as ids are
    /// assigned; in the web app each doubling copies every such table in the same slice of the
    /// analysis (the page's longest pauses at a million events, `docs/performance.md`), so an
    /// analysis of a whole trace sizes them once for the block hashes it stores.
    pub(crate) fn reserve(&mut self, n: usize) {
        self.hashes.reserve_exact(n);
    }

    /// Room in the table of hashes, for tests of [`Interner::reserve`].
    #[cfg(test)]
    pub(crate) fn capacity(&self) -> usize {
        self.hashes.capacity()
    }

    /// The id of `h`, assigned if new.
    pub fn intern(&mut self, h: u64) -> u32 {
        if let Some(id) = self.get(h) {
            return id;
        }
        let id = match self.free.pop() {
            Some(f) => {
                if let Some(slot) = self.hashes.get_mut(f as usize) {
                    *slot = h;
                }
                f
            }
            // `u32::MAX` is no id (the table's empty slot).
            None if self.hashes.len() >= u32::MAX as usize => return u32::MAX,
            None => {
                self.hashes.push(h);
                (self.hashes.len() - 1) as u32
            }
        };
        self.ids.insert(id, &self.hashes);
        id
    }

    /// Forget block `id` (its hash gets a new id if seen again; `id` goes to another hash).
    /// The caller has checked that nothing refers to it. Returns its hash.
    pub(crate) fn release(&mut self, id: u32) -> Option<u64> {
        let h = self.hash(id)?;
        if self.get(h) != Some(id) {
            return None;
        }
        self.ids.remove(h, &self.hashes);
        self.free.push(id);
        Some(h)
    }

    /// Whether `id` is assigned (not released).
    pub(crate) fn live(&self, id: u32) -> bool {
        self.hash(id).is_some_and(|h| self.get(h) == Some(id))
    }

    /// Look up the block hashes (and parent) of `events` without interning them: a batch's
    /// hashes are new or long unseen, so each look-up misses the cache; done for a whole batch
    /// before its events are interned one by one, the misses overlap (the processor runs ahead
    /// through these independent look-ups) and the interning that follows finds the table's
    /// lines in the cache: -11% of the analysis' CPU time without models on the anchor stream
    /// (`docs/performance.md`, fourth round).
    pub(crate) fn warm(&self, events: &[KvEvent]) {
        for ev in events {
            for h in ev.block_hashes() {
                std::hint::black_box(self.get(h.as_u64()));
            }
            if let KvEvent::BlockStored(e) = ev {
                if let Some(p) = &e.parent_block_hash {
                    std::hint::black_box(self.get(p.as_u64()));
                }
            }
        }
    }

    /// The id of `h`, if it was ever seen.
    pub fn get(&self, h: u64) -> Option<u32> {
        self.ids.get(h, &self.hashes)
    }

    /// The hash of `id`.
    pub(crate) fn hash(&self, id: u32) -> Option<u64> {
        self.hashes.get(id as usize).copied()
    }
}

/// The dense ids of one event's blocks (in block order) and of its parent, with the blocks'
/// u64-normalised hashes (normalised once per event for every model and the violation index).
#[derive(Clone, Debug, Default)]
pub struct EventIds {
    pub(crate) blocks: smallvec::SmallVec<[u32; 4]>,
    pub(crate) parent: Option<u32>,
    /// The blocks' hashes, normalised to u64 (same order as `blocks`).
    pub(crate) hashes: Hashes,
}

impl EventIds {
    /// Intern the blocks and parent of `ev`.
    pub fn fill(&mut self, interner: &mut Interner, ev: &KvEvent) {
        self.blocks.clear();
        self.hashes.clear();
        for h in ev.block_hashes() {
            let h = h.as_u64();
            self.hashes.push(h);
            self.blocks.push(interner.intern(h));
        }
        self.parent = match ev {
            KvEvent::BlockStored(e) => e
                .parent_block_hash
                .as_ref()
                .map(|p| interner.intern(p.as_u64())),
            _ => None,
        };
    }

    /// The id of block `i`.
    pub(crate) fn block(&self, i: usize) -> u32 {
        self.blocks.get(i).copied().unwrap_or(u32::MAX)
    }
}

/// `v[id]`, growing `v` with defaults as needed (ids are dense, so this is an amortised push).
pub(crate) fn slot<T: Default>(v: &mut Vec<T>, id: u32) -> &mut T {
    let i = id as usize;
    if i >= v.len() {
        v.resize_with(i + 1, T::default);
    }
    // In range after the resize.
    &mut v[i]
}

/// The hash map used by the models.
pub(crate) type Map<K, V> = hashbrown::HashMap<K, V, rustc_hash::FxBuildHasher>;

/// An exact index over dense ids `0..n` by a 64-bit hash of what they name (strings, job
/// keys): [`Map<u64, u32>`] to the first id with a hash, then a chain through the ids sharing
/// it. Equality is the caller's (`same`), so hash collisions only lengthen a chain; no
/// hash-table code per key type (wasm size).
#[derive(Clone, Debug, Default)]
pub(crate) struct HashChain {
    first: Map<u64, u32>,
    /// Per id: the next id with the same hash (`u32::MAX`: none).
    next: Vec<u32>,
}

impl HashChain {
    /// The id with hash `hash` for which `same(id)` holds.
    pub(crate) fn find(&self, hash: u64, mut same: impl FnMut(u32) -> bool) -> Option<u32> {
        let mut id = *self.first.get(&hash)?;
        loop {
            if same(id) {
                return Some(id);
            }
            id = *self.next.get(id as usize)?;
        }
    }

    /// The id with hash `hash` for which `same(id)` holds, or else `None` after recording
    /// `id` (the next dense id) under `hash`: [`HashChain::find`] then [`HashChain::push`]
    /// in one probe of the table.
    pub(crate) fn find_or_push(
        &mut self,
        hash: u64,
        id: u32,
        mut same: impl FnMut(u32) -> bool,
    ) -> Option<u32> {
        if self.next.len() <= id as usize {
            self.next.resize(id as usize + 1, u32::MAX);
        }
        let head = match self.first.entry(hash) {
            hashbrown::hash_map::Entry::Occupied(e) => *e.get(),
            hashbrown::hash_map::Entry::Vacant(e) => {
                e.insert(id);
                return None;
            }
        };
        let mut at = head;
        loop {
            if same(at) {
                return Some(at);
            }
            match self.next.get(at as usize) {
                Some(&n) if n != u32::MAX => at = n,
                _ => break,
            }
        }
        // Link in after the head (chain order does not matter).
        let after = std::mem::replace(slot(&mut self.next, head), id);
        *slot(&mut self.next, id) = after;
        None
    }

    /// Record `id` (the next dense id, not already present) under `hash`.
    pub(crate) fn push(&mut self, hash: u64, id: u32) {
        if self.next.len() <= id as usize {
            self.next.resize(id as usize + 1, u32::MAX);
        }
        let head = self.first.entry(hash).or_insert(id);
        if *head != id {
            // Link in after the head (chain order does not matter).
            let after = std::mem::replace(slot(&mut self.next, *head), id);
            *slot(&mut self.next, id) = after;
        }
    }
}

impl HashChain {
    /// Unlink `id` (present under `hash`); its id may be pushed again.
    pub(crate) fn remove(&mut self, hash: u64, id: u32) {
        let Some(&head) = self.first.get(&hash) else {
            return;
        };
        let after = self.next.get(id as usize).copied().unwrap_or(u32::MAX);
        if head == id {
            if after == u32::MAX {
                self.first.remove(&hash);
            } else {
                self.first.insert(hash, after);
            }
        } else {
            let mut at = head;
            while let Some(&n) = self.next.get(at as usize) {
                if n == id {
                    *slot(&mut self.next, at) = after;
                    break;
                }
                at = n;
            }
        }
        if let Some(n) = self.next.get_mut(id as usize) {
            *n = u32::MAX;
        }
    }
}

/// A 64-bit hash of a string (for [`HashChain`], which compares the strings themselves, so
/// only the spread matters): Fx-style, one multiply per 8-byte little-endian word and one for
/// the length. A small loop instead of rustc-hash's string hashing, which is about 750 bytes of
/// wasm; the strings hashed (source names, job keys, statuses and reasons) are short.
pub(crate) fn str_hash(s: &str) -> u64 {
    /// rustc-hash 2's multiplier.
    const K: u64 = 0xf135_7aea_2e62_a9c5;
    let mut h = (s.len() as u64).wrapping_mul(K);
    for word in s.as_bytes().chunks(8) {
        let mut w = 0u64;
        for (i, b) in word.iter().enumerate() {
            w |= (*b as u64) << (8 * i);
        }
        h = (h.rotate_left(26) ^ w).wrapping_mul(K);
    }
    h
}

/// A map from `u64` keys to values kept in a vector: [`Map<u64, u32>`] (key → slot) plus a
/// `Vec` per value type, instead of a copy of the hash-table code per value type (wasm size).
/// Freed slots are reused. Iteration order is unspecified (like a hash map's).
#[derive(Clone, Debug)]
pub(crate) struct SlabMap<V> {
    index: Map<u64, u32>,
    slots: Vec<(u64, V)>,
    free: Vec<u32>,
}

impl<V> Default for SlabMap<V> {
    fn default() -> Self {
        SlabMap {
            index: Map::default(),
            slots: Vec::new(),
            free: Vec::new(),
        }
    }
}

impl<V: Default> SlabMap<V> {
    /// Whether no key is present.
    pub(crate) fn is_empty(&self) -> bool {
        self.index.is_empty()
    }

    /// The value of `key`.
    pub(crate) fn get(&self, key: u64) -> Option<&V> {
        let i = *self.index.get(&key)? as usize;
        self.slots.get(i).map(|s| &s.1)
    }

    /// The value of `key`, mutable.
    pub(crate) fn get_mut(&mut self, key: u64) -> Option<&mut V> {
        let i = *self.index.get(&key)? as usize;
        self.slots.get_mut(i).map(|s| &mut s.1)
    }

    /// The value of `key`, inserted as `V::default()` if absent.
    pub(crate) fn entry(&mut self, key: u64) -> &mut V {
        // One probe of the index (the interner's entry type: no new table code).
        let i = match self.index.entry(key) {
            hashbrown::hash_map::Entry::Occupied(e) => *e.get() as usize,
            hashbrown::hash_map::Entry::Vacant(e) => {
                let i = match self.free.pop() {
                    Some(i) => i as usize,
                    None => {
                        self.slots.push((key, V::default()));
                        self.slots.len() - 1
                    }
                };
                if let Some(s) = self.slots.get_mut(i) {
                    s.0 = key;
                }
                e.insert(i as u32);
                i
            }
        };
        // In range: an index entry always names a slot.
        &mut self.slots[i].1
    }

    /// Remove `key`, returning its value.
    pub(crate) fn remove(&mut self, key: u64) -> Option<V> {
        let i = self.index.remove(&key)?;
        self.free.push(i);
        self.slots
            .get_mut(i as usize)
            .map(|s| std::mem::take(&mut s.1))
    }

    /// The keys present (unspecified order).
    pub(crate) fn keys(&self) -> impl Iterator<Item = u64> + '_ {
        self.index.keys().copied()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hash_chain_remove_unlinks_head_middle_and_tail() {
        // Four ids under one hash (a collision chain) and one under another.
        let mut c = HashChain::default();
        for id in 0..4 {
            c.push(7, id);
        }
        c.push(8, 4);
        let all = |c: &HashChain| {
            (0..5)
                .map(|id| c.find(7, |x| x == id).is_some())
                .collect::<Vec<_>>()
        };
        assert_eq!(all(&c), [true, true, true, true, false]);
        c.remove(7, 0); // the head
        assert_eq!(all(&c), [false, true, true, true, false]);
        c.remove(7, 2);
        assert_eq!(all(&c), [false, true, false, true, false]);
        c.push(7, 2); // taken again
        assert_eq!(all(&c), [false, true, true, true, false]);
        c.remove(7, 1);
        c.remove(7, 3);
        c.remove(7, 2);
        assert_eq!(all(&c), [false; 5]);
        assert_eq!(c.find(8, |x| x == 4), Some(4));
    }

    #[test]
    fn interner_takes_released_ids_again() {
        let mut i = Interner::default();
        assert_eq!((i.intern(10), i.intern(20), i.intern(30)), (0, 1, 2));
        assert_eq!(i.release(1), Some(20));
        assert_eq!(i.release(1), None);
        assert!(!i.live(1) && i.get(20).is_none());
        assert_eq!(i.intern(40), 1);
        assert_eq!((i.get(40), i.hash(1), i.intern(20)), (Some(1), Some(40), 3));
        assert!(i.live(1) && i.live(3));
    }
}
