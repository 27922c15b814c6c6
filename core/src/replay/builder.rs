//! [`ReplayBuilder`]: the analysis pass and the replay tables, built in slices.

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::record::Recording;
use super::tables::{Sources, Tables};
use super::Replay;
use crate::analysis::{AnalysisConfig, Run, Stage};
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
    /// Building the replay's tables from the analysis: loss prefixes, the findings a viewer
    /// lists, job rows and per-event rows; `done` and `total` count those.
    Tables,
    /// Everything is done: [`ReplayBuilder::finish`] only moves the results into the
    /// [`Replay`].
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
    /// Overall completion in `0.0..=1.0` (indexing counts for a tenth of the work, finishing
    /// and the tables for a twentieth each).
    pub fn fraction(&self) -> f64 {
        let part = if self.total == 0 {
            1.0
        } else {
            self.done.min(self.total) as f64 / self.total as f64
        };
        match self.phase {
            BuildPhase::Index => 0.1 * part,
            BuildPhase::Analysis => 0.1 + 0.8 * part,
            BuildPhase::Finish => 0.9 + 0.05 * part,
            BuildPhase::Tables => 0.9 + 0.05 * (1.0 + part),
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
/// batch records while indexing, single events, findings, then the tables' roots, findings,
/// jobs and rows) except a few whole steps that each end their call: freeing one model's
/// state, sorting the findings (by small keys), one model's loss summary (sorting its lost
/// block hashes). [`ReplayBuilder::finish`] after [`ReplayBuilder::is_done`] only moves the
/// results into the [`Replay`].
pub struct ReplayBuilder {
    trace: Arc<Trace>,
    run: Run,
    rec: Recording,
    /// The replay's tables, built once the analysis is done.
    tables: Tables,
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
        ReplayBuilder {
            trace,
            run,
            rec,
            tables: Tables::default(),
        }
    }

    /// Do about `budget` events of work (at least one batch record or event) and report
    /// progress.
    pub fn advance(&mut self, budget: usize) -> BuildProgress {
        self.work(budget);
        self.progress()
    }

    /// [`ReplayBuilder::advance`] without the progress report.
    fn work(&mut self, budget: usize) {
        if self.run.stage() != Stage::Done {
            self.run
                .advance(&self.trace, budget, None, Some(&mut self.rec));
        } else if !self.tables.is_done() {
            let (index, store) = self.run.results();
            let from = Sources {
                trace: &self.trace,
                index,
                store,
                rec: &mut self.rec,
            };
            self.tables.advance(from, budget);
        }
    }

    /// Where the build is.
    pub fn progress(&self) -> BuildProgress {
        let (phase, (done, total)) = match self.run.stage() {
            Stage::Index => (BuildPhase::Index, self.run_progress()),
            Stage::Events | Stage::Release => (BuildPhase::Analysis, self.run_progress()),
            Stage::Finish => (BuildPhase::Finish, self.run_progress()),
            Stage::Done if !self.tables.is_done() => (BuildPhase::Tables, self.tables.progress()),
            Stage::Done => (BuildPhase::Done, (0, 0)),
        };
        BuildProgress { phase, done, total }
    }

    /// The run's work done and in all, in its current stage.
    fn run_progress(&self) -> (usize, usize) {
        (self.run.done(), self.run.stage_total())
    }

    /// Whether all the sliced work is done (then [`ReplayBuilder::finish`] is cheap).
    pub fn is_done(&self) -> bool {
        self.run.stage() == Stage::Done && self.tables.is_done()
    }

    /// The trace being analysed.
    pub fn trace(&self) -> &Trace {
        &self.trace
    }

    /// Complete the work (all of it when called early) and return the replay, cursor at 0.
    pub fn finish(mut self) -> Replay {
        while !self.is_done() {
            self.work(usize::MAX);
        }
        let ReplayBuilder {
            trace,
            run,
            mut rec,
            tables,
        } = self;
        let (mut analysis, interner, mut findings) = run.finish_parts(&trace);
        // The findings stay compact, rendered one at a time when shown (so the analysis'
        // `findings` and `violations` stay empty). Rendering needs the verdicts: the analysis
        // gets a copy (a byte per event and model), and the loss summaries (their prefixes
        // already rebuilt by the tables).
        analysis.verdict_kinds = findings.kinds.clone();
        analysis.losses = findings.take_losses();
        rec.blocks_seen.interner = interner;
        let consumers = analysis.config.consumers.len();
        let lanes = rec.lane_keys.len();
        Replay {
            trace,
            analysis,
            rec,
            job_violation_at: tables.job_violation_at,
            job_violations: tables.job_violations,
            job_rows: tables.job_rows,
            max_job_span: tables.max_job_span,
            findings,
            finding_events: tables.finding_events,
            cursor: 0,
            lanes_now: vec![vec![None; lanes]; consumers],
        }
    }
}
