//! Static per-block tables of the replay: each block's first store (event, parent), its
//! children (in first-store order) and every event that named it, indexed by the analysis'
//! dense block ids (no per-block hash map or vector: flat arrays and intrusive lists).

use crate::analysis::BlockKeys;

/// "No event / no block".
const NONE: u32 = u32::MAX;

/// A singly linked list's ends.
#[derive(Clone, Copy)]
struct Ends {
    first: u32,
    last: u32,
}

const EMPTY: Ends = Ends {
    first: NONE,
    last: NONE,
};

/// The tables (see the module docs).
#[derive(Default)]
pub(super) struct BlockTables {
    /// Hash ↔ id.
    pub(super) interner: BlockKeys,
    /// By id: `(event of the first store, parent id)`, [`NONE`] when absent.
    first_store: Vec<(u32, u32)>,
    /// Number of distinct blocks stored so far.
    pub(super) first_stores: u32,
    /// By id: its children (ids, linked through `next_sibling`).
    children: Vec<Ends>,
    /// By id: the next child of the same parent.
    next_sibling: Vec<u32>,
    /// By id: the events naming it (entries of `touch_list`).
    touches: Vec<Ends>,
    /// `(event, next entry)`.
    touch_list: Vec<(u32, u32)>,
}

fn grow<T: Copy>(v: &mut Vec<T>, id: u32, fill: T) {
    let want = id as usize + 1;
    if v.len() < want {
        v.resize(want, fill);
    }
}

impl BlockTables {
    /// Room for about `n` events naming one block each (the common case; more grow).
    pub(super) fn reserve(&mut self, n: usize) {
        self.first_store.reserve(n);
        self.touches.reserve(n);
        self.touch_list.reserve(n);
    }

    /// Record event `i`, naming blocks `ids` (a store when `stored`, under `parent`).
    pub(super) fn add(&mut self, i: u32, ids: &[u32], stored: bool, parent: Option<u32>) {
        let mut parent = parent.unwrap_or(NONE);
        for &id in ids {
            grow(&mut self.touches, id, EMPTY);
            let entry = self.touch_list.len() as u32;
            self.touch_list.push((i, NONE));
            if let Some(ends) = self.touches.get_mut(id as usize) {
                match self.touch_list.get_mut(ends.last as usize) {
                    Some(last) => last.1 = entry,
                    None => ends.first = entry,
                }
                ends.last = entry;
            }
            if !stored {
                continue;
            }
            grow(&mut self.first_store, id, (NONE, NONE));
            if let Some(slot) = self.first_store.get_mut(id as usize) {
                if slot.0 == NONE {
                    *slot = (i, parent);
                    self.first_stores += 1;
                    if parent != NONE {
                        self.add_child(parent, id);
                    }
                }
            }
            parent = id;
        }
    }

    fn add_child(&mut self, parent: u32, child: u32) {
        grow(&mut self.children, parent, EMPTY);
        grow(&mut self.next_sibling, child, NONE);
        let Some(ends) = self.children.get_mut(parent as usize) else {
            return;
        };
        match self.next_sibling.get_mut(ends.last as usize) {
            Some(next) => *next = child,
            None => ends.first = child,
        }
        ends.last = child;
    }

    /// `(event, parent hash)` of the first store of `hash`.
    pub(super) fn first_store(&self, group: u32, hash: u64) -> Option<(usize, Option<u64>)> {
        let id = self.interner.get(group, hash)?;
        let (e, p) = *self.first_store.get(id as usize)?;
        (e != NONE).then(|| (e as usize, self.interner.key(p).map(|k| k.1)))
    }

    /// Children of `hash` (hashes, in first-store order).
    pub(super) fn children(&self, group: u32, hash: u64) -> impl Iterator<Item = u64> + '_ {
        let mut next = self
            .interner
            .get(group, hash)
            .and_then(|id| self.children.get(id as usize))
            .map_or(NONE, |e| e.first);
        std::iter::from_fn(move || {
            let id = next;
            let h = self.interner.key(id)?.1;
            next = self.next_sibling.get(id as usize).copied().unwrap_or(NONE);
            Some(h)
        })
    }

    /// Events naming `hash`, in order.
    pub(super) fn touches(&self, group: u32, hash: u64) -> impl Iterator<Item = usize> + '_ {
        let mut next = self
            .interner
            .get(group, hash)
            .and_then(|id| self.touches.get(id as usize))
            .map_or(NONE, |e| e.first);
        std::iter::from_fn(move || {
            let (e, n) = *self.touch_list.get(next as usize)?;
            next = n;
            Some(e as usize)
        })
    }

    /// Approximate heap bytes.
    pub(super) fn bytes(&self) -> usize {
        self.interner.bytes()
            + self.first_store.capacity() * 8
            + self.children.capacity() * 8
            + self.next_sibling.capacity() * 4
            + self.touches.capacity() * 8
            + self.touch_list.capacity() * 8
    }
}
