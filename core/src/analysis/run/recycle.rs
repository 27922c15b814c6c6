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
//! parent that was once stored is no `unknown-parent`), kept by hash in [`Gone`] (8 bytes a
//! block: a hash-map entry would cost about 27 at its load, 140 MB on the 10M-event churn
//! trace).
//!
//! The ids of an engine's blocks cleared by `AllBlocksCleared` are looked at the same way
//! (llm-d keeps the blocks' engine mappings across a clear, so with the llm-d model they stay
//! taken).
//!
//! Only for single-group traces (the models' ids are then also the analysis' ids), and never
//! for `analyze` or replay (their tables keep every id). An id stays taken while a block is in
//! Dynamo's device tree (its nodes are never freed), while the ideal model holds orphans, or
//! after an llm-d restart replay did not handle (its stale list names ids).

use super::Run;
use crate::consumers::Map;

/// Hashes of released blocks that had been stored: a sorted vector, and the latest in a small
/// map merged into it every [`Gone::TAIL`] hashes.
#[derive(Default)]
pub(super) struct Gone {
    sorted: Vec<u64>,
    tail: Map<u64, u32>,
}

impl Gone {
    const TAIL: usize = 1 << 16;

    /// Whether no hash is kept.
    pub(super) fn is_empty(&self) -> bool {
        self.sorted.is_empty() && self.tail.is_empty()
    }

    /// Keep `h`.
    fn insert(&mut self, h: u64) {
        self.tail.insert(h, 0);
        if self.tail.len() >= Self::TAIL {
            let mut t: Vec<u64> = self.tail.drain().map(|(h, _)| h).collect();
            crate::sort::sort_u64(&mut t);
            // Merge from the back, in place.
            let n = self.sorted.len();
            self.sorted.resize(n + t.len(), 0);
            let (mut i, mut j, mut k) = (n, t.len(), n + t.len());
            while j > 0 {
                k -= 1;
                if i > 0 && self.sorted[i - 1] > t[j - 1] {
                    i -= 1;
                    self.sorted[k] = self.sorted[i];
                } else {
                    j -= 1;
                    self.sorted[k] = t[j];
                }
            }
            self.sorted.dedup();
        }
    }

    /// Whether `h` is kept.
    pub(super) fn contains(&self, h: u64) -> bool {
        self.tail.contains_key(&h) || self.sorted.binary_search(&h).is_ok()
    }
}

impl Run {
    /// Release the ids of the blocks the last record removed that nothing refers to; those
    /// still referred to (e.g. SGLang keeps a node while it has children, and prunes it with
    /// its last child) are looked at again later, in sweeps of amortised constant cost.
    ///
    /// Called by [`crate::analysis::Analyzer`] after each record, not from [`Run::push`], so
    /// that the whole-trace analysis (the page's, the npm package's) does not link it.
    pub(crate) fn recycle(&mut self) {
        let mut removed = std::mem::take(&mut self.removed);
        if !self.index.streaming || self.index.multi_group {
            removed.clear();
            self.removed = removed;
            return;
        }
        for id in removed.drain(..) {
            if self.referenced(id) {
                self.deferred.push(id);
            } else {
                self.release(id);
            }
        }
        self.removed = removed;
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
                self.gone.insert(h);
            }
        }
    }

    /// Whether any part of the run refers to block `id`.
    fn referenced(&self, id: u32) -> bool {
        let i = id as usize;
        self.presence
            .held
            .get(i)
            .is_some_and(|h| !h.is_empty() || h.waiters > 0)
            || self.waiting.waits_for(id)
            || self.tracks.iter().any(|t| t.holds(id))
            || self.primary_pairs.names(id, self.engine_count)
            || self.consumers.iter().any(|c| c.uses(id))
    }
}

#[cfg(test)]
mod tests {
    use super::super::Run;
    use super::Gone;
    use crate::analysis::AnalysisConfig;
    use crate::consumers::testkit::{batch, h, removed, stored};
    use crate::event::KvEvent;

    /// The id a new hash gets after `rounds` rounds of a block stored then taken away by
    /// `gone`, on a streaming run of the models `models`.
    fn next_id(models: &str, rounds: u64, gone: impl Fn(u64) -> KvEvent) -> u32 {
        let config = AnalysisConfig {
            consumers: models
                .split(',')
                .filter_map(crate::consumers::ConsumerKind::parse)
                .collect(),
            ..AnalysisConfig::default()
        };
        let mut run = Run::streaming(&config);
        let cpu = Some("CPU");
        for k in 0..rounds {
            run.push(
                &batch("a", 2 * k, vec![stored(&[100 + k], None, cpu, 4)]),
                None,
            );
            run.recycle();
            run.push(&batch("a", 2 * k + 1, vec![gone(100 + k)]), None);
            run.recycle();
        }
        run.interner.intern(h(1))
    }

    #[test]
    fn removed_and_cleared_blocks_give_their_ids_back() {
        let cpu = Some("CPU");
        for models in ["sglang,smg,ideal,dynamo", "llmd"] {
            // Removed one by one: the ids are reused.
            assert!(
                next_id(models, 3000, |k| removed(&[k], cpu)) < 8,
                "{models}"
            );
        }
        // Cleared with the whole engine: the same, except where llm-d keeps the blocks' engine
        // mappings across a clear (its `uses`), as upstream does.
        assert!(
            next_id("sglang,smg,ideal,dynamo", 3000, |_| {
                KvEvent::AllBlocksCleared
            }) < 8
        );
        assert_eq!(next_id("llmd", 3000, |_| KvEvent::AllBlocksCleared), 3000);
    }

    #[test]
    fn gone_keeps_every_hash_across_merges() {
        let mut g = Gone::default();
        assert!(g.is_empty());
        // Three merges and a tail, with repeats; odd multiples of a large odd number.
        let h = |i: u64| (2 * i + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        let n = 3 * Gone::TAIL as u64 + 1000;
        for i in 0..n {
            g.insert(h(i));
            if i % 7 == 0 {
                g.insert(h(i / 2));
            }
        }
        // Merged at least twice, sorted without repeats.
        assert!(g.sorted.len() > 2 * Gone::TAIL && g.sorted.windows(2).all(|w| w[0] < w[1]));
        assert!((0..n).all(|i| g.contains(h(i))));
        assert!(!(0..1000).any(|i| g.contains((2 * i as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15))));
    }
}
