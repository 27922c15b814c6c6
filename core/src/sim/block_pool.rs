//! The GPU side: the prefix cache (`KVCacheManager.get_computed_blocks`, unbounded) and the
//! block pool's `BlockStored` events (`BlockPool.cache_full_blocks`,
//! `vllm/v1/core/block_pool.py`).

use crate::event::{BlockStored, ExtraValue, KvEvent, Label};
use crate::scenario::GroupKind;
use crate::trace::{Provenance, ProvenanceKind};

use super::engine::Engine;

impl Engine<'_> {
    /// `cache_full_blocks` up to `num_tokens` computed tokens: one `BlockStored` per group.
    pub(super) fn gpu_cache_blocks(&mut self, r: usize, num_tokens: usize) {
        let bs = self.bs;
        let step = self.step_now();
        let req = &self.reqs[r];
        let full = (num_tokens / bs).min(req.block_hashes.len());
        let start = req.gpu_cached_blocks;
        if full <= start {
            return;
        }
        // allocate_slots caches the blocks at allocation: later requests of the same step
        // already hit them (upstream fixture h_two_requests_one_step)
        for h in &req.block_hashes[start..full] {
            self.gpu_cache.insert(*h);
        }
        if self.sc.gpu_events {
            for (g, grp) in self.sc.groups.iter().enumerate() {
                let req = &self.reqs[r];
                let ev = BlockStored {
                    block_hashes: req.block_hashes[start..full]
                        .iter()
                        .map(|d| self.tracker.wire(d))
                        .collect(),
                    parent_block_hash: (start > 0)
                        .then(|| self.tracker.wire(&req.block_hashes[start - 1])),
                    token_ids: req.tokens[start * bs..full * bs].to_vec(),
                    block_size: bs as u32,
                    lora_id: req.lora_id,
                    medium: Some("GPU".into()),
                    lora_name: req.lora_name.clone().map(Label::from),
                    extra_keys: Some(
                        (start..full)
                            .map(|b| req.extra.for_block(b * bs).map(ExtraValue::Array))
                            .collect(),
                    ),
                    group_idx: Some(g as u32),
                    kv_cache_spec_kind: Some(grp.kind.spec_kind().into()),
                    kv_cache_spec_sliding_window: match grp.kind {
                        GroupKind::SlidingWindow => grp.sliding_window.map(u64::from),
                        _ => None,
                    },
                    locality: None,
                    ownership: None,
                };
                let prov = Provenance {
                    tier: "GPU".into(),
                    kind: ProvenanceKind::GpuStore,
                    job_id: None,
                    req_id: Some(req.id.clone()),
                    group_idx: Some(g as u32),
                    chunk_idx: Some(start as u32),
                    step: Some(step),
                };
                self.gpu_events.push((KvEvent::BlockStored(ev), prov));
            }
        }
        self.reqs[r].gpu_cached_blocks = full;
    }

    /// GPU prefix-cache hit in tokens: leading full blocks already allocated (cached) by any
    /// request, this step included, at most `num_tokens - 1` tokens (`get_computed_blocks`).
    pub(super) fn gpu_prefix_hit(&self, r: usize) -> usize {
        if !self.sc.gpu_prefix_cache {
            return 0;
        }
        let req = &self.reqs[r];
        let max_blocks = (req.num_tokens().saturating_sub(1)) / self.bs;
        let n = req
            .block_hashes
            .iter()
            .take(max_blocks)
            .take_while(|h| self.gpu_cache.contains(h))
            .count();
        n * self.bs
    }
}
