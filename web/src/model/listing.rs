//! The analysis' findings in the page's form ([`Violation`]), listed a slice at a time once the
//! replay engine is built, with what the page reads of all of them kept up to date as each is
//! listed: the rows of the default filter, the events they mark and the count per rule.
//!
//! At a million findings, going over the whole list once more when the analysis lands (to
//! filter it, count it, name its rules) took about 50 ms in one task, the page's longest pause
//! of a load (`docs/performance.md`); counted one finding at a time, in the listing's slices,
//! it costs nothing noticeable.

use kvscope_core::analysis::FindingRef;
use kvscope_core::replay::ViolationFilter;

use super::insertion_sort;

/// A finding of the core's analysis (child-before-parent violations of every class, at every
/// level, plus the other rules' warn/deny findings), as the violation list shows it: the
/// core's compact finding ([`FindingRef`]) in the page's compact indices, nothing decided here.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Violation {
    /// The offending event (the child delivered first, the removal, ...).
    pub event: u32,
    /// Rule name (`child-before-parent-in-job`, ...).
    pub rule: &'static str,
    /// Level in this run (`allow`, `warn`, `deny`).
    pub level: &'static str,
    /// Child-before-parent findings: the class (`in-job`, `across-jobs`, `ambiguous`, ...).
    pub class: Option<&'static str>,
    /// Child-before-parent findings: what the class rests on (`provenance`, `gpu-events`, ...).
    pub evidence: Option<&'static str>,
    /// The finding's id in the replay engine ([`super::Model::message`] reads its sentence):
    /// a million findings keep no message each.
    pub id: u32,
    /// The related event (the late parent), when there is one.
    pub related: Option<u32>,
    /// Whether the rule marks an event's order (the default filter, `Rule::marks_order`),
    /// decided once here so a redraw parses no rule names.
    pub marks_order: bool,
}

impl Violation {
    /// The page's row of finding `f` (compact, not rendered), whose id in the replay engine
    /// is `id`.
    pub(super) fn new(id: usize, f: &FindingRef<'_>) -> Violation {
        Violation {
            event: f.event.min(u32::MAX as usize) as u32,
            id: id.min(u32::MAX as usize) as u32,
            rule: f.rule.name(),
            level: f.level.name(),
            class: f.class().map(|c| c.name()),
            evidence: f.evidence().map(|e| e.name()),
            related: f.related_event().map(|e| e.min(u32::MAX as usize) as u32),
            marks_order: ViolationFilter::for_rule(None).keeps(f.rule),
        }
    }
}

/// The violations listed so far (sorted by event, as the core gives them) and their summaries.
#[derive(Debug, Default)]
pub(super) struct Listing {
    pub(super) violations: Vec<Violation>,
    /// Positions in `violations` of those the default filter keeps (`marks_order`).
    pub(super) marked: Vec<u32>,
    /// The events of `marked`, ascending and distinct: what the timeline paints red.
    pub(super) order_events: Vec<u32>,
    /// Per rule name, how many violations have it (in order of first appearance: a handful).
    pub(super) per_rule: Vec<(&'static str, usize)>,
}

impl Listing {
    /// Add the next violation (violations come sorted by event).
    pub(super) fn push(&mut self, v: Violation) {
        if v.marks_order {
            self.marked.push(self.violations.len() as u32);
            if self.order_events.last() != Some(&v.event) {
                self.order_events.push(v.event);
            }
        }
        // Rule names are the core's static names: comparing the pointers first skips the
        // string comparison for every finding but a rule's first.
        match self
            .per_rule
            .iter_mut()
            .find(|r| std::ptr::eq(r.0, v.rule) || r.0 == v.rule)
        {
            Some(r) => r.1 += 1,
            None => self.per_rule.push((v.rule, 1)),
        }
        self.violations.push(v);
    }

    /// How many violations a rule filter keeps (`None`: the default filter).
    pub(super) fn count(&self, rule: Option<&str>) -> usize {
        match rule {
            None => self.marked.len(),
            Some(r) => self.per_rule.iter().find(|p| p.0 == r).map_or(0, |p| p.1),
        }
    }

    /// The rule names present, sorted.
    pub(super) fn rules(&self) -> Vec<String> {
        let mut r: Vec<&str> = self.per_rule.iter().map(|p| p.0).collect();
        insertion_sort(&mut r);
        r.into_iter().map(str::to_owned).collect()
    }
}
