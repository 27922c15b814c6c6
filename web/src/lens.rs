//! The router lens: what one router model did with each event, and its loss roots, read from
//! the core's analysis (`Analysis::verdict_kinds`, `LossSummary::unreachable_prefixes`).
//!
//! This is view-model logic that belongs in `kvscope-core` (next to `replay`'s violation
//! index) and lives here only until it moves there: [`LensMark`] (the verdict classes the
//! timeline draws), [`marks`], [`loss_roots`], [`next_loss_root`] / [`prev_loss_root`] and
//! [`mark_counts`].

use kvscope_core::consumers::{ConsumerKind, VerdictKind};

use crate::model::Model;

/// What a router did with an event, as the timeline marks it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum LensMark {
    /// Indexed (or a removal / clear that took effect): the plain mark.
    Applied,
    /// Not indexed (orphan, or truncated after a bad block): struck through and hatched.
    Dropped,
    /// Indexed under the wrong parent: unreachable for routing.
    Misrooted,
    /// Held until its parent arrives, and never released.
    Pending,
    /// Held, then applied once its parent arrived.
    Replayed,
    /// Skipped on purpose, or a removal of an unknown block.
    Ignored,
}

impl LensMark {
    /// Every mark, in legend order.
    pub const ALL: [LensMark; 6] = [
        LensMark::Applied,
        LensMark::Dropped,
        LensMark::Misrooted,
        LensMark::Pending,
        LensMark::Replayed,
        LensMark::Ignored,
    ];

    /// The mark of a final verdict.
    pub fn of(v: VerdictKind) -> LensMark {
        match v {
            VerdictKind::Applied | VerdictKind::Removed | VerdictKind::Cleared => LensMark::Applied,
            VerdictKind::DroppedOrphan | VerdictKind::Truncated => LensMark::Dropped,
            VerdictKind::Misrooted => LensMark::Misrooted,
            VerdictKind::Pending => LensMark::Pending,
            VerdictKind::Replayed => LensMark::Replayed,
            VerdictKind::RemoveUnknown | VerdictKind::Ignored => LensMark::Ignored,
        }
    }

    /// The legend word.
    pub fn as_str(self) -> &'static str {
        match self {
            LensMark::Applied => "applied",
            LensMark::Dropped => "dropped",
            LensMark::Misrooted => "misrooted",
            LensMark::Pending => "pending",
            LensMark::Replayed => "replayed",
            LensMark::Ignored => "ignored",
        }
    }
}

/// `f(event, mark)` for every event in `lo..=hi` whose final verdict for `router` is not
/// [`LensMark::Applied`]; nothing before the analysis has run.
pub fn marks(m: &Model, router: ConsumerKind, lo: u32, hi: u32, mut f: impl FnMut(u32, LensMark)) {
    let Some(r) = m.replay() else { return };
    let a = r.analysis();
    let Some(c) = a.config.consumers.iter().position(|k| *k == router) else {
        return;
    };
    let Some(kinds) = a.verdict_kinds.get(c) else {
        return;
    };
    let hi = hi.min(kinds.len().saturating_sub(1) as u32);
    for i in lo..=hi {
        if let Some(&v) = kinds.get(i as usize) {
            let mark = LensMark::of(v);
            if mark != LensMark::Applied {
                f(i, mark);
            }
        }
    }
}

/// How many events of the whole trace get each mark from `router`, in [`LensMark::ALL`]
/// order; `None` before the analysis has run.
pub fn mark_counts(m: &Model, router: ConsumerKind) -> Option<[usize; 6]> {
    let r = m.replay()?;
    let a = r.analysis();
    let c = a.config.consumers.iter().position(|k| *k == router)?;
    let mut counts = [0usize; 6];
    for &v in a.verdict_kinds.get(c)? {
        let k = LensMark::ALL
            .iter()
            .position(|x| *x == LensMark::of(v))
            .unwrap_or(0);
        counts[k] += 1;
    }
    Some(counts)
}

/// The loss roots of `router`: the events whose loss made later events unreachable, with
/// their cascade (`UnreachablePrefix`), ascending by event. Empty before the analysis.
pub fn loss_roots(m: &Model, router: ConsumerKind) -> Vec<u32> {
    let Some(r) = m.replay() else {
        return Vec::new();
    };
    let mut roots: Vec<u32> = r
        .analysis()
        .loss(router)
        .map(|l| {
            l.unreachable_prefixes
                .iter()
                .map(|p| p.event as u32)
                .collect()
        })
        .unwrap_or_default();
    crate::model::sort_by_u64(&mut roots, |e| u64::from(*e));
    roots.dedup();
    roots
}

/// The first loss root of `router` strictly after event `after` (`None`: from the start).
pub fn next_loss_root(m: &Model, router: ConsumerKind, after: Option<u32>) -> Option<u32> {
    let roots = loss_roots(m, router);
    let k = match after {
        Some(a) => roots.partition_point(|e| *e <= a),
        None => 0,
    };
    roots.get(k).copied()
}

/// The last loss root of `router` strictly before event `before`.
pub fn prev_loss_root(m: &Model, router: ConsumerKind, before: u32) -> Option<u32> {
    let roots = loss_roots(m, router);
    let k = roots.partition_point(|e| *e < before);
    k.checked_sub(1).and_then(|k| roots.get(k)).copied()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::LaneMode;

    fn demo() -> Model {
        let t = kvscope_core::wire::read_trace(crate::DEMO_TRACE.as_bytes(), "demo")
            .expect("demo parses");
        let m = Model::from_trace("demo", t, LaneMode::Tier).expect("model");
        m.analyse();
        m
    }

    #[test]
    fn every_verdict_has_a_mark() {
        for v in VerdictKind::ALL {
            let _ = LensMark::of(v);
        }
        assert_eq!(LensMark::of(VerdictKind::DroppedOrphan), LensMark::Dropped);
        assert_eq!(LensMark::of(VerdictKind::Truncated), LensMark::Dropped);
        assert_eq!(LensMark::of(VerdictKind::Removed), LensMark::Applied);
    }

    #[test]
    fn llmd_on_the_demo_drops_and_navigates_its_loss_roots() {
        let m = demo();
        let counts = mark_counts(&m, ConsumerKind::Llmd).expect("analysed");
        assert_eq!(counts.iter().sum::<usize>(), m.len());
        assert!(counts[1] > 0, "llm-d drops events of the demo: {counts:?}");
        let mut dropped = Vec::new();
        marks(&m, ConsumerKind::Llmd, 0, m.len() as u32 - 1, |i, k| {
            if k == LensMark::Dropped {
                dropped.push(i)
            }
        });
        assert_eq!(dropped.len(), counts[1]);
        let roots = loss_roots(&m, ConsumerKind::Llmd);
        assert!(!roots.is_empty());
        assert!(
            roots.iter().all(|r| dropped.contains(r)),
            "{roots:?} ⊆ {dropped:?}"
        );
        // Navigation walks the roots both ways and stops at the ends.
        assert_eq!(next_loss_root(&m, ConsumerKind::Llmd, None), Some(roots[0]));
        let last = *roots.last().unwrap();
        assert_eq!(next_loss_root(&m, ConsumerKind::Llmd, Some(last)), None);
        assert_eq!(prev_loss_root(&m, ConsumerKind::Llmd, roots[0]), None);
        if roots.len() > 1 {
            assert_eq!(
                next_loss_root(&m, ConsumerKind::Llmd, Some(roots[0])),
                Some(roots[1])
            );
            assert_eq!(
                prev_loss_root(&m, ConsumerKind::Llmd, roots[1]),
                Some(roots[0])
            );
        }
    }

    #[test]
    fn the_ideal_model_loses_nothing_on_the_demo() {
        let m = demo();
        assert_eq!(loss_roots(&m, ConsumerKind::Ideal), Vec::<u32>::new());
        assert_eq!(next_loss_root(&m, ConsumerKind::Ideal, None), None);
    }
}
