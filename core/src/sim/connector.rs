//! The connector's scheduler side: `OffloadingConnectorScheduler`
//! (`vllm/distributed/kv_transfer/kv_connector/v1/offloading/scheduler.py`): lookups and
//! `_touch`, load jobs (`update_state_after_alloc`), store jobs (`_build_store_jobs`), worker
//! reports merged as `OffloadingWorkerMetadata.aggregate` does (`offloading/common.py`) and
//! completed in that order (`update_connector_output`), and `reset_cache`.

use rustc_hash::FxHashSet;

use indexmap::IndexMap;
use rand::Rng;

use crate::event::KvEvent;
use crate::keys::OffloadKey;
use crate::order::OrderMode;
use crate::scenario::CompletionTiming;
use crate::trace::{Provenance, ProvenanceKind};

use super::cpu::LookupResult;
use super::engine::{Ctx, Engine};
use super::request::ReqState;
use super::touch::TouchSpan;
use super::SimError;

/// `TransferJobStatus`.
#[derive(Clone, Debug)]
pub(super) struct Job {
    pub(super) req: usize,
    /// `keys`, in the order `complete_store` iterates them (`OrderMode`).
    pub(super) keys: Vec<OffloadKey>,
    pub(super) is_store: bool,
    pub(super) pending: u32,
}

impl Engine<'_> {
    /// `_touch(req_status)`.
    pub(super) fn touch(&mut self, r: usize) {
        let len = self.reqs[r].num_keys(self.bpc);
        let spans: Vec<TouchSpan> = (0..self.sc.groups.len())
            .map(|g| TouchSpan {
                skip: match self.window_chunks(g) {
                    None => 0,
                    Some(w) => self.reqs[r].num_hit_chunks[g].saturating_sub(w).min(len),
                },
                len,
            })
            .collect();
        let (req, bpc) = (&self.reqs[r], self.bpc);
        self.cpu
            .touch_request(r as u64, &spans, |g, c| req.key(g as u32, c, bpc));
    }

    /// `get_num_new_matched_tokens`: `Some(hit tokens)` or `None` (deferred).
    pub(super) fn get_num_new_matched_tokens(
        &mut self,
        r: usize,
        num_computed: usize,
    ) -> Option<usize> {
        self.reqs[r].tracked = true;
        if !self.reqs[r].transfer_jobs.is_empty() {
            return None;
        }
        let hits = self.lookup(r, num_computed);
        let tpc = self.tpc();
        for g in 0..self.sc.groups.len() {
            self.reqs[r].num_hit_chunks[g] = (num_computed + hits.unwrap_or(0)) / tpc;
        }
        self.touch(r);
        hits
    }

    /// `_lookup` (simplified: one pass over full-attention groups, then sliding-window
    /// groups by decreasing window; the upstream convergence loop is not modelled).
    pub(super) fn lookup(&mut self, r: usize, num_computed: usize) -> Option<usize> {
        let tpc = self.tpc();
        let ngroups = self.sc.groups.len();
        let has_swa = (0..ngroups).any(|g| !self.is_full_attention(g));
        let mut max_hit = self.reqs[r].num_tokens();
        if has_swa {
            max_hit = max_hit.saturating_sub(1);
        }
        let mut order: Vec<usize> = (0..ngroups)
            .filter(|&g| self.is_full_attention(g))
            .collect();
        let mut swa: Vec<usize> = (0..ngroups)
            .filter(|&g| !self.is_full_attention(g))
            .collect();
        swa.sort_by_key(|&g| std::cmp::Reverse(self.window_chunks(g)));
        order.extend(swa);
        let mut defer = false;
        let mut num_hit_tokens = 0;
        for g in order {
            let nkeys = self.reqs[r].num_keys(self.bpc);
            max_hit = max_hit.min(nkeys * tpc);
            if max_hit.saturating_sub(num_computed) < tpc {
                return Some(0);
            }
            let num_chunks = max_hit.div_ceil(tpc).min(nkeys);
            let start = num_computed / tpc;
            let keys: Vec<OffloadKey> = (start..num_chunks)
                .map(|c| self.reqs[r].key(g as u32, c, self.bpc))
                .collect();
            let hit_chunks = match self.window_chunks(g) {
                None => {
                    let mut hits = 0;
                    let mut d = false;
                    for (i, k) in keys.iter().enumerate() {
                        match self.manager_lookup(k, r) {
                            LookupResult::Hit => {
                                if self.sc.self_describing_kv_events {
                                    let meta = self.chunk_meta(r, g as u32, start + i);
                                    self.tracker.record_lookup(*k, meta);
                                }
                                hits += 1;
                            }
                            LookupResult::HitPending => {
                                d = true;
                                hits += 1;
                            }
                            LookupResult::Retry => d = true,
                            LookupResult::Miss => break,
                        }
                    }
                    (!d).then_some(hits)
                }
                Some(w) => {
                    let mut consecutive = 0;
                    let mut d = false;
                    let mut result = None;
                    for idx in (0..keys.len()).rev() {
                        match self.manager_lookup(&keys[idx], r) {
                            LookupResult::Hit => consecutive += 1,
                            LookupResult::HitPending => {
                                d = true;
                                consecutive += 1
                            }
                            LookupResult::Retry => {
                                d = true;
                                consecutive = 0
                            }
                            LookupResult::Miss => consecutive = 0,
                        }
                        if consecutive == w {
                            result = Some(idx + w);
                            break;
                        }
                    }
                    let v = result.unwrap_or(consecutive);
                    (!d).then_some(v)
                }
            };
            match hit_chunks {
                Some(0) => return Some(0),
                None => defer = true,
                Some(h) => max_hit = max_hit.min(tpc * (start + h)),
            }
            let new_hit = max_hit.saturating_sub(num_computed);
            if new_hit < tpc {
                return Some(0);
            }
            num_hit_tokens = new_hit;
        }
        if defer {
            return None;
        }
        Some(num_hit_tokens)
    }

    /// `update_state_after_alloc` with external tokens: the load job.
    pub(super) fn create_load_job(&mut self, r: usize, num_computed: usize, ext: usize) {
        let cached = num_computed + ext;
        let tpc = self.tpc();
        let mut keys = Vec::new();
        for g in 0..self.sc.groups.len() {
            let local_blocks = num_computed / self.bs;
            let num_gpu_blocks = cached.div_ceil(self.bs);
            let num_chunks = cached.div_ceil(tpc);
            if num_gpu_blocks > local_blocks {
                let start = local_blocks / self.bpc;
                for c in start..num_chunks {
                    keys.push(self.reqs[r].key(g as u32, c, self.bpc));
                }
            }
            self.reqs[r].next_stored[g] = num_chunks;
        }
        self.cpu.prepare_load(&keys);
        let id = self.job_counter;
        self.job_counter += 1;
        let ordered = match self.order {
            OrderMode::Fixed => keys,
            other => other.order(&keys, id),
        };
        self.add_job(id, r, ordered, false);
        self.reqs[r].state = ReqState::WaitingForLoad {
            ready: false,
            cached_tokens: cached,
        };
    }

    pub(super) fn add_job(&mut self, id: u64, r: usize, keys: Vec<OffloadKey>, is_store: bool) {
        let workers = self.sc.completion.workers;
        self.jobs.insert(
            id,
            Job {
                req: r,
                keys,
                is_store,
                pending: workers,
            },
        );
        self.reqs[r].transfer_jobs.insert(id);
        let base = self.local_step
            + match self.sc.completion.timing {
                CompletionTiming::SameStep => 0,
                CompletionTiming::NextStep => 1,
            };
        for w in 0..workers as usize {
            let lag = if workers > 1
                && self.rng.gen_range(0.0..1.0) < self.sc.completion.worker_lag_probability
            {
                1
            } else {
                0
            };
            let at = match self.explicit_reports.remove(&(id, w as u32)) {
                // `completion.reports`: exactly when the scenario says
                Some(global) => {
                    let local = global - (self.sc.first_step + self.spec.start_step);
                    if local < base && self.error.is_none() {
                        self.error = Some(SimError(format!(
                            "completion.reports: worker {w} reports job {id} at step {global}, \
                             before it can (the job was created at step {}; the earliest report \
                             is step {})",
                            self.step_now(),
                            self.step_now() + (base - self.local_step)
                        )));
                    }
                    local
                }
                None => (base + lag).max(self.last_report[w]),
            };
            self.last_report[w] = self.last_report[w].max(at);
            self.reports[w].entry(at).or_default().push(id);
        }
    }

    /// `storable_chunks` for a group.
    pub(super) fn storable_chunks(&self, r: usize, offloadable: usize) -> usize {
        let req = &self.reqs[r];
        (offloadable / self.tpc()).min(req.num_allocated_blocks / self.bpc)
    }

    /// `_build_store_jobs` for one request.
    pub(super) fn build_store_job(&mut self, r: usize, num_after: usize) {
        let req = &self.reqs[r];
        let mut offloadable = num_after.min(req.num_tokens());
        if let Some(m) = req.max_offload_tokens {
            offloadable = offloadable.min(m);
        }
        if self.sc.offload_prompt_only {
            offloadable = offloadable.min(req.num_prompt_tokens);
        }
        let ngroups = self.sc.groups.len();
        let num_chunks = self.storable_chunks(r, offloadable);
        let mut candidates: Vec<(u32, usize, OffloadKey)> = Vec::new();
        for g in 0..ngroups {
            let start = self.reqs[r].next_stored[g];
            for c in start..num_chunks {
                candidates.push((g as u32, c, self.reqs[r].key(g as u32, c, self.bpc)));
            }
        }
        let advance = |me: &mut Self| {
            for g in 0..ngroups {
                me.reqs[r].next_stored[g] = me.reqs[r].next_stored[g].max(num_chunks);
            }
        };
        if candidates.is_empty() {
            advance(self);
            return;
        }
        let cand_keys: Vec<OffloadKey> = candidates.iter().map(|c| c.2).collect();
        let job_id = self.job_counter;
        // TieringOffloadingManager.prepare_store: the gated poll first (at most once per
        // step, vLLM 0.28.0), so finished cascades and promotions are unpinned before this
        // eviction unless a lookup already polled this step
        self.maybe_process_tier_jobs();
        let out = self.cpu.prepare_store(&cand_keys);
        let req_id = self.reqs[r].id.clone();
        self.drain_cpu(Ctx {
            kind: ProvenanceKind::Evict,
            job_id: Some(job_id),
            req_id: Some(req_id),
        });
        let Some(out) = out else {
            return; // ALLOCATION_FAILURE: skip this step without advancing
        };
        if out.keys_to_store.is_empty() {
            advance(self);
            return;
        }
        self.touch(r);
        let to_store: FxHashSet<OffloadKey> = out.keys_to_store.iter().copied().collect();
        for (g, c, k) in &candidates {
            if to_store.contains(k) && self.is_full_attention(*g as usize) {
                let meta = self.chunk_meta(r, *g, *c);
                self.tracker.record_store(*k, meta);
            }
        }
        advance(self);
        self.job_counter += 1;
        let keys = self.order.order(&out.keys_to_store, job_id);
        self.add_job(job_id, r, keys, true);
    }

    /// `reset_prefix_cache` / connector `reset_cache`.
    pub(super) fn reset(&mut self) {
        self.gpu_cache.clear();
        let step = self.step_now();
        self.gpu_events.push((
            KvEvent::AllBlocksCleared,
            Provenance {
                tier: "GPU".into(),
                kind: ProvenanceKind::Reset,
                step: Some(step),
                ..Default::default()
            },
        ));
        self.cpu.reset_cache();
        self.drain_cpu(Ctx {
            kind: ProvenanceKind::Reset,
            job_id: None,
            req_id: None,
        });
        for req in &mut self.reqs {
            if req.state == ReqState::Finished {
                req.tracked = false;
            }
            for n in &mut req.next_stored {
                *n = 0;
            }
            req.transfer_jobs.clear();
            if let ReqState::WaitingForLoad { .. } = req.state {
                req.state = ReqState::Waiting;
            }
        }
        self.stale_threshold = self.job_counter;
        self.jobs.clear();
        self.tracker.reset();
        self.pending_promotions.clear();
    }

    /// `update_connector_output`: merged worker reports, jobs completed in merged order.
    pub(super) fn update_connector_output(&mut self) {
        let local = self.local_step;
        // OffloadingWorkerMetadata.aggregate(): worker 0's dict, other workers' ids appended
        let mut merged: IndexMap<u64, u32> = IndexMap::new();
        for w in 0..self.reports.len() {
            if let Some(ids) = self.reports[w].remove(&local) {
                for id in ids {
                    *merged.entry(id).or_insert(0) += 1;
                }
            }
        }
        for (id, count) in merged {
            if id < self.stale_threshold {
                continue;
            }
            let Some(job) = self.jobs.get_mut(&id) else {
                continue;
            };
            job.pending = job.pending.saturating_sub(count);
            if job.pending > 0 {
                continue;
            }
            let Some(job) = self.jobs.remove(&id) else {
                continue;
            };
            if job.is_store {
                self.manager_complete_store(&job.keys, id, job.req);
            } else {
                self.cpu.complete_load(&job.keys);
                if let ReqState::WaitingForLoad { cached_tokens, .. } = self.reqs[job.req].state {
                    self.reqs[job.req].state = ReqState::WaitingForLoad {
                        ready: true,
                        cached_tokens,
                    };
                }
            }
            let req = &mut self.reqs[job.req];
            req.transfer_jobs.remove(&id);
            if req.finished_signaled && req.transfer_jobs.is_empty() {
                req.tracked = false;
            }
        }
    }
}
