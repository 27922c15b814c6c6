//! Giving back the block ids of removed blocks that nothing refers to any more (streaming
//! runs only), so that memory follows the live set rather than the trace's length.
//!
//! Every per-block structure of the run (the models' rows, the lanes that hold each block, the
//! waiters, the loss roots, the primary-tier pairs) is a vector indexed by the interner's dense
//! block id. On a trace with LRU churn (`scripts/bench-memory.sh`'s churn trace: every block
//! stored, then evicted) the ids, hence all those vectors, grew with the number of distinct
//! blocks ever seen: about 330 bytes per event on the 10M-event trace. After a `BlockRemoved`
//! event, each of its blocks whose id no model and no part of the run refers to (all its rows
//! at their defaults) is released ([`crate::consumers::Interner::release`]) and its id goes to
//! the next new hash: the rows it leaves are exactly what a fresh id finds, so the analysis is
//! unchanged. What a released block leaves behind is whether it was ever stored (a waiter's
//! parent that was once stored is no `unknown-parent`), kept by hash in `Run::gone`.
//!
//! Only for single-group traces (the models' ids are then also the analysis' ids), and never
//! for `analyze` or replay (their tables keep every id). An id stays taken while a block is in
//! Dynamo's device tree (its nodes are never freed), while the ideal model holds orphans, or
//! after an llm-d restart replay did not handle (its stale list names ids).

use super::Run;

impl Run {
    /// Release the ids of the current (removal) event's blocks that nothing refers to; those
    /// still referred to (e.g. SGLang keeps a node while it has children, and prunes it with
    /// its last child) are looked at again later, in sweeps of amortised constant cost.
    pub(super) fn recycle(&mut self) {
        if !self.index.streaming || self.index.multi_group {
            return;
        }
        for k in 0..self.ids.blocks.len() {
            let Some(&id) = self.ids.blocks.get(k) else {
                break;
            };
            if self.referenced(id) {
                self.deferred.push(id);
            } else {
                self.release(id);
            }
        }
        if self.deferred.len() >= self.sweep_at {
            let mut ids = std::mem::take(&mut self.deferred);
            ids.sort_unstable();
            ids.dedup();
            ids.retain(|&id| {
                if !self.interner.live(id) {
                    false
                } else if self.referenced(id) {
                    true
                } else {
                    self.release(id);
                    false
                }
            });
            self.sweep_at = (2 * ids.len()).max(1024);
            self.deferred = ids;
        }
    }

    /// Give id `id` back (nothing refers to it).
    fn release(&mut self, id: u32) {
        let Some(h) = self.interner.release(id) else {
            return;
        };
        if let Some(held) = self.presence.held.get_mut(id as usize) {
            if std::mem::take(held).ever {
                self.gone.insert(h, 0);
            }
        }
    }

    /// Whether any part of the run refers to block `id`.
    fn referenced(&self, id: u32) -> bool {
        let i = id as usize;
        self.presence
            .held
            .get(i)
            .is_some_and(|h| !h.lanes.is_empty() || h.waiters > 0)
            || self.waiting.waits_for(id)
            || self.tracks.iter().any(|t| t.holds(id))
            || self.primary_pairs.names(id, self.engine_count)
            || self.consumers.iter().any(|c| c.uses(id))
    }
}
