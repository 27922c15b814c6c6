//! Lists kept aside for the rare rows that hold several values, and the one-value cells that
//! name them.

use super::Hashes;

/// Lists kept aside for the rare rows that hold several values (a block in several lanes,
/// an SGLang node with several owners, a waiter naming several blocks): the row names the
/// list's slot, and freed slots are reused. One slab type rather than a hash map per use (wasm
/// size).
///
/// A row that holds a set of `u64` values in a [`Cell`] (one value inline, several in a slot)
/// goes through [`Spill::values`], [`Spill::insert`] and [`Spill::remove`].
#[derive(Clone, Debug, Default)]
pub(crate) struct Spill {
    lists: Vec<Hashes>,
    free: Vec<u32>,
}

/// A row's set of `u64` values in 8 bytes: none, the one value, or the slot of a [`Spill`]
/// list. Values' high halves stay below `u32::MAX - 1` (they pack engine or worker ids,
/// which count engines and workers, with a tier).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Cell(u64);

/// An empty cell.
const EMPTY: u64 = u64::MAX;

impl Default for Cell {
    fn default() -> Self {
        Cell(EMPTY)
    }
}

impl Cell {
    /// Whether the cell holds no value.
    pub(crate) fn is_empty(self) -> bool {
        self.0 == EMPTY
    }
}

/// A cell's high half when its values are in the slot of its low half.
const SPILLED: u64 = (u32::MAX - 1) as u64;

/// The slot of a cell whose values are spilled.
fn spilled(cell: u64) -> Option<u32> {
    (cell >> 32 == SPILLED).then_some(cell as u32)
}

impl Spill {
    /// Keep `list`; its slot.
    pub(crate) fn put(&mut self, list: Hashes) -> u32 {
        match self.free.pop() {
            Some(k) => {
                if let Some(l) = self.lists.get_mut(k as usize) {
                    *l = list;
                }
                k
            }
            None => {
                self.lists.push(list);
                (self.lists.len() - 1) as u32
            }
        }
    }

    /// The list in slot `k`.
    pub(crate) fn get(&self, k: u32) -> &[u64] {
        self.lists.get(k as usize).map_or(&[], |l| l.as_slice())
    }

    /// Take the list out of slot `k` (which is freed).
    pub(crate) fn take(&mut self, k: u32) -> Hashes {
        match self.lists.get_mut(k as usize) {
            Some(l) => {
                self.free.push(k);
                std::mem::take(l)
            }
            None => Hashes::new(),
        }
    }

    /// The values of `cell`, in the order they were added.
    pub(crate) fn values<'a>(&'a self, cell: &'a Cell) -> &'a [u64] {
        match spilled(cell.0) {
            _ if cell.is_empty() => &[],
            Some(k) => self.get(k),
            None => std::slice::from_ref(&cell.0),
        }
    }

    /// Add `v` to `cell` (into a slot from the second value on); false if it was there.
    pub(crate) fn insert(&mut self, cell: &mut Cell, v: u64) -> bool {
        if cell.is_empty() {
            cell.0 = v;
            return true;
        }
        if cell.0 == v {
            return false;
        }
        match spilled(cell.0) {
            Some(k) => match self.lists.get_mut(k as usize) {
                Some(list) if !list.contains(&v) => {
                    list.push(v);
                    true
                }
                _ => false,
            },
            None => {
                let mut list = Hashes::new();
                list.push(cell.0);
                list.push(v);
                cell.0 = SPILLED << 32 | self.put(list) as u64;
                true
            }
        }
    }

    /// Take the values whose high half is `high` (and low half `low`, when given: the rows
    /// pack an engine or worker with a tier) out of `cell` (inline again once at most one is
    /// left); the values taken, in order.
    pub(crate) fn remove(&mut self, cell: &mut Cell, high: u32, low: Option<u32>) -> Hashes {
        let (mut kept, mut out) = (Hashes::new(), Hashes::new());
        for &v in self.values(cell) {
            if (v >> 32) as u32 == high && low.is_none_or(|l| v as u32 == l) {
                out.push(v);
            } else {
                kept.push(v);
            }
        }
        if !out.is_empty() {
            if let Some(k) = spilled(cell.0) {
                self.take(k);
            }
            cell.0 = match kept[..] {
                [] => EMPTY,
                [v] => v,
                _ => SPILLED << 32 | self.put(kept) as u64,
            };
        }
        out
    }

    /// Slots in use.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.lists.len() - self.free.len()
    }
}

#[cfg(test)]
mod tests {
    use super::{Cell, Spill};

    #[test]
    fn a_cell_keeps_one_value_inline_and_several_in_a_slot() {
        let mut s = Spill::default();
        let mut c = Cell::default();
        assert!(s.values(&c).is_empty());
        assert!(s.insert(&mut c, 7 << 32 | 1));
        assert!(!s.insert(&mut c, 7 << 32 | 1));
        assert_eq!((s.values(&c), s.len()), (&[7 << 32 | 1][..], 0));
        assert!(s.insert(&mut c, 8 << 32));
        assert!(s.insert(&mut c, 7 << 32 | 2));
        assert!(!s.insert(&mut c, 8 << 32));
        assert_eq!(s.values(&c), &[7 << 32 | 1, 8 << 32, 7 << 32 | 2]);
        assert_eq!(s.len(), 1);
        let gone = s.remove(&mut c, 7, None);
        assert_eq!(
            (&gone[..], s.values(&c), s.len()),
            (&[7 << 32 | 1, 7 << 32 | 2][..], &[8 << 32][..], 0)
        );
        assert!(s.remove(&mut c, 7, None).is_empty());
        assert_eq!(&s.remove(&mut c, 8, Some(0))[..], &[8 << 32]);
        assert!(c.is_empty());
        // A freed slot is reused.
        let (mut a, mut b) = (Cell(1), Cell::default());
        assert!(s.insert(&mut a, 2) && s.insert(&mut b, 3) && s.insert(&mut b, 4));
        assert_eq!(
            (s.len(), s.values(&a), s.values(&b)),
            (2, &[1, 2][..], &[3, 4][..])
        );
        assert_eq!(s.lists.len(), 2);
    }
}
