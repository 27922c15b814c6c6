//! The [`Interner`](super::Interner)'s table: block hash → dense id in 4 bytes a slot.
//!
//! Hand-rolled (open addressing, linear probing) for a measured need: the interner names
//! every block and parent hash of a trace, and with the crate's hash map (16-byte entries
//! plus a control byte, the old and the new table side by side while it grows) its table was
//! the peak of `kvscope check` on the 2M-orphan trace of `scripts/bench-memory.sh`: 214 MB
//! of 1.17 GB, heaptrack, `docs/performance.md`. Here a slot holds only the id; the hash it
//! names is the interner's `hashes[id]`, which the table reads to compare.

/// An empty slot.
const EMPTY: u32 = u32::MAX;

/// Ids by the hash they name (`hashes[id]`, the interner's), at most half the slots full.
#[derive(Clone, Debug, Default)]
pub(super) struct IdTable {
    /// A power of two of slots (or none), each an id or [`EMPTY`].
    slots: Vec<u32>,
    len: usize,
}

impl IdTable {
    /// Where the search for `h` starts: Fibonacci hashing (the top bits of `h` times 2^64 / φ),
    /// so hashes that differ only in a few bits spread too.
    fn home(&self, h: u64) -> usize {
        let bits = self.slots.len().trailing_zeros();
        (h.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> (64 - bits)) as usize
    }

    /// The slot holding the id of `h`, or the empty slot where it would go; `None` before the
    /// first insertion.
    fn find(&self, h: u64, hashes: &[u64]) -> Option<usize> {
        let mask = self.slots.len().checked_sub(1)?;
        let mut i = self.home(h);
        loop {
            let id = *self.slots.get(i)?;
            if id == EMPTY || hashes.get(id as usize) == Some(&h) {
                return Some(i);
            }
            i = (i + 1) & mask;
        }
    }

    /// The id of `h`.
    pub(super) fn get(&self, h: u64, hashes: &[u64]) -> Option<u32> {
        let id = *self.slots.get(self.find(h, hashes)?)?;
        (id != EMPTY).then_some(id)
    }

    /// Add `id`, which names `hashes[id]` (not in the table).
    pub(super) fn insert(&mut self, id: u32, hashes: &[u64]) {
        if (self.len + 1) * 2 > self.slots.len() {
            let old = std::mem::replace(&mut self.slots, vec![EMPTY; (self.len * 4).max(16)]);
            for id in old {
                if id != EMPTY {
                    self.put(id, hashes);
                }
            }
        }
        self.put(id, hashes);
        self.len += 1;
    }

    /// Put `id` in the first empty slot from its home (ids are distinct: no comparison).
    fn put(&mut self, id: u32, hashes: &[u64]) {
        let mask = self.slots.len() - 1;
        let mut i = self.home(hashes.get(id as usize).copied().unwrap_or_default());
        while let Some(s) = self.slots.get_mut(i) {
            if *s == EMPTY {
                *s = id;
                return;
            }
            i = (i + 1) & mask;
        }
    }

    /// Take the id of `h` out; the id it was.
    pub(super) fn remove(&mut self, h: u64, hashes: &[u64]) -> Option<u32> {
        let mut i = self.find(h, hashes)?;
        let id = std::mem::replace(self.slots.get_mut(i)?, EMPTY);
        if id == EMPTY {
            return None;
        }
        self.len -= 1;
        // Shift back the ids after it in its run that could sit at `i` (whose search starts
        // at or before `i`): no search may cross an empty slot before its id.
        let mask = self.slots.len() - 1;
        let mut j = i;
        loop {
            j = (j + 1) & mask;
            let next = self.slots.get(j).copied().unwrap_or(EMPTY);
            if next == EMPTY {
                return Some(id);
            }
            let home = self.home(hashes.get(next as usize).copied().unwrap_or_default());
            // Stays if its home lies cyclically in (i, j].
            if (j.wrapping_sub(home) & mask) < (j.wrapping_sub(i) & mask) {
                continue;
            }
            self.slots.swap(i, j);
            i = j;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::IdTable;

    #[test]
    fn ids_are_found_by_hash_through_growth_and_removals() {
        // Hashes that share their top bits after the multiply land in one run.
        let hashes: Vec<u64> = (0..1000u64).map(|k| (k << 40) | (k % 7)).collect();
        let mut t = IdTable::default();
        assert_eq!(t.get(5, &hashes), None);
        for id in 0..1000 {
            t.insert(id, &hashes);
        }
        assert_eq!((t.len, t.slots.len()), (1000, 2048));
        assert!((0..1000).all(|id| t.get(hashes[id as usize], &hashes) == Some(id)));
        assert_eq!(t.get(12345, &hashes), None);
        // Every third removed: the others are still found, the removed ones are not.
        for id in (0..1000).step_by(3) {
            assert_eq!(t.remove(hashes[id as usize], &hashes), Some(id));
        }
        assert_eq!(t.remove(hashes[0], &hashes), None);
        for id in 0..1000u32 {
            let want = (id % 3 != 0).then_some(id);
            assert_eq!(t.get(hashes[id as usize], &hashes), want);
        }
        assert_eq!(t.len, 666);
    }

    #[test]
    fn a_removal_in_a_wrapped_run_keeps_the_run_searchable() {
        // 16 slots; hashes chosen by their home slot: three at slot 15 wrap to 0 and 1.
        let t0 = IdTable {
            slots: vec![super::EMPTY; 16],
            len: 0,
        };
        let home = |h: u64| t0.home(h);
        let at = |slot: usize, skip: usize| {
            (1u64..)
                .filter(|h| home(*h) == slot)
                .nth(skip)
                .unwrap_or_default()
        };
        let hashes = vec![at(15, 0), at(15, 1), at(15, 2), at(0, 0), at(1, 0)];
        let mut t = t0.clone();
        for id in 0..5 {
            t.insert(id, &hashes);
        }
        assert_eq!(t.remove(hashes[0], &hashes), Some(0));
        assert_eq!(t.remove(hashes[3], &hashes), Some(3));
        for id in [1, 2, 4] {
            assert_eq!(t.get(hashes[id as usize], &hashes), Some(id));
        }
        assert_eq!(t.get(hashes[0], &hashes), None);
    }
}
