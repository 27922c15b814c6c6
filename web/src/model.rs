//! The debugger's view-model: a loaded trace flattened into delivery-ordered events with lanes
//! and parent→child edges for drawing, over the core's [`Replay`] (consumer models, violation
//! index, snapshots, step diffs). Pure Rust (no DOM), tested natively.
//!
//! Cursor positions are indices into [`Model::events`] (every event of every batch, in delivery
//! order). The timeline's x axis is that index, not `ts`: vLLM stamps a whole batch with one
//! `ts`, and delivery order is what consumers see.

use rustc_hash::FxHashMap as HashMap;
use std::sync::{Mutex, MutexGuard, OnceLock};

use kvscope_core::analysis::{AnalysisConfig, EventIndex, Job, Level};
use kvscope_core::event::{KvEvent, Tier};
use kvscope_core::replay::{BuildProgress, Replay, ReplayBuilder};
use kvscope_core::trace::{Provenance, Trace, TraceBatch, TraceHeader, TraceRecord};

/// One event of the trace, located by batch and position in the batch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EventRef {
    /// Index of the batch record in `Trace::records`.
    pub batch: u32,
    /// Index into that batch's `events`.
    pub ev: u32,
}

/// A timeline lane: one tier (GPU, CPU, each STORAGE tier), optionally split by source or by
/// transfer job.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Lane {
    /// The tier (ordering: GPU, CPU, STORAGE tiers, others).
    pub tier: Tier,
    /// Tier label shown in the gutter (provenance tier name for unnamed STORAGE tiers).
    pub label: String,
    /// Source the lane is restricted to when lanes are split per source (or per job in a trace
    /// with several sources).
    pub source: Option<String>,
    /// The job sub-lane, when lanes are split per job.
    pub job: Option<JobLane>,
}

/// A per-job sub-lane of a tier (lane mode [`LaneMode::TierJob`]). Ordered: the tier's
/// "no job" lane first, then jobs by first event, then the overflow lane.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum JobLane {
    /// Events of the tier without a job (GPU events, removals without provenance job).
    NoJob,
    /// One transfer job (see `kvscope_core::analysis::Job`).
    Job {
        /// Delivery index of its first event (sort key: jobs in order of appearance).
        first_event: u32,
        /// Provenance `job_id`, or the analysis' interned id when inferred.
        id: u64,
        /// Inferred from batch structure (no provenance).
        inferred: bool,
    },
    /// Jobs beyond [`MAX_JOB_LANES`], sharing one lane per tier.
    More,
}

/// At most this many per-job lanes; later jobs share a "more jobs" lane of their tier.
pub const MAX_JOB_LANES: usize = 256;

impl Lane {
    /// The job part of a per-job lane's title (`job 7`, `job ~3 (inferred)`, `no job`,
    /// `more jobs`); `None` when lanes are not split per job.
    pub fn job_title(&self) -> Option<String> {
        Some(match self.job.as_ref()? {
            JobLane::NoJob => "no job".to_owned(),
            JobLane::Job {
                id, inferred: true, ..
            } => format!("job ~{id} (inferred)"),
            JobLane::Job { id, .. } => format!("job {id}"),
            JobLane::More => "more jobs".to_owned(),
        })
    }

    /// The full label: `GPU`, `pod-a · CPU` when split per source, `CPU · job 7`,
    /// `CPU · job ~3 (inferred)` or `GPU · no job` when split per job.
    pub fn title(&self) -> String {
        let base = match &self.source {
            Some(s) => format!("{s} · {}", self.label),
            None => self.label.clone(),
        };
        match self.job_title() {
            Some(j) => format!("{base} · {j}"),
            None => base,
        }
    }
}

/// How lanes are laid out.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum LaneMode {
    /// One lane per tier.
    #[default]
    Tier,
    /// One lane per (source, tier).
    SourceTier,
    /// One lane per tier, split into one sub-lane per transfer job (plus a "no job" lane).
    TierJob,
}

impl LaneMode {
    /// Every mode, in picker order.
    pub const ALL: [LaneMode; 3] = [LaneMode::Tier, LaneMode::SourceTier, LaneMode::TierJob];

    /// Short name (picker value and permalink `l=`).
    pub fn as_str(self) -> &'static str {
        match self {
            LaneMode::Tier => "tier",
            LaneMode::SourceTier => "source",
            LaneMode::TierJob => "job",
        }
    }

    /// Parse [`LaneMode::as_str`] (unknown: `Tier`).
    pub fn parse(s: &str) -> LaneMode {
        LaneMode::ALL
            .into_iter()
            .find(|m| m.as_str() == s)
            .unwrap_or_default()
    }

    /// Label in the lane picker.
    pub fn label(self) -> &'static str {
        match self {
            LaneMode::Tier => "lanes: tier",
            LaneMode::SourceTier => "lanes: source × tier",
            LaneMode::TierJob => "lanes: tier × job",
        }
    }
}

/// How a parent→child edge relates to delivery order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EdgeKind {
    /// The parent was delivered before the child in the same lane (normal).
    Forward,
    /// The child was delivered before its parent in the same lane: drawn as a red backwards
    /// arrow; this is the ordering violation routers drop blocks over.
    ChildFirst,
    /// The parent is only known from another lane (e.g. the GPU copy of a CPU block).
    CrossLane,
}

/// A parent→child edge between two events (the events storing the parent and the child).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Edge {
    /// Event that stored the parent block.
    pub parent: u32,
    /// Event whose `parent_block_hash` names that block.
    pub child: u32,
    /// Relation to delivery order.
    pub kind: EdgeKind,
}

/// A finding of the core's analysis (child-before-parent violations of every class, at every
/// level, plus the other rules' warn/deny findings), as the violation list shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Violation {
    /// The offending event (the child delivered first, the removal, ...).
    pub event: u32,
    /// Rule name (`child-before-parent-in-job`, ...).
    pub rule: String,
    /// Level in this run (`allow`, `warn`, `deny`).
    pub level: &'static str,
    /// One readable sentence.
    pub message: String,
    /// The related event (the late parent), when there is one.
    pub related: Option<u32>,
}

/// Kind of an event, for colouring and filtering.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventKind {
    /// `BlockStored`.
    Stored,
    /// `BlockRemoved`.
    Removed,
    /// `AllBlocksCleared`.
    Cleared,
}

impl EventKind {
    /// The kind's bit in the timeline's bins (1 stored, 2 removed, 4 cleared).
    pub fn bit(self) -> u8 {
        match self {
            EventKind::Stored => 1,
            EventKind::Removed => 2,
            EventKind::Cleared => 4,
        }
    }
}

/// A loaded trace, ready to render.
pub struct Model {
    /// Display name (file name, URL or `demo`).
    pub name: String,
    /// The header record, if any.
    pub header: Option<TraceHeader>,
    /// The trace and the analysis in progress, until the replay engine takes the trace over
    /// ([`Model::analyse`], [`Model::analyse_some`]).
    pending: Mutex<Pending>,
    /// The core's replay engine, once analysed; it then owns the trace. Locked briefly to read
    /// the trace or to seek and snapshot (single-threaded in the browser, so never contended).
    replay: OnceLock<Mutex<Replay>>,
    /// Violations known before the analysis: child-first edges from the layout.
    quick: Vec<Violation>,
    /// The analysis' findings, once analysed.
    analysed: OnceLock<Vec<Violation>>,
    /// Number of batches.
    pub batch_count: usize,
    /// Number of gap records.
    pub gaps: usize,
    /// Every event in delivery order.
    pub events: Vec<EventRef>,
    /// Lanes in display order.
    pub lanes: Vec<Lane>,
    /// Kind of each event (a column, for fast rendering).
    pub kinds: Vec<EventKind>,
    /// Lane index of each event (`AllBlocksCleared`: lane of its batch's source's first lane, or 0).
    pub lane_of: Vec<u16>,
    /// Parent→child edges, sorted by child.
    pub edges: Vec<Edge>,
    /// Indices into `edges`, sorted by parent (for [`Model::children_of`]).
    by_parent: Vec<u32>,
    /// Per block of [`BIN_BLOCK`] events and lane, the OR of the events' [`EventKind::bit`]s:
    /// zoomed far out, the timeline bins whole blocks instead of single events.
    blocks: Vec<u8>,
}

/// Stable insertion sort, for lists of a few elements (rule names): much smaller in
/// wasm than a standard sort instance per element type.
pub fn insertion_sort<T: Ord>(v: &mut [T]) {
    for i in 1..v.len() {
        let mut j = i;
        while j > 0 && v[j] < v[j - 1] {
            v.swap(j - 1, j);
            j -= 1;
        }
    }
}

/// Stable sort of `v` by a `u64` key. Every call goes through one sort of `(key, index)`
/// pairs, so the wasm carries one sort implementation instead of one per element type (each
/// is several KB).
pub fn sort_by_u64<T>(v: &mut Vec<T>, key: impl Fn(&T) -> u64) {
    let mut keys: Vec<(u64, u32)> = v
        .iter()
        .enumerate()
        .map(|(i, x)| (key(x), i as u32))
        .collect();
    keys.sort_unstable();
    let mut slots: Vec<Option<T>> = std::mem::take(v).into_iter().map(Some).collect();
    *v = keys
        .iter()
        .filter_map(|&(_, i)| slots.get_mut(i as usize).and_then(Option::take))
        .collect();
}

/// Events per block of the timeline's coarse bins ([`Model::bins`]).
pub const BIN_BLOCK: usize = 64;

/// The analysis of a [`Model`] before it is done.
enum Pending {
    /// Not started: the trace.
    Trace(Trace),
    /// Under way: the core's resumable builder (it owns the trace meanwhile).
    Building(Box<ReplayBuilder>),
    /// Done: the replay engine owns the trace.
    Done,
}

/// Rule of the preliminary child-first findings shown before the analysis has run.
pub const CHILD_FIRST: &str = "child-before-parent";

/// The rule of per-model loss findings, left out of the default violation navigation.
pub const CONSUMER_LOSS: &str = "consumer-loss";

/// Whether a violation passes a rule filter (`None`: every rule but [`CONSUMER_LOSS`]).
pub fn rule_matches(v: &Violation, rule: Option<&str>) -> bool {
    match rule {
        Some(r) => v.rule == r,
        None => v.rule != CONSUMER_LOSS,
    }
}

/// Errors from [`Model::from_trace`].
#[derive(Debug, PartialEq, Eq)]
pub enum ModelError {
    /// More events than the debugger indexes (u32).
    TooLarge(usize),
}

impl std::fmt::Display for ModelError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ModelError::TooLarge(n) => write!(
                f,
                "trace has {n} events; the debugger handles at most {}",
                u32::MAX
            ),
        }
    }
}

impl Model {
    /// Flatten a trace, run the core's analysis (all consumer models) and index it for drawing.
    pub fn from_trace(name: &str, trace: Trace, mode: LaneMode) -> Result<Model, ModelError> {
        let m = Self::from_trace_timed(name, trace, mode, &mut |_| {})?;
        m.analyse();
        Ok(m)
    }

    /// Flatten a trace and lay it out for drawing (lanes, edges, child-first findings), without
    /// the core's analysis: call [`Model::analyse`] later. Calls `mark(phase)` after each phase
    /// (`flatten`, `lanes`, `edges`) so the caller can time them.
    pub fn from_trace_timed(
        name: &str,
        trace: Trace,
        mode: LaneMode,
        mark: &mut dyn FnMut(&'static str),
    ) -> Result<Model, ModelError> {
        let mut model = Model::flatten(name, trace)?;
        mark("flatten");
        model.layout_lanes(mode);
        mark("lanes");
        model.index_edges();
        mark("edges");
        Ok(model)
    }

    /// Flatten a trace into delivery-ordered events, not laid out yet: call
    /// [`Model::layout_lanes`] and [`Model::index_edges`] (or [`Model::layout`]) next. The
    /// loader yields to the browser between these steps.
    pub fn flatten(name: &str, trace: Trace) -> Result<Model, ModelError> {
        let header = trace.records.iter().find_map(|r| match r {
            TraceRecord::Header(h) => Some(h.clone()),
            _ => None,
        });
        let gaps = trace.gaps().count();
        let total = trace.event_count();
        if total > u32::MAX as usize || trace.records.len() > u32::MAX as usize {
            return Err(ModelError::TooLarge(total));
        }
        let mut events = Vec::with_capacity(total);
        let mut kinds = Vec::with_capacity(total);
        let mut batch_count = 0;
        for (ri, rec) in trace.records.iter().enumerate() {
            if let TraceRecord::Batch(b) = rec {
                batch_count += 1;
                for (ei, ev) in b.events.iter().enumerate() {
                    events.push(EventRef {
                        batch: ri as u32,
                        ev: ei as u32,
                    });
                    kinds.push(match ev {
                        KvEvent::BlockStored(_) => EventKind::Stored,
                        KvEvent::BlockRemoved(_) => EventKind::Removed,
                        KvEvent::AllBlocksCleared => EventKind::Cleared,
                    });
                }
            }
        }
        Ok(Model {
            name: name.to_owned(),
            header,
            pending: Mutex::new(Pending::Trace(trace)),
            replay: OnceLock::new(),
            quick: Vec::new(),
            analysed: OnceLock::new(),
            batch_count,
            gaps,
            events,
            lanes: Vec::new(),
            kinds,
            lane_of: Vec::new(),
            edges: Vec::new(),
            by_parent: Vec::new(),
            blocks: Vec::new(),
        })
    }

    /// Run the core's analysis (all consumer models and the violation index; see
    /// `kvscope_core::replay::Replay::new`), or the rest of it, if it has not completed yet.
    /// Synchronous: the app uses [`Model::analyse_some`] instead.
    pub fn analyse(&self) {
        while self.analyse_some(usize::MAX).is_some() {}
    }

    /// Do about `budget` events of the analysis (`kvscope_core::replay::ReplayBuilder`) and
    /// report how far it is; `None` once it is done (the replay engine and the findings are
    /// then available). The app calls this in slices of a few tens of milliseconds so the page
    /// stays responsive.
    pub fn analyse_some(&self, budget: usize) -> Option<BuildProgress> {
        if self.replay.get().is_some() {
            return None;
        }
        let mut pending = self.pending.lock().unwrap_or_else(|e| e.into_inner());
        let builder = match std::mem::replace(&mut *pending, Pending::Done) {
            Pending::Trace(t) => Box::new(ReplayBuilder::new(t, &AnalysisConfig::default())),
            Pending::Building(b) => b,
            Pending::Done => return None,
        };
        let mut builder = builder;
        let progress = builder.advance(budget);
        if !builder.is_done() {
            *pending = Pending::Building(builder);
            return Some(progress);
        }
        drop(pending);
        let replay = builder.finish();
        let a = replay.analysis();
        let mut violations: Vec<Violation> = a
            .violations
            .iter()
            .chain(a.findings.iter().filter(|f| !f.rule.is_reorder()))
            .map(|f| Violation {
                event: f.event.min(u32::MAX as usize) as u32,
                rule: f.rule.name().to_owned(),
                level: match f.level {
                    Level::Allow => "allow",
                    Level::Warn => "warn",
                    Level::Deny => "deny",
                },
                message: f.message.clone(),
                related: f.related_event.map(|e| e.min(u32::MAX as usize) as u32),
            })
            .collect();
        sort_by_u64(&mut violations, |v| u64::from(v.event));
        let _ = self.analysed.set(violations);
        let _ = self.replay.set(Mutex::new(replay));
        None
    }

    /// Whether [`Model::analyse`] has run.
    pub fn is_analysed(&self) -> bool {
        self.analysed.get().is_some()
    }

    /// Ordering violations, sorted by event: the analysis' findings once analysed, before that
    /// the child-first edges of the layout (rule [`CHILD_FIRST`]).
    pub fn violations(&self) -> &[Violation] {
        self.analysed.get().map_or(&self.quick[..], |v| &v[..])
    }

    /// The replay engine (locked), once analysed.
    pub fn replay(&self) -> Option<MutexGuard<'_, Replay>> {
        self.replay
            .get()
            .map(|r| r.lock().unwrap_or_else(|e| e.into_inner()))
    }

    /// Run `f` with the trace.
    pub fn with_trace<R>(&self, f: impl FnOnce(&Trace) -> R) -> R {
        if let Some(r) = self.replay() {
            return f(r.trace());
        }
        let pending = self.pending.lock().unwrap_or_else(|e| e.into_inner());
        match &*pending {
            Pending::Trace(t) => f(t),
            Pending::Building(b) => f(b.trace()),
            Pending::Done => {
                drop(pending);
                // The builder just handed over to the replay engine.
                match self.replay() {
                    Some(r) => f(r.trace()),
                    None => f(&Trace::default()),
                }
            }
        }
    }

    /// Per event, its job's lane (lane mode [`LaneMode::TierJob`]), from the analysis'
    /// [`EventIndex`] once analysed, else from an index built here (same jobs: provenance
    /// job ids, or inferred from batch structure), so lanes do not move when the analysis lands.
    /// Jobs past [`MAX_JOB_LANES`] (in order of appearance) map to [`JobLane::More`].
    fn job_lanes(&self) -> (Vec<u32>, Vec<JobLane>, bool) {
        let of = |idx: &EventIndex| -> (Vec<u32>, Vec<JobLane>, bool) {
            let lanes = idx
                .jobs
                .iter()
                .enumerate()
                .map(|(n, j): (usize, &Job)| {
                    if n >= MAX_JOB_LANES {
                        JobLane::More
                    } else {
                        JobLane::Job {
                            first_event: j.first_event.min(u32::MAX as usize) as u32,
                            id: if j.inferred {
                                u64::from(j.id)
                            } else {
                                j.job_id.unwrap_or(u64::from(j.id))
                            },
                            inferred: j.inferred,
                        }
                    }
                })
                .collect();
            (
                idx.events.iter().map(|e| e.job).collect(),
                lanes,
                idx.sources.len() > 1,
            )
        };
        if let Some(r) = self.replay() {
            return of(&r.analysis().index);
        }
        self.with_trace(|t| of(&EventIndex::build(t)))
    }

    /// Recompute lanes and edges for a lane mode. Lanes are interned by borrowed wire strings
    /// (no allocation per event), then sorted (GPU, CPU, STORAGE tiers, others; per job: the
    /// tier's "no job" lane, then jobs in order of appearance).
    pub fn layout(&mut self, mode: LaneMode) {
        self.layout_lanes(mode);
        self.index_edges();
    }

    /// The lanes part of [`Model::layout`]: each event's lane and the coarse bins.
    pub fn layout_lanes(&mut self, mode: LaneMode) {
        type Key<'t> = (
            Option<&'t str>,
            Option<&'t str>,
            Option<&'t str>,
            Option<&'t str>,
            Option<u32>,
            Option<u32>,
        );
        const NONE: u16 = u16::MAX;
        let (event_jobs, job_lanes, many_sources) = match mode {
            LaneMode::TierJob => self.job_lanes(),
            _ => (Vec::new(), Vec::new(), false),
        };
        let (tmp_ids, tmp_lanes) = self.with_trace(|t| {
            let mut ids: HashMap<Key<'_>, u16> = HashMap::default();
            let mut lanes: Vec<Lane> = Vec::new();
            let mut out = Vec::with_capacity(self.events.len());
            for (ei, r) in self.events.iter().enumerate() {
                let Some(b) = batch_of(t, *r) else {
                    out.push(NONE);
                    continue;
                };
                let (medium, ownership) = match b.events.get(r.ev as usize) {
                    Some(KvEvent::BlockStored(e)) => (e.medium.as_deref(), e.ownership.as_deref()),
                    Some(KvEvent::BlockRemoved(e)) => (e.medium.as_deref(), e.ownership.as_deref()),
                    _ => {
                        out.push(NONE);
                        continue;
                    }
                };
                let prov_tier = match (medium, ownership) {
                    (Some("STORAGE" | "FS" | "OBJ"), None) => b
                        .provenance
                        .as_ref()
                        .and_then(|p| p.get(r.ev as usize))
                        .map(|p| p.tier.as_str()),
                    _ => None,
                };
                let job = match mode {
                    LaneMode::TierJob => {
                        let j = event_jobs.get(ei).copied().unwrap_or(u32::MAX);
                        // Jobs sharing the overflow lane share one key per tier.
                        match job_lanes.get(j as usize) {
                            Some(JobLane::More) => Some(u32::MAX - 1),
                            Some(_) => Some(j),
                            None => Some(u32::MAX),
                        }
                    }
                    _ => None,
                };
                let split_source = mode == LaneMode::SourceTier
                    || (many_sources && job.is_some_and(|j| j != u32::MAX));
                let source = split_source.then_some(b.source.as_str());
                let key = (
                    medium,
                    ownership,
                    prov_tier,
                    source,
                    source.and(b.dp_rank),
                    job,
                );
                let id = match ids.get(&key) {
                    Some(id) => *id,
                    None => {
                        let id = lanes.len().min(NONE as usize - 1) as u16;
                        let job_lane = job.map(|j| match j {
                            u32::MAX => JobLane::NoJob,
                            _ => job_lanes.get(j as usize).cloned().unwrap_or(JobLane::More),
                        });
                        if let Some(l) = lane_key(t, *r, split_source, job_lane) {
                            lanes.push(l);
                        }
                        ids.insert(key, id);
                        id
                    }
                };
                out.push(id);
            }
            (out, lanes)
        });
        let mut distinct: Vec<Lane> = tmp_lanes.clone();
        distinct.sort();
        distinct.dedup();
        if distinct.is_empty() {
            distinct.push(Lane {
                tier: Tier::Gpu,
                label: "GPU".into(),
                source: None,
                job: None,
            });
        }
        let remap: Vec<u16> = tmp_lanes
            .iter()
            .map(|l| {
                distinct
                    .binary_search(l)
                    .unwrap_or(0)
                    .min(NONE as usize - 1) as u16
            })
            .collect();
        self.lane_of = tmp_ids
            .iter()
            .map(|&i| {
                if i == NONE {
                    0
                } else {
                    remap.get(i as usize).copied().unwrap_or(0)
                }
            })
            .collect();
        self.lanes = distinct;
        self.index_blocks();
    }

    /// Fill [`Model::blocks`] from `lane_of` and `kinds`.
    fn index_blocks(&mut self) {
        let lanes = self.lanes.len();
        let nblocks = self.events.len().div_ceil(BIN_BLOCK);
        self.blocks = vec![0u8; nblocks * lanes];
        for (i, (&l, &k)) in self.lane_of.iter().zip(&self.kinds).enumerate() {
            if let Some(slot) = self.blocks.get_mut(i / BIN_BLOCK * lanes + l as usize) {
                *slot |= k.bit();
            }
        }
    }

    /// The timeline's bins for events `lo..=hi`: `lanes × cols` bytes (lane-major), each the OR
    /// of the [`EventKind::bit`]s of the events of that lane whose index falls in the column
    /// (column `c` holds `start + c·per_px ..`). Far zoomed out (a column spans several
    /// [`BIN_BLOCK`]s) whole blocks are binned (a block may mark the column next to its own),
    /// so a frame costs O(visible events / BIN_BLOCK × lanes) instead of O(visible events).
    pub fn bins(&self, lo: u32, hi: u32, start: f64, per_px: f64, cols: usize) -> Vec<u8> {
        let coarse = per_px >= 2.0 * BIN_BLOCK as f64 && self.lanes.len() < BIN_BLOCK;
        self.bins_with(lo, hi, start, per_px, cols, coarse)
    }

    fn bins_with(
        &self,
        lo: u32,
        hi: u32,
        start: f64,
        per_px: f64,
        cols: usize,
        coarse: bool,
    ) -> Vec<u8> {
        let lanes = self.lanes.len();
        let mut bins = vec![0u8; cols * lanes];
        let col = |i: usize| -> Option<usize> {
            let c = ((i as f64 - start) / per_px).floor();
            (c >= 0.0 && (c as usize) < cols).then_some(c as usize)
        };
        let one = |bins: &mut [u8], i: usize| {
            let (Some(&l), Some(&k)) = (self.lane_of.get(i), self.kinds.get(i)) else {
                return;
            };
            if let Some(slot) = col(i).and_then(|c| bins.get_mut(l as usize * cols + c)) {
                *slot |= k.bit();
            }
        };
        let (lo, hi) = (lo as usize, (hi as usize).min(self.len().saturating_sub(1)));
        if lo > hi {
            return bins;
        }
        if !coarse {
            for i in lo..=hi {
                one(&mut bins, i);
            }
            return bins;
        }
        // Partial blocks at both ends event by event, whole blocks in between.
        let first_full = lo.div_ceil(BIN_BLOCK);
        let end_full = (hi + 1) / BIN_BLOCK; // exclusive
        if first_full >= end_full {
            for i in lo..=hi {
                one(&mut bins, i);
            }
            return bins;
        }
        for i in lo..first_full * BIN_BLOCK {
            one(&mut bins, i);
        }
        for i in end_full * BIN_BLOCK..=hi {
            one(&mut bins, i);
        }
        for b in first_full..end_full {
            let row = self
                .blocks
                .get(b * lanes..(b + 1) * lanes)
                .unwrap_or_default();
            let c0 = col(b * BIN_BLOCK);
            let c1 = col(b * BIN_BLOCK + BIN_BLOCK - 1);
            for (l, &bits) in row.iter().enumerate() {
                if bits == 0 {
                    continue;
                }
                for c in [c0, c1].into_iter().flatten() {
                    if let Some(slot) = bins.get_mut(l * cols + c) {
                        *slot |= bits;
                    }
                }
            }
        }
        bins
    }

    /// The edges part of [`Model::layout`] (after [`Model::layout_lanes`]). Single pass: for
    /// each stored child, link to the latest earlier store of its parent in the same lane; a
    /// parent stored only later gives a child-first edge (and a violation).
    pub fn index_edges(&mut self) {
        let edges = self.with_trace(|t| self.edges_of(t));
        self.quick = edges
            .iter()
            .filter(|e| e.kind == EdgeKind::ChildFirst)
            .map(|e| Violation {
                event: e.child,
                rule: CHILD_FIRST.to_owned(),
                level: "warn",
                message: format!(
                    "child delivered before its parent (stored by event {}) in the same lane",
                    e.parent
                ),
                related: Some(e.parent),
            })
            .collect();
        sort_by_u64(&mut self.quick, |v| {
            u64::from(v.event) << 32
                | v.related
                    .map_or(0, |r| u64::from(r) + 1)
                    .min(u64::from(u32::MAX))
        });
        let mut by_parent: Vec<(u64, u32)> = edges
            .iter()
            .enumerate()
            .map(|(k, e)| (u64::from(e.parent) << 32 | u64::from(e.child), k as u32))
            .collect();
        by_parent.sort_unstable();
        self.by_parent = by_parent.into_iter().map(|(_, k)| k).collect();
        self.edges = edges;
    }

    fn edges_of(&self, t: &Trace) -> Vec<Edge> {
        let stored_event =
            |r: &EventRef| match batch_of(t, *r).and_then(|b| b.events.get(r.ev as usize)) {
                Some(KvEvent::BlockStored(s)) => Some(s),
                _ => None,
            };
        // Forward edges come out in child order (one per child event); the others are sorted
        // and merged in at the end.
        let n = self.events.len();
        let mut forward: Vec<Edge> = Vec::with_capacity(n);
        let mut late: Vec<Edge> = Vec::new();
        // (lane, hash) -> latest event storing that block. Sized for every event up front:
        // growing a table of a million entries rehashes it (hundreds of ms in wasm).
        let mut stored: HashMap<(u16, u64), u32> =
            HashMap::with_capacity_and_hasher(n, Default::default());
        // (lane, parent hash) -> children waiting for that parent.
        let mut waiting: HashMap<(u16, u64), Vec<u32>> = HashMap::default();
        for (i, r) in self.events.iter().enumerate() {
            let i = i as u32;
            let lane = self.lane_of.get(i as usize).copied().unwrap_or(0);
            let Some(s) = stored_event(r) else { continue };
            if let Some(p) = &s.parent_block_hash {
                let key = (lane, p.as_u64());
                match stored.get(&key) {
                    Some(&pe) => forward.push(Edge {
                        parent: pe,
                        child: i,
                        kind: EdgeKind::Forward,
                    }),
                    None => waiting.entry(key).or_default().push(i),
                }
            }
            for h in &s.block_hashes {
                let key = (lane, h.as_u64());
                stored.insert(key, i);
                if waiting.is_empty() {
                    continue;
                }
                if let Some(children) = waiting.remove(&key) {
                    late.extend(children.into_iter().map(|c| Edge {
                        parent: i,
                        child: c,
                        kind: EdgeKind::ChildFirst,
                    }));
                }
            }
        }
        drop(stored);
        // Children whose parent never arrived in their lane: a cross-lane edge from the first
        // store of that parent in any lane, found by a second pass (only when there are some).
        if !waiting.is_empty() {
            let mut first: HashMap<u64, u32> =
                waiting.keys().map(|(_, p)| (*p, u32::MAX)).collect();
            let mut missing = first.len();
            for (i, r) in self.events.iter().enumerate() {
                if missing == 0 {
                    break;
                }
                let Some(s) = stored_event(r) else { continue };
                for h in &s.block_hashes {
                    if let Some(slot) = first.get_mut(&h.as_u64()) {
                        if *slot == u32::MAX {
                            *slot = i as u32;
                            missing -= 1;
                        }
                    }
                }
            }
            for ((_, p), children) in waiting {
                if let Some(&pe) = first.get(&p).filter(|e| **e != u32::MAX) {
                    late.extend(children.into_iter().map(|c| Edge {
                        parent: pe,
                        child: c,
                        kind: EdgeKind::CrossLane,
                    }));
                }
            }
        }
        let key = |e: &Edge| u64::from(e.child) << 32 | u64::from(e.parent);
        sort_by_u64(&mut late, key);
        // Merge the two sorted lists.
        let mut edges = Vec::with_capacity(forward.len() + late.len());
        let mut late = late.into_iter().peekable();
        for e in forward {
            while let Some(l) = late.next_if(|l| key(l) < key(&e)) {
                edges.push(l);
            }
            edges.push(e);
        }
        edges.extend(late);
        edges
    }

    /// Number of events.
    pub fn len(&self) -> usize {
        self.events.len()
    }

    /// Whether the trace has no events.
    pub fn is_empty(&self) -> bool {
        self.events.is_empty()
    }

    /// Run `f` with the batch, event and provenance at cursor position `i`.
    pub fn with_event<R>(
        &self,
        i: u32,
        f: impl FnOnce(&TraceBatch, &KvEvent, Option<&Provenance>) -> R,
    ) -> Option<R> {
        let r = *self.events.get(i as usize)?;
        self.with_trace(|t| {
            let b = batch_of(t, r)?;
            let ev = b.events.get(r.ev as usize)?;
            Some(f(
                b,
                ev,
                b.provenance.as_ref().and_then(|p| p.get(r.ev as usize)),
            ))
        })
    }

    /// Kind of the event at a cursor position.
    pub fn kind_at(&self, i: u32) -> Option<EventKind> {
        self.kinds.get(i as usize).copied()
    }

    /// Whether the event at `i` is a violation.
    pub fn is_violation(&self, i: u32) -> bool {
        self.violations_at(i).any(|v| v.rule != CONSUMER_LOSS)
    }

    /// Violations at event `i`.
    pub fn violations_at(&self, i: u32) -> impl Iterator<Item = &Violation> {
        let start = self.violations().partition_point(|v| v.event < i);
        self.violations()[start..]
            .iter()
            .take_while(move |v| v.event == i)
    }

    /// Rule names present, sorted.
    pub fn rules(&self) -> Vec<String> {
        // A handful of distinct names: a small list and an insertion sort (no B-tree or
        // standard sort instance of their own in the wasm).
        let mut r: Vec<&str> = Vec::new();
        for v in self.violations() {
            if !r.contains(&v.rule.as_str()) {
                r.push(v.rule.as_str());
            }
        }
        insertion_sort(&mut r);
        r.into_iter().map(str::to_owned).collect()
    }

    /// The first violation strictly after `cursor` (`None`: from the start) of `rule`, or of
    /// any rule but [`CONSUMER_LOSS`] (one finding per lost event and model: navigable by
    /// choosing that rule explicitly).
    pub fn next_violation(&self, cursor: Option<u32>, rule: Option<&str>) -> Option<u32> {
        let start = match cursor {
            Some(c) => self.violations().partition_point(|v| v.event <= c),
            None => 0,
        };
        self.violations()[start..]
            .iter()
            .find(|v| rule_matches(v, rule))
            .map(|v| v.event)
    }

    /// The last violation strictly before `cursor` (same filter as [`Model::next_violation`]).
    pub fn prev_violation(&self, cursor: u32, rule: Option<&str>) -> Option<u32> {
        let end = self.violations().partition_point(|v| v.event < cursor);
        self.violations()[..end]
            .iter()
            .rev()
            .find(|v| rule_matches(v, rule))
            .map(|v| v.event)
    }

    /// Edges whose child lies in `[lo, hi]` (edges are sorted by child).
    pub fn edges_with_child_in(&self, lo: u32, hi: u32) -> &[Edge] {
        let a = self.edges.partition_point(|e| e.child < lo);
        let b = self.edges.partition_point(|e| e.child <= hi);
        &self.edges[a..b.max(a)]
    }

    /// Edges into event `i` (its parent links).
    pub fn parents_of(&self, i: u32) -> &[Edge] {
        self.edges_with_child_in(i, i)
    }

    /// Edges out of event `i` (its children), by child. O(log edges + children).
    pub fn children_of(&self, i: u32) -> impl Iterator<Item = &Edge> + '_ {
        let parent = |k: &u32| self.edges.get(*k as usize).map_or(u32::MAX, |e| e.parent);
        let a = self.by_parent.partition_point(|k| parent(k) < i);
        let b = self.by_parent.partition_point(|k| parent(k) <= i);
        self.by_parent
            .get(a..b.max(a))
            .unwrap_or_default()
            .iter()
            .filter_map(|k| self.edges.get(*k as usize))
    }

    /// The first event after `from` (wrapping) matching `query` (see [`Query`]).
    pub fn search(&self, query: &Query, from: Option<u32>) -> Option<u32> {
        let n = self.events.len() as u32;
        if n == 0 || query.is_empty() {
            return None;
        }
        let start = from.map(|f| f.saturating_add(1)).unwrap_or(0);
        self.with_trace(|t| {
            (start..n)
                .chain(0..start.min(n))
                .find(|&i| query.matches(self, t, i))
        })
    }
}

fn lane_key(t: &Trace, r: EventRef, split_source: bool, job: Option<JobLane>) -> Option<Lane> {
    let b = batch_of(t, r)?;
    let ev = b.events.get(r.ev as usize)?;
    let tier = ev.tier()?;
    let prov = b.provenance.as_ref().and_then(|p| p.get(r.ev as usize));
    let label = match (&tier, prov) {
        (Tier::Storage(None), Some(p)) if !p.tier.is_empty() => p.tier.clone(),
        _ => tier.label(),
    };
    let source = split_source.then(|| match b.dp_rank {
        Some(d) if d > 0 => format!("{}/dp{d}", b.source),
        _ => b.source.clone(),
    });
    Some(Lane {
        tier,
        label,
        source,
        job,
    })
}

/// The batch record an event belongs to.
pub fn batch_of(t: &Trace, r: EventRef) -> Option<&TraceBatch> {
    match t.records.get(r.batch as usize)? {
        TraceRecord::Batch(b) => Some(b),
        _ => None,
    }
}

/// A search query: terms joined by `&&` (or spaces), each `field=value` or free text.
/// Fields: `type`, `tier`, `source`, `job`, `seq`, `hash` (any block or parent hash, decimal or
/// hex), `rule`, `req`. Free text matches the type, tier, source or any hash.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Query {
    terms: Vec<(Option<String>, String)>,
}

impl Query {
    /// Parse a query string (never fails; unknown fields match nothing).
    pub fn parse(s: &str) -> Query {
        let terms = s
            .split("&&")
            .flat_map(|part| part.split_whitespace())
            .filter(|t| !t.is_empty())
            .map(|t| match t.split_once('=') {
                Some((k, v)) => (
                    Some(k.trim().to_ascii_lowercase()),
                    v.trim().to_ascii_lowercase(),
                ),
                None => (None, t.to_ascii_lowercase()),
            })
            .collect();
        Query { terms }
    }

    /// Whether there are no terms.
    pub fn is_empty(&self) -> bool {
        self.terms.is_empty()
    }

    /// Whether event `i` of `m` matches every term.
    pub fn matches(&self, m: &Model, t: &Trace, i: u32) -> bool {
        let Some(r) = m.events.get(i as usize) else {
            return false;
        };
        let Some(b) = batch_of(t, *r) else {
            return false;
        };
        let Some(ev) = b.events.get(r.ev as usize) else {
            return false;
        };
        let prov = b.provenance.as_ref().and_then(|p| p.get(r.ev as usize));
        let lane = m
            .lane_of
            .get(i as usize)
            .and_then(|l| m.lanes.get(*l as usize));
        let hash_hit = |v: &str| {
            let mut hashes = ev.block_hashes().iter().collect::<Vec<_>>();
            if let KvEvent::BlockStored(s) = ev {
                hashes.extend(s.parent_block_hash.iter());
            }
            hashes.iter().any(|h| {
                let v = v.trim_start_matches("0x");
                h.to_display_string() == v
                    || h.to_hex_string()
                        .trim_start_matches("0x")
                        .trim_start_matches('0')
                        == v.trim_start_matches('0')
            })
        };
        self.terms.iter().all(|(k, v)| match k.as_deref() {
            Some("type") => ev.type_name().to_ascii_lowercase().contains(v.as_str()),
            Some("tier") => lane.is_some_and(|l| l.label.to_ascii_lowercase() == *v),
            Some("source") => b.source.to_ascii_lowercase() == *v,
            Some("job") => prov
                .and_then(|p| p.job_id)
                .is_some_and(|j| j.to_string() == *v),
            Some("req") => prov
                .and_then(|p| p.req_id.as_deref())
                .is_some_and(|q| q.to_ascii_lowercase() == *v),
            Some("seq") => b.seq.to_string() == *v,
            Some("hash") => hash_hit(v),
            Some("rule") => m.violations_at(i).any(|x| x.rule == *v),
            Some(_) => false,
            None => {
                ev.type_name().to_ascii_lowercase().contains(v.as_str())
                    || lane.is_some_and(|l| l.label.to_ascii_lowercase() == *v)
                    || b.source.to_ascii_lowercase() == *v
                    || hash_hit(v)
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kvscope_core::event::BlockStored;
    use kvscope_core::hash::BlockHash;

    fn stored(h: u64, parent: Option<u64>, medium: &str) -> KvEvent {
        KvEvent::BlockStored(BlockStored {
            block_hashes: vec![BlockHash::Int(h)],
            parent_block_hash: parent.map(BlockHash::Int),
            token_ids: vec![1, 2],
            block_size: 2,
            lora_id: None,
            medium: Some(medium.into()),
            lora_name: None,
            extra_keys: None,
            group_idx: None,
            kv_cache_spec_kind: None,
            kv_cache_spec_sliding_window: None,
            locality: None,
            ownership: None,
        })
    }

    fn batch(seq: u64, events: Vec<KvEvent>) -> TraceRecord {
        TraceRecord::Batch(TraceBatch {
            source: "pod".into(),
            dp_rank: Some(0),
            seq,
            ts: seq as f64,
            events,
            provenance: None,
            raw: None,
            origin: seq + 1,
        })
    }

    fn model() -> Model {
        let trace = Trace {
            records: vec![
                batch(0, vec![stored(1, None, "GPU"), stored(2, Some(1), "GPU")]),
                batch(
                    1,
                    vec![
                        stored(2, Some(1), "CPU"),
                        stored(1, None, "CPU"),
                        stored(3, Some(2), "CPU"),
                    ],
                ),
            ],
        };
        Model::from_trace("t", trace, LaneMode::Tier).unwrap()
    }

    /// Before the analysis the layout is complete and the child-first edge is already listed
    /// (preliminary rule); the consumer models are not available yet. After it, the core's
    /// classified finding replaces it.
    #[test]
    fn layout_before_analysis() {
        let m = model_unanalysed();
        assert!(!m.is_analysed());
        assert!(m.replay().is_none());
        assert_eq!(m.len(), 5);
        assert_eq!(m.lanes.len(), 2);
        assert_eq!(m.edges.len(), 3);
        assert_eq!(m.with_trace(|t| t.event_count()), 5);
        let v = m.violations();
        assert_eq!(v.len(), 1, "{v:?}");
        assert_eq!((v[0].event, v[0].rule.as_str()), (2, CHILD_FIRST));
        assert_eq!(v[0].related, Some(3));
        assert_eq!(m.next_violation(None, None), Some(2));
        m.analyse();
        assert!(m.is_analysed());
        assert!(m.replay().is_some());
        assert_eq!(m.with_trace(|t| t.event_count()), 5);
        assert!(m.violations().iter().all(|v| v.rule != CHILD_FIRST));
        assert!(m
            .violations()
            .iter()
            .any(|v| v.rule == "child-before-parent-in-job" && v.event == 2));
        // Idempotent.
        m.analyse();
        assert!(m.is_analysed());
    }

    fn model_unanalysed() -> Model {
        let trace = Trace {
            records: vec![
                batch(0, vec![stored(1, None, "GPU"), stored(2, Some(1), "GPU")]),
                batch(
                    1,
                    vec![
                        stored(2, Some(1), "CPU"),
                        stored(1, None, "CPU"),
                        stored(3, Some(2), "CPU"),
                    ],
                ),
            ],
        };
        Model::from_trace_timed("t", trace, LaneMode::Tier, &mut |_| {}).unwrap()
    }

    #[test]
    fn lanes_edges_and_violations() {
        let m = model();
        assert_eq!(m.len(), 5);
        assert_eq!(
            m.lanes.iter().map(Lane::title).collect::<Vec<_>>(),
            ["GPU", "CPU"]
        );
        assert_eq!(m.lane_of, [0, 0, 1, 1, 1]);
        assert_eq!(
            m.edges,
            [
                Edge {
                    parent: 0,
                    child: 1,
                    kind: EdgeKind::Forward
                },
                Edge {
                    parent: 3,
                    child: 2,
                    kind: EdgeKind::ChildFirst
                },
                Edge {
                    parent: 2,
                    child: 4,
                    kind: EdgeKind::Forward
                },
            ]
        );
        let reorders: Vec<_> = m
            .violations()
            .iter()
            .filter(|v| v.rule.starts_with("child-before-parent"))
            .collect();
        assert_eq!(reorders.len(), 1, "{:?}", m.violations());
        assert_eq!(reorders[0].event, 2);
        assert_eq!(reorders[0].rule, "child-before-parent-in-job");
        assert_eq!(reorders[0].related, Some(3));
        let rule = Some("child-before-parent-in-job");
        assert_eq!(m.next_violation(None, rule), Some(2));
        assert_eq!(m.next_violation(Some(2), rule), None);
        assert_eq!(m.prev_violation(4, rule), Some(2));
        assert_eq!(m.next_violation(None, Some("seq-gap")), None);
        assert_eq!(
            m.next_violation(None, None),
            Some(2),
            "consumer-loss findings are skipped by default"
        );
        assert!(m.is_violation(2) && !m.is_violation(0));
        let children = |i| m.children_of(i).map(|e| e.child).collect::<Vec<_>>();
        assert_eq!(children(3), [2]);
        assert_eq!(children(2), [4]);
        assert_eq!(children(0), [1]);
        assert!(children(4).is_empty());
    }

    /// A child whose parent is only stored in another lane gets a cross-lane edge from that
    /// parent's first store; edges stay sorted by child with the others.
    #[test]
    fn cross_lane_edges() {
        let trace = Trace {
            records: vec![
                batch(0, vec![stored(1, None, "GPU"), stored(7, Some(9), "CPU")]),
                batch(1, vec![stored(5, Some(1), "CPU"), stored(1, None, "GPU")]),
                batch(2, vec![stored(9, None, "CPU"), stored(6, Some(5), "CPU")]),
            ],
        };
        let m = Model::from_trace("t", trace, LaneMode::Tier).unwrap();
        let e = |parent, child, kind| Edge {
            parent,
            child,
            kind,
        };
        assert_eq!(
            m.edges,
            [
                e(4, 1, EdgeKind::ChildFirst),
                e(0, 2, EdgeKind::CrossLane),
                e(2, 5, EdgeKind::Forward),
            ]
        );
        assert_eq!(m.children_of(0).map(|x| x.child).collect::<Vec<_>>(), [2]);
    }

    /// Zoomed far out the timeline bins whole blocks of events: the same marks as binning
    /// event by event, each at most one column off.
    #[test]
    fn coarse_bins_match_fine_bins() {
        let n = 20_000u64;
        let records = (0..n / 10)
            .map(|b| {
                let evs = (0..10)
                    .map(|j| {
                        let i = b * 10 + j;
                        let medium = ["GPU", "CPU", "GPU"][(i % 3) as usize];
                        if i % 97 == 0 {
                            removed(i, medium)
                        } else {
                            stored(i + 1_000_000, None, medium)
                        }
                    })
                    .collect();
                batch(b, evs)
            })
            .collect();
        let m =
            Model::from_trace_timed("t", Trace { records }, LaneMode::Tier, &mut |_| {}).unwrap();
        assert_eq!(m.lanes.len(), 2);
        for (lo, hi, start, per_px) in [
            (0u32, 19_999u32, 0.0, 128.0),
            (0, 19_999, -37.0, 150.0),
            (130, 17_001, 100.0, 200.0),
            (5_000, 5_100, 4_990.0, 130.0),
        ] {
            let cols = 200;
            let fine = m.bins_with(lo, hi, start, per_px, cols, false);
            let coarse = m.bins_with(lo, hi, start, per_px, cols, true);
            assert!(fine.iter().any(|b| *b != 0));
            for l in 0..2 {
                let row = |v: &[u8], c: usize| v.get(l * cols + c).copied().unwrap_or(0);
                for c in 0..cols {
                    let near = |v: &[u8]| {
                        row(v, c) | row(v, c + 1) | c.checked_sub(1).map_or(0, |d| row(v, d))
                    };
                    assert_eq!(row(&fine, c) & !near(&coarse), 0, "lane {l} col {c}");
                    assert_eq!(row(&coarse, c) & !near(&fine), 0, "lane {l} col {c}");
                }
            }
            // The removals (every 97th event) stay visible.
            assert!(coarse.iter().any(|b| b & 2 != 0));
        }
    }

    fn prov(tier: &str, job: Option<u64>) -> Provenance {
        Provenance {
            tier: tier.into(),
            kind: Default::default(),
            job_id: job,
            req_id: None,
            group_idx: None,
            chunk_idx: None,
            step: None,
        }
    }

    fn removed(h: u64, medium: &str) -> KvEvent {
        KvEvent::BlockRemoved(kvscope_core::event::BlockRemoved {
            block_hashes: vec![BlockHash::Int(h)],
            medium: Some(medium.into()),
            group_idx: None,
            locality: None,
            ownership: None,
        })
    }

    /// Per-job lanes: two provenance jobs in CPU get a sub-lane each (in order of first
    /// event), the GPU event and the CPU removal without a job stay in their tier's "no job"
    /// lane; the same lanes before and after the analysis.
    #[test]
    fn lanes_per_job() {
        let mut jobs = batch(
            1,
            vec![
                stored(11, None, "CPU"),
                stored(12, Some(11), "CPU"),
                stored(21, None, "CPU"),
                removed(11, "CPU"),
            ],
        );
        if let TraceRecord::Batch(b) = &mut jobs {
            b.provenance = Some(vec![
                prov("CPU", Some(9)),
                prov("CPU", Some(9)),
                prov("CPU", Some(4)),
                prov("CPU", None),
            ]);
        }
        let trace = Trace {
            records: vec![batch(0, vec![stored(1, None, "GPU")]), jobs],
        };
        let mut m = Model::from_trace_timed("t", trace, LaneMode::TierJob, &mut |_| {}).unwrap();
        let titles = |m: &Model| m.lanes.iter().map(Lane::title).collect::<Vec<_>>();
        let expected = ["GPU · no job", "CPU · no job", "CPU · job 9", "CPU · job 4"];
        assert_eq!(titles(&m), expected);
        assert_eq!(m.lane_of, [0, 2, 2, 3, 1]);
        // Parent→child edges stay within the job's lane.
        assert_eq!(
            m.edges,
            [Edge {
                parent: 1,
                child: 2,
                kind: EdgeKind::Forward
            }]
        );
        m.analyse();
        m.layout(LaneMode::TierJob);
        assert_eq!(titles(&m), expected);
        assert_eq!(m.lane_of, [0, 2, 2, 3, 1]);
        m.layout(LaneMode::Tier);
        assert_eq!(titles(&m), ["GPU", "CPU"]);
        assert_eq!(m.lane_of, [0, 1, 1, 1, 1]);
    }

    /// Without provenance, jobs are the analysis' inferred ones (a batch's run of same-medium
    /// connector events), labelled as inferred.
    #[test]
    fn lanes_per_inferred_job() {
        let mut m = model();
        m.layout(LaneMode::TierJob);
        assert_eq!(
            m.lanes.iter().map(Lane::title).collect::<Vec<_>>(),
            ["GPU · no job", "CPU · job ~0 (inferred)"]
        );
        assert_eq!(m.lane_of, [0, 0, 1, 1, 1]);
        assert_eq!(
            LaneMode::parse(LaneMode::TierJob.as_str()),
            LaneMode::TierJob
        );
        assert_eq!(LaneMode::parse("bogus"), LaneMode::Tier);
    }

    #[test]
    fn u64_key_sort_is_stable() {
        let mut v: Vec<(u32, char)> = vec![(3, 'a'), (1, 'b'), (3, 'c'), (0, 'd'), (1, 'e')];
        sort_by_u64(&mut v, |x| u64::from(x.0));
        assert_eq!(v, [(0, 'd'), (1, 'b'), (1, 'e'), (3, 'a'), (3, 'c')]);
    }

    #[test]
    fn search_by_field_and_hash() {
        let m = model();
        assert_eq!(m.search(&Query::parse("tier=CPU"), None), Some(2));
        assert_eq!(m.search(&Query::parse("tier=cpu && hash=3"), None), Some(4));
        assert_eq!(
            m.search(&Query::parse("hash=0x0000000000000003"), None),
            Some(4)
        );
        assert_eq!(
            m.search(&Query::parse("tier=GPU"), Some(1)),
            Some(0),
            "wraps around"
        );
        assert_eq!(m.search(&Query::parse("nosuch=1"), None), None);
    }
}
