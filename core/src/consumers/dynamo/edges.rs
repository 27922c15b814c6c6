//! Dynamo's lower-tier edges (`LowerTierIndexer`: `(parent, local hash) → child` per
//! `StorageTier` and rank publisher), kept over the models' one hash-map type.

use std::hash::BuildHasher;

use super::{StorageTier, Worker};
use crate::consumers::HashChain;

/// An edge's key: `(tier, publisher, parent engine hash, local hash)`.
pub(super) type EdgeKey = (StorageTier, Worker, Option<u64>, u64);

/// The edges `key → child engine hash`: entries in a vector, found through a [`HashChain`] by
/// the key's Fx hash (exact: the chain compares keys), instead of a hash table of their own
/// key type (wasm size). A removed edge's entry is unlinked and taken by the next new edge
/// (with LRU churn the live edges are bounded, so the entries are too).
#[derive(Clone, Debug, Default)]
pub(super) struct Edges {
    chain: HashChain,
    entries: Vec<(EdgeKey, Option<u64>)>,
    live: usize,
    /// Entries of removed edges.
    free: Vec<u32>,
}

fn key_hash(key: &EdgeKey) -> u64 {
    rustc_hash::FxBuildHasher.hash_one(key)
}

impl Edges {
    /// The entry of `key`, live or not.
    fn find(&self, key: &EdgeKey) -> Option<usize> {
        let entries = &self.entries;
        self.chain
            .find(key_hash(key), |id| {
                entries.get(id as usize).is_some_and(|e| e.0 == *key)
            })
            .map(|id| id as usize)
    }

    /// The child of `key`.
    #[cfg(test)]
    fn get(&self, key: &EdgeKey) -> Option<u64> {
        self.find(key)
            .and_then(|i| self.entries.get(i))
            .and_then(|e| e.1)
    }

    /// Room for about `n` edges (a block's each).
    pub(super) fn reserve(&mut self, n: usize) {
        self.entries.reserve_exact(n);
    }

    /// The child of `key`, or else (no edge) set it to `child` and return `None`:
    /// [`Edges::get`] then [`Edges::insert`] in one probe (once per lower-tier block).
    pub(super) fn get_or_insert(&mut self, key: EdgeKey, child: u64) -> Option<u64> {
        let (e, live) = self.entry(key)?;
        if e.1.is_none() {
            e.1 = Some(child);
            *live += 1;
            return None;
        }
        e.1
    }

    /// Set the child of `key`.
    #[cfg(test)]
    fn insert(&mut self, key: EdgeKey, child: u64) {
        if let Some((e, live)) = self.entry(key) {
            if e.1.replace(child).is_none() {
                *live += 1;
            }
        }
    }

    /// The entry of `key` (and the live count), found in one probe or else linked as a new
    /// entry without a child: in the last freed slot, else a new one.
    fn entry(&mut self, key: EdgeKey) -> Option<(&mut (EdgeKey, Option<u64>), &mut usize)> {
        let id = match self.free.last() {
            Some(&slot) => slot,
            None => u32::try_from(self.entries.len()).unwrap_or(u32::MAX),
        };
        let entries = &self.entries;
        let found = self.chain.find_or_push(key_hash(&key), id, |id| {
            entries.get(id as usize).is_some_and(|e| e.0 == key)
        });
        let i = match found {
            Some(i) => i as usize,
            None => match self.free.pop() {
                Some(slot) => {
                    let slot = slot as usize;
                    *self.entries.get_mut(slot)? = (key, None);
                    slot
                }
                None => {
                    self.entries.push((key, None));
                    self.entries.len() - 1
                }
            },
        };
        Some((self.entries.get_mut(i)?, &mut self.live))
    }

    /// Remove the edge of `key`, if any.
    pub(super) fn remove(&mut self, key: &EdgeKey) {
        let Some(i) = self.find(key) else {
            return;
        };
        if let Some(e) = self.entries.get_mut(i) {
            if e.1.take().is_some() {
                self.live -= 1;
            }
        }
        self.chain.remove(key_hash(key), i as u32);
        self.free.push(i as u32);
    }

    /// Number of edges.
    pub(super) fn len(&self) -> usize {
        self.live
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn insert_get_remove_reinsert() {
        let mut e = Edges::default();
        let k1: EdgeKey = (StorageTier::HostPinned, (0, 0), None, 7);
        let k2: EdgeKey = (StorageTier::HostPinned, (0, 0), Some(1), 7);
        let k3: EdgeKey = (StorageTier::Disk, (0, 0), None, 7);
        e.insert(k1, 10);
        e.insert(k2, 20);
        assert_eq!(
            (e.get(&k1), e.get(&k2), e.get(&k3), e.len()),
            (Some(10), Some(20), None, 2)
        );
        e.insert(k1, 11);
        assert_eq!((e.get(&k1), e.len()), (Some(11), 2));
        e.remove(&k1);
        e.remove(&k3);
        assert_eq!((e.get(&k1), e.get(&k2), e.len()), (None, Some(20), 1));
        e.insert(k1, 12);
        assert_eq!((e.get(&k1), e.len()), (Some(12), 2));
        // The removed entry was taken again, not a new one.
        assert_eq!(e.entries.len(), 2);
        e.remove(&k2);
        e.insert(k3, 30);
        assert_eq!(
            (e.get(&k1), e.get(&k2), e.get(&k3), e.len()),
            (Some(12), None, Some(30), 2)
        );
        assert_eq!(e.entries.len(), 2);
    }

    #[test]
    fn get_or_insert_keeps_the_first_child() {
        let mut e = Edges::default();
        let k: EdgeKey = (StorageTier::HostPinned, (0, 0), Some(1), 7);
        assert_eq!(e.get_or_insert(k, 10), None);
        assert_eq!(
            (e.get_or_insert(k, 11), e.get(&k), e.len()),
            (Some(10), Some(10), 1)
        );
        e.remove(&k);
        assert_eq!(
            (e.get_or_insert(k, 12), e.get(&k), e.len()),
            (None, Some(12), 1)
        );
        assert_eq!(e.entries.len(), 1);
    }
}
