//! One block's entries in Dynamo's per-`(worker, dp_rank)` device lookups.

use super::NodeId;
use crate::consumers::Hashes;

/// The lookup entries of one block: `(worker id, node, kvscope tier id)` per rank publisher
/// holding it, in insertion order, stored as pairs `[worker id << 32 | tier, node]` in the
/// crate's `Hashes` vector (one entry inline, as before): no `SmallVec` type of its own (wasm
/// size).
#[derive(Clone, Debug, Default)]
pub(super) struct BlockLookup(Hashes);

impl BlockLookup {
    /// Whether no rank publisher holds the block.
    pub(super) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The index of worker `wid`'s pair.
    fn pos(&self, wid: u32) -> Option<usize> {
        self.0
            .iter()
            .step_by(2)
            .position(|k| (k >> 32) as u32 == wid)
            .map(|i| 2 * i)
    }

    fn at(&self, p: usize) -> Option<(NodeId, u32)> {
        let k = *self.0.get(p)?;
        let node = *self.0.get(p + 1)?;
        Some((node as NodeId, k as u32))
    }

    /// Worker `wid`'s `(node, tier)`.
    pub(super) fn get(&self, wid: u32) -> Option<(NodeId, u32)> {
        self.at(self.pos(wid)?)
    }

    /// Set worker `wid`'s entry, returning the previous `(node, tier)`.
    pub(super) fn set(&mut self, wid: u32, node: NodeId, tier: u32) -> Option<(NodeId, u32)> {
        let k = (wid as u64) << 32 | tier as u64;
        match self.pos(wid) {
            Some(p) => {
                let prev = self.at(p);
                if let Some(x) = self.0.get_mut(p) {
                    *x = k;
                }
                if let Some(x) = self.0.get_mut(p + 1) {
                    *x = node as u64;
                }
                prev
            }
            None => {
                self.0.push(k);
                self.0.push(node as u64);
                None
            }
        }
    }

    /// Remove worker `wid`'s entry, returning its `(node, tier)`.
    pub(super) fn remove(&mut self, wid: u32) -> Option<(NodeId, u32)> {
        let p = self.pos(wid)?;
        let prev = self.at(p);
        self.0.remove(p + 1);
        self.0.remove(p);
        prev
    }

    /// Remove the entries of the workers in `wids`, in order, passing each
    /// `(worker id, node, tier)` to `gone`.
    pub(super) fn remove_workers(&mut self, wids: &[u32], mut gone: impl FnMut(u32, NodeId, u32)) {
        let mut p = 0;
        while let (Some(&k), Some(&node)) = (self.0.get(p), self.0.get(p + 1)) {
            let wid = (k >> 32) as u32;
            if wids.contains(&wid) {
                self.0.remove(p + 1);
                self.0.remove(p);
                gone(wid, node as NodeId, k as u32);
            } else {
                p += 2;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn set_get_remove_in_order() {
        let mut l = BlockLookup::default();
        assert_eq!(l.set(3, 10, 0), None);
        assert_eq!(l.set(5, 11, 1), None);
        assert_eq!(l.set(3, 12, 2), Some((10, 0)));
        assert_eq!(
            (l.get(3), l.get(5), l.get(4)),
            (Some((12, 2)), Some((11, 1)), None)
        );
        assert_eq!(l.remove(3), Some((12, 2)));
        assert_eq!((l.get(3), l.get(5)), (None, Some((11, 1))));
        l.set(7, 13, 0);
        l.set(8, 14, 1);
        let mut gone = Vec::new();
        l.remove_workers(&[5, 8], |w, n, t| gone.push((w, n, t)));
        assert_eq!(gone, vec![(5, 11, 1), (8, 14, 1)]);
        assert_eq!((l.get(7), l.get(5)), (Some((13, 0)), None));
    }
}
