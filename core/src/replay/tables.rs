//! [`Tables`]: the replay's tables, built in slices from the finished analysis (the last
//! phase of a [`super::ReplayBuilder`]).
//!
//! At a million events every table here is a pass over a million rows, roots or findings
//! (together ~120 ms in the page, the longest pause of its analysis), so each pass resumes
//! where the last call stopped: a call does about `budget` roots, findings, jobs or rows.

use super::record::{JobRow, Recording, Row};
use crate::analysis::{EventIndex, FindingCursor, FindingStore, Level, Rule};
use crate::trace::{Trace, TraceRecord};

/// Which table [`Tables::advance`] is building.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
enum Step {
    /// Close the recording and count the work.
    #[default]
    Start,
    /// Model `c`'s unreachable prefixes ([`FindingStore::fill_prefixes`]).
    Losses(usize),
    /// The findings a viewer lists, and the within-job violations.
    Findings,
    /// One row per job, and where jobs open and close.
    Jobs,
    /// The per-event rows' batch data, open jobs and findings so far.
    Rows,
    Done,
}

/// The replay's tables under construction. They are read from the finished analysis'
/// index and findings and written to the recording's rows, which the caller keeps; the
/// replay takes both at the end.
#[derive(Default)]
pub(super) struct Tables {
    step: Step,
    /// Position within the step (job or row).
    next: usize,
    cursor: FindingCursor,
    /// `(event, finding id)` of each finding a viewer lists, in event order.
    pub(super) finding_events: Vec<(usize, usize)>,
    /// `(job, event)` of each within-job violation (as key/index pairs, so the crate's one
    /// sort serves).
    job_pairs: Vec<(u64, u32)>,
    pub(super) job_violation_at: Vec<u32>,
    pub(super) job_violations: Vec<u32>,
    pub(super) job_rows: Vec<JobRow>,
    pub(super) max_job_span: usize,
    /// Per event: jobs opening (+1) and closing (-1) there, summed in [`Step::Rows`].
    open: Vec<i32>,
    open_now: i32,
    /// Listed findings at events before the current row.
    listed_before: usize,
    done: usize,
    total: usize,
}

/// What the tables are built from and into.
pub(super) struct Sources<'a> {
    pub(super) trace: &'a Trace,
    pub(super) index: &'a EventIndex,
    pub(super) store: &'a mut FindingStore,
    pub(super) rec: &'a mut Recording,
}

impl Tables {
    /// Work done and in all (roots, findings, jobs and rows; at least one unit, so that the
    /// work not counted yet reads as not done).
    pub(super) fn progress(&self) -> (usize, usize) {
        (self.done, self.total.max(1))
    }

    /// Whether every table is built.
    pub(super) fn is_done(&self) -> bool {
        self.step == Step::Done
    }

    /// Build about `budget` roots, findings, jobs or rows of the tables.
    pub(super) fn advance(&mut self, s: Sources<'_>, budget: usize) {
        let Sources {
            trace,
            index,
            store,
            rec,
        } = s;
        let mut left = budget.max(1);
        while left > 0 && !self.is_done() {
            let did = match self.step {
                Step::Start => {
                    rec.close(index.events.len());
                    // Each loss root is a prefix to rebuild (and a finding).
                    let roots: usize = store.losses().map(|l| l.prefix_count()).sum();
                    self.total = roots + store.id_count() + index.jobs.len() + rec.rows.len();
                    // Most findings are listed (a million on the bench trace): sized once.
                    self.finding_events.reserve_exact(store.id_count());
                    self.step = Step::Losses(0);
                    0
                }
                Step::Losses(c) => {
                    let did = store.fill_prefixes(c, left);
                    if did < left {
                        self.step = if c + 1 < store.losses().len() {
                            Step::Losses(c + 1)
                        } else {
                            Step::Findings
                        };
                    }
                    did
                }
                Step::Findings => self.findings(index, store, left),
                Step::Jobs => self.jobs(index, rec.rows.len(), left),
                Step::Rows => self.rows(trace, index, rec, left),
                Step::Done => 0,
            };
            self.done += did;
            left = left.saturating_sub(did.max(1));
        }
    }

    /// The next findings in (event, rule) order: the (event, id) of each one a viewer lists
    /// (every child-before-parent finding at any level, the other rules' at warn or deny:
    /// what `analyze` renders) and the within-job violations.
    fn findings(&mut self, index: &EventIndex, store: &FindingStore, budget: usize) -> usize {
        let mut did = 0;
        while did < budget {
            let Some(f) = store.next(&mut self.cursor) else {
                self.end_findings(index.jobs.len());
                break;
            };
            did += 1;
            if f.level == Level::Allow && !f.rule.is_reorder() {
                continue;
            }
            self.finding_events.push((f.event, f.id()));
            if f.rule != Rule::ChildBeforeParentInJob {
                continue;
            }
            if let Some(job) = index.events.get(f.event).map(|l| l.job) {
                if job != u32::MAX {
                    self.job_pairs.push((u64::from(job), f.event as u32));
                }
            }
        }
        did
    }

    /// Within-job violations by job, sorted by event: (job, event) pairs sorted, then offsets
    /// per job.
    fn end_findings(&mut self, jobs: usize) {
        let mut pairs = std::mem::take(&mut self.job_pairs);
        crate::sort::sort_keyed(&mut pairs);
        self.job_violation_at = Vec::with_capacity(jobs + 1);
        let mut k = 0usize;
        for j in 0..=jobs as u32 {
            while pairs.get(k).is_some_and(|p| p.0 < u64::from(j)) {
                k += 1;
            }
            self.job_violation_at.push(k as u32);
        }
        self.job_violations = Vec::with_capacity(pairs.len());
        for p in pairs {
            self.job_violations.push(p.1);
        }
        self.step = Step::Jobs;
    }

    /// The next jobs' rows; each job is open at cursors `first_event + 1 ..= last_event`,
    /// i.e. after events `first_event .. last_event`.
    fn jobs(&mut self, index: &EventIndex, rows: usize, budget: usize) -> usize {
        let from = self.next;
        if from == 0 {
            self.open = vec![0; rows + 1];
            self.job_rows = Vec::with_capacity(index.jobs.len());
        }
        let to = from.saturating_add(budget).min(index.jobs.len());
        for j in index.jobs.get(from..to).unwrap_or_default() {
            if let Some(a) = self.open.get_mut(j.first_event) {
                *a += 1;
                if let Some(b) = self.open.get_mut(j.last_event) {
                    *b -= 1;
                }
            }
            self.max_job_span = self.max_job_span.max(j.last_event - j.first_event + 1);
            let loc = index.events.get(j.first_event);
            self.job_rows.push(JobRow {
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
        self.next = to;
        if to == index.jobs.len() {
            self.step = Step::Rows;
            self.next = 0;
        }
        to - from
    }

    /// The next rows: their batch's origin and sequence number, whether jobs other than the
    /// event's own are open there, and the listed findings at events up to it.
    fn rows(
        &mut self,
        trace: &Trace,
        index: &EventIndex,
        rec: &mut Recording,
        budget: usize,
    ) -> usize {
        let from = self.next;
        let to = from.saturating_add(budget).min(rec.rows.len());
        let rows = rec.rows.get_mut(from..to).unwrap_or_default();
        for (e, row) in (from..).zip(rows) {
            let record = index
                .events
                .get(e)
                .map_or(usize::MAX, |l| l.record as usize);
            if let Some(TraceRecord::Batch(b)) = trace.records.get(record) {
                row.origin = b.origin;
                row.seq = b.seq;
            }
            self.open_now += self.open.get(e).copied().unwrap_or(0);
            let own = index
                .jobs
                .get(row.job as usize)
                .is_some_and(|j| j.last_event > e);
            if self.open_now - i32::from(own) > 0 {
                row.flags |= Row::OTHER_JOBS;
            }
            let listed = &self.finding_events;
            while listed.get(self.listed_before).is_some_and(|f| f.0 <= e) {
                self.listed_before += 1;
            }
            row.findings = self.listed_before as u32;
        }
        self.next = to;
        if to == rec.rows.len() {
            self.open = Vec::new();
            self.step = Step::Done;
        }
        to - from
    }
}
