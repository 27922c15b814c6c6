//! One simulated engine: vLLM's v1 `Scheduler` (simplified), the `OffloadingConnectorScheduler`,
//! the CPU manager, secondary tiers and the events tracker, stepped once per engine step.
//!
//! Per step, in upstream order (`vllm/v1/core/sched/scheduler.py`):
//! 1. `schedule()`: running requests first, then waiting ones (FCFS). A new request's GPU
//!    prefix-cache hit is taken first, then the connector's `get_num_new_matched_tokens`
//!    (`_lookup` + `_touch`); a CPU hit creates a load job and parks the request in
//!    `WAITING_FOR_REMOTE_KVS`. `allocate_slots` announces newly full GPU blocks
//!    (`BlockPool.cache_full_blocks`, one `BlockStored` per request, group and step).
//! 2. `build_connector_meta()`: `on_schedule_end` (secondary-tier polling, promotion flush),
//!    then `_build_store_jobs` over `num_scheduled_tokens` then `finished_req_ids`.
//! 3. model execution: `num_computed_tokens += n`; a request whose prompt is computed samples
//!    a token; finished requests are reported next step.
//! 4. `update_from_output()`: worker reports merged (`OffloadingWorkerMetadata.aggregate`),
//!    `update_connector_output` completes jobs in merged order (`complete_store(job.keys)`),
//!    then `take_events()`: GPU events, then connector events (primary tier first, then each
//!    secondary tier in config order).

use rustc_hash::{FxHashMap, FxHashSet};

use indexmap::IndexMap;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::event::{BlockStored, ExtraValue, KvEvent};
use crate::hashing::{none_hash, Digest, ExtraKeyInputs};
use crate::keys::OffloadKey;
use crate::order::OrderMode;
use crate::scenario::{
    CompletionTiming, EngineSpec, GroupKind, Scenario, SecondaryTierConfig, StepSpec,
};
use crate::trace::{Provenance, ProvenanceKind};

use super::cpu::{CpuManager, LookupResult, RawEvent};
use super::request::{ReqState, SimRequest};
use super::tracker::{ChunkMeta, EventMedium, EventsTracker, Translated};
use super::SimError;

/// The events of one engine step (a batch, if non-empty).
#[derive(Clone, Debug, PartialEq)]
pub struct StepEvents {
    /// Global step number.
    pub step: u64,
    /// Events, GPU first then connector.
    pub events: Vec<KvEvent>,
    /// Provenance parallel to `events`.
    pub provenance: Vec<Provenance>,
}

/// Context attached to a raw manager event.
#[derive(Clone, Debug)]
struct Ctx {
    kind: ProvenanceKind,
    job_id: Option<u64>,
    req_id: Option<String>,
}

/// `TransferJobStatus`.
#[derive(Clone, Debug)]
struct Job {
    req: usize,
    /// `keys`, in the order `complete_store` iterates them (`OrderMode`).
    keys: Vec<OffloadKey>,
    is_store: bool,
    pending: u32,
}

/// A secondary-tier job (cascade store or promotion load).
#[derive(Clone, Debug)]
struct TierJob {
    id: u64,
    keys: Vec<OffloadKey>,
    req_id: String,
    is_promotion: bool,
    done_step: u64,
    finish_time: f64,
    success: bool,
}

#[derive(Clone, Debug)]
struct Tier {
    cfg: SecondaryTierConfig,
    stored: FxHashSet<OffloadKey>,
    jobs: Vec<TierJob>,
    events: Vec<(RawEvent, Ctx)>,
}

/// One engine's whole state.
pub struct Engine<'a> {
    sc: &'a Scenario,
    spec: EngineSpec,
    none_hash: Digest,
    bs: usize,
    bpc: usize,
    order: OrderMode,
    reqs: Vec<SimRequest>,
    by_id: FxHashMap<String, usize>,
    running: Vec<usize>,
    waiting: Vec<usize>,
    finished_pending: Vec<usize>,
    gpu_cache: FxHashSet<Digest>,
    cpu: CpuManager,
    tracker: EventsTracker,
    primary_events: Vec<(RawEvent, Ctx)>,
    tiers: Vec<Tier>,
    pending_promotions: IndexMap<(usize, usize), Vec<OffloadKey>>,
    tier_job_counter: u64,
    processed_tiers_this_step: bool,
    /// In-flight GPU↔CPU jobs by id (looked up, never iterated).
    jobs: FxHashMap<u64, Job>,
    job_counter: u64,
    stale_threshold: u64,
    /// Per worker: step → job ids reported at that step (FIFO).
    reports: Vec<FxHashMap<u64, Vec<u64>>>,
    last_report: Vec<u64>,
    rng: ChaCha8Rng,
    local_step: u64,
    gpu_events: Vec<(KvEvent, Provenance)>,
}

fn mix(a: u64, b: u64) -> u64 {
    // splitmix64 of a ^ rotated b: cheap, deterministic stream separation.
    let mut z = a ^ b.rotate_left(29) ^ 0x9e37_79b9_7f4a_7c15;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

impl<'a> Engine<'a> {
    /// Build an engine; generates request tokens.
    pub fn new(sc: &'a Scenario, spec: EngineSpec, engine_idx: u64) -> Result<Self, SimError> {
        let nh = none_hash(&sc.hashing.none_hash_seed);
        let bs = sc.block_size as usize;
        let ngroups = sc.groups.len();
        let mut reqs: Vec<SimRequest> = Vec::with_capacity(spec.requests.len());
        let explicit = spec.steps.is_some();
        let mut index: FxHashMap<&str, usize> = FxHashMap::default();
        for (i, r) in spec.requests.iter().enumerate() {
            let mut rng = ChaCha8Rng::seed_from_u64(mix(mix(sc.seed, engine_idx), i as u64));
            let mut tokens = Vec::new();
            if let Some(p) = &r.shared_prefix {
                let other = index
                    .get(p.request.as_str())
                    .map(|&j| &reqs[j])
                    .ok_or_else(|| {
                        SimError(format!("request {:?}: unknown shared_prefix", r.id))
                    })?;
                let n = (p.len as usize).min(other.num_prompt_tokens);
                tokens.extend_from_slice(&other.tokens[..n]);
            }
            match (&r.token_ids, r.prompt_len) {
                (Some(t), _) => tokens.extend_from_slice(t),
                (None, Some(len)) => {
                    while tokens.len() < len as usize {
                        tokens.push(rng.gen_range(0..sc.scheduler.vocab_size));
                    }
                }
                (None, None) => {}
            }
            if tokens.is_empty() {
                return Err(SimError(format!("request {:?} has an empty prompt", r.id)));
            }
            let planned: std::collections::VecDeque<u32> =
                r.output_token_ids.clone().unwrap_or_default().into();
            let max_tokens = if explicit {
                None
            } else {
                Some(
                    r.output_token_ids
                        .as_ref()
                        .map(|o| o.len())
                        .unwrap_or(r.max_tokens as usize)
                        .max(1),
                )
            };
            let mut req = SimRequest {
                id: r.id.clone(),
                num_prompt_tokens: tokens.len(),
                tokens,
                planned_outputs: planned,
                max_tokens,
                num_outputs: 0,
                block_hashes: Vec::new(),
                extra: ExtraKeyInputs {
                    lora_name: r.lora_name.clone(),
                    cache_salt: r.cache_salt.clone(),
                },
                lora_id: r.lora_id,
                lora_name: r.lora_name.clone(),
                num_computed: 0,
                num_allocated_blocks: 0,
                gpu_cached_blocks: 0,
                state: ReqState::Waiting,
                arrival_step: r.arrival_step,
                max_offload_tokens: r.max_offload_tokens.map(|x| x as usize),
                tracked: false,
                next_stored: vec![0; ngroups],
                num_hit_chunks: vec![0; ngroups],
                transfer_jobs: Default::default(),
                finished_signaled: false,
                rng,
                vocab: sc.scheduler.vocab_size,
            };
            req.update_hashes(&nh, bs);
            index.insert(r.id.as_str(), reqs.len());
            reqs.push(req);
        }
        let mut waiting: Vec<usize> = (0..reqs.len()).collect();
        waiting.sort_by_key(|&i| reqs[i].arrival_step);
        let workers = sc.completion.workers as usize;
        Ok(Engine {
            sc,
            none_hash: nh,
            bs,
            bpc: sc.blocks_per_chunk as usize,
            order: sc.order,
            by_id: reqs
                .iter()
                .enumerate()
                .map(|(i, r)| (r.id.clone(), i))
                .collect(),
            reqs,
            running: Vec::new(),
            waiting,
            finished_pending: Vec::new(),
            gpu_cache: FxHashSet::default(),
            cpu: CpuManager::new(sc.cpu.capacity_chunks, sc.cpu.events),
            tracker: EventsTracker::new(
                sc.self_describing_kv_events,
                sc.cpu.pop_metadata_on_removal,
                sc.hashing.format,
            ),
            primary_events: Vec::new(),
            tiers: sc
                .secondary_tiers
                .iter()
                .map(|cfg| Tier {
                    cfg: cfg.clone(),
                    stored: FxHashSet::default(),
                    jobs: Vec::new(),
                    events: Vec::new(),
                })
                .collect(),
            pending_promotions: IndexMap::new(),
            tier_job_counter: 0,
            processed_tiers_this_step: false,
            jobs: FxHashMap::default(),
            job_counter: 0,
            stale_threshold: 0,
            reports: vec![FxHashMap::default(); workers],
            last_report: vec![0; workers],
            rng: ChaCha8Rng::seed_from_u64(mix(sc.seed ^ 0x5eed, engine_idx)),
            local_step: 0,
            gpu_events: Vec::new(),
            spec,
        })
    }

    /// The engine's publisher.
    pub fn source(&self) -> (&str, u32) {
        (&self.spec.source, self.spec.dp_rank)
    }

    /// The global step of the next `step()` call.
    pub fn next_global_step(&self) -> u64 {
        self.sc.first_step + self.spec.start_step + self.local_step
    }

    fn tpc(&self) -> usize {
        self.bs * self.bpc
    }

    /// True when nothing is left to do.
    pub fn is_done(&self) -> bool {
        let quiet = self.jobs.is_empty()
            && self.finished_pending.is_empty()
            && self.pending_promotions.is_empty()
            && self.tiers.iter().all(|t| t.jobs.is_empty());
        match &self.spec.steps {
            Some(steps) => quiet && self.local_step as usize >= steps.len(),
            None => quiet && self.reqs.iter().all(|r| r.state == ReqState::Finished),
        }
    }

    // ----- helpers -----

    fn chunk_meta(&self, r: usize, group: u32, chunk: usize) -> ChunkMeta {
        let req = &self.reqs[r];
        let hpc = self.bpc;
        let first = chunk * hpc;
        let tpc = self.tpc();
        ChunkMeta {
            block_hashes: req.block_hashes[first..first + hpc].to_vec(),
            parent: (first > 0).then(|| req.block_hashes[first - 1]),
            token_ids: req.tokens[chunk * tpc..(chunk + 1) * tpc].to_vec(),
            block_size: self.bs as u32,
            lora_id: req.lora_id,
            lora_name: req.lora_name.clone(),
            group_idx: group,
            spec_kind: "full_attention",
            req_id: req.id.clone(),
            chunk_idx: chunk as u32,
        }
    }

    fn is_full_attention(&self, g: usize) -> bool {
        self.sc.groups[g].kind == GroupKind::FullAttention
    }

    /// `sliding_window_size_in_chunks` (None = full attention, Mamba = 1).
    fn window_chunks(&self, g: usize) -> Option<usize> {
        let grp = &self.sc.groups[g];
        match grp.kind {
            GroupKind::FullAttention => None,
            GroupKind::Mamba => Some(1),
            GroupKind::SlidingWindow => {
                Some((grp.sliding_window.unwrap_or(1) as usize).div_ceil(self.tpc()))
            }
        }
    }

    fn drain_cpu(&mut self, ctx: Ctx) {
        for ev in self.cpu.take_events() {
            self.primary_events.push((ev, ctx.clone()));
        }
    }

    fn step_now(&self) -> u64 {
        self.next_global_step()
    }

    // ----- GPU block pool -----

    /// `cache_full_blocks` up to `num_tokens` computed tokens: one `BlockStored` per group.
    fn gpu_cache_blocks(&mut self, r: usize, num_tokens: usize) {
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
                    lora_name: req.lora_name.clone(),
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
    fn gpu_prefix_hit(&self, r: usize) -> usize {
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

    // ----- tiering manager -----

    /// `_maybe_process_finished_jobs` (at most once per step, scheduling phase).
    fn maybe_process_tier_jobs(&mut self) {
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

    fn new_tier_job(&mut self, ti: usize, keys: Vec<OffloadKey>, req_id: String, promo: bool) {
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
    fn manager_lookup(&mut self, key: &OffloadKey, r: usize) -> LookupResult {
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
    fn on_schedule_end(&mut self) {
        self.maybe_process_tier_jobs();
        for ((ti, r), keys) in std::mem::take(&mut self.pending_promotions) {
            let id = self.reqs[r].id.clone();
            self.new_tier_job(ti, keys, id, true);
        }
    }

    /// Manager `complete_store(keys)`: primary stored event, then one cascade job per tier
    /// with the same key order.
    fn manager_complete_store(&mut self, keys: &[OffloadKey], job_id: u64, r: usize) {
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

    // ----- connector scheduler -----

    /// `_touch(req_status)`.
    fn touch(&mut self, r: usize) {
        for g in 0..self.sc.groups.len() {
            let skip = match self.window_chunks(g) {
                None => 0,
                Some(w) => self.reqs[r].num_hit_chunks[g].saturating_sub(w),
            };
            let keys = self.reqs[r].keys_from(g as u32, skip, self.bpc);
            self.cpu.touch(&keys);
        }
    }

    /// `get_num_new_matched_tokens`: `Some(hit tokens)` or `None` (deferred).
    fn get_num_new_matched_tokens(&mut self, r: usize, num_computed: usize) -> Option<usize> {
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
    fn lookup(&mut self, r: usize, num_computed: usize) -> Option<usize> {
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
    fn create_load_job(&mut self, r: usize, num_computed: usize, ext: usize) {
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

    fn add_job(&mut self, id: u64, r: usize, keys: Vec<OffloadKey>, is_store: bool) {
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
            let at = (base + lag).max(self.last_report[w]);
            self.last_report[w] = at;
            self.reports[w].entry(at).or_default().push(id);
        }
    }

    /// `storable_chunks` for a group.
    fn storable_chunks(&self, r: usize, offloadable: usize) -> usize {
        let req = &self.reqs[r];
        (offloadable / self.tpc()).min(req.num_allocated_blocks / self.bpc)
    }

    /// `_build_store_jobs` for one request.
    fn build_store_job(&mut self, r: usize, num_after: usize) {
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
    fn reset(&mut self) {
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

    // ----- the step -----

    /// Run one engine step; returns its events (possibly empty).
    pub fn step(&mut self) -> StepEvents {
        let step = self.step_now();
        self.processed_tiers_this_step = false;
        let explicit: Option<StepSpec> = self
            .spec
            .steps
            .as_ref()
            .map(|s| s.get(self.local_step as usize).cloned().unwrap_or_default());
        if explicit.as_ref().is_some_and(|s| s.reset) {
            self.reset();
        }

        // 1. schedule()
        let scheduled: IndexMap<usize, usize> = match &explicit {
            Some(s) => self.schedule_explicit(s),
            None => self.schedule_generated(step),
        };

        // 2. build_connector_meta()
        self.on_schedule_end();
        let finished_ids = std::mem::take(&mut self.finished_pending);
        for (&r, &n) in &scheduled {
            let after = self.reqs[r].num_computed + n;
            self.build_store_job(r, after);
        }
        for &r in &finished_ids {
            if self.reqs[r].tracked {
                let n = self.reqs[r].num_tokens();
                self.build_store_job(r, n);
            }
        }
        for &r in &finished_ids {
            self.reqs[r].finished_signaled = true;
            if self.reqs[r].transfer_jobs.is_empty() {
                self.reqs[r].tracked = false;
            }
        }

        // 3. execute
        let to_finish: Vec<usize> = match &explicit {
            Some(s) => s
                .finish
                .iter()
                .filter_map(|id| self.by_id.get(id).copied())
                .collect(),
            None => Vec::new(),
        };
        for (&r, &n) in &scheduled {
            let req = &mut self.reqs[r];
            req.num_computed += n;
            if req.num_computed >= req.num_tokens() {
                req.append_output(&self.none_hash, self.bs);
                if req.max_tokens.is_some_and(|m| req.num_outputs >= m) {
                    self.finish(r);
                }
            }
        }
        for r in to_finish {
            if self.reqs[r].state != ReqState::Finished {
                self.finish(r);
            }
        }

        // 4. update_from_output(): connector completions, then events
        self.update_connector_output();
        let mut events = Vec::new();
        let mut provenance = Vec::new();
        for (e, p) in std::mem::take(&mut self.gpu_events) {
            events.push(e);
            provenance.push(p);
        }
        let primary = std::mem::take(&mut self.primary_events);
        let cpu_medium = EventMedium {
            medium: "CPU",
            locality: None,
            ownership: None,
        };
        for (raw, ctx) in primary {
            let tr = if raw.removed {
                self.tracker.removed(&raw.keys, &cpu_medium)
            } else {
                self.tracker.stored(&raw.keys, &cpu_medium)
            };
            push_translated(&mut events, &mut provenance, tr, "CPU", &ctx, step);
        }
        for ti in 0..self.tiers.len() {
            let m = EventMedium {
                medium: "STORAGE",
                locality: self.tiers[ti].cfg.locality.clone(),
                ownership: self.tiers[ti].cfg.ownership.clone(),
            };
            let label = format!("STORAGE:{}", self.tiers[ti].cfg.name);
            for (raw, ctx) in std::mem::take(&mut self.tiers[ti].events) {
                let tr = self.tracker.stored(&raw.keys, &m);
                push_translated(&mut events, &mut provenance, tr, &label, &ctx, step);
            }
        }
        self.local_step += 1;
        StepEvents {
            step,
            events,
            provenance,
        }
    }

    fn finish(&mut self, r: usize) {
        self.reqs[r].state = ReqState::Finished;
        self.running.retain(|&x| x != r);
        self.waiting.retain(|&x| x != r);
        if self.reqs[r].tracked {
            self.finished_pending.push(r);
        }
    }

    fn schedule_explicit(&mut self, s: &StepSpec) -> IndexMap<usize, usize> {
        let mut out = IndexMap::new();
        for (id, &n) in &s.schedule {
            let Some(&r) = self.by_id.get(id) else {
                continue;
            };
            if self.reqs[r].state == ReqState::Finished {
                continue;
            }
            if !self.reqs[r].tracked && self.reqs[r].num_computed == 0 {
                // GPU prefix hit from earlier steps, then lookups and touch for their side
                // effects; explicit schedules never load (0 external tokens)
                let hit = self.gpu_prefix_hit(r);
                self.reqs[r].num_computed = hit;
                self.reqs[r].gpu_cached_blocks = hit / self.bs;
                let _ = self.get_num_new_matched_tokens(r, hit);
                self.reqs[r].state = ReqState::Running;
                self.waiting.retain(|&x| x != r);
                self.running.push(r);
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

    fn allocate(&mut self, r: usize, n: usize) {
        let total = self.reqs[r].num_computed + n;
        let blocks = total.div_ceil(self.bs);
        let req = &mut self.reqs[r];
        req.num_allocated_blocks = req.num_allocated_blocks.max(blocks);
        self.gpu_cache_blocks(r, total);
    }

    fn schedule_generated(&mut self, step: u64) -> IndexMap<usize, usize> {
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
        for r in std::mem::take(&mut self.waiting) {
            if self.reqs[r].arrival_step > local || budget == 0 || self.running.len() >= max_seqs {
                still.push(r);
                continue;
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
                    let mut c = cached_tokens.min(self.reqs[r].num_tokens());
                    if c == self.reqs[r].num_tokens() {
                        c -= 1;
                    }
                    self.reqs[r].num_computed = c;
                    self.reqs[r].num_allocated_blocks = c.div_ceil(self.bs);
                    self.gpu_cache_blocks(r, c);
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

    /// `update_connector_output`: merged worker reports, jobs completed in merged order.
    fn update_connector_output(&mut self) {
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

    /// CPU slots in use and capacity (for invariant checks).
    pub fn cpu_usage(&self) -> (u64, u64) {
        (self.cpu.used(), self.cpu.capacity())
    }

    /// Offload key → (request id, chunk index) for every request (tests).
    pub fn key_index(&self) -> FxHashMap<OffloadKey, (String, usize)> {
        let mut m = FxHashMap::default();
        for req in &self.reqs {
            for g in 0..self.sc.groups.len() {
                for c in 0..req.num_keys(self.bpc) {
                    m.entry(req.key(g as u32, c, self.bpc))
                        .or_insert((req.id.clone(), c));
                }
            }
        }
        m
    }
}

fn push_translated(
    events: &mut Vec<KvEvent>,
    provenance: &mut Vec<Provenance>,
    tr: Vec<Translated>,
    tier: &str,
    ctx: &Ctx,
    step: u64,
) {
    for t in tr {
        let kind = match (&t.event, ctx.kind) {
            (KvEvent::BlockRemoved(_), _) => ProvenanceKind::Evict,
            (_, k) => k,
        };
        provenance.push(Provenance {
            tier: tier.to_owned(),
            kind,
            job_id: ctx.job_id,
            req_id: match (&t.event, t.req_id) {
                (KvEvent::BlockStored(_), Some(id)) => Some(id),
                _ => ctx.req_id.clone(),
            },
            group_idx: Some(t.group_idx),
            chunk_idx: t.chunk_idx,
            step: Some(step),
        });
        events.push(t.event);
    }
}
