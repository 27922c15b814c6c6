//! Moving the cursor: steps, seeks and the next / previous finding.

use super::record::Row;
use super::{set_lane, Replay, Step, ViolationFilter};
use crate::analysis::{Finding, FindingRef, Rule};
use crate::consumers::VerdictKind;

impl Replay {
    /// Apply the event at the cursor and advance. Returns what changed, `None` at the end.
    pub fn step_forward(&mut self) -> Option<Step> {
        if self.cursor >= self.len() {
            return None;
        }
        let e = self.cursor;
        let (a, b) = (self.rec.changes_begin(e), self.rec.changes_end(e));
        for idx in a..b {
            if let Some(ch) = self.rec.changes.get(idx as usize).copied() {
                set_lane(&mut self.lanes_now, ch.consumer, ch.lane, ch.counts);
            }
        }
        self.cursor += 1;
        self.step_at(e)
    }

    /// Revert the event at the cursor and move back. Returns what that event had changed.
    pub fn step_back(&mut self) -> Option<Step> {
        if self.cursor == 0 {
            return None;
        }
        let e = self.cursor - 1;
        let (a, b) = (self.rec.changes_begin(e), self.rec.changes_end(e));
        for idx in (a..b).rev() {
            let before = self.before_change(idx);
            if let Some(ch) = self.rec.changes.get(idx as usize).copied() {
                set_lane(&mut self.lanes_now, ch.consumer, ch.lane, before);
            }
        }
        self.cursor = e;
        self.step_at(e)
    }

    /// Move the cursor to `cursor` (clamped to `0..=len()`): restore the lane checkpoint at or
    /// before it, then apply the recorded changes of the events in between (one contiguous
    /// run of `changes`).
    pub fn seek(&mut self, cursor: usize) {
        let cursor = cursor.min(self.len());
        for m in &mut self.lanes_now {
            m.fill(None);
        }
        let (from, to) = self.seek_run(cursor);
        for ch in self.rec.changes.get(from..to).unwrap_or(&[]) {
            set_lane(&mut self.lanes_now, ch.consumer, ch.lane, ch.counts);
        }
        self.cursor = cursor;
    }

    /// The run of `changes` a seek to `cursor` applies: the entries of the checkpoint at or
    /// before it, then the changes of the events up to the cursor.
    fn seek_run(&self, cursor: usize) -> (usize, usize) {
        let every = self.rec.checkpoint_every.max(1);
        let Some((at, m)) = self.rec.checkpoint_header(cursor - cursor % every) else {
            return (0, 0);
        };
        let from = at + 1;
        let to = if cursor.is_multiple_of(every) {
            from + m
        } else {
            self.rec.changes_end(cursor - 1) as usize
        };
        (from, to.max(from))
    }

    /// How many recorded lane entries (checkpoint entries plus changes) a seek to `cursor`
    /// applies: at most the lanes seen plus `K - 1` events' changes, whatever the trace length
    /// (what `benches/analysis.rs` reports next to the seek time).
    pub fn seek_work(&self, cursor: usize) -> usize {
        let (from, to) = self.seek_run(cursor.min(self.len()));
        to - from
    }

    fn matches(&self, event: usize, rule: Option<Rule>, filter: &ViolationFilter) -> bool {
        if (filter.rule.is_some() || filter.ordering) && !rule.is_some_and(|r| filter.keeps(r)) {
            return false;
        }
        if let Some(kind) = filter.consumer {
            let lost = matches!(self.event_kind(event), Some("BlockStored"))
                && self
                    .analysis
                    .verdict_kind(kind, event)
                    .is_some_and(|v| !matches!(v, VerdictKind::Applied | VerdictKind::Replayed));
            if !lost {
                return false;
            }
        }
        true
    }

    fn event_kind(&self, event: usize) -> Option<&'static str> {
        (event < self.len())
            .then(|| self.rec.rows.get(event))
            .flatten()
            .map(Row::kind_name)
    }

    /// The finding with id `id` (see [`Replay::findings_with_ids`]), rendered (its message,
    /// names, every model's verdict and cascade): what a viewer calls for the findings it
    /// shows.
    pub fn finding(&self, id: usize) -> Option<Finding> {
        self.lent().get(id).map(|f| f.render())
    }

    /// The rule of finding `id`, without rendering it.
    fn finding_rule(&self, id: usize) -> Option<Rule> {
        self.lent().get(id).map(|f| f.rule)
    }

    /// The next event after the cursor's event (index ≥ cursor) that matches `filter`: a
    /// finding (violation) when `rule` is set or neither is set, an event the consumer loses
    /// when only `consumer` is set. Seek to `index + 1` to apply it.
    pub fn next_violation(&self, filter: &ViolationFilter) -> Option<usize> {
        self.next_violation_after(self.cursor.checked_sub(1), filter)
    }

    /// The previous matching event before the cursor's event (index < cursor - 1).
    pub fn prev_violation(&self, filter: &ViolationFilter) -> Option<usize> {
        self.prev_violation_before(self.cursor.checked_sub(1)?, filter)
    }

    /// The first event strictly after `event` (`None`: from the start) that matches `filter`
    /// (as [`Replay::next_violation`], without moving the cursor): what a viewer's "next
    /// violation" goes to from the event it shows.
    pub fn next_violation_after(
        &self,
        event: Option<usize>,
        filter: &ViolationFilter,
    ) -> Option<usize> {
        let from = event.map_or(0, |e| e + 1);
        if filter.rule.is_none() && !filter.ordering && filter.consumer.is_some() {
            return (from..self.len()).find(|e| self.matches(*e, None, filter));
        }
        let start = self.finding_events.partition_point(|(e, _)| *e < from);
        self.finding_events
            .get(start..)?
            .iter()
            .find(|(e, k)| self.matches(*e, self.finding_rule(*k), filter))
            .map(|(e, _)| *e)
    }

    /// The last event strictly before `event` that matches `filter` (without moving the
    /// cursor).
    pub fn prev_violation_before(&self, event: usize, filter: &ViolationFilter) -> Option<usize> {
        if filter.rule.is_none() && !filter.ordering && filter.consumer.is_some() {
            return (0..event.min(self.len()))
                .rev()
                .find(|e| self.matches(*e, None, filter));
        }
        let stop = self.finding_events.partition_point(|(e, _)| *e < event);
        self.finding_events
            .get(..stop)?
            .iter()
            .rev()
            .find(|(e, k)| self.matches(*e, self.finding_rule(*k), filter))
            .map(|(e, _)| *e)
    }

    /// Every finding (child-before-parent violations of every class and level, then the other
    /// rules' warn and deny findings), in event order, compact: the list a viewer shows and
    /// navigates. Each renders with [`FindingRef::render`] (or later by its id with
    /// [`Replay::finding`]).
    pub fn findings_by_event(&self) -> impl Iterator<Item = FindingRef<'_>> + '_ {
        self.findings_with_ids().map(|(_, f)| f)
    }

    /// [`Replay::findings_by_event`] with each finding's id ([`FindingRef::id`]), for a viewer
    /// that keeps ids and renders a finding ([`Replay::finding`]) only when it shows it.
    pub fn findings_with_ids(&self) -> impl Iterator<Item = (usize, FindingRef<'_>)> + '_ {
        self.findings_from(0)
    }

    /// The number of findings [`Replay::findings_with_ids`] lists.
    pub fn finding_count(&self) -> usize {
        self.finding_events.len()
    }

    /// [`Replay::findings_with_ids`] from the `start`-th on, for a viewer that lists a million
    /// of them a slice at a time.
    pub fn findings_from(
        &self,
        start: usize,
    ) -> impl Iterator<Item = (usize, FindingRef<'_>)> + '_ {
        let lent = self.lent();
        self.finding_events
            .get(start..)
            .unwrap_or_default()
            .iter()
            .filter_map(move |(_, k)| Some((*k, lent.get(*k)?)))
    }

    /// Every finding rendered, as [`crate::analysis::analyze`] gives them: the reported ones
    /// (warn and deny; `Analysis::findings`) and every child-before-parent one at any level
    /// (`Analysis::violations`), both in event order. Renders them all: for a whole report,
    /// not for a viewer.
    pub fn rendered_findings(&self) -> (Vec<Finding>, Vec<Finding>) {
        self.lent().rendered()
    }
}
