//! Comparing two traces (e.g. one scenario in `legacy` and in `fixed` order, or two captures):
//! which violations and which consumer losses disappear and which appear ([`compare`], from
//! the two analyses), and event by event ([`compare_traces`]): the events aligned by block
//! (`align.rs`), those whose order or verdicts differ, and a plain explanation of each count
//! that differs (`explain.rs`). `kvscope diff` and the debugger's Compare dialog both show
//! [`compare_traces`].

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use super::{Analysis, Rule};
use crate::trace::Trace;

mod align;
mod explain;
#[cfg(test)]
mod tests;

pub use align::{Alignment, EventPair, VerdictDelta};
pub use explain::{short_hash, Explanation};

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

fn keys(a: &Analysis) -> BTreeSet<ViolationKey> {
    a.violations
        .iter()
        .map(|f| ViolationKey {
            rule: f.rule,
            group: f.group,
            block: f.hashes.first().copied().unwrap_or(0),
            parent: f.parent.unwrap_or(0),
        })
        .collect()
}

/// Compare analysis `a` (e.g. legacy) with `b` (e.g. fixed).
pub fn compare(a: &Analysis, b: &Analysis) -> TraceDiff {
    let count = |x: &Analysis| {
        let mut m: BTreeMap<Rule, usize> = BTreeMap::new();
        for f in x
            .violations
            .iter()
            .chain(x.findings.iter().filter(|f| !f.rule.is_reorder()))
        {
            *m.entry(f.rule).or_default() += 1;
        }
        m
    };
    let (ca, cb) = (count(a), count(b));
    let rules = Rule::ALL
        .into_iter()
        .map(|r| RuleDelta {
            rule: r,
            a: ca.get(&r).copied().unwrap_or(0),
            b: cb.get(&r).copied().unwrap_or(0),
        })
        .collect();
    let (ka, kb) = (keys(a), keys(b));
    let losses = a
        .losses
        .iter()
        .filter_map(|la| {
            let lb = b.losses.iter().find(|l| l.consumer == la.consumer)?;
            let sa: BTreeSet<u64> = la.lost_hashes.iter().copied().collect();
            let sb: BTreeSet<u64> = lb.lost_hashes.iter().copied().collect();
            Some(LossDelta {
                consumer: la.consumer.clone(),
                a_blocks_lost: la.blocks_lost,
                b_blocks_lost: lb.blocks_lost,
                a_events_lost: la.events_lost,
                b_events_lost: lb.events_lost,
                disappeared: sa.difference(&sb).copied().collect(),
                appeared: sb.difference(&sa).copied().collect(),
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

/// Two analysed traces compared event by event (see the module docs).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct TraceComparison {
    /// The counts: findings per rule, violations on one side only, losses per router.
    #[serde(flatten)]
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
    /// The events that differ, side by side (see [`EventPair`]).
    pub events: Vec<EventPair>,
    /// A plain explanation of each count that differs.
    pub explanations: Vec<Explanation>,
    /// The alignment itself (partners of every event).
    #[serde(skip)]
    pub alignment: Alignment,
}

/// Compare trace `ta` (analysed as `a`) with `tb` (analysed as `b`, with the same
/// configuration) event by event.
pub fn compare_traces(ta: &Trace, a: &Analysis, tb: &Trace, b: &Analysis) -> TraceComparison {
    let (sa, sb) = (align::Side::new(ta, a), align::Side::new(tb, b));
    let alignment = Alignment::new(&sa, &sb);
    let diff = compare(a, b);
    TraceComparison {
        events_a: sa.len(),
        events_b: sb.len(),
        aligned: alignment.aligned(),
        only_a: alignment.only_in_a(),
        only_b: alignment.only_in_b(),
        moved: alignment.moved(),
        events: alignment.differing(&sa, &sb),
        explanations: explain::explain(&sa, &sb, &diff, &alignment),
        diff,
        alignment,
    }
}
