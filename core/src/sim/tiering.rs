//! The tiering manager: `TieringOffloadingManager` (`vllm/v1/kv_offload/tiering/manager.py`)
//! over the CPU primary tier and the secondary (`STORAGE`) tiers in config order: cascade
//! store jobs after each CPU `complete_store`, promotions on a CPU miss, and the poll of
//! finished secondary jobs (`_maybe_process_finished_jobs`, at most once per step, from a
//! lookup, a `prepare_store` or `on_schedule_end`), as in vLLM 0.28.0; the `fs` kind adds the
//! file-system tier's asynchronous existence checks (`tiering/async_lookup.py`) and
//! `preload`ed keys (`docs/vllm-offloading.md` facts 14-17).

use rustc_hash::{FxHashMap, FxHashSet};

use rand::Rng;

use crate::keys::OffloadKey;
use crate::scenario::{SecondaryTierConfig, TierKind};
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
    /// `kind = "fs"`: `AsyncLookupManager` state per key: the step whose `flush()` posted
    /// the probe, and the verdict once drained (`None` while in flight).
    pub(super) probes: FxHashMap<OffloadKey, (u64, Option<bool>)>,
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
                        // vLLM 0.28.0 has no `mark_present`: a cached FS verdict (a miss
                        // probed before this store) stays a miss while a request holds it
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
        let (mut done_step, mut finish_time) = (step + lat, (step + lat) as f64 + jitter);
        let cfg = &self.tiers[ti].cfg;
        if let Some(&at) = cfg.io_finished.get(&id.to_string()) {
            // validated: `at` is a step; unlisted jobs of that step first, by id, then the
            // listed ones in `io_release_order`
            done_step = at.max(step + 1);
            let rank = cfg.io_release_rank(at, id).map_or(0.0, |r| (r + 1) as f64);
            finish_time = done_step as f64 + rank / (cfg.io_release_order.len() + 64) as f64 * 0.5;
        }
        self.tiers[ti].jobs.push(TierJob {
            id,
            keys,
            req_id,
            is_promotion: promo,
            done_step,
            finish_time,
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
        let step = self.step_now();
        let mut any_retry = false;
        for ti in 0..self.tiers.len() {
            if self.tiers[ti].cfg.kind == TierKind::Fs {
                // AsyncLookupManager.lookup: first sight queues a probe (RETRY); the verdict
                // drains from the step after the probe was flushed
                match self.tiers[ti].probes.get(key) {
                    None => {
                        self.tiers[ti].probes.insert(*key, (step, None));
                        any_retry = true;
                        continue;
                    }
                    Some((_, None)) => {
                        any_retry = true;
                        continue;
                    }
                    Some((_, Some(false))) => continue,
                    Some((_, Some(true))) => {}
                }
            }
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
                    // `MISS if not promoted else HIT_PENDING`: the connector counts the
                    // chunk and defers the request
                    LookupResult::HitPending
                }
            };
        }
        if any_retry {
            LookupResult::Retry
        } else {
            LookupResult::Miss
        }
    }

    /// `on_schedule_end`: poll tiers, submit one promotion job per (tier, request).
    pub(super) fn on_schedule_end(&mut self) {
        self.maybe_process_tier_jobs();
        // FS tiers' flush(): this step's probes are answered before the next step (file
        // existence = the tier holds the key now)
        for tier in &mut self.tiers {
            if tier.cfg.kind != TierKind::Fs {
                continue;
            }
            let stored = &tier.stored;
            for (k, p) in tier.probes.iter_mut() {
                if p.1.is_none() {
                    p.1 = Some(stored.contains(k));
                }
            }
        }
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
