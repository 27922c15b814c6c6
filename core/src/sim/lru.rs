//! The LRU `CachePolicy` of the CPU tier (`vllm/v1/kv_offload/cpu/policies/lru.py`):
//! `blocks` (key → ref_cnt) plus the evictable keys in an ordered dict, LRU end first.
//!
//! Python's `OrderedDict` is a hash map over a doubly linked list, so insertion, removal and
//! `move_to_end` are O(1). [`OrderedKeys`] is the same structure: a hash map from key to a
//! node of a linked list kept in a slab (a `Vec` of nodes with a free list), so every
//! operation is O(1) and memory stays proportional to the live keys.

use rustc_hash::FxHashMap;

use crate::keys::OffloadKey;

use super::touch::{TouchMemo, TouchSpan};

const NIL: u32 = u32::MAX;

#[derive(Clone, Debug)]
struct Node {
    key: OffloadKey,
    prev: u32,
    next: u32,
    /// Free for the node's owner ([`super::touch`] marks the nodes it has put in order); 0 for a
    /// new node.
    stamp: u32,
}

/// An insertion-ordered set of keys with O(1) `push_back`, `remove` and `move_to_end`.
///
/// Nodes are named by their slab index (`u32`) so that a caller can keep runs of nodes
/// ([`OrderedKeys::splice_back`]); an index names its key until the key is removed.
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

    /// `d[key] = None` for an absent key: append at the MRU end and return its node. A
    /// present key keeps its position (`None`).
    pub fn push_back(&mut self, key: OffloadKey) -> Option<u32> {
        if self.index.contains_key(&key) {
            return None;
        }
        let node = Node {
            key,
            prev: NIL,
            next: NIL,
            stamp: 0,
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
        Some(i)
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

    /// `d.move_to_end(key)` of a node's key; returns whether the order changed.
    pub fn move_node_to_end(&mut self, i: u32) -> bool {
        if self.tail == i {
            return false;
        }
        self.unlink(i);
        self.link_back(i);
        true
    }

    /// Move the run of nodes from `first` to `last` (in list order, `first` not after `last`)
    /// to the MRU end, keeping its order: O(1).
    pub fn splice_back(&mut self, first: u32, last: u32) {
        if self.tail == last {
            return;
        }
        let before = self.nodes[first as usize].prev;
        let after = self.nodes[last as usize].next;
        match before {
            NIL => self.head = after,
            p => self.nodes[p as usize].next = after,
        }
        // `last` is not the tail, so `after` is a node
        self.nodes[after as usize].prev = before;
        self.nodes[first as usize].prev = self.tail;
        self.nodes[self.tail as usize].next = first;
        self.nodes[last as usize].next = NIL;
        self.tail = last;
    }

    /// The node of `key`, if present.
    pub fn node(&self, key: &OffloadKey) -> Option<u32> {
        self.index.get(key).copied()
    }

    /// The key of a live node.
    pub fn key(&self, i: u32) -> &OffloadKey {
        &self.nodes[i as usize].key
    }

    /// The node after `i` (towards the MRU end).
    pub fn next(&self, i: u32) -> Option<u32> {
        Some(self.nodes[i as usize].next).filter(|&n| n != NIL)
    }

    /// The node before `i` (towards the LRU end).
    pub fn prev(&self, i: u32) -> Option<u32> {
        Some(self.nodes[i as usize].prev).filter(|&n| n != NIL)
    }

    /// A node's stamp.
    pub fn stamp(&self, i: u32) -> u32 {
        self.nodes[i as usize].stamp
    }

    /// Set a node's stamp.
    pub fn set_stamp(&mut self, i: u32, stamp: u32) {
        self.nodes[i as usize].stamp = stamp;
    }

    /// Reset every node's stamp to 0.
    pub fn clear_stamps(&mut self) {
        for n in &mut self.nodes {
            n.stamp = 0;
        }
    }

    /// Take a live node out of the order (it keeps its key; put it back with
    /// [`OrderedKeys::attach_back`]).
    pub fn detach(&mut self, i: u32) {
        self.unlink(i);
    }

    /// Put a detached node back, at the MRU end.
    pub fn attach_back(&mut self, i: u32) {
        self.link_back(i);
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

/// The LRU policy state. Every change to the evictable order goes through its methods, which
/// keep [`TouchMemo`] informed.
#[derive(Clone, Debug, Default)]
pub struct LruPolicy {
    /// key → ref_cnt (−1 = store in flight, 0 = evictable, > 0 = pinned by loads).
    pub blocks: FxHashMap<OffloadKey, i32>,
    /// Evictable keys, LRU first.
    evictable: OrderedKeys,
    /// The last request `touch` (see [`LruPolicy::touch_request`]).
    memo: TouchMemo,
}

impl LruPolicy {
    /// Evictable keys, LRU first.
    pub fn evictable(&self) -> &OrderedKeys {
        &self.evictable
    }

    /// `mark_evictable`: `evictable_blocks[key] = None` (an existing entry keeps its place).
    pub fn mark_evictable(&mut self, key: OffloadKey) {
        if let Some(i) = self.evictable.push_back(key) {
            self.memo.pushed(&self.evictable, i);
        }
    }

    /// `mark_non_evictable`: `evictable_blocks.pop(key, None)` (also eviction's
    /// `del evictable_blocks[key]`).
    pub fn mark_non_evictable(&mut self, key: &OffloadKey) {
        if let Some(i) = self.evictable.node(key) {
            self.memo.removing(&self.evictable, i);
            self.evictable.remove(key);
        }
    }

    /// `touch` of one key: `move_to_end` if evictable.
    pub fn move_to_end(&mut self, key: &OffloadKey) {
        if let Some(i) = self.evictable.node(key) {
            if self.evictable.move_node_to_end(i) {
                self.memo.moved(&self.evictable, i);
            }
        }
    }

    /// `touch(keys)` of one request's keys, group by group: for each span, the keys
    /// `key(span, c)` for `c` in `skip..len`, walked in reverse. The same order as calling
    /// [`LruPolicy::move_to_end`] on each, in time proportional to what changed since the
    /// request's previous touch (see [`super::touch`]).
    pub fn touch_request(
        &mut self,
        owner: u64,
        spans: &[TouchSpan],
        key: impl Fn(usize, usize) -> OffloadKey,
    ) {
        self.memo.touch(&mut self.evictable, owner, spans, key);
    }

    /// The request `owner` will not touch again: its memo, if any, is dropped.
    pub fn forget(&mut self, owner: u64) {
        self.memo.forget(owner);
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
                proptest::prop_assert_eq!(p.evictable().iter().copied().collect::<Vec<_>>(), model.clone());
                proptest::prop_assert_eq!(p.evictable().len(), model.len());
                proptest::prop_assert!(p.evictable().nodes.len() <= peak);
            }
        }
    }
}
