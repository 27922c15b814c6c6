//! Comparing two traces (e.g. one scenario in `legacy` and in `fixed` order, or two captures):
//! which violations and which consumer losses disappear and which appear ([`compare`], from
//! the two analyses), and event by event ([`compare_traces`]): the events aligned by block
//! (`align.rs`), those whose order or verdicts differ, and a plain explanation of each count
//! that differs (`explain.rs`). Both read each trace's compact [`Side`] (`side.rs`): the
//! debugger's Compare dialog builds them from two whole analyses ([`compare_traces`]),
//! `kvscope diff` as it reads each trace ([`SideBuilder`], [`compare_sides`]).

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

use super::{Analysis, Rule};
use crate::trace::Trace;

mod align;
mod explain;
mod side;
#[cfg(test)]
mod tests;

pub use align::{Alignment, EventPair, VerdictDelta};
pub use explain::{short_hash, Explanation};
pub use side::{Side, SideBuilder};

/// A violation identified independently of event positions: rule, KV group, child's first
/// block, missing parent. The group is part of a block's name (`identity.rs`): two
/// full-attention groups store the same hashes, so an inversion in group 1 is not the one in
/// group 0.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct ViolationKey {
    /// The rule.
    pub rule: Rule,
    /// The KV cache group (0, and left out of JSON, for a single-group engine).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub group: u32,
    /// The child's first block hash (0 when the finding names none).
    pub block: u64,
    /// The parent (0 when none).
    pub parent: u64,
}

/// Per rule: finding counts in A and B.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RuleDelta {
    /// The rule.
    pub rule: Rule,
    /// Count in trace A.
    pub a: usize,
    /// Count in trace B.
    pub b: usize,
}

/// Per consumer: losses in A and B and which lost blocks differ.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LossDelta {
    /// The consumer.
    pub consumer: String,
    /// Blocks lost in A.
    pub a_blocks_lost: usize,
    /// Blocks lost in B.
    pub b_blocks_lost: usize,
    /// Events lost in A.
    pub a_events_lost: usize,
    /// Events lost in B.
    pub b_events_lost: usize,
    /// Block hashes lost in A but not in B.
    pub disappeared: Vec<u64>,
    /// Block hashes lost in B but not in A.
    pub appeared: Vec<u64>,
}

/// The comparison of two traces.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TraceDiff {
    /// Finding counts per rule (all rules, regardless of level).
    pub rules: Vec<RuleDelta>,
    /// Violations (all levels) present in A but not in B.
    pub disappeared: Vec<ViolationKey>,
    /// Violations present in B but not in A.
    pub appeared: Vec<ViolationKey>,
    /// Per consumer losses.
    pub losses: Vec<LossDelta>,
}

fn is_zero(g: &u32) -> bool {
    *g == 0
}

fn keys(a: &Side) -> BTreeSet<ViolationKey> {
    a.violations
        .iter()
        .map(|f| ViolationKey {
            rule: f.rule,
            group: f.group,
            block: f.first.unwrap_or(0),
            parent: f.parent.unwrap_or(0),
        })
        .collect()
}

/// Compare analysis `a` (e.g. legacy) with `b` (e.g. fixed).
pub fn compare(a: &Analysis, b: &Analysis) -> TraceDiff {
    diff(&Side::judged(a), &Side::judged(b))
}

/// The counts of [`compare`], from two sides.
fn diff(a: &Side, b: &Side) -> TraceDiff {
    let rules = Rule::ALL
        .into_iter()
        .map(|r| RuleDelta {
            rule: r,
            a: a.rule_count(r),
            b: b.rule_count(r),
        })
        .collect();
    let (ka, kb) = (keys(a), keys(b));
    let losses = a
        .losses
        .iter()
        .filter_map(|la| {
            let lb = b.losses.iter().find(|l| l.consumer == la.consumer)?;
            let (disappeared, appeared) = differences(&la.lost_hashes, &lb.lost_hashes);
            Some(LossDelta {
                consumer: la.consumer.clone(),
                a_blocks_lost: la.blocks_lost,
                b_blocks_lost: lb.blocks_lost,
                a_events_lost: la.events_lost,
                b_events_lost: lb.events_lost,
                disappeared,
                appeared,
            })
        })
        .collect();
    TraceDiff {
        rules,
        disappeared: ka.difference(&kb).cloned().collect(),
        appeared: kb.difference(&ka).cloned().collect(),
        losses,
    }
}

/// The values of sorted, de-duplicated `a` not in `b`, and of `b` not in `a` (a merge).
fn differences(a: &[u64], b: &[u64]) -> (Vec<u64>, Vec<u64>) {
    let (mut only_a, mut only_b) = (Vec::new(), Vec::new());
    let (mut x, mut y) = (a.iter().peekable(), b.iter().peekable());
    loop {
        match (x.peek(), y.peek()) {
            (Some(&&p), Some(&&q)) if p == q => {
                x.next();
                y.next();
            }
            (Some(&&p), Some(&&q)) if p < q => {
                only_a.push(p);
                x.next();
            }
            (_, Some(&&q)) => {
                only_b.push(q);
                y.next();
            }
            (Some(&&p), None) => {
                only_a.push(p);
                x.next();
            }
            (None, None) => break,
        }
    }
    (only_a, only_b)
}

/// Two analysed traces compared event by event (see the module docs). The differing events
/// are kept as positions and rendered when read ([`TraceComparison::events`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TraceComparison {
    /// The counts: findings per rule, violations on one side only, losses per router.
    pub diff: TraceDiff,
    /// Events in A and in B.
    pub events_a: usize,
    /// Events in B.
    pub events_b: usize,
    /// Events aligned by block (pairs).
    pub aligned: usize,
    /// Events of A without a partner in B.
    pub only_a: usize,
    /// Events of B without a partner in A.
    pub only_b: usize,
    /// Aligned events B delivers in another order.
    pub moved: usize,
    /// A plain explanation of each count that differs.
    pub explanations: Vec<Explanation>,
    /// The alignment itself (partners of every event).
    pub alignment: Alignment,
    /// The events that differ, as positions (see [`Alignment::differing`]).
    differing: Vec<(u32, u32)>,
    /// Both sides, for rendering them.
    sides: Box<(Side, Side)>,
}

impl TraceComparison {
    /// Number of events that differ.
    pub fn differing(&self) -> usize {
        self.differing.len()
    }

    /// The events that differ, side by side (see [`EventPair`]), rendered one by one.
    pub fn events(&self) -> impl ExactSizeIterator<Item = EventPair> + '_ {
        let (a, b) = &*self.sides;
        self.differing
            .iter()
            .map(move |p| self.alignment.pair(a, b, *p))
    }
}

/// The JSON form: the counts, `events` (every differing event) and `explanations`.
impl Serialize for TraceComparison {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        /// The differing events, rendered as they are written.
        struct Events<'c>(&'c TraceComparison);
        impl Serialize for Events<'_> {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.collect_seq(self.0.events())
            }
        }
        #[derive(Serialize)]
        struct View<'c> {
            #[serde(flatten)]
            diff: &'c TraceDiff,
            events_a: usize,
            events_b: usize,
            aligned: usize,
            only_a: usize,
            only_b: usize,
            moved: usize,
            events: Events<'c>,
            explanations: &'c [Explanation],
        }
        View {
            diff: &self.diff,
            events_a: self.events_a,
            events_b: self.events_b,
            aligned: self.aligned,
            only_a: self.only_a,
            only_b: self.only_b,
            moved: self.moved,
            events: Events(self),
            explanations: &self.explanations,
        }
        .serialize(s)
    }
}

/// Compare trace `ta` (analysed as `a`) with `tb` (analysed as `b`, with the same
/// configuration) event by event.
pub fn compare_traces(ta: &Trace, a: &Analysis, tb: &Trace, b: &Analysis) -> TraceComparison {
    compare_sides(Side::of(ta, a), Side::of(tb, b))
}

/// Compare side `a` with side `b` (analysed with the same configuration) event by event:
/// [`compare_traces`] for sides built as the traces were read ([`SideBuilder`]).
pub fn compare_sides(a: Side, b: Side) -> TraceComparison {
    let alignment = Alignment::new(&a, &b);
    let diff = diff(&a, &b);
    TraceComparison {
        events_a: a.len(),
        events_b: b.len(),
        aligned: alignment.aligned(),
        only_a: alignment.only_in_a(),
        only_b: alignment.only_in_b(),
        moved: alignment.moved(),
        differing: alignment.differing(&a, &b),
        explanations: explain::explain(&a, &b, &diff, &alignment),
        diff,
        alignment,
        sides: Box::new((a, b)),
    }
}
