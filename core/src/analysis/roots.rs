//! Loss roots, compact: a model's [`UnreachablePrefix`]es as 16-byte [`Root`]s, with where
//! each root event is and the hashes it names kept once per event in [`Places`], shared by the
//! models (a trace can lose every event for every strict model: one-event batches whose parents
//! are never stored, `scripts/bench-memory.sh`'s orphans trace, where the prefixes cost five
//! times 56 bytes an event). A prefix is rebuilt when shown ([`Places::prefix`]).

use super::{LossSummary, SortedPairs, UnreachablePrefix};
use crate::consumers::VerdictKind;

/// One loss root of one model: its event and what it took down (its cascade is `events - 1`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Root {
    pub(crate) event: u32,
    pub(crate) events: u32,
    pub(crate) blocks: u32,
    /// [`HAS_PARENT`], [`HAS_FIRST`], [`OWN`].
    flags: u32,
}

/// The root names a missing parent / a first block.
const HAS_PARENT: u32 = 1;
const HAS_FIRST: u32 = 2;
/// Its hashes differ from its place's (the first model's at that event): they are in
/// [`Places::odd`].
const OWN: u32 = 4;

impl Root {
    /// The event as an index.
    pub(crate) fn at(&self) -> usize {
        self.event as usize
    }
}

/// Where a loss root is (its batch's line, its position, its source id) and the hashes of the
/// first model's root there (missing parent, first lost block; 0 when none).
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct RootAt {
    pub(crate) line: u64,
    pub(crate) pos: u32,
    pub(crate) source: u32,
    parent: u64,
    first: u64,
}

impl RootAt {
    /// At `line`, position `pos`, source `source`.
    pub(crate) fn new(line: u64, pos: u32, source: u32) -> RootAt {
        RootAt {
            line,
            pos,
            source,
            parent: 0,
            first: 0,
        }
    }
}

/// Every root event's [`RootAt`] (ascending by event: a root is always the event being
/// delivered), and the few roots whose hashes differ from their place's.
#[derive(Clone, Debug, Default)]
pub(crate) struct Places {
    at: Vec<(u32, RootAt)>,
    /// (event, model, missing parent, first block), ascending by event then model.
    odd: Vec<(u32, u32, Option<u64>, Option<u64>)>,
}

impl Places {
    /// A new root of model `c` at event `event` (the event being delivered, at `at`), missing
    /// `parent`, its first lost block `first`.
    pub(crate) fn root(
        &mut self,
        c: usize,
        event: u32,
        at: RootAt,
        parent: Option<u64>,
        first: Option<u64>,
    ) -> Root {
        let mut flags = 0;
        if parent.is_some() {
            flags |= HAS_PARENT;
        }
        if first.is_some() {
            flags |= HAS_FIRST;
        }
        match self.at.last_mut() {
            Some((e, p)) if *e == event => {
                let same = |v: Option<u64>, kept: u64| v.is_none_or(|v| v == kept);
                if !(same(parent, p.parent) && same(first, p.first)) {
                    flags |= OWN;
                    self.odd.push((event, c as u32, parent, first));
                }
            }
            _ => {
                let mut at = at;
                at.parent = parent.unwrap_or(0);
                at.first = first.unwrap_or(0);
                self.at.push((event, at));
            }
        }
        Root {
            event,
            events: 0,
            blocks: 0,
            flags,
        }
    }

    /// Room for one more root event's place, `done` of the run's `total` events delivered
    /// (sized from the rate so far: [`crate::room`]).
    pub(crate) fn make_room(&mut self, done: usize, total: usize) {
        crate::room::make_room(&mut self.at, 1, done, total);
    }

    /// Where root event `event` is.
    pub(crate) fn at(&self, event: u32) -> RootAt {
        self.at
            .binary_search_by_key(&event, |p| p.0)
            .ok()
            .and_then(|k| self.at.get(k))
            .map_or_else(RootAt::default, |p| p.1)
    }

    /// Model `c`'s root `r` as an [`UnreachablePrefix`].
    pub(crate) fn prefix(&self, c: usize, r: &Root) -> UnreachablePrefix {
        let (parent, first) = if r.flags & OWN != 0 {
            let key = (r.event, c as u32);
            self.odd
                .binary_search_by_key(&key, |o| (o.0, o.1))
                .ok()
                .and_then(|k| self.odd.get(k))
                .map_or((None, None), |o| (o.2, o.3))
        } else {
            let at = self.at(r.event);
            (
                (r.flags & HAS_PARENT != 0).then_some(at.parent),
                (r.flags & HAS_FIRST != 0).then_some(at.first),
            )
        };
        UnreachablePrefix {
            event: r.at(),
            missing_parent: parent,
            first_block: first,
            events: r.events as usize,
            blocks: r.blocks as usize,
        }
    }
}

/// One model's losses in a [`super::FindingStore`]: its [`LossSummary`]'s figures, with its
/// unreachable prefixes rebuilt one at a time from the compact roots. Serialises as the
/// [`LossSummary`] it stands for.
#[derive(Clone, Copy)]
pub struct Losses<'a> {
    summary: &'a LossSummary,
    roots: &'a [Root],
    places: &'a Places,
    c: usize,
}

impl<'a> Losses<'a> {
    pub(crate) fn new(
        summary: &'a LossSummary,
        roots: &'a [Root],
        places: &'a Places,
        c: usize,
    ) -> Losses<'a> {
        Losses {
            summary,
            roots,
            places,
            c,
        }
    }

    /// The model's name.
    pub fn consumer(&self) -> &'a str {
        &self.summary.consumer
    }

    /// Stored blocks not indexed or not reachable at the end.
    pub fn blocks_lost(&self) -> usize {
        self.summary.blocks_lost
    }

    /// `BlockStored` events with at least one lost block.
    pub fn events_lost(&self) -> usize {
        self.summary.events_lost
    }

    /// Final verdict counts over all events.
    pub fn verdicts(&self) -> &'a SortedPairs<VerdictKind, usize> {
        &self.summary.verdicts
    }

    /// Events still pending at the end (ideal).
    pub fn pending_at_end(&self) -> usize {
        self.summary.pending_at_end
    }

    /// How many unreachable prefixes.
    pub fn prefix_count(&self) -> usize {
        self.roots.len()
    }

    /// The unreachable prefixes, in delivery order.
    pub fn prefixes(&self) -> impl ExactSizeIterator<Item = UnreachablePrefix> + 'a {
        let (places, c) = (self.places, self.c);
        self.roots.iter().map(move |r| places.prefix(c, r))
    }

    /// The whole [`LossSummary`] (every prefix in memory at once).
    pub fn to_summary(&self) -> LossSummary {
        let mut l = self.summary.clone();
        l.unreachable_prefixes = self.prefixes().collect();
        l
    }
}

impl serde::Serialize for Losses<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        /// The prefixes as a sequence, each rebuilt as it is written.
        struct Prefixes<'a>(Losses<'a>);
        impl serde::Serialize for Prefixes<'_> {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.collect_seq(self.0.prefixes())
            }
        }
        // The fields of `LossSummary`'s derived form, in its order.
        let l = self.summary;
        let mut st = s.serialize_struct("LossSummary", 6)?;
        st.serialize_field("consumer", &l.consumer)?;
        st.serialize_field("blocks_lost", &l.blocks_lost)?;
        st.serialize_field("events_lost", &l.events_lost)?;
        st.serialize_field("verdicts", &l.verdicts)?;
        st.serialize_field("pending_at_end", &l.pending_at_end)?;
        st.serialize_field("unreachable_prefixes", &Prefixes(*self))?;
        st.end()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roots_keep_their_own_hashes_when_the_models_differ() {
        let mut p = Places::default();
        let at = RootAt::new(3, 1, 0);
        // Three models at event 7: the first's hashes, a subset of them, others.
        let a = p.root(0, 7, at, Some(10), Some(20));
        let b = p.root(1, 7, at, None, Some(20));
        let c = p.root(2, 7, at, Some(11), Some(20));
        // Event 9: no parent.
        let d = p.root(0, 9, RootAt::new(4, 0, 0), None, Some(30));
        let e = p.root(1, 9, RootAt::new(4, 0, 0), Some(12), None);
        let got = |c: usize, r: &Root| {
            let u = p.prefix(c, r);
            (u.event, u.missing_parent, u.first_block)
        };
        assert_eq!(got(0, &a), (7, Some(10), Some(20)));
        assert_eq!(got(1, &b), (7, None, Some(20)));
        assert_eq!(got(2, &c), (7, Some(11), Some(20)));
        assert_eq!(got(0, &d), (9, None, Some(30)));
        assert_eq!(got(1, &e), (9, Some(12), None));
        assert_eq!(p.odd.len(), 2);
        assert_eq!(p.at(9).line, 4);
        assert_eq!(p.at(8).line, 0);
    }
}
