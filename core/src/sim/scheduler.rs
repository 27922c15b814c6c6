//! vLLM's v1 `Scheduler.schedule()` (`vllm/v1/core/sched/scheduler.py`, simplified): explicit
//! schedules from the scenario, or generated FCFS scheduling with a token budget (running
//! requests first, then waiting ones, chunked prefill), and request finishing.

use indexmap::IndexMap;

use crate::scenario::StepSpec;

use super::engine::Engine;
use super::request::ReqState;

impl Engine<'_> {
    /// The request finishes at the end of this step (`finished_req_ids` next step).
    pub(super) fn finish(&mut self, r: usize) {
        if self.reqs[r].state != ReqState::Finished {
            self.num_unfinished -= 1;
        }
        // a request is in `running` iff it is Running, else in `waiting` (or finished)
        match self.reqs[r].state {
            ReqState::Running => self.running.retain(|&x| x != r),
            ReqState::Finished => {}
            _ => self.waiting.retain(|&x| x != r),
        }
        self.reqs[r].state = ReqState::Finished;
        self.cpu.forget_touches(r as u64);
        if self.reqs[r].tracked {
            self.finished_pending.push(r);
        }
    }

    pub(super) fn schedule_explicit(&mut self, s: &StepSpec) -> IndexMap<usize, usize> {
        let mut out = IndexMap::new();
        for (id, &n) in &s.schedule {
            let Some(&r) = self.by_id.get(id) else {
                continue;
            };
            if self.reqs[r].state == ReqState::Finished {
                continue;
            }
            match self.reqs[r].state.clone() {
                // an asynchronous load in flight: not schedulable yet
                ReqState::WaitingForLoad { ready: false, .. } => continue,
                // loaded (`_update_waiting_for_remote_kv`): resumes with the loaded tokens
                // computed, as in the generated schedule
                ReqState::WaitingForLoad {
                    ready: true,
                    cached_tokens,
                } => {
                    self.resume_loaded(r, cached_tokens);
                    self.reqs[r].state = ReqState::Running;
                    self.waiting.retain(|&x| x != r);
                    self.running.push(r);
                }
                ReqState::Waiting if self.reqs[r].num_computed == 0 => {
                    // GPU prefix hit from earlier steps, then the connector's lookup (and
                    // touch). A deferred lookup (`None`: a tier answered RETRY or
                    // HIT_PENDING) keeps the request waiting this step, as vLLM's scheduler
                    // does; external tokens start an asynchronous load and the request
                    // waits for it (`WAITING_FOR_REMOTE_KVS`). Either way the schedule must
                    // list it again later.
                    let hit = self.gpu_prefix_hit(r);
                    self.reqs[r].num_computed = hit;
                    self.reqs[r].gpu_cached_blocks = hit / self.bs;
                    match self.get_num_new_matched_tokens(r, hit) {
                        None => {
                            self.reqs[r].num_computed = 0;
                            self.reqs[r].gpu_cached_blocks = 0;
                            continue;
                        }
                        Some(ext) if ext > 0 => {
                            self.reqs[r].num_allocated_blocks = (hit + ext).div_ceil(self.bs);
                            self.create_load_job(r, hit, ext);
                            continue;
                        }
                        Some(_) => {}
                    }
                    self.reqs[r].state = ReqState::Running;
                    self.waiting.retain(|&x| x != r);
                    self.running.push(r);
                }
                _ => {}
            }
            let remaining = self.reqs[r].num_tokens() - self.reqs[r].num_computed;
            let n = (n as usize).min(remaining);
            if n == 0 {
                continue;
            }
            self.allocate(r, n);
            out.insert(r, n);
        }
        out
    }

    /// A request whose asynchronous load finished resumes with the loaded tokens computed
    /// (`_update_waiting_for_remote_kv`), all but the last when the whole prompt was loaded (one
    /// token is always computed).
    fn resume_loaded(&mut self, r: usize, cached_tokens: usize) {
        let mut c = cached_tokens.min(self.reqs[r].num_tokens());
        if c == self.reqs[r].num_tokens() {
            c -= 1;
        }
        self.reqs[r].num_computed = c;
        self.reqs[r].num_allocated_blocks = c.div_ceil(self.bs);
        self.gpu_cache_blocks(r, c);
    }

    pub(super) fn allocate(&mut self, r: usize, n: usize) {
        let total = self.reqs[r].num_computed + n;
        let blocks = total.div_ceil(self.bs);
        let req = &mut self.reqs[r];
        req.num_allocated_blocks = req.num_allocated_blocks.max(blocks);
        self.gpu_cache_blocks(r, total);
    }

    pub(super) fn schedule_generated(&mut self, step: u64) -> IndexMap<usize, usize> {
        let cfg = &self.sc.scheduler;
        let thr = cfg.long_prefill_token_threshold as usize;
        let max_seqs = cfg.max_num_seqs as usize;
        let mut budget = cfg.max_num_batched_tokens as usize;
        let mut out = IndexMap::new();
        for r in self.running.clone() {
            let mut n = self.reqs[r].num_tokens() - self.reqs[r].num_computed;
            if thr > 0 {
                n = n.min(thr);
            }
            n = n.min(budget);
            if n == 0 {
                continue;
            }
            self.allocate(r, n);
            out.insert(r, n);
            budget -= n;
        }
        let local = self.local_step;
        let _ = step;
        let mut still = Vec::new();
        let mut queue = std::mem::take(&mut self.waiting).into_iter();
        while let Some(r) = queue.next() {
            // `waiting` stays in arrival order, and neither the budget nor the running count
            // recovers within a step: once one of these holds it holds for every later
            // request, so the rest waits without being looked at (O(1), same result).
            if self.reqs[r].arrival_step > local || budget == 0 || self.running.len() >= max_seqs {
                still.push(r);
                still.extend(queue);
                break;
            }
            match self.reqs[r].state.clone() {
                ReqState::WaitingForLoad { ready: false, .. } => {
                    still.push(r);
                    continue;
                }
                ReqState::WaitingForLoad {
                    ready: true,
                    cached_tokens,
                } => {
                    self.resume_loaded(r, cached_tokens);
                }
                _ => {
                    let hit = self.gpu_prefix_hit(r);
                    self.reqs[r].num_computed = hit;
                    self.reqs[r].gpu_cached_blocks = hit / self.bs;
                    match self.get_num_new_matched_tokens(r, hit) {
                        None => {
                            still.push(r);
                            continue;
                        }
                        Some(ext) if ext > 0 => {
                            self.reqs[r].num_allocated_blocks = (hit + ext).div_ceil(self.bs);
                            self.create_load_job(r, hit, ext);
                            still.push(r);
                            continue;
                        }
                        Some(_) => {}
                    }
                }
            }
            let mut n = self.reqs[r].num_tokens() - self.reqs[r].num_computed;
            if thr > 0 {
                n = n.min(thr);
            }
            n = n.min(budget);
            self.reqs[r].state = ReqState::Running;
            self.running.push(r);
            self.allocate(r, n);
            out.insert(r, n);
            budget -= n;
        }
        self.waiting = still;
        out
    }
}
