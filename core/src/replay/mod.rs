//! The replay engine: a cursor over a trace's delivered events, for stepping through what each
//! router model did.
//!
//! The cursor counts applied events: cursor `c` shows the state after events `0..c` (so `0` is
//! before the first event and `len()` after the last); "the event at the cursor" is `c - 1`.
//!
//! # How seeking stays cheap
//! [`Replay::new`] (or [`ReplayBuilder`], the same work in slices) runs the analysis once and
//! records, as compact version-stamped histories (a "fat node" persistent structure),
//! everything a snapshot shows:
//! * per event and consumer a 4-byte verdict (kind, status, interned reason), with sorted side
//!   tables for missing parents and non-uniform per-block outcomes;
//! * per consumer and lane (source × tier) the counters after every event that changed them,
//!   with an index by event so that a step applies or reverts only that event's changes;
//! * per event one 64-byte, line-aligned row: where its lane changes end, distinct blocks
//!   stored, findings and jobs started up to it, and what the UI shows of the event (first
//!   hash, parent, kind, its batch's line and seq, 16-bit tier / source / DP rank / position
//!   with a fallback to the index, job and its position in the job, whether another job is
//!   active after it): a snapshot at cursor `c` reads row `c - 1`, not the trace (the trace only
//!   for the hashes of events naming more than one block);
//! * static tables by dense block id (`blocks.rs`): each block's first store (parent, event),
//!   its children, the events naming it; each job's events, and a compact 32-byte row per job
//!   (a `Job` is rebuilt from it with interned source and tier names);
//! * the findings as the analysis' compact records (a `FindingStore`: ids and numbers), each
//!   rendered (message, names, verdicts, cascades) only when shown ([`Replay::finding`]): a
//!   trace can have a finding per event;
//! * every `K` events a checkpoint of the lane counters, stored inline in the change log (a
//!   header, then one entry per lane) and found through a small per-checkpoint index (`K`
//!   grows with the number of lanes so that checkpoints cost a few bytes per event).
//!
//! A seek restores the checkpoint at or before the cursor and applies the recorded lane changes
//! of at most `K - 1` events: one contiguous run of the change log (`O(K)`, independent of the
//! trace length; [`Replay::seek_work`] counts it), never a replay; a step is
//! `O(changes of one event)`; memory grows linearly with the trace (checkpoints hold lane
//! counters only, not consumer states, so never `N²/K`). `core/benches/analysis.rs` measures
//! seek cost at 10k vs 1M events, the work per seek and the bytes per event of the recording;
//! `core/examples/seek_probe.rs` times seek and snapshot parts and is the callgrind probe.
//! A seek + snapshot at a random cursor reads the per-checkpoint index, one change run and one
//! row (plus a job row when the event belongs to a job): on a large trace these are still
//! cache and TLB misses that a small trace keeps in cache, so the cost is not perfectly flat
//! (see ARCHITECTURE.md for the measured ratio).
//!
//! # Example
//! ```
//! use kvscope_core::analysis::{AnalysisConfig, Rule};
//! use kvscope_core::consumers::{ConsumerKind, VerdictKind};
//! use kvscope_core::consumers::testkit::{batch, h, stored, trace};
//! use kvscope_core::replay::{Replay, ViolationFilter};
//!
//! let t = trace(vec![batch("pod-a", 0, vec![
//!     stored(&[1], None, Some("GPU"), 16),
//!     stored(&[3], Some(2), Some("CPU"), 16), // child first (legacy order)
//!     stored(&[2], Some(1), Some("CPU"), 16),
//! ])]);
//! let mut r = Replay::new(t, &AnalysisConfig::default());
//! assert_eq!(r.len(), 3);
//!
//! // Jump to the first child-before-parent violation and apply that event.
//! let filter = ViolationFilter::for_rule(Some(Rule::ChildBeforeParentInJob));
//! let at = r.next_violation(&filter).unwrap();
//! assert_eq!(at, 1);
//! r.seek(at + 1);
//! let snap = r.snapshot();
//! assert_eq!(snap.cursor, 2);
//! let llmd = snap.consumers.iter().find(|c| c.consumer == ConsumerKind::Llmd).unwrap();
//! assert_eq!(llmd.total.dropped, 1); // llm-d dropped block 3
//!
//! // What the step onto event 1 changed, for the UI to highlight.
//! let step = r.step_at(1).unwrap();
//! let v = step.verdicts.iter().find(|v| v.consumer == ConsumerKind::Llmd).unwrap();
//! assert_eq!(v.verdict.verdict, VerdictKind::DroppedOrphan);
//! assert_eq!(v.verdict.missing_parent, Some(h(2)));
//!
//! // Snapshots are plain serde data.
//! let json = serde_json::to_string(&snap).unwrap();
//! assert!(json.contains("\"cursor\":2"));
//! ```

mod blocks;
mod builder;
mod cursor;
mod job_order;
mod lens;
mod record;
mod story;
mod tables;
mod view;

use blocks::BlockTables;
pub use builder::{BuildPhase, BuildProgress, ReplayBuilder};
pub use job_order::{JobOrder, JobOrderRow};
pub use lens::{LensMark, RouterLens, VerdictTime};
use record::{Change, JobRow, Recording};

use serde::{Deserialize, Serialize};

use crate::analysis::{Analysis, AnalysisConfig, Finding, FindingStore, Job, Rule};
use crate::consumers::{ConsumerKind, EventVerdict, LaneCounts, Resolution, VerdictKind};
use crate::trace::Trace;
use std::sync::Arc;

/// Filter for [`Replay::next_violation`] / [`Replay::prev_violation`].
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ViolationFilter {
    /// Only findings of this rule (reorder rules at any level, including `allow`; other rules
    /// at `warn` or `deny`).
    #[serde(default)]
    pub rule: Option<Rule>,
    /// Only events this consumer loses (dropped, misrooted, truncated, pending or skipped
    /// stores). With `rule`, both must hold.
    #[serde(default)]
    pub consumer: Option<ConsumerKind>,
    /// Without `rule`: only findings of the rules that mark an event's order
    /// ([`Rule::marks_order`]: not the per-model `consumer-loss` findings, not the routing
    /// preconditions). What the debugger's `n`/`p` and violation marks use.
    #[serde(default)]
    pub ordering: bool,
}

impl ViolationFilter {
    /// The debugger's filter: findings of `rule`, or (`None`) of every rule that marks an
    /// event's order.
    pub fn for_rule(rule: Option<Rule>) -> ViolationFilter {
        ViolationFilter {
            rule,
            consumer: None,
            ordering: rule.is_none(),
        }
    }

    /// Whether a finding of `rule` passes the rule part of the filter.
    pub fn keeps(&self, rule: Rule) -> bool {
        match self.rule {
            Some(r) => r == rule,
            None => !self.ordering || rule.marks_order(),
        }
    }
}

/// A delivered event, as the UI shows it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct EventInfo {
    /// Global 0-based index.
    pub index: usize,
    /// 1-based JSONL line / msgpack batch number.
    pub line: u64,
    /// 0-based index in its batch.
    pub pos: usize,
    /// Source name.
    pub source: String,
    /// DP rank.
    pub dp_rank: u32,
    /// Publisher sequence number of its batch.
    pub seq: u64,
    /// Tier label.
    pub tier: String,
    /// `BlockStored`, `BlockRemoved` or `AllBlocksCleared`.
    #[serde(rename = "type")]
    pub kind: String,
    /// Block hashes (u64-normalised).
    pub hashes: Vec<u64>,
    /// Parent (stores only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent: Option<u64>,
    /// Interned job id, when the event belongs to a job.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub job: Option<u32>,
}

/// One lane's counters.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LaneSnapshot {
    /// Source name.
    pub source: String,
    /// Tier label.
    pub tier: String,
    /// Counters.
    pub counts: LaneCounts,
}

/// One consumer's state at the cursor.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConsumerSnapshot {
    /// The model.
    pub consumer: ConsumerKind,
    /// Per lane (source × tier), sorted by source then tier.
    pub lanes: Vec<LaneSnapshot>,
    /// Sum over lanes.
    pub total: LaneCounts,
}

/// A job's progress at the cursor.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobProgress {
    /// The job.
    pub job: Job,
    /// Events of the job delivered so far.
    pub delivered: usize,
    /// Child-before-parent-in-job violations in it so far.
    pub violations: usize,
}

/// The full state at the cursor (plain data).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Snapshot {
    /// Number of applied events.
    pub cursor: usize,
    /// Total number of events.
    pub total: usize,
    /// The event at the cursor (`cursor - 1`), if any.
    pub last_event: Option<EventInfo>,
    /// Per consumer state.
    pub consumers: Vec<ConsumerSnapshot>,
    /// Jobs started but not finished at the cursor, plus the current event's job.
    pub active_jobs: Vec<JobProgress>,
    /// Distinct blocks stored so far (by any source, any tier).
    pub blocks_seen: usize,
    /// Findings (all levels) at events before the cursor.
    pub findings_so_far: usize,
}

/// A lane whose counters an event changed.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
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

/// What one consumer did with one event.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConsumerStep {
    /// The model.
    pub consumer: ConsumerKind,
    /// Its verdict (as produced at delivery; `final_verdict` says if it changed later).
    pub verdict: EventVerdict,
    /// The final verdict when a later event changed it (a pending event replayed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub final_verdict: Option<VerdictKind>,
    /// Earlier events this one resolved (replayed orphans).
    pub resolved: Vec<Resolution>,
    /// Lanes whose counters changed.
    pub lanes: Vec<LaneChange>,
}

/// The diff between cursor `event` and `event + 1`: what applying that event changed.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Step {
    /// The event.
    pub event: EventInfo,
    /// Per consumer outcome.
    pub verdicts: Vec<ConsumerStep>,
    /// Findings at this event (all levels).
    pub findings: Vec<Finding>,
}

/// What is known about one block at the cursor.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BlockInfo {
    /// The hash.
    pub hash: u64,
    /// Parent named by its first store (if stored before the cursor).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent: Option<u64>,
    /// Event of its first store, if before the cursor.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_stored: Option<usize>,
    /// Children first stored before the cursor.
    pub children: Vec<u64>,
    /// Per consumer: the outcome for this block at the last event before the cursor that
    /// named it, with that event's index.
    pub last_outcome: Vec<(ConsumerKind, usize, VerdictKind)>,
}

/// The replay engine (see the module docs).
pub struct Replay {
    /// Shared, not copied: a caller that keeps the trace (the npm package's `Trace`) and
    /// replays it holds it once.
    trace: Arc<Trace>,
    analysis: Analysis,
    rec: Recording,
    /// Per job `j`: `job_violations[job_violation_at[j]..job_violation_at[j + 1]]` are the
    /// events of its within-job violations, sorted (one flat table: most jobs have none, and
    /// then a snapshot reads one small array).
    job_violation_at: Vec<u32>,
    job_violations: Vec<u32>,
    /// Per job: what a snapshot shows of it, compact (its source and tier interned).
    job_rows: Vec<JobRow>,
    /// Longest job span in events (bounds the active-job scan).
    max_job_span: usize,
    /// Every finding, compact: rendered one at a time when shown ([`Replay::finding`]) (the
    /// analysis' own `findings` and `violations` stay empty).
    findings: FindingStore,
    /// `(event, finding id)` of the findings a viewer lists, in event order (see
    /// [`Replay::findings_with_ids`]).
    finding_events: Vec<(usize, usize)>,
    cursor: usize,
    /// Per consumer, by lane slot: the counters at the cursor (`None`: lane not yet seen).
    lanes_now: Vec<Vec<Option<[i32; 4]>>>,
}

/// Set lane `lane` of consumer `c` in a per-consumer, per-slot lane table.
fn set_lane(lanes: &mut [Vec<Option<[i32; 4]>>], c: u8, lane: u16, counts: [i32; 4]) {
    if let Some(slot) = lanes
        .get_mut(c as usize)
        .and_then(|m| m.get_mut(lane as usize))
    {
        *slot = Some(counts);
    }
}

impl Replay {
    /// Analyse `trace` and build the replay index in one go; the cursor starts at 0. For large
    /// traces in an interactive app, use [`ReplayBuilder`] to do the same work in slices.
    pub fn new(trace: impl Into<Arc<Trace>>, config: &AnalysisConfig) -> Replay {
        ReplayBuilder::new(trace, config).finish()
    }

    /// Number of delivered events.
    pub fn len(&self) -> usize {
        self.analysis.index.events.len()
    }

    /// Whether the trace has no events.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The cursor (number of applied events).
    pub fn cursor(&self) -> usize {
        self.cursor
    }

    /// The analysis (index, verdicts, losses). Its `findings` and `violations` are empty: the
    /// replay keeps them compact ([`Replay::findings_with_ids`], [`Replay::finding`],
    /// [`Replay::rendered_findings`]).
    pub fn analysis(&self) -> &Analysis {
        &self.analysis
    }

    /// The trace.
    pub fn trace(&self) -> &Trace {
        &self.trace
    }

    fn changes_of(&self, event: usize) -> &[Change] {
        let a = self.rec.changes_begin(event) as usize;
        let b = self.rec.changes_end(event) as usize;
        self.rec.changes.get(a..b).unwrap_or(&[])
    }

    /// Counters of a lane before change `idx` (the previous change of that lane, or zero).
    fn before_change(&self, idx: u32) -> [i32; 4] {
        let prev = self.rec.changes.get(idx as usize).map_or(0, |c| c.prev);
        match prev.checked_sub(1) {
            Some(p) => self
                .rec
                .changes
                .get(p as usize)
                .map_or([0; 4], |c| c.counts),
            None => [0; 4],
        }
    }

    /// The findings (compact).
    fn lent(&self) -> &FindingStore {
        &self.findings
    }

    /// Job `j`, built from its compact row (equal to `analysis().index.jobs[j]`).
    fn job(&self, j: u32) -> Option<Job> {
        let r = self.job_rows.get(j as usize)?;
        let index = &self.analysis.index;
        Some(Job {
            id: j,
            job_id: (r.flags & JobRow::JOB_ID != 0).then_some(r.job_id),
            inferred: r.flags & JobRow::INFERRED != 0,
            source: index
                .sources
                .get(r.source as usize)
                .cloned()
                .unwrap_or_default(),
            tier: index
                .tiers
                .get(r.tier as usize)
                .map(|t| t.label())
                .unwrap_or_default(),
            kind: r.kind,
            evidence: r.evidence,
            first_event: r.first_event as usize,
            last_event: r.last_event as usize,
            events: r.events as usize,
        })
    }

    /// Within-job violations of job `j` at events before `c`.
    fn job_violations_before(&self, j: u32, c: usize) -> usize {
        let at = |j: u32| self.job_violation_at.get(j as usize).map(|a| *a as usize);
        match (at(j), at(j + 1)) {
            (Some(a), Some(b)) if a < b => self
                .job_violations
                .get(a..b)
                .map_or(0, |l| l.partition_point(|e| (*e as usize) < c)),
            _ => 0,
        }
    }
}

#[cfg(test)]
mod tests;
