//! CPU/STORAGE/DISK: Dynamo's order-insensitive `LowerTierIndexer` (`src/indexer/lower_tier.rs`),
//! one per `StorageTier` and rank publisher.

use super::{Blk, Dynamo, StorageTier, Worker};
use crate::consumers::{push_block, slot, Blocks, LaneKey, VerdictKind};

/// A lower-tier owner's entry for one block (`worker_blocks[(tier, worker)][hash]`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct LowerBlock {
    tier: StorageTier,
    worker: Worker,
    /// `(parent, local hash)`.
    key: (Option<u64>, u64),
    /// kvscope tier id (for the lane counters).
    lane_tier: u32,
}

impl Dynamo {
    pub(super) fn lower_store(
        &mut self,
        tier: StorageTier,
        w: Worker,
        parent_hash: Option<u64>,
        blocks: &[Blk],
        lane: LaneKey,
    ) -> usize {
        let mut parent = parent_hash;
        let mut stored = 0;
        for b in blocks {
            let key = (parent, b.0);
            let mine = |e: &LowerBlock| e.tier == tier && e.worker == w;
            if self
                .worker_blocks
                .get(b.2 as usize)
                .and_then(|l| l.iter().find(|e| mine(e)))
                .is_some_and(|e| e.key != key)
            {
                break;
            }
            let ekey = (tier, w, parent, b.0);
            if self
                .edges
                .get_or_insert(ekey, b.1)
                .is_some_and(|c| c != b.1)
            {
                break;
            }
            let entry = LowerBlock {
                tier,
                worker: w,
                key,
                lane_tier: lane.tier,
            };
            let list = slot(&mut self.worker_blocks, b.2);
            match list.iter_mut().find(|e| mine(e)) {
                Some(e) => *e = entry,
                None => {
                    list.push(entry);
                    self.lane_delta(lane, 1);
                }
            }
            parent = Some(b.1);
            stored += 1;
        }
        stored
    }

    pub(super) fn remove_edge_owner(
        &mut self,
        tier: StorageTier,
        key: (Option<u64>, u64),
        w: Worker,
    ) {
        self.edges.remove(&(tier, w, key.0, key.1));
    }

    pub(super) fn lower_remove(
        &mut self,
        tier: StorageTier,
        w: Worker,
        hashes: &[u64],
        bids: &[u32],
        lane: LaneKey,
    ) -> Blocks {
        let mut out = Blocks::with_capacity(hashes.len());
        for (&h, &bid) in hashes.iter().zip(bids) {
            let removed = self.worker_blocks.get_mut(bid as usize).and_then(|l| {
                let p = l.iter().position(|e| e.tier == tier && e.worker == w)?;
                Some(l.remove(p))
            });
            match removed {
                Some(e) => {
                    self.remove_edge_owner(tier, e.key, w);
                    self.lane_delta(
                        LaneKey {
                            source: lane.source,
                            tier: e.lane_tier,
                        },
                        -1,
                    );
                    push_block(&mut out, h, VerdictKind::Removed, None);
                }
                None => push_block(&mut out, h, VerdictKind::RemoveUnknown, Some("skipped")),
            }
        }
        out
    }

    pub(super) fn lower_clear(&mut self, w: Worker) {
        let clear_all = self.clear_all_ranks;
        let gone = |wk: &Worker| if clear_all { wk.0 == w.0 } else { *wk == w };
        let mut removed: Vec<LowerBlock> = Vec::new();
        for l in &mut self.worker_blocks {
            l.retain(|e| {
                if gone(&e.worker) {
                    removed.push(*e);
                    false
                } else {
                    true
                }
            });
        }
        for e in removed {
            self.remove_edge_owner(e.tier, e.key, e.worker);
            self.lane_delta(
                LaneKey {
                    source: e.worker.0,
                    tier: e.lane_tier,
                },
                -1,
            );
        }
    }
}
