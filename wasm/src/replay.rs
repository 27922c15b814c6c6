//! The `ReplaySession` class: a cursor over a trace's delivered events with the consumer
//! models' state at the cursor, stepping, seeking and violation search (core:
//! `kvscope_core::replay::Replay`).
//!
//! Cursor convention (core's): cursor `c` shows the state after events `0..c`; `0` is before
//! the first event, `length` after the last; "the event at the cursor" is `c - 1`.

use kvscope_core::consumers as kc;
use kvscope_core::replay as kr;
use tsify::Tsify;
use wasm_bindgen::prelude::*;

use crate::dto::hash_from_js;
use crate::js::{js_error, js_string, str_array, Obj, ToJs};
use crate::options::{
    parse_options, AnalyzeOptions, AnalyzeOptionsArg, ViolationFilterArg, ViolationFilterOptions,
};
use crate::report::{hash_str, hash_strs, num, Analysis, Finding, Job};
use crate::trace::{out_of_range, range_error, Trace};

/// A delivered event, as the replay shows it (hashes u64-normalised, as routers key them).
#[derive(Debug, Tsify)]
#[tsify(large_number_types_as_bigints, missing_as_null)]
pub struct EventInfo {
    /// Global 0-based index.
    pub index: f64,
    /// 1-based JSONL line / msgpack batch number.
    pub line: f64,
    /// 0-based index in its batch.
    pub pos: f64,
    /// Source name.
    pub source: String,
    /// DP rank.
    pub dp_rank: u32,
    /// Publisher sequence number of its batch.
    pub seq: u64,
    /// Tier label (`GPU`, `CPU`, `STORAGE:fs0`, ...).
    pub tier: String,
    /// `BlockStored`, `BlockRemoved` or `AllBlocksCleared`.
    #[serde(rename = "type")]
    #[tsify(type = "\"BlockStored\" | \"BlockRemoved\" | \"AllBlocksCleared\"")]
    pub kind: String,
    /// Block hashes (decimal strings of the router-normalised u64).
    #[tsify(type = "BlockHashString[]")]
    pub hashes: Vec<String>,
    /// Parent (stores only).
    #[tsify(type = "BlockHashString | null")]
    pub parent: Option<String>,
    /// kvscope's job id, when the event belongs to a job (see `Analysis.jobs`).
    pub job: Option<u32>,
}

impl ToJs for EventInfo {
    fn to_js(&self) -> JsValue {
        let EventInfo {
            index,
            line,
            pos,
            source,
            dp_rank,
            seq,
            tier,
            kind,
            hashes,
            parent,
            job,
        } = self;
        let o = Obj::new();
        o.num("index", *index)
            .num("line", *line)
            .num("pos", *pos)
            .str("source", source)
            .num("dp_rank", f64::from(*dp_rank))
            .big("seq", *seq)
            .str("tier", tier)
            .str("type", kind)
            .val("hashes", &str_array(hashes))
            .opt_str("parent", parent.as_deref())
            .opt_num("job", job.map(f64::from));
        o.done()
    }
}

impl From<kr::EventInfo> for EventInfo {
    fn from(e: kr::EventInfo) -> Self {
        EventInfo {
            index: num(e.index),
            line: e.line as f64,
            pos: num(e.pos),
            source: e.source,
            dp_rank: e.dp_rank,
            seq: e.seq,
            tier: e.tier,
            kind: e.kind,
            hashes: hash_strs(&e.hashes),
            parent: e.parent.map(hash_str),
            job: e.job,
        }
    }
}

/// A lane's block counters (one consumer, one source, one tier).
#[derive(Debug, Tsify)]
pub struct LaneCounts {
    /// Blocks currently indexed (reachable or not).
    pub indexed: f64,
    /// Blocks currently held pending.
    pub pending: f64,
    /// Blocks dropped so far (cumulative).
    pub dropped: f64,
    /// Blocks indexed but unreachable (misrooted), currently.
    pub unreachable: f64,
}

impl ToJs for LaneCounts {
    fn to_js(&self) -> JsValue {
        let LaneCounts {
            indexed,
            pending,
            dropped,
            unreachable,
        } = self;
        let o = Obj::new();
        o.num("indexed", *indexed)
            .num("pending", *pending)
            .num("dropped", *dropped)
            .num("unreachable", *unreachable);
        o.done()
    }
}

impl From<&kc::LaneCounts> for LaneCounts {
    fn from(c: &kc::LaneCounts) -> Self {
        LaneCounts {
            indexed: c.indexed as f64,
            pending: c.pending as f64,
            dropped: c.dropped as f64,
            unreachable: c.unreachable as f64,
        }
    }
}

/// One lane's counters at the cursor.
#[derive(Debug, Tsify)]
pub struct LaneSnapshot {
    /// Source name.
    pub source: String,
    /// Tier label.
    pub tier: String,
    /// Counters.
    pub counts: LaneCounts,
}

impl ToJs for LaneSnapshot {
    fn to_js(&self) -> JsValue {
        let LaneSnapshot {
            source,
            tier,
            counts,
        } = self;
        let o = Obj::new();
        o.str("source", source)
            .str("tier", tier)
            .to("counts", counts);
        o.done()
    }
}

/// One consumer's state at the cursor.
#[derive(Debug, Tsify)]
pub struct ConsumerSnapshot {
    /// The model.
    #[tsify(type = "ConsumerName")]
    pub consumer: &'static str,
    /// Per lane (source × tier), sorted by source then tier.
    pub lanes: Vec<LaneSnapshot>,
    /// Sum over lanes.
    pub total: LaneCounts,
}

impl ToJs for ConsumerSnapshot {
    fn to_js(&self) -> JsValue {
        let ConsumerSnapshot {
            consumer,
            lanes,
            total,
        } = self;
        let o = Obj::new();
        o.str("consumer", consumer)
            .to("lanes", lanes)
            .to("total", total);
        o.done()
    }
}

/// A job's progress at the cursor.
#[derive(Debug, Tsify)]
#[tsify(large_number_types_as_bigints, missing_as_null)]
pub struct JobProgress {
    /// The job.
    pub job: Job,
    /// Events of the job delivered so far.
    pub delivered: f64,
    /// Child-before-parent-in-job violations in it so far.
    pub violations: f64,
}

impl ToJs for JobProgress {
    fn to_js(&self) -> JsValue {
        let JobProgress {
            job,
            delivered,
            violations,
        } = self;
        let o = Obj::new();
        o.to("job", job)
            .num("delivered", *delivered)
            .num("violations", *violations);
        o.done()
    }
}

/// The state at the cursor.
#[derive(Debug, Tsify)]
#[tsify(large_number_types_as_bigints, missing_as_null)]
pub struct Snapshot {
    /// Number of applied events.
    pub cursor: f64,
    /// Total number of events.
    pub total: f64,
    /// The event at the cursor (`cursor - 1`), if any.
    pub last_event: Option<EventInfo>,
    /// Per consumer state.
    pub consumers: Vec<ConsumerSnapshot>,
    /// Jobs started but not finished at the cursor, plus the current event's job.
    pub active_jobs: Vec<JobProgress>,
    /// Distinct blocks stored so far (by any source, any tier).
    pub blocks_seen: f64,
    /// Findings (all levels) at events before the cursor.
    pub findings_so_far: f64,
}

impl ToJs for Snapshot {
    fn to_js(&self) -> JsValue {
        let Snapshot {
            cursor,
            total,
            last_event,
            consumers,
            active_jobs,
            blocks_seen,
            findings_so_far,
        } = self;
        let o = Obj::new();
        o.num("cursor", *cursor)
            .num("total", *total)
            .to("last_event", last_event)
            .to("consumers", consumers)
            .to("active_jobs", active_jobs)
            .num("blocks_seen", *blocks_seen)
            .num("findings_so_far", *findings_so_far);
        o.done()
    }
}

impl From<kr::Snapshot> for Snapshot {
    fn from(s: kr::Snapshot) -> Self {
        Snapshot {
            cursor: num(s.cursor),
            total: num(s.total),
            last_event: s.last_event.map(EventInfo::from),
            consumers: s
                .consumers
                .iter()
                .map(|c| ConsumerSnapshot {
                    consumer: c.consumer.as_str(),
                    lanes: c
                        .lanes
                        .iter()
                        .map(|l| LaneSnapshot {
                            source: l.source.clone(),
                            tier: l.tier.clone(),
                            counts: LaneCounts::from(&l.counts),
                        })
                        .collect(),
                    total: LaneCounts::from(&c.total),
                })
                .collect(),
            active_jobs: s
                .active_jobs
                .iter()
                .map(|j| JobProgress {
                    job: Job::from(&j.job),
                    delivered: num(j.delivered),
                    violations: num(j.violations),
                })
                .collect(),
            blocks_seen: num(s.blocks_seen),
            findings_so_far: num(s.findings_so_far),
        }
    }
}

/// The outcome for one block of an event.
#[derive(Debug, Tsify)]
#[tsify(missing_as_null)]
pub struct BlockVerdict {
    /// The block hash.
    #[tsify(type = "BlockHashString")]
    pub hash: String,
    /// What happened to it.
    #[tsify(type = "VerdictKind")]
    pub verdict: &'static str,
    /// Why, for drops and skips.
    pub reason: Option<String>,
}

impl ToJs for BlockVerdict {
    fn to_js(&self) -> JsValue {
        let BlockVerdict {
            hash,
            verdict,
            reason,
        } = self;
        let o = Obj::new();
        o.str("hash", hash)
            .str("verdict", verdict)
            .opt_str("reason", reason.as_deref());
        o.done()
    }
}

/// A consumer's verdict on one event.
#[derive(Debug, Tsify)]
#[tsify(missing_as_null)]
pub struct EventVerdict {
    /// The event-level outcome.
    #[tsify(type = "VerdictKind")]
    pub verdict: &'static str,
    /// For `dropped_orphan` / `misrooted` / `pending`: the parent that was not found.
    #[tsify(type = "BlockHashString | null")]
    pub missing_parent: Option<String>,
    /// Why, for `ignored` / `truncated` and other non-obvious outcomes.
    pub reason: Option<String>,
    /// The consumer's own status name, when it has one (Dynamo's `parent_block_not_found`...).
    pub status: Option<String>,
    /// Per-block outcomes, in the event's block order.
    pub blocks: Vec<BlockVerdict>,
}

impl ToJs for EventVerdict {
    fn to_js(&self) -> JsValue {
        let EventVerdict {
            verdict,
            missing_parent,
            reason,
            status,
            blocks,
        } = self;
        let o = Obj::new();
        o.str("verdict", verdict)
            .opt_str("missing_parent", missing_parent.as_deref())
            .opt_str("reason", reason.as_deref())
            .opt_str("status", status.as_deref())
            .to("blocks", blocks);
        o.done()
    }
}

impl From<&kc::EventVerdict> for EventVerdict {
    fn from(v: &kc::EventVerdict) -> Self {
        EventVerdict {
            verdict: v.verdict.as_str(),
            missing_parent: v.missing_parent.map(hash_str),
            reason: v.reason.as_ref().map(|r| r.to_string()),
            status: v.status.as_ref().map(|r| r.to_string()),
            blocks: v
                .blocks
                .iter()
                .map(|b| BlockVerdict {
                    hash: hash_str(b.hash),
                    verdict: b.verdict.as_str(),
                    reason: b.reason.as_ref().map(|r| r.to_string()),
                })
                .collect(),
        }
    }
}

/// A later outcome for an earlier (pending) event.
#[derive(Debug, Tsify)]
pub struct Resolution {
    /// Global index of the earlier event.
    pub event: f64,
    /// Its final outcome (`replayed` or `dropped_orphan`).
    #[tsify(type = "VerdictKind")]
    pub verdict: &'static str,
    /// The blocks it concerned.
    #[tsify(type = "BlockHashString[]")]
    pub hashes: Vec<String>,
}

impl ToJs for Resolution {
    fn to_js(&self) -> JsValue {
        let Resolution {
            event,
            verdict,
            hashes,
        } = self;
        let o = Obj::new();
        o.num("event", *event)
            .str("verdict", verdict)
            .val("hashes", &str_array(hashes));
        o.done()
    }
}

/// A lane whose counters an event changed.
#[derive(Debug, Tsify)]
pub struct LaneChange {
    /// Source name.
    pub source: String,
    /// Tier label.
    pub tier: String,
    /// Before the event.
    pub before: LaneCounts,
    /// After the event.
    pub after: LaneCounts,
}

impl ToJs for LaneChange {
    fn to_js(&self) -> JsValue {
        let LaneChange {
            source,
            tier,
            before,
            after,
        } = self;
        let o = Obj::new();
        o.str("source", source)
            .str("tier", tier)
            .to("before", before)
            .to("after", after);
        o.done()
    }
}

/// What one consumer did with one event.
#[derive(Debug, Tsify)]
#[tsify(missing_as_null)]
pub struct ConsumerStep {
    /// The model.
    #[tsify(type = "ConsumerName")]
    pub consumer: &'static str,
    /// Its verdict, as produced at delivery.
    pub verdict: EventVerdict,
    /// The final verdict when a later event changed it (a pending event replayed).
    #[tsify(type = "VerdictKind | null")]
    pub final_verdict: Option<&'static str>,
    /// Earlier events this one resolved (replayed orphans).
    pub resolved: Vec<Resolution>,
    /// Lanes whose counters changed.
    pub lanes: Vec<LaneChange>,
}

impl ToJs for ConsumerStep {
    fn to_js(&self) -> JsValue {
        let ConsumerStep {
            consumer,
            verdict,
            final_verdict,
            resolved,
            lanes,
        } = self;
        let o = Obj::new();
        o.str("consumer", consumer)
            .to("verdict", verdict)
            .opt_str("final_verdict", *final_verdict)
            .to("resolved", resolved)
            .to("lanes", lanes);
        o.done()
    }
}

/// The diff of one step: what applying one event changed.
#[derive(Debug, Tsify)]
#[tsify(large_number_types_as_bigints, missing_as_null)]
pub struct Step {
    /// The event.
    pub event: EventInfo,
    /// Per consumer outcome.
    pub verdicts: Vec<ConsumerStep>,
    /// Findings at this event (all levels).
    pub findings: Vec<Finding>,
}

impl ToJs for Step {
    fn to_js(&self) -> JsValue {
        let Step {
            event,
            verdicts,
            findings,
        } = self;
        let o = Obj::new();
        o.to("event", event)
            .to("verdicts", verdicts)
            .to("findings", findings);
        o.done()
    }
}

impl From<kr::Step> for Step {
    fn from(s: kr::Step) -> Self {
        Step {
            event: EventInfo::from(s.event),
            verdicts: s
                .verdicts
                .iter()
                .map(|c| ConsumerStep {
                    consumer: c.consumer.as_str(),
                    verdict: EventVerdict::from(&c.verdict),
                    final_verdict: c.final_verdict.map(|v| v.as_str()),
                    resolved: c
                        .resolved
                        .iter()
                        .map(|r| Resolution {
                            event: num(r.event),
                            verdict: r.verdict.as_str(),
                            hashes: hash_strs(&r.hashes),
                        })
                        .collect(),
                    lanes: c
                        .lanes
                        .iter()
                        .map(|l| LaneChange {
                            source: l.source.clone(),
                            tier: l.tier.clone(),
                            before: LaneCounts::from(&l.before),
                            after: LaneCounts::from(&l.after),
                        })
                        .collect(),
                })
                .collect(),
            findings: s.findings.iter().map(Finding::from).collect(),
        }
    }
}

/// A consumer's last outcome for a block.
#[derive(Debug, Tsify)]
pub struct BlockOutcome {
    /// The model.
    #[tsify(type = "ConsumerName")]
    pub consumer: &'static str,
    /// The last event before the cursor that named the block.
    pub event: f64,
    /// The outcome for the block there.
    #[tsify(type = "VerdictKind")]
    pub verdict: &'static str,
}

impl ToJs for BlockOutcome {
    fn to_js(&self) -> JsValue {
        let BlockOutcome {
            consumer,
            event,
            verdict,
        } = self;
        let o = Obj::new();
        o.str("consumer", consumer)
            .num("event", *event)
            .str("verdict", verdict);
        o.done()
    }
}

/// What is known about one block at the cursor.
#[derive(Debug, Tsify)]
#[tsify(missing_as_null)]
pub struct BlockInfo {
    /// The hash (router-normalised u64, decimal).
    #[tsify(type = "BlockHashString")]
    pub hash: String,
    /// Parent named by its first store (if stored before the cursor).
    #[tsify(type = "BlockHashString | null")]
    pub parent: Option<String>,
    /// Event of its first store, if before the cursor.
    pub first_stored: Option<f64>,
    /// Children first stored before the cursor.
    #[tsify(type = "BlockHashString[]")]
    pub children: Vec<String>,
    /// Per consumer: the outcome at the last event before the cursor that named the block.
    pub last_outcome: Vec<BlockOutcome>,
}

impl ToJs for BlockInfo {
    fn to_js(&self) -> JsValue {
        let BlockInfo {
            hash,
            parent,
            first_stored,
            children,
            last_outcome,
        } = self;
        let o = Obj::new();
        o.str("hash", hash)
            .opt_str("parent", parent.as_deref())
            .opt_num("first_stored", *first_stored)
            .val("children", &str_array(children))
            .to("last_outcome", last_outcome);
        o.done()
    }
}

impl From<kr::BlockInfo> for BlockInfo {
    fn from(b: kr::BlockInfo) -> Self {
        BlockInfo {
            hash: hash_str(b.hash),
            parent: b.parent.map(hash_str),
            first_stored: b.first_stored.map(num),
            children: hash_strs(&b.children),
            last_outcome: b
                .last_outcome
                .iter()
                .map(|(c, e, v)| BlockOutcome {
                    consumer: c.as_str(),
                    event: num(*e),
                    verdict: v.as_str(),
                })
                .collect(),
        }
    }
}

/// A cursor position or event index given by JS: a non-negative integer.
fn index_arg(v: f64, what: &str) -> Result<usize, JsValue> {
    if v.is_finite() && v >= 0.0 && v.fract() == 0.0 && v <= 9_007_199_254_740_991.0 {
        Ok(v as usize)
    } else {
        // `String(v)`, not Rust's float formatting (which would add ~14 KB of wasm).
        Err(range_error(&format!(
            "{what} must be a non-negative integer, got {}",
            js_string(&JsValue::from_f64(v))
        )))
    }
}

/// A replay session: the trace, its analysis, and a cursor. Owns wasm memory (the trace copy
/// and the recorded histories): call `.free()` when done to return it to the allocator.
#[wasm_bindgen]
pub struct ReplaySession {
    inner: kr::Replay,
}

impl ReplaySession {
    /// A session over `trace`, shared rather than copied (pure Rust side).
    pub fn from_trace(trace: &Trace, options: &AnalyzeOptions) -> Result<Self, String> {
        let config = options.to_config()?;
        Ok(ReplaySession {
            inner: kr::Replay::new(trace.shared(), &config),
        })
    }

    /// The core replay engine.
    pub fn core(&self) -> &kr::Replay {
        &self.inner
    }

    fn step_js(step: Option<kr::Step>) -> JsValue {
        step.map_or(JsValue::NULL, |s| Step::from(s).to_js())
    }

    fn filter(filter: Option<ViolationFilterArg>) -> Result<kr::ViolationFilter, JsValue> {
        parse_options(
            filter.map(JsValue::from),
            "violation filter",
            ViolationFilterOptions::from_js,
        )?
        .to_filter()
        .map_err(|m| js_error(&m))
    }
}

#[wasm_bindgen]
impl ReplaySession {
    /// Analyse `trace` (with `options`, as for `Trace.analyze`) and open a session at cursor 0.
    /// The session keeps its own copy of the trace.
    #[wasm_bindgen(constructor)]
    pub fn new(
        trace: &Trace,
        options: Option<AnalyzeOptionsArg>,
    ) -> Result<ReplaySession, JsValue> {
        let options = parse_options(
            options.map(JsValue::from),
            "analyze options",
            AnalyzeOptions::from_js,
        )?;
        ReplaySession::from_trace(trace, &options).map_err(|m| js_error(&m))
    }

    /// Number of events (the last cursor position).
    #[wasm_bindgen(getter)]
    pub fn length(&self) -> usize {
        self.inner.len()
    }

    /// Number of applied events: `0` before the first event, `length` after the last.
    #[wasm_bindgen(getter)]
    pub fn cursor(&self) -> usize {
        self.inner.cursor()
    }

    /// Move the cursor to `cursor` (clamped to `0..=length`) and return the new cursor.
    /// Cost: one binary search per lane, never a replay.
    pub fn seek(&mut self, cursor: f64) -> Result<usize, JsValue> {
        self.inner.seek(index_arg(cursor, "cursor")?);
        Ok(self.inner.cursor())
    }

    /// Apply the event at the cursor and advance; returns that event's diff, or `null` at the
    /// end.
    #[wasm_bindgen(js_name = stepForward, unchecked_return_type = "Step | null")]
    pub fn step_forward(&mut self) -> JsValue {
        Self::step_js(self.inner.step_forward())
    }

    /// Revert the event at the cursor and move back; returns the diff that event had made
    /// (which this step undid), or `null` at cursor 0.
    #[wasm_bindgen(js_name = stepBack, unchecked_return_type = "Step | null")]
    pub fn step_back(&mut self) -> JsValue {
        Self::step_js(self.inner.step_back())
    }

    /// Jump to the next violation matching `filter`: the first matching event with index ≥
    /// the cursor is applied (the cursor moves just past it, so `lastStep()` is its diff).
    /// Returns its event index, or `null` (cursor unchanged) when there is none.
    #[wasm_bindgen(js_name = nextViolation, unchecked_return_type = "number | null")]
    pub fn next_violation(
        &mut self,
        filter: Option<ViolationFilterArg>,
    ) -> Result<JsValue, JsValue> {
        let filter = Self::filter(filter)?;
        Ok(match self.inner.next_violation(&filter) {
            Some(e) => {
                self.inner.seek(e + 1);
                JsValue::from_f64(num(e))
            }
            None => JsValue::NULL,
        })
    }

    /// Jump to the previous violation matching `filter` (an event before the one at the
    /// cursor), applying it like `nextViolation`. Returns its index, or `null`.
    #[wasm_bindgen(js_name = previousViolation, unchecked_return_type = "number | null")]
    pub fn previous_violation(
        &mut self,
        filter: Option<ViolationFilterArg>,
    ) -> Result<JsValue, JsValue> {
        let filter = Self::filter(filter)?;
        Ok(match self.inner.prev_violation(&filter) {
            Some(e) => {
                self.inner.seek(e + 1);
                JsValue::from_f64(num(e))
            }
            None => JsValue::NULL,
        })
    }

    /// The state at the cursor: per consumer and lane counters, active jobs, totals.
    #[wasm_bindgen(unchecked_return_type = "Snapshot")]
    pub fn state(&self) -> JsValue {
        Snapshot::from(self.inner.snapshot()).to_js()
    }

    /// The diff of the last step: what applying the event at the cursor (`cursor - 1`)
    /// changed, or `null` at cursor 0.
    #[wasm_bindgen(js_name = lastStep, unchecked_return_type = "Step | null")]
    pub fn last_step(&self) -> JsValue {
        match self.inner.cursor().checked_sub(1) {
            Some(e) => Self::step_js(self.inner.step_at(e)),
            None => JsValue::NULL,
        }
    }

    /// The diff of applying event `index` (independent of the cursor).
    #[wasm_bindgen(js_name = stepAt, unchecked_return_type = "Step")]
    pub fn step_at(&self, index: f64) -> Result<JsValue, JsValue> {
        let i = index_arg(index, "event index")?;
        let step = self
            .inner
            .step_at(i)
            .ok_or_else(|| out_of_range("event", "events", i, self.inner.len()))?;
        Ok(Step::from(step).to_js())
    }

    /// Describe event `index`.
    #[wasm_bindgen(unchecked_return_type = "EventInfo")]
    pub fn event(&self, index: f64) -> Result<JsValue, JsValue> {
        let i = index_arg(index, "event index")?;
        let info = self
            .inner
            .event_info(i)
            .ok_or_else(|| out_of_range("event", "events", i, self.inner.len()))?;
        Ok(EventInfo::from(info).to_js())
    }

    /// What is known about a block at the cursor. `hash` is a decimal string (or `0x` hex of
    /// a byte hash, normalised like routers do) or a `bigint`.
    #[wasm_bindgen(unchecked_return_type = "BlockInfo")]
    pub fn block(
        &self,
        #[wasm_bindgen(unchecked_param_type = "BlockHashString | bigint")] hash: JsValue,
    ) -> Result<JsValue, JsValue> {
        let h = if let Some(s) = hash.as_string() {
            hash_from_js(&s).map_err(|m| js_error(&m))?.as_u64()
        } else if hash.is_bigint() {
            u64::try_from(hash).map_err(|_| range_error("block hash bigint must be in 0..2^64"))?
        } else {
            return Err(js_error(
                "block hash must be a string or a bigint (never a number)",
            ));
        };
        Ok(BlockInfo::from(self.inner.block(h)).to_js())
    }

    /// The session's analysis (same shape as `Trace.analyze()`).
    #[wasm_bindgen(unchecked_return_type = "Analysis")]
    pub fn analysis(&self) -> JsValue {
        Analysis::from(self.inner.analysis()).to_js()
    }

    /// Bytes of the recorded index (what seeking uses), for memory accounting.
    #[wasm_bindgen(getter, js_name = indexBytes)]
    pub fn index_bytes(&self) -> usize {
        self.inner.index_bytes()
    }
}

#[wasm_bindgen]
impl Trace {
    /// Analyse the trace: the violation index, lint findings and each consumer model's
    /// losses, for the chosen consumers and rules. Returns a plain object.
    #[wasm_bindgen(unchecked_return_type = "Analysis")]
    pub fn analyze(&self, options: Option<AnalyzeOptionsArg>) -> Result<JsValue, JsValue> {
        let options = parse_options(
            options.map(JsValue::from),
            "analyze options",
            AnalyzeOptions::from_js,
        )?;
        let config = options.to_config().map_err(|m| js_error(&m))?;
        Ok(Analysis::from(&kvscope_core::analysis::analyze(self.core(), &config)).to_js())
    }

    /// Open a replay session over a copy of this trace (same options as `analyze`).
    pub fn replay(&self, options: Option<AnalyzeOptionsArg>) -> Result<ReplaySession, JsValue> {
        ReplaySession::new(self, options)
    }
}
