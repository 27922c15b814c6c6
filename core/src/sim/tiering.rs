//! The tiering manager: `TieringOffloadingManager` (`vllm/v1/kv_offload/tiering/manager.py`)
//! over the CPU primary tier and the secondary (`STORAGE`) tiers in config order: cascade
//! store jobs after each CPU `complete_store`, promotions on a CPU miss, and the poll of
//! finished secondary jobs (`_maybe_process_finished_jobs`, at most once per step).

use rustc_hash::FxHashSet;

use rand::Rng;

use crate::keys::OffloadKey;
use crate::scenario::SecondaryTierConfig;
use crate::trace::ProvenanceKind;

use super::cpu::{LookupResult, RawEvent};
use super::engine::{Ctx, Engine};

/// A secondary-tier job (cascade store or promotion load).
#[derive(Clone, Debug)]
pub(super) struct TierJob {
    pub(super) id: u64,
    pub(super) keys: Vec<OffloadKey>,
    pub(super) req_id: String,
    pub(super) is_promotion: bool,
    pub(super) done_step: u64,
    pub(super) finish_time: f64,
    pub(super) success: bool,
}

#[derive(Clone, Debug)]
pub(super) struct Tier {
    pub(super) cfg: SecondaryTierConfig,
    pub(super) stored: FxHashSet<OffloadKey>,
    pub(super) jobs: Vec<TierJob>,
    pub(super) events: Vec<(RawEvent, Ctx)>,
}

impl Engine<'_> {
    /// `_maybe_process_finished_jobs` (at most once per step, scheduling phase).
    pub(super) fn maybe_process_tier_jobs(&mut self) {
        if self.processed_tiers_this_step || self.tiers.is_empty() {
            return;
        }
        self.processed_tiers_this_step = true;
        let step = self.step_now();
        for ti in 0..self.tiers.len() {
            let mut done: Vec<TierJob> = Vec::new();
            let mut keep = Vec::new();
            for j in std::mem::take(&mut self.tiers[ti].jobs) {
                if j.done_step <= step {
                    done.push(j);
                } else {
                    keep.push(j);
                }
            }
            self.tiers[ti].jobs = keep;
            // thread-pool completion order
            done.sort_by(|a, b| {
                a.finish_time
                    .total_cmp(&b.finish_time)
                    .then(a.id.cmp(&b.id))
            });
            for j in done {
                if j.is_promotion {
                    // primary.complete_write(keys): CPU stored event in lookup order
                    self.cpu.complete_store(&j.keys);
                    self.drain_cpu(Ctx {
                        kind: ProvenanceKind::Promotion,
                        job_id: Some(j.id),
                        req_id: Some(j.req_id.clone()),
                    });
                } else {
                    // primary.complete_read(keys): unpin (mark_evictable in job order)
                    self.cpu.complete_load(&j.keys);
                    if j.success {
                        let tier = &mut self.tiers[ti];
                        tier.stored.extend(j.keys.iter().copied());
                        tier.events.push((
                            RawEvent {
                                keys: j.keys.clone(),
                                removed: false,
                            },
                            Ctx {
                                kind: ProvenanceKind::SecondaryStore,
                                job_id: Some(j.id),
                                req_id: Some(j.req_id.clone()),
                            },
                        ));
                    }
                }
            }
        }
    }

    pub(super) fn new_tier_job(
        &mut self,
        ti: usize,
        keys: Vec<OffloadKey>,
        req_id: String,
        promo: bool,
    ) {
        let cfg = &self.tiers[ti].cfg;
        let (lo, hi) = (cfg.min_latency_steps, cfg.max_latency_steps);
        let fail_p = cfg.failure_probability;
        let lat = self.rng.gen_range(lo..=hi);
        let jitter: f64 = self.rng.gen_range(0.0..1.0);
        let success = promo || self.rng.gen_range(0.0..1.0) >= fail_p;
        let step = self.step_now();
        let id = self.tier_job_counter;
        self.tier_job_counter += 1;
        self.tiers[ti].jobs.push(TierJob {
            id,
            keys,
            req_id,
            is_promotion: promo,
            done_step: step + lat,
            finish_time: (step + lat) as f64 + jitter,
            success,
        });
    }

    /// Manager `lookup(key)` (tiering-aware).
    pub(super) fn manager_lookup(&mut self, key: &OffloadKey, r: usize) -> LookupResult {
        self.maybe_process_tier_jobs();
        let res = self.cpu.lookup(key);
        if res != LookupResult::Miss {
            return res;
        }
        for ti in 0..self.tiers.len() {
            if !self.tiers[ti].cfg.promotions || !self.tiers[ti].stored.contains(key) {
                continue;
            }
            // _initiate_promotion: primary.prepare_write([key]), one key at a time.
            let out = self.cpu.prepare_store(std::slice::from_ref(key));
            let req_id = self.reqs[r].id.clone();
            self.drain_cpu(Ctx {
                kind: ProvenanceKind::Evict,
                job_id: None,
                req_id: Some(req_id),
            });
            return match out {
                None => LookupResult::Miss,
                Some(_) => {
                    self.pending_promotions
                        .entry((ti, r))
                        .or_default()
                        .push(*key);
                    LookupResult::Retry
                }
            };
        }
        LookupResult::Miss
    }

    /// `on_schedule_end`: poll tiers, submit one promotion job per (tier, request).
    pub(super) fn on_schedule_end(&mut self) {
        self.maybe_process_tier_jobs();
        for ((ti, r), keys) in std::mem::take(&mut self.pending_promotions) {
            let id = self.reqs[r].id.clone();
            self.new_tier_job(ti, keys, id, true);
        }
    }

    /// Manager `complete_store(keys)`: primary stored event, then one cascade job per tier
    /// with the same key order.
    pub(super) fn manager_complete_store(&mut self, keys: &[OffloadKey], job_id: u64, r: usize) {
        self.cpu.complete_store(keys);
        let req_id = self.reqs[r].id.clone();
        self.drain_cpu(Ctx {
            kind: ProvenanceKind::OffloadStore,
            job_id: Some(job_id),
            req_id: Some(req_id.clone()),
        });
        for ti in 0..self.tiers.len() {
            self.cpu.prepare_load(keys);
            self.new_tier_job(ti, keys.to_vec(), req_id.clone(), false);
        }
    }
}
