//! The event index: every delivered event's place (record, position, source, tier, DP rank),
//! interned sources and tiers, and the transfer jobs with the evidence they rest on.
//!
//! **Jobs.** vLLM publishes no job ids, so without provenance jobs are inferred from evidence
//! (`docs/rules.md`, "Jobs and evidence"):
//! 1. provenance `job_id` when the trace has it ([`JobEvidence::Provenance`]);
//! 2. GPU-tier events of the same or earlier batches: the block pool's `BlockStored` of step `s`
//!    is published in step `s`'s batch, and the connector's scheduler builds one store job per
//!    request per step from the chunks that became full in that step, so a connector event
//!    whose chunk key (its last block hash) the GPU stored in batch `b` for request `r` belongs
//!    to job `(b, r)` ([`JobEvidence::GpuEvents`]);
//! 3. otherwise a batch's run of consecutive same-medium connector events is one *candidate*
//!    ([`JobEvidence::BatchRun`]): one or more jobs whose boundaries the batch order alone
//!    cannot show; [`BatchOrder`] measures how far that order is from what jobs in prefix order
//!    completing out of order on `W` workers can produce.
//!
//! A secondary tier's candidates are not measured against the worker count (its jobs complete
//! asynchronously): the run classifies an inversion there by the CPU-tier job the cascade
//! copies ([`Evidence::Cascade`](super::Evidence::Cascade), `run/event.rs`).

use serde::{Deserialize, Serialize};

use super::identity::group_of;
use crate::consumers::{str_hash, EventCtx, HashChain};
use crate::event::{KvEvent, Tier};
use crate::hash::BlockHash;
use crate::room::{make_room, room_wanted};
use crate::trace::{ProvenanceKind, Trace, TraceBatch, TraceRecord};

type HashMap<K, V> = hashbrown::HashMap<K, V, rustc_hash::FxBuildHasher>;

/// Where one delivered event sits in the trace (compact: 24 bytes per event).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EventLoc {
    /// Index of the batch record in `Trace::records`.
    pub record: u32,
    /// 0-based index of the event in its batch.
    pub pos: u32,
    /// Interned source id (see [`EventIndex::sources`]).
    pub source: u32,
    /// Interned tier id (see [`EventIndex::tiers`]).
    pub tier: u32,
    /// DP rank (0 when absent).
    pub dp_rank: u32,
    /// Interned job id (see [`EventIndex::jobs`]), `u32::MAX` for none (GPU events).
    pub job: u32,
}

impl EventLoc {
    /// The consumer context of event `i`, which sits here in batch `b`.
    pub(crate) fn ctx<'t>(&self, i: usize, b: &'t TraceBatch) -> EventCtx<'t> {
        EventCtx {
            index: i,
            source: self.source,
            dp_rank: self.dp_rank,
            seq: b.seq,
            tier: self.tier,
            provenance: b.provenance.as_ref().and_then(|p| p.get(self.pos as usize)),
            batch: &b.events,
            batch_start: i - self.pos as usize,
        }
    }
}

/// The flat, global index of a trace's delivered events.
#[derive(Clone, Debug, Default)]
pub struct EventIndex {
    /// One entry per event, in delivery order.
    pub events: Vec<EventLoc>,
    /// Source names by id.
    pub sources: Vec<String>,
    /// Tiers by id.
    pub tiers: Vec<Tier>,
    /// Jobs by id.
    pub jobs: Vec<Job>,
    /// Engine block size per source id: the `block_size` of the source's first `BlockStored`
    /// that carries tokens (what `auto` router block sizes resolve to).
    pub engine_block_sizes: Vec<Option<u32>>,
    /// The batch order of connector stores in [`JobEvidence::BatchRun`] candidates, for the
    /// events whose request's runs are out of order (see [`BatchOrder`]), sorted by event.
    pub batch_order: Vec<(u32, BatchOrder)>,
}

/// What a job's boundaries rest on.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum JobEvidence {
    /// The trace's provenance names the job.
    Provenance,
    /// The GPU-tier events of this or an earlier batch partition the connector events.
    GpuEvents,
    /// Only the batch structure: a run of consecutive same-medium connector events of one
    /// batch, one or more jobs.
    #[default]
    BatchRun,
}

impl JobEvidence {
    /// The evidence's name.
    pub fn name(self) -> &'static str {
        match self {
            JobEvidence::Provenance => "provenance",
            JobEvidence::GpuEvents => "gpu-events",
            JobEvidence::BatchRun => "batch-run",
        }
    }
}

/// How one request's connector stores are ordered within one batch (per tier and KV group):
/// split into maximal runs of consecutive chunks in prefix order (each event's parent is the
/// event before it), `descents` counts the run starts that begin earlier in the prefix than the
/// run before them. Under the key-order fix each job is one run per group, and the jobs that
/// finish in one step come out in the merged worker-report order (the first worker's ids in
/// order, then each other worker's new ids appended): at most `W - 1` descents with `W`
/// workers. More is set order within a job.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct BatchOrder {
    /// Descents among the run starts.
    pub descents: u32,
    /// Number of runs.
    pub runs: u32,
}

/// A transfer job: explicit (provenance `job_id`) or inferred from evidence (see the module
/// docs).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Job {
    /// Interned id.
    pub id: u32,
    /// The provenance job id, when explicit.
    pub job_id: Option<u64>,
    /// True when inferred (no provenance).
    pub inferred: bool,
    /// What its boundaries rest on.
    #[serde(default)]
    pub evidence: JobEvidence,
    /// Source name.
    pub source: String,
    /// Tier label.
    pub tier: String,
    /// Provenance kind of its first event, when known.
    pub kind: Option<ProvenanceKind>,
    /// Global index of its first event.
    pub first_event: usize,
    /// Global index of its last event.
    pub last_event: usize,
    /// Number of events.
    pub events: usize,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum JobKey {
    /// (source, tier, provenance job id).
    Explicit(u32, u32, u64),
    /// (source, DP rank, tier, record of the GPU batch, request ordinal in it).
    Gpu(u32, u32, u32, u32, u32),
    /// (record, run of same-medium events in it).
    Inferred(u32, u32),
}

/// (source, DP rank, KV group): the engine and group a GPU stores table is for.
type EngineGroup = (u32, u32, u32);

/// (source, DP rank, group, hash) of a GPU-stored block → (its batch record, the request's
/// ordinal among that batch's GPU stores): a table of hashes per (source, DP rank, group), to
/// the request in `jobs` (16-byte entries rather than 32 with the whole key and the pair in
/// each: a table entry per block the GPU ever stored, about 30 MB of the anchor stream's peak
/// in `scripts/bench-memory.sh`). The crate's hash-map type: no hash-table code of its own
/// (wasm size).
#[derive(Default)]
struct GpuStores {
    /// (source, DP rank, group) of each table: few (engines times KV groups), found by a scan.
    keys: Vec<EngineGroup>,
    tables: Vec<HashMap<u64, u32>>,
    /// (batch record, request ordinal) of the GPU requests.
    jobs: Vec<(u32, u32)>,
}

impl GpuStores {
    /// The table of (source, DP rank, group) `key`.
    fn table(&self, key: EngineGroup) -> Option<usize> {
        self.keys.iter().position(|k| *k == key)
    }

    /// The blocks `hashes` of (source, DP rank, group) `key` were stored by request `job`
    /// (of batch record `job.0`, of `records` in the whole trace: 0 when streaming).
    fn insert(&mut self, key: EngineGroup, hashes: &[BlockHash], job: (u32, u32), records: usize) {
        let done = job.0 as usize;
        let t = match self.table(key) {
            Some(t) => t,
            None => {
                let t = self.keys.len();
                self.keys.push(key);
                self.tables.push(HashMap::default());
                t
            }
        };
        if self.jobs.last().is_none_or(|j| *j != job) {
            make_room(&mut self.jobs, 1, done, records);
            self.jobs.push(job);
        }
        let j = (self.jobs.len() - 1) as u32;
        if let Some(table) = self.tables.get_mut(t) {
            let (n, more, capacity) = (table.len(), hashes.len(), table.capacity());
            if let Some(k) = room_wanted(n, more, capacity, done, records) {
                table.reserve(k);
            }
            for h in hashes {
                table.insert(h.as_u64(), j);
            }
        }
    }

    fn get(&self, key: EngineGroup, hash: u64) -> Option<(u32, u32)> {
        let t = self.table(key)?;
        let j = *self.tables.get(t)?.get(&hash)?;
        self.jobs.get(j as usize).copied()
    }
}

/// Builds an [`EventIndex`] record by record (resumable, see `Run`).
#[derive(Default)]
pub(crate) struct IndexBuilder {
    pub(crate) idx: EventIndex,
    /// Streaming: keep only the current batch's locations in `idx.events` (the first of them
    /// is event `base`) and no [`Job`] records (their evidence is in `job_evidence`), so the
    /// index does not grow with the trace's length.
    pub(crate) streaming: bool,
    /// Events indexed before `idx.events[0]` (0 unless streaming).
    pub(crate) base: usize,
    /// Per job id: what its boundaries rest on (kept in both modes).
    pub(crate) job_evidence: Vec<JobEvidence>,
    /// Source ids by name hash.
    sources: HashChain,
    /// Job ids by key hash, and each job's key. An inferred job's key names its record and
    /// run, so it can only come back within the run: those jobs are not in `jobs` but in
    /// `last_inferred` (a trace whose media alternate has a job per connector event, and a
    /// look-up in a table of every job ever made cost about a tenth of the analysis' own time,
    /// `docs/performance.md`).
    jobs: HashChain,
    job_keys: Vec<JobKey>,
    /// The last inferred job: `(record, run, id)`.
    last_inferred: Option<(u32, u32, u32)>,
    /// Blocks the GPU stored, by the batch and request that stored them last.
    gpu: GpuStores,
    /// Records indexed so far and in the whole trace (0: streaming), for the tables that
    /// grow with them ([`crate::room`]).
    pub(crate) records: (usize, usize),
    /// Scratch of [`IndexBuilder::batch_order`] (kept to reuse the allocations): candidate
    /// positions, (tier, group, last hash) → position, position → in-batch parent position.
    candidates: Vec<usize>,
    last_hash: HashMap<(u32, u32, u64), usize>,
    parent: HashMap<usize, usize>,
    /// Whether some event names a KV group other than 0.
    pub(crate) multi_group: bool,
    /// Scratch of [`IndexBuilder::gpu_jobs`]: the batch's events' GPU store jobs.
    gpu_out: Vec<Option<(u32, u32)>>,
}

impl IndexBuilder {
    /// Events indexed so far.
    pub(crate) fn event_count(&self) -> usize {
        self.base + self.idx.events.len()
    }

    /// The location of event `i`, if it is still held (streaming: the current batch's only).
    pub(crate) fn loc(&self, i: usize) -> Option<EventLoc> {
        self.idx.events.get(i.checked_sub(self.base)?).copied()
    }

    /// Number of jobs found so far.
    pub(crate) fn job_count(&self) -> usize {
        self.job_evidence.len()
    }

    /// The evidence of job `job` (`u32::MAX`: none).
    pub(crate) fn evidence_of(&self, job: u32) -> Option<JobEvidence> {
        self.job_evidence.get(job as usize).copied()
    }

    /// Index batch record `ri`; returns its source id.
    pub(crate) fn batch(&mut self, ri: usize, b: &TraceBatch) -> u32 {
        self.records.0 = ri;
        let sid = self.source_id(&b.source);
        let dp = b.dp_rank.unwrap_or(0);
        if self.streaming {
            self.base += self.idx.events.len();
            self.idx.events.clear();
        }
        let first = self.idx.events.len();
        let gpu_jobs = self.gpu_jobs(ri, sid, dp, b);
        let mut run = 0u32;
        let mut prev_medium: Option<Option<&str>> = None;
        for (pos, ev) in b.events.iter().enumerate() {
            if let KvEvent::BlockStored(st) = ev {
                if !st.token_ids.is_empty() {
                    if let Some(slot @ None) = self.idx.engine_block_sizes.get_mut(sid as usize) {
                        *slot = Some(st.block_size);
                    }
                }
            }
            let prov = b.provenance.as_ref().and_then(|p| p.get(pos));
            let tier = match ev.tier() {
                Some(Tier::Storage(None)) => match prov {
                    Some(p) if p.tier.starts_with("STORAGE") => {
                        Tier::Storage(p.tier.split_once(':').map(|x| x.1.to_owned()))
                    }
                    _ => Tier::Storage(None),
                },
                Some(t) => t,
                None => Tier::Gpu,
            };
            let tid = self.tier_id(&tier);
            self.multi_group |= group_of(ev) != 0;
            let medium = ev.medium();
            if prev_medium != Some(medium) {
                run += 1;
                prev_medium = Some(medium);
            }
            let mut evidence = JobEvidence::BatchRun;
            let key = match (prov.and_then(|p| p.job_id), ev) {
                (Some(j), _) => {
                    evidence = JobEvidence::Provenance;
                    Some(JobKey::Explicit(sid, tid, j))
                }
                (None, _) if prov.is_some() || tier == Tier::Gpu => None,
                (None, KvEvent::AllBlocksCleared) => None,
                (None, KvEvent::BlockStored(_)) => match gpu_jobs.get(pos).copied().flatten() {
                    Some((g_ri, req)) => {
                        evidence = JobEvidence::GpuEvents;
                        Some(JobKey::Gpu(sid, dp, tid, g_ri, req))
                    }
                    None => Some(JobKey::Inferred(ri as u32, run)),
                },
                (None, KvEvent::BlockRemoved(_)) => Some(JobKey::Inferred(ri as u32, run)),
            };
            let gi = self.base + self.idx.events.len();
            let job = match key {
                None => u32::MAX,
                Some(k) => self.job_id(k, evidence, gi, b, &tier, prov),
            };
            self.idx.events.push(EventLoc {
                record: ri as u32,
                pos: pos as u32,
                source: sid,
                tier: tid,
                dp_rank: dp,
                job,
            });
        }
        self.batch_order(first, b);
        self.gpu_out = gpu_jobs;
        sid
    }

    /// Record the batch's GPU stores and find, per event, the GPU store job of each connector
    /// store (`(GPU batch record, request ordinal)`). The GPU evidence is used for a tier of
    /// the batch only when it covers every connector store of that tier there (a capture with
    /// some GPU events missing falls back to the batch structure for that tier).
    fn gpu_jobs(
        &mut self,
        ri: usize,
        sid: u32,
        dp: u32,
        b: &TraceBatch,
    ) -> Vec<Option<(u32, u32)>> {
        // Request ordinal among this batch's GPU stores: a request's groups come in index
        // order (`KVCacheCoordinator` caches each group in turn), so a group index that does
        // not increase starts the next request.
        let mut request = 0u32;
        let mut last_group: Option<u32> = None;
        // Reused from batch to batch (`IndexBuilder::gpu_out`).
        let mut out = std::mem::take(&mut self.gpu_out);
        out.clear();
        out.resize(b.events.len(), None);
        // Per tier label: whether some connector store of it has no GPU store.
        let mut uncovered: Vec<Option<&str>> = Vec::new();
        let mut any = false;
        for (pos, ev) in b.events.iter().enumerate() {
            let KvEvent::BlockStored(st) = ev else {
                continue;
            };
            let group = group_of(ev);
            // `Tier::from_medium`'s GPU tier, without building the tier (an owned `String`
            // for STORAGE and other media).
            if matches!(st.medium.as_deref(), None | Some("GPU")) {
                if last_group.is_some_and(|g| group <= g) {
                    request += 1;
                }
                last_group = Some(group);
                let key = (sid, dp, group);
                let job = (ri as u32, request);
                self.gpu.insert(key, &st.block_hashes, job, self.records.1);
                continue;
            }
            let found = st
                .block_hashes
                .last()
                .and_then(|h| self.gpu.get((sid, dp, group), h.as_u64()));
            match (found, out.get_mut(pos)) {
                (Some(job), Some(slot)) => {
                    *slot = Some(job);
                    any = true;
                }
                _ => uncovered.push(ev.medium()),
            }
        }
        if any && !uncovered.is_empty() {
            for (pos, ev) in b.events.iter().enumerate() {
                if uncovered.contains(&ev.medium()) {
                    if let Some(slot) = out.get_mut(pos) {
                        *slot = None;
                    }
                }
            }
        }
        out
    }

    fn source_id(&mut self, name: &str) -> u32 {
        let idx = &mut self.idx;
        let sh = str_hash(name);
        let found = self.sources.find(sh, |id| {
            idx.sources.get(id as usize).map(String::as_str) == Some(name)
        });
        match found {
            Some(id) => id,
            None => {
                let id = idx.sources.len() as u32;
                idx.sources.push(name.to_owned());
                idx.engine_block_sizes.push(None);
                self.sources.push(sh, id);
                id
            }
        }
    }

    fn tier_id(&mut self, tier: &Tier) -> u32 {
        // A trace has a handful of tiers: a linear search, no hash map type of its own.
        match self.idx.tiers.iter().position(|t| t == tier) {
            Some(id) => id as u32,
            None => {
                self.idx.tiers.push(tier.clone());
                (self.idx.tiers.len() - 1) as u32
            }
        }
    }

    fn job_id(
        &mut self,
        k: JobKey,
        evidence: JobEvidence,
        gi: usize,
        b: &TraceBatch,
        tier: &Tier,
        prov: Option<&crate::trace::Provenance>,
    ) -> u32 {
        let streaming = self.streaming;
        let records = self.records;
        let idx = &mut self.idx;
        let kh = {
            use std::hash::BuildHasher;
            rustc_hash::FxBuildHasher.hash_one(&k)
        };
        let keys = &self.job_keys;
        let inferred = match k {
            JobKey::Inferred(ri, run) => Some((ri, run)),
            _ => None,
        };
        let found = match (inferred, self.last_inferred) {
            (Some((ri, run)), Some((r, n, id))) if (ri, run) == (r, n) => Some(id),
            (Some(_), _) => None,
            (None, _) => self.jobs.find(kh, |id| keys.get(id as usize) == Some(&k)),
        };
        let job_evidence = &mut self.job_evidence;
        let last_inferred = &mut self.last_inferred;
        let id = found.unwrap_or_else(|| {
            let id = job_evidence.len() as u32;
            match inferred {
                Some((ri, run)) => *last_inferred = Some((ri, run, id)),
                None => self.jobs.push(kh, id),
            }
            let (done, total) = records;
            make_room(&mut self.job_keys, 1, done, total);
            self.job_keys.push(k);
            make_room(job_evidence, 1, done, total);
            job_evidence.push(evidence);
            if streaming {
                return id;
            }
            make_room(&mut idx.jobs, 1, done, total);
            idx.jobs.push(Job {
                id,
                job_id: prov.and_then(|p| p.job_id),
                inferred: evidence != JobEvidence::Provenance,
                evidence,
                source: b.source.clone(),
                tier: tier.label(),
                kind: prov.map(|p| p.kind),
                first_event: gi,
                last_event: gi,
                events: 0,
            });
            id
        });
        if let Some(j) = idx.jobs.get_mut(id as usize) {
            j.last_event = gi;
            j.events += 1;
        }
        id
    }

    /// Measure the batch order ([`BatchOrder`]) of the batch's connector stores whose job rests
    /// only on the batch run (events `first..` of the index are the batch's).
    fn batch_order(&mut self, first: usize, b: &TraceBatch) {
        // (tier, group, last hash) → position in the batch, of the candidate stores.
        let mut last_hash = std::mem::take(&mut self.last_hash);
        let mut candidates = std::mem::take(&mut self.candidates);
        let mut parent = std::mem::take(&mut self.parent);
        last_hash.clear();
        candidates.clear();
        parent.clear();
        for (pos, ev) in b.events.iter().enumerate() {
            let Some(loc) = self.idx.events.get(first + pos) else {
                continue;
            };
            let KvEvent::BlockStored(st) = ev else {
                continue;
            };
            let batch_run = self
                .job_evidence
                .get(loc.job as usize)
                .is_some_and(|e| *e == JobEvidence::BatchRun);
            if !batch_run {
                continue;
            }
            if let Some(h) = st.block_hashes.last() {
                last_hash.insert((loc.tier, group_of(ev), h.as_u64()), pos);
            }
            candidates.push(pos);
        }
        // Each candidate's in-batch parent (the candidate whose last hash is its parent).
        for &pos in &candidates {
            let (Some(KvEvent::BlockStored(st)), Some(loc)) =
                (b.events.get(pos), self.idx.events.get(first + pos))
            else {
                continue;
            };
            let Some(p) = st.parent_block_hash.as_ref() else {
                continue;
            };
            let key = (loc.tier, st.group_idx.unwrap_or(0), p.as_u64());
            if let Some(&pp) = last_hash.get(&key) {
                if pp != pos {
                    parent.insert(pos, pp);
                }
            }
        }
        // Only a child delivered before its in-batch parent is ever looked up (a same-batch
        // inversion): without one, nothing to measure (the common case, fixed order).
        if parent.iter().any(|(child, p)| p > child) {
            self.measure_runs(first, &candidates, &parent);
        }
        self.last_hash = last_hash;
        self.candidates = candidates;
        self.parent = parent;
    }

    /// The slow part of [`IndexBuilder::batch_order`]: depths, runs and descents per request.
    fn measure_runs(&mut self, first: usize, candidates: &[usize], parent: &HashMap<usize, usize>) {
        // Depth in the in-batch chain and the chain's root (its request), following parents
        // (bounded by the batch size: a cycle of hashes cannot loop).
        let mut depth: HashMap<usize, (u32, usize)> = HashMap::default();
        for &pos in candidates {
            let mut path = vec![pos];
            let mut at = pos;
            let mut base = None;
            while let Some(&p) = parent.get(&at) {
                if let Some(&d) = depth.get(&p) {
                    base = Some(d);
                    break;
                }
                if path.len() > candidates.len() {
                    break;
                }
                path.push(p);
                at = p;
            }
            let (mut d, root) = match base {
                Some((d, root)) => (d + 1, root),
                None => (0, *path.last().unwrap_or(&pos)),
            };
            for &q in path.iter().rev() {
                depth.insert(q, (d, root));
                d += 1;
            }
        }
        // Per request (root): runs in delivery order, descents among their starts.
        let mut by_root: HashMap<usize, (Option<usize>, u32, BatchOrder)> = HashMap::default();
        for &pos in candidates {
            let Some(&(d, root)) = depth.get(&pos) else {
                continue;
            };
            let e = by_root
                .entry(root)
                .or_insert((None, 0, BatchOrder::default()));
            let continues = e.0.is_some() && parent.get(&pos) == e.0.as_ref();
            if !continues {
                if e.2.runs > 0 && d < e.1 {
                    e.2.descents += 1;
                }
                e.2.runs += 1;
                e.1 = d;
            }
            e.0 = Some(pos);
        }
        for &pos in candidates {
            let Some(order) = depth
                .get(&pos)
                .and_then(|(_, root)| by_root.get(root))
                .map(|e| e.2)
            else {
                continue;
            };
            if order.descents > 0 {
                let event = self.base + first + pos;
                self.idx.batch_order.push((event as u32, order));
            }
        }
    }
}

impl EventIndex {
    /// Build the index (interning sources, tiers and jobs).
    pub fn build(trace: &Trace) -> EventIndex {
        let mut b = IndexBuilder::default();
        for (ri, rec) in trace.records.iter().enumerate() {
            if let TraceRecord::Batch(batch) = rec {
                let _source = b.batch(ri, batch);
            }
        }
        b.idx
    }

    /// The event at a global index.
    pub fn event<'t>(&self, trace: &'t Trace, i: usize) -> Option<(&'t TraceBatch, &'t KvEvent)> {
        let loc = self.events.get(i)?;
        match trace.records.get(loc.record as usize)? {
            TraceRecord::Batch(b) => b.events.get(loc.pos as usize).map(|e| (b, e)),
            _ => None,
        }
    }

    /// The consumer context of event `i`.
    pub fn ctx<'t>(&self, trace: &'t Trace, i: usize) -> Option<(EventCtx<'t>, &'t KvEvent)> {
        let loc = self.events.get(i)?;
        let (b, ev) = self.event(trace, i)?;
        Some((loc.ctx(i, b), ev))
    }

    /// The batch order of event `i`'s request in its batch, when its runs are out of order.
    pub fn batch_order_of(&self, i: usize) -> Option<BatchOrder> {
        let k = self
            .batch_order
            .binary_search_by_key(&(i as u32), |e| e.0)
            .ok()?;
        self.batch_order.get(k).map(|e| e.1)
    }

    /// The evidence of event `i`'s job, if it has one.
    pub fn job_evidence(&self, i: usize) -> Option<JobEvidence> {
        let loc = self.events.get(i)?;
        self.jobs.get(loc.job as usize).map(|j| j.evidence)
    }
}

#[cfg(test)]
mod gpu_tests {
    use super::{BlockHash, GpuStores};

    #[test]
    fn gpu_stores_keep_a_table_per_source_rank_and_group() {
        let mut g = GpuStores::default();
        let hs = |v: &[u64]| v.iter().map(|h| BlockHash::Int(*h)).collect::<Vec<_>>();
        g.insert((0, 0, 0), &hs(&[1, 2]), (5, 0), 0);
        g.insert((0, 0, 1), &hs(&[1]), (5, 1), 0);
        g.insert((1, 0, 0), &hs(&[2]), (6, 0), 0);
        // Stored again by a later request: the last one counts.
        g.insert((0, 0, 0), &hs(&[2]), (7, 0), 0);
        assert_eq!(g.get((0, 0, 0), 1), Some((5, 0)));
        assert_eq!(g.get((0, 0, 0), 2), Some((7, 0)));
        assert_eq!(g.get((0, 0, 1), 1), Some((5, 1)));
        assert_eq!(g.get((0, 0, 1), 2), None);
        assert_eq!(g.get((1, 0, 0), 2), Some((6, 0)));
        assert_eq!(g.get((0, 1, 0), 1), None);
        assert_eq!((g.tables.len(), g.jobs.len()), (3, 4));
    }
}
