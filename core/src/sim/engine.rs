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
//!
//! The step is split by upstream class: [`super::scheduler`] (`Scheduler.schedule`),
//! [`super::block_pool`] (GPU prefix cache and `BlockPool` events), [`super::connector`]
//! (`OffloadingConnectorScheduler`), [`super::tiering`] (`TieringOffloadingManager`).

use rustc_hash::{FxHashMap, FxHashSet};

use indexmap::IndexMap;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::event::KvEvent;
use crate::hashing::{none_hash, Digest, ExtraKeyInputs};
use crate::keys::OffloadKey;
use crate::order::OrderMode;
use crate::scenario::{EngineSpec, GroupKind, Scenario, StepSpec};
use crate::trace::{Provenance, ProvenanceKind};

use super::connector::Job;
use super::cpu::{CpuManager, RawEvent};
use super::request::{ReqState, SimRequest};
use super::tiering::Tier;
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
pub(super) struct Ctx {
    pub(super) kind: ProvenanceKind,
    pub(super) job_id: Option<u64>,
    pub(super) req_id: Option<String>,
}

/// One engine's whole state.
pub struct Engine<'a> {
    pub(super) sc: &'a Scenario,
    pub(super) spec: EngineSpec,
    pub(super) none_hash: Digest,
    pub(super) bs: usize,
    pub(super) bpc: usize,
    pub(super) order: OrderMode,
    pub(super) reqs: Vec<SimRequest>,
    pub(super) by_id: FxHashMap<String, usize>,
    /// Requests not yet finished (so `is_done` is O(1)).
    pub(super) num_unfinished: usize,
    pub(super) running: Vec<usize>,
    pub(super) waiting: Vec<usize>,
    pub(super) finished_pending: Vec<usize>,
    pub(super) gpu_cache: FxHashSet<Digest>,
    pub(super) cpu: CpuManager,
    pub(super) tracker: EventsTracker,
    pub(super) primary_events: Vec<(RawEvent, Ctx)>,
    pub(super) tiers: Vec<Tier>,
    pub(super) pending_promotions: IndexMap<(usize, usize), Vec<OffloadKey>>,
    pub(super) tier_job_counter: u64,
    pub(super) processed_tiers_this_step: bool,
    /// In-flight GPU↔CPU jobs by id (looked up, never iterated).
    pub(super) jobs: FxHashMap<u64, Job>,
    pub(super) job_counter: u64,
    pub(super) stale_threshold: u64,
    /// Per worker: step → job ids reported at that step (FIFO).
    pub(super) reports: Vec<FxHashMap<u64, Vec<u64>>>,
    pub(super) last_report: Vec<u64>,
    /// `completion.reports` of this engine not yet applied: (job, worker) → global step.
    pub(super) explicit_reports: FxHashMap<(u64, u32), u64>,
    /// A scenario error found while running (reported after the step).
    pub(super) error: Option<SimError>,
    pub(super) rng: ChaCha8Rng,
    pub(super) local_step: u64,
    pub(super) gpu_events: Vec<(KvEvent, Provenance)>,
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
        let mut tiers = Vec::with_capacity(sc.secondary_tiers.len());
        for cfg in &sc.secondary_tiers {
            let mut stored = FxHashSet::default();
            for p in &cfg.preload {
                let req = index
                    .get(p.request.as_str())
                    .map(|&j| &reqs[j])
                    .ok_or_else(|| {
                        SimError(format!(
                            "secondary_tiers[{:?}].preload: unknown request {:?}",
                            cfg.name, p.request
                        ))
                    })?;
                let nkeys = req.num_keys(sc.blocks_per_chunk as usize);
                if p.group as usize >= ngroups {
                    return Err(SimError(format!(
                        "secondary_tiers[{:?}].preload: request {:?} has no group {}",
                        cfg.name, p.request, p.group
                    )));
                }
                for &c in &p.chunks {
                    if c >= nkeys {
                        return Err(SimError(format!(
                            "secondary_tiers[{:?}].preload: request {:?} has {nkeys} chunks, \
                             no chunk {c}",
                            cfg.name, p.request
                        )));
                    }
                    stored.insert(req.key(p.group, c, sc.blocks_per_chunk as usize));
                }
            }
            tiers.push(Tier {
                cfg: cfg.clone(),
                stored,
                jobs: Vec::new(),
                events: Vec::new(),
                probes: Default::default(),
            });
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
            num_unfinished: reqs.len(),
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
            tiers,
            pending_promotions: IndexMap::new(),
            tier_job_counter: 0,
            processed_tiers_this_step: false,
            jobs: FxHashMap::default(),
            job_counter: 0,
            stale_threshold: 0,
            reports: vec![FxHashMap::default(); workers],
            last_report: vec![0; workers],
            explicit_reports: sc
                .completion
                .reports
                .iter()
                .filter(|r| match &r.source {
                    None => true,
                    Some(s) => *s == spec.source && r.dp_rank == spec.dp_rank,
                })
                .map(|r| ((r.job, r.worker), r.step))
                .collect(),
            error: None,
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

    pub(super) fn tpc(&self) -> usize {
        self.bs * self.bpc
    }

    /// True when nothing is left to do.
    pub fn is_done(&self) -> bool {
        let quiet = self.jobs.is_empty()
            && self.finished_pending.is_empty()
            && self.pending_promotions.is_empty()
            && self.tiers.iter().all(|t| t.jobs.is_empty());
        if let Some(n) = self.sc.num_steps {
            return self.local_step >= n;
        }
        match &self.spec.steps {
            Some(steps) => quiet && self.local_step as usize >= steps.len(),
            None => quiet && self.num_unfinished == 0,
        }
    }

    /// A scenario error found by the last step (`completion.reports` that cannot happen).
    pub fn take_error(&mut self) -> Option<SimError> {
        self.error.take()
    }

    /// Jobs named in `completion.reports` that this engine never created.
    pub fn unused_reports(&self) -> Vec<(u64, u32)> {
        let mut v: Vec<_> = self.explicit_reports.keys().copied().collect();
        v.sort_unstable();
        v
    }

    // ----- helpers -----

    pub(super) fn chunk_meta(&self, r: usize, group: u32, chunk: usize) -> ChunkMeta {
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

    pub(super) fn is_full_attention(&self, g: usize) -> bool {
        self.sc.groups[g].kind == GroupKind::FullAttention
    }

    /// `sliding_window_size_in_chunks` (None = full attention, Mamba = 1).
    pub(super) fn window_chunks(&self, g: usize) -> Option<usize> {
        let grp = &self.sc.groups[g];
        match grp.kind {
            GroupKind::FullAttention => None,
            GroupKind::Mamba => Some(1),
            GroupKind::SlidingWindow => {
                Some((grp.sliding_window.unwrap_or(1) as usize).div_ceil(self.tpc()))
            }
        }
    }

    pub(super) fn drain_cpu(&mut self, ctx: Ctx) {
        for ev in self.cpu.take_events() {
            self.primary_events.push((ev, ctx.clone()));
        }
    }

    pub(super) fn step_now(&self) -> u64 {
        self.next_global_step()
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
