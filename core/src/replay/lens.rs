//! The router lens: what one router model did with each event, its loss roots and their
//! cascades, read from an [`Analysis`] (`verdict_kinds`, `LossSummary`).
//!
//! A debugger draws [`LensMark`]s on its timeline, walks the loss roots with
//! [`RouterLens::next_root`] / [`RouterLens::prev_root`], lists them ([`RouterLens::roots`]:
//! first block, missing parent, events and blocks lost) and highlights the cascade of the root
//! it shows ([`RouterLens::cascade`]).

use super::Replay;
use crate::analysis::{Analysis, LossSummary, UnreachablePrefix};
use crate::consumers::{ConsumerKind, VerdictKind};

/// When a verdict is read: a debugger's "at cursor" / "end of trace" switch.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum VerdictTime {
    /// As known at the cursor: the verdict at delivery, changed only by resolutions (a pending
    /// event replayed) of events before the cursor; none before the event is applied.
    #[default]
    AtCursor,
    /// The final verdict, at the end of the trace.
    EndOfTrace,
}

impl Replay {
    /// What `router` made of event `i` at `when`, with cursor `cursor` (see [`VerdictTime`]);
    /// `None` when the model did not run, or at the cursor when event `i` is not applied yet.
    pub fn verdict_when(
        &self,
        router: ConsumerKind,
        i: usize,
        cursor: usize,
        when: VerdictTime,
    ) -> Option<VerdictKind> {
        let c = self
            .analysis
            .config
            .consumers
            .iter()
            .position(|k| *k == router)?;
        if when == VerdictTime::EndOfTrace {
            return self.analysis.verdict_kinds.get(c)?.get(i).copied();
        }
        if cursor <= i {
            return None;
        }
        let mut kind = self.rec.verdicts.get(c)?.get(i)?.kind;
        // Resolutions are sorted by the resolving event; those before the cursor count.
        let end = self
            .rec
            .resolutions
            .partition_point(|r| (r.0 as usize) < cursor);
        for r in self.rec.resolutions.get(..end).unwrap_or_default() {
            if r.1 as usize == c && r.2.event == i {
                kind = r.2.verdict;
            }
        }
        Some(kind)
    }
}

/// What a router did with an event, as a timeline marks it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum LensMark {
    /// Indexed (or a removal / clear that took effect): the plain mark.
    Applied,
    /// Not indexed (orphan, or truncated after a bad block).
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

/// One router's view of an analysed trace.
#[derive(Clone, Copy, Debug)]
pub struct RouterLens<'a> {
    kinds: &'a [VerdictKind],
    loss: Option<&'a LossSummary>,
}

impl<'a> RouterLens<'a> {
    /// The lens of `router`; `None` when the analysis did not run that model.
    pub fn new(a: &'a Analysis, router: ConsumerKind) -> Option<RouterLens<'a>> {
        let c = a.config.consumers.iter().position(|k| *k == router)?;
        Some(RouterLens {
            kinds: a.verdict_kinds.get(c)?,
            loss: a.loss(router),
        })
    }

    /// The router's final verdict on event `i`.
    pub fn verdict(&self, i: u32) -> Option<VerdictKind> {
        self.kinds.get(i as usize).copied()
    }

    /// The mark of event `i` (final verdict).
    pub fn mark(&self, i: u32) -> Option<LensMark> {
        self.kinds.get(i as usize).map(|v| LensMark::of(*v))
    }

    /// `f(event, mark)` for every event in `lo..=hi` whose mark is not [`LensMark::Applied`].
    pub fn marks(&self, lo: u32, hi: u32, mut f: impl FnMut(u32, LensMark)) {
        let hi = (hi as usize).min(self.kinds.len().saturating_sub(1));
        for (i, v) in self.kinds.iter().enumerate().take(hi + 1).skip(lo as usize) {
            let mark = LensMark::of(*v);
            if mark != LensMark::Applied {
                f(i as u32, mark);
            }
        }
    }

    /// How many events of the trace get each mark, in [`LensMark::ALL`] order.
    pub fn counts(&self) -> [usize; 6] {
        let mut counts = [0usize; 6];
        for v in self.kinds {
            counts[LensMark::of(*v) as usize] += 1;
        }
        counts
    }

    /// The loss roots (each lost event whose loss made later events unreachable, with its
    /// first block, missing parent and how many events and blocks were lost with it),
    /// ascending by event.
    pub fn roots(&self) -> &'a [UnreachablePrefix] {
        self.loss.map_or(&[], |l| l.unreachable_prefixes.as_slice())
    }

    /// The loss root at event `i`, if `i` is one.
    pub fn root_at(&self, i: u32) -> Option<&'a UnreachablePrefix> {
        let roots = self.roots();
        let k = roots
            .binary_search_by_key(&(i as usize), |r| r.event)
            .ok()?;
        roots.get(k)
    }

    /// The first loss root strictly after event `after` (`None`: from the start).
    pub fn next_root(&self, after: Option<u32>) -> Option<u32> {
        let roots = self.roots();
        let k = after.map_or(0, |a| roots.partition_point(|r| r.event <= a as usize));
        roots.get(k).map(|r| r.event as u32)
    }

    /// The last loss root strictly before event `before`.
    pub fn prev_root(&self, before: u32) -> Option<u32> {
        let roots = self.roots();
        let k = roots.partition_point(|r| r.event < before as usize);
        k.checked_sub(1)
            .and_then(|k| roots.get(k))
            .map(|r| r.event as u32)
    }

    /// The root event `i` was lost under (itself for a root); `None` when `i` lost nothing.
    pub fn root_of(&self, i: u32) -> Option<u32> {
        let lost = self.loss.map_or(&[][..], |l| l.lost_events.as_slice());
        let k = lost.binary_search_by_key(&i, |e| e.0).ok()?;
        lost.get(k).map(|e| e.1)
    }

    /// The cascade of root `root`: the later events lost because of it, ascending (empty when
    /// `root` is not a loss root).
    pub fn cascade(&self, root: u32) -> Vec<u32> {
        let lost = self.loss.map_or(&[][..], |l| l.lost_events.as_slice());
        let from = lost.partition_point(|e| e.0 <= root);
        let mut out = Vec::new();
        for &(e, r) in lost.get(from..).unwrap_or_default() {
            if r == root {
                out.push(e);
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::{analyze, AnalysisConfig};
    use crate::consumers::testkit::child_first_chain;

    /// Block 3 (child of 2) and 4 (child of 3) before their parent 2: llm-d drops 3 (a root
    /// whose missing parent is 2) and 4 with it (its cascade); 2 arrives last.
    fn analysis() -> Analysis {
        let t = child_first_chain();
        analyze(&t, &AnalysisConfig::default())
    }

    #[test]
    fn every_verdict_has_a_mark() {
        for v in VerdictKind::ALL {
            assert!(LensMark::ALL.contains(&LensMark::of(v)));
        }
        assert_eq!(LensMark::of(VerdictKind::Truncated), LensMark::Dropped);
        assert_eq!(LensMark::of(VerdictKind::Removed), LensMark::Applied);
    }

    #[test]
    fn llmd_drops_a_root_and_its_cascade() {
        let a = analysis();
        let l = RouterLens::new(&a, ConsumerKind::Llmd).expect("llm-d runs");
        let mut dropped = Vec::new();
        l.marks(0, 3, |i, k| dropped.push((i, k)));
        assert_eq!(
            dropped,
            vec![(1, LensMark::Dropped), (2, LensMark::Dropped)]
        );
        assert_eq!(l.counts(), [2, 2, 0, 0, 0, 0]);
        assert_eq!(l.verdict(1), Some(VerdictKind::DroppedOrphan));
        assert_eq!(l.verdict(99), None);
        let roots = l.roots();
        assert_eq!(roots.len(), 1);
        assert_eq!(roots[0].event, 1);
        assert_eq!(roots[0].events, 2);
        assert_eq!(
            roots[0].missing_parent,
            Some(crate::consumers::testkit::h(2))
        );
        assert_eq!(roots[0].first_block, Some(crate::consumers::testkit::h(3)));
        assert!(l.root_at(1).is_some() && l.root_at(2).is_none());
        assert_eq!(l.cascade(1), vec![2]);
        assert_eq!(l.cascade(2), Vec::<u32>::new());
        assert_eq!(l.root_of(2), Some(1));
        assert_eq!(l.root_of(1), Some(1));
        assert_eq!(l.root_of(3), None);
        assert_eq!(l.next_root(None), Some(1));
        assert_eq!(l.next_root(Some(1)), None);
        assert_eq!(l.prev_root(1), None);
        assert_eq!(l.prev_root(3), Some(1));
    }

    #[test]
    fn a_replayed_orphan_is_pending_at_the_cursor_until_its_parent_arrives() {
        let tr = child_first_chain();
        let r = Replay::new(tr, &AnalysisConfig::default());
        let ideal = ConsumerKind::Ideal;
        let at = |cursor| r.verdict_when(ideal, 1, cursor, VerdictTime::AtCursor);
        assert_eq!(at(1), None, "not applied yet");
        assert_eq!(at(2), Some(VerdictKind::Pending));
        assert_eq!(at(3), Some(VerdictKind::Pending));
        assert_eq!(
            at(4),
            Some(VerdictKind::Replayed),
            "its parent came at event 3"
        );
        assert_eq!(
            r.verdict_when(ideal, 1, 0, VerdictTime::EndOfTrace),
            Some(VerdictKind::Replayed)
        );
        assert_eq!(
            r.verdict_when(ConsumerKind::Llmd, 1, 4, VerdictTime::AtCursor),
            Some(VerdictKind::DroppedOrphan)
        );
    }

    #[test]
    fn the_ideal_model_loses_nothing() {
        let a = analysis();
        let l = RouterLens::new(&a, ConsumerKind::Ideal).expect("ideal runs");
        assert!(l.roots().is_empty());
        assert_eq!(l.next_root(None), None);
        assert_eq!(l.cascade(1), Vec::<u32>::new());
        let mut any = false;
        l.marks(0, 3, |_, k| any |= k != LensMark::Replayed);
        assert!(!any, "ideal replays the orphans, nothing else");
    }
}
