//! The LRU `CachePolicy` of the CPU tier (`vllm/v1/kv_offload/cpu/policies/lru.py`):
//! `blocks` (key → ref_cnt) plus the evictable keys in an ordered dict, LRU end first.
//!
//! Python's `OrderedDict` is a hash map over a doubly linked list, so insertion, removal and
//! `move_to_end` are O(1). [`OrderedKeys`] is the same structure: a hash map from key to a
//! node of a linked list kept in a slab (a `Vec` of nodes with a free list), so every
//! operation is O(1) and memory stays proportional to the live keys.

use rustc_hash::FxHashMap;

use crate::keys::OffloadKey;

const NIL: u32 = u32::MAX;

#[derive(Clone, Debug)]
struct Node {
    key: OffloadKey,
    prev: u32,
    next: u32,
}

/// An insertion-ordered set of keys with O(1) `push_back`, `remove` and `move_to_end`.
#[derive(Clone, Debug)]
pub struct OrderedKeys {
    index: FxHashMap<OffloadKey, u32>,
    nodes: Vec<Node>,
    free: Vec<u32>,
    head: u32,
    tail: u32,
}

impl Default for OrderedKeys {
    fn default() -> Self {
        OrderedKeys {
            index: FxHashMap::default(),
            nodes: Vec::new(),
            free: Vec::new(),
            head: NIL,
            tail: NIL,
        }
    }
}

impl OrderedKeys {
    /// Number of keys.
    #[allow(clippy::len_without_is_empty)]
    pub fn len(&self) -> usize {
        self.index.len()
    }

    fn link_back(&mut self, i: u32) {
        self.nodes[i as usize].prev = self.tail;
        self.nodes[i as usize].next = NIL;
        match self.tail {
            NIL => self.head = i,
            t => self.nodes[t as usize].next = i,
        }
        self.tail = i;
    }

    fn unlink(&mut self, i: u32) {
        let Node { prev, next, .. } = self.nodes[i as usize];
        match prev {
            NIL => self.head = next,
            p => self.nodes[p as usize].next = next,
        }
        match next {
            NIL => self.tail = prev,
            n => self.nodes[n as usize].prev = prev,
        }
    }

    /// `d[key] = None` for an absent key: append at the MRU end. A present key keeps its
    /// position (returns false).
    pub fn push_back(&mut self, key: OffloadKey) -> bool {
        if self.index.contains_key(&key) {
            return false;
        }
        let node = Node {
            key,
            prev: NIL,
            next: NIL,
        };
        let i = match self.free.pop() {
            Some(i) => {
                self.nodes[i as usize] = node;
                i
            }
            None => {
                // at most 2^32 - 1 live keys: the scenario limits keep far below
                self.nodes.push(node);
                (self.nodes.len() - 1) as u32
            }
        };
        self.index.insert(key, i);
        self.link_back(i);
        true
    }

    /// `d.pop(key, None)`; returns whether it was present.
    pub fn remove(&mut self, key: &OffloadKey) -> bool {
        let Some(i) = self.index.remove(key) else {
            return false;
        };
        self.unlink(i);
        self.free.push(i);
        true
    }

    /// `d.move_to_end(key)` if present.
    pub fn move_to_end(&mut self, key: &OffloadKey) {
        if let Some(&i) = self.index.get(key) {
            if self.tail != i {
                self.unlink(i);
                self.link_back(i);
            }
        }
    }

    /// Keys from the LRU end to the MRU end.
    pub fn iter(&self) -> impl Iterator<Item = &OffloadKey> + '_ {
        let mut at = self.head;
        std::iter::from_fn(move || {
            if at == NIL {
                return None;
            }
            let node = &self.nodes[at as usize];
            at = node.next;
            Some(&node.key)
        })
    }
}

/// The LRU policy state.
#[derive(Clone, Debug, Default)]
pub struct LruPolicy {
    /// key → ref_cnt (−1 = store in flight, 0 = evictable, > 0 = pinned by loads).
    pub blocks: FxHashMap<OffloadKey, i32>,
    /// Evictable keys, LRU first.
    pub evictable: OrderedKeys,
}

impl LruPolicy {
    /// `mark_evictable`: `evictable_blocks[key] = None` (an existing entry keeps its place).
    pub fn mark_evictable(&mut self, key: OffloadKey) {
        self.evictable.push_back(key);
    }

    /// `mark_non_evictable`: `evictable_blocks.pop(key, None)`.
    pub fn mark_non_evictable(&mut self, key: &OffloadKey) {
        self.evictable.remove(key);
    }

    /// `touch` of one key: `move_to_end` if evictable.
    pub fn move_to_end(&mut self, key: &OffloadKey) {
        self.evictable.move_to_end(key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hashing::Digest;

    fn k(i: u8) -> OffloadKey {
        OffloadKey::new(Digest([i; 32]), 0)
    }

    proptest::proptest! {
        /// The linked slab behaves like a plain ordered list (Python's `OrderedDict`), and
        /// its slab never holds more nodes than keys were ever live at once.
        #[test]
        fn ordered_keys_match_an_ordered_list(ops in proptest::collection::vec((0u8..3, 0u8..6), 0..400)) {
            let mut p = LruPolicy::default();
            let mut model: Vec<OffloadKey> = Vec::new();
            let mut peak = 0;
            for (op, i) in ops {
                let key = k(i);
                let pos = model.iter().position(|m| *m == key);
                match op {
                    0 => {
                        p.mark_evictable(key);
                        if pos.is_none() {
                            model.push(key);
                        }
                    }
                    1 => {
                        p.mark_non_evictable(&key);
                        if let Some(i) = pos {
                            model.remove(i);
                        }
                    }
                    _ => {
                        p.move_to_end(&key);
                        if let Some(i) = pos {
                            model.remove(i);
                            model.push(key);
                        }
                    }
                }
                peak = peak.max(model.len());
                proptest::prop_assert_eq!(p.evictable.iter().copied().collect::<Vec<_>>(), model.clone());
                proptest::prop_assert_eq!(p.evictable.len(), model.len());
                proptest::prop_assert!(p.evictable.nodes.len() <= peak);
            }
        }
    }
}
