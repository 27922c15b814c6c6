//! [`ReplayBuilder`]: the analysis pass and the replay tables, built in slices.

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::record::{JobRow, Recording, Row};
use super::Replay;
use crate::analysis::{AnalysisConfig, FindingCursor, Level, Rule, Run, Stage};
use crate::trace::Trace;

/// Which part of the work a [`ReplayBuilder`] is doing.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BuildPhase {
    /// Indexing the trace (sources, tiers, jobs, sequence numbers).
    Index,
    /// Running the consumer models and the violation index over the events, recording what
    /// the replay needs (then freeing the models, one per call).
    Analysis,
    /// Assembling findings (levels, per-model verdicts and cascades) and loss summaries; `done`
    /// and `total` count findings-sized work units, not events.
    Finish,
    /// Everything is done: [`ReplayBuilder::finish`] only builds small tables (one pass over
    /// the events' rows).
    Done,
}

/// How far a [`ReplayBuilder`] is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BuildProgress {
    /// The current phase.
    pub phase: BuildPhase,
    /// Work done in this phase (events, except in [`BuildPhase::Finish`]).
    pub done: usize,
    /// Work in this phase (the trace's events, except in [`BuildPhase::Finish`]).
    pub total: usize,
}

impl BuildProgress {
    /// Overall completion in `0.0..=1.0` (indexing and finishing count for a tenth of the work
    /// each).
    pub fn fraction(&self) -> f64 {
        let part = if self.total == 0 {
            1.0
        } else {
            self.done.min(self.total) as f64 / self.total as f64
        };
        match self.phase {
            BuildPhase::Index => 0.1 * part,
            BuildPhase::Analysis => 0.1 + 0.8 * part,
            BuildPhase::Finish => 0.9 + 0.1 * part,
            BuildPhase::Done => 1.0,
        }
    }
}

/// Builds a [`Replay`] in slices, so that a caller (the web app) can keep its UI responsive and
/// show progress on large traces:
///
/// ```
/// use kvscope_core::analysis::AnalysisConfig;
/// use kvscope_core::consumers::testkit::{batch, stored, trace};
/// use kvscope_core::replay::{BuildPhase, ReplayBuilder};
///
/// let t = trace(vec![batch("pod-a", 0, vec![
///     stored(&[1], None, Some("GPU"), 16),
///     stored(&[2], Some(1), Some("GPU"), 16),
/// ])]);
/// let mut b = ReplayBuilder::new(t, &AnalysisConfig::default()); // cheap
/// while !b.is_done() {
///     let p = b.advance(1); // about one event (or finding) of work per call
///     assert!(p.done <= p.total);
///     if p.phase == BuildPhase::Analysis {
///         assert_eq!(p.total, 2); // events
///     }
/// }
/// assert_eq!(b.progress().phase, BuildPhase::Done);
/// let replay = b.finish();
/// assert_eq!(replay.len(), 2);
/// ```
///
/// [`Replay::new`] is `ReplayBuilder::new(..).finish()`: the result does not depend on how the
/// work was sliced. Every step of [`ReplayBuilder::advance`] is bounded by its budget (whole
/// batch records while indexing, single events, then findings) except a few whole steps that
/// each end their call: freeing one model's state, sorting the findings (by small keys), one
/// model's loss summary (sorting its lost block hashes). [`ReplayBuilder::finish`] after
/// [`ReplayBuilder::is_done`] makes one pass over the per-cursor rows and the findings.
pub struct ReplayBuilder {
    trace: Arc<Trace>,
    run: Run,
    rec: Recording,
}

impl ReplayBuilder {
    /// Start building a replay of `trace` (cheap: counts the events). Pass an `Arc<Trace>` to
    /// share a trace the caller keeps instead of copying it.
    pub fn new(trace: impl Into<Arc<Trace>>, config: &AnalysisConfig) -> ReplayBuilder {
        let trace = trace.into();
        let run = Run::new(&trace, config);
        let rec = Recording {
            consumers: config.consumers.len(),
            ..Recording::default()
        };
        ReplayBuilder { trace, run, rec }
    }

    /// Do about `budget` events of work (at least one batch record or event) and report
    /// progress.
    pub fn advance(&mut self, budget: usize) -> BuildProgress {
        if !self.is_done() {
            self.run
                .advance(&self.trace, budget, None, Some(&mut self.rec));
        }
        self.progress()
    }

    /// Where the build is.
    pub fn progress(&self) -> BuildProgress {
        let phase = match self.run.stage() {
            Stage::Index => BuildPhase::Index,
            Stage::Events | Stage::Release => BuildPhase::Analysis,
            Stage::Finish => BuildPhase::Finish,
            Stage::Done => BuildPhase::Done,
        };
        BuildProgress {
            phase,
            done: self.run.done(),
            total: self.run.stage_total(),
        }
    }

    /// Whether all the sliced work is done (then [`ReplayBuilder::finish`] is cheap).
    pub fn is_done(&self) -> bool {
        self.run.stage() == Stage::Done
    }

    /// The trace being analysed.
    pub fn trace(&self) -> &Trace {
        &self.trace
    }

    /// Complete the work (all of it when called early) and return the replay, cursor at 0.
    pub fn finish(mut self) -> Replay {
        while !self.is_done() {
            self.advance(usize::MAX);
        }
        let ReplayBuilder {
            trace,
            run,
            mut rec,
        } = self;
        let (mut analysis, interner, store) = run.finish_parts(&trace);
        let mut findings = store.unwrap_or_default();
        // The findings stay compact, rendered one at a time when shown (so the analysis'
        // `findings` and `violations` stay empty). Rendering needs the verdicts: the analysis
        // gets a copy (a byte per event and model), and the loss summaries.
        analysis.verdict_kinds = findings.kinds.clone();
        analysis.losses = findings.take_losses();
        let n = analysis.index.events.len();
        rec.close(n);
        rec.blocks_seen.interner = interner;
        // One pass over the compact findings in (event, rule) order: the (event, id) of each
        // one a viewer lists (every child-before-parent finding at any level, the other rules'
        // at warn or deny: what `analyze` renders) and the within-job violations by job.
        let lent = &findings;
        let mut finding_events: Vec<(usize, usize)> = Vec::new();
        // As `(job, event)` key/index pairs, so the crate's one sort serves (code size).
        let mut pairs: Vec<(u64, u32)> = Vec::new();
        let mut cur = FindingCursor::default();
        while let Some(f) = lent.next(&mut cur) {
            if f.level == Level::Allow && !f.rule.is_reorder() {
                continue;
            }
            finding_events.push((f.event, f.id()));
            if f.rule != Rule::ChildBeforeParentInJob {
                continue;
            }
            if let Some(job) = analysis.index.events.get(f.event).map(|l| l.job) {
                if job != u32::MAX {
                    pairs.push((u64::from(job), f.event as u32));
                }
            }
        }
        let consumers = analysis.config.consumers.len();
        // Within-job violations by job, sorted by event: (job, event) pairs sorted, then
        // offsets per job.
        crate::sort::sort_keyed(&mut pairs);
        let jobs = analysis.index.jobs.len();
        let mut job_violation_at = Vec::with_capacity(jobs + 1);
        let mut k = 0usize;
        for j in 0..=jobs as u32 {
            while pairs.get(k).is_some_and(|p| p.0 < u64::from(j)) {
                k += 1;
            }
            job_violation_at.push(k as u32);
        }
        let mut job_violations = Vec::with_capacity(pairs.len());
        for p in pairs {
            job_violations.push(p.1);
        }
        // Batch display data into the rows (batches' events are consecutive, in record order).
        let mut rows = rec.rows.iter_mut();
        for b in trace.batches() {
            for row in rows.by_ref().take(b.events.len()) {
                row.origin = b.origin;
                row.seq = b.seq;
            }
        }
        // Jobs active at each cursor other than the event's own: jobs are open at cursors
        // `first_event + 1 ..= last_event`, i.e. after events `first_event .. last_event`.
        let n_rows = rec.rows.len();
        let mut open = vec![0i32; n_rows + 1];
        for j in &analysis.index.jobs {
            if let (Some(a), Some(b)) = (open.get_mut(j.first_event), Some(j.last_event)) {
                *a += 1;
                if let Some(b) = open.get_mut(b) {
                    *b -= 1;
                }
            }
        }
        let mut now = 0i32;
        for (e, row) in rec.rows.iter_mut().enumerate() {
            now += open.get(e).copied().unwrap_or(0);
            let own = analysis
                .index
                .jobs
                .get(row.job as usize)
                .is_some_and(|j| j.last_event > e);
            if now - i32::from(own) > 0 {
                row.flags |= Row::OTHER_JOBS;
            }
        }
        drop(open);
        let mut job_rows = Vec::with_capacity(analysis.index.jobs.len());
        for j in &analysis.index.jobs {
            let loc = analysis.index.events.get(j.first_event);
            job_rows.push(JobRow {
                job_id: j.job_id.unwrap_or(0),
                first_event: j.first_event as u32,
                last_event: j.last_event as u32,
                events: j.events as u32,
                source: loc.map_or(0, |l| l.source),
                tier: loc.map_or(0, |l| l.tier),
                flags: if j.job_id.is_some() {
                    JobRow::JOB_ID
                } else {
                    0
                } | if j.inferred { JobRow::INFERRED } else { 0 },
                kind: j.kind,
                evidence: j.evidence,
            });
        }
        let max_job_span = analysis
            .index
            .jobs
            .iter()
            .map(|j| j.last_event - j.first_event + 1)
            .max()
            .unwrap_or(0);
        // Findings at events up to each event: one pass over the rows and the sorted findings.
        let mut k = 0usize;
        for (e, row) in rec.rows.iter_mut().enumerate() {
            while finding_events.get(k).is_some_and(|f| f.0 <= e) {
                k += 1;
            }
            row.findings = k as u32;
        }
        let lanes = rec.lane_keys.len();
        Replay {
            trace,
            analysis,
            rec,
            job_violation_at,
            job_violations,
            job_rows,
            max_job_span,
            findings,
            finding_events,
            cursor: 0,
            lanes_now: vec![vec![None; lanes]; consumers],
        }
    }
}
