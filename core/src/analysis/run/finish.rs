//! The finishing stage: unknown parents, loss summaries and the compact finding store (levels,
//! order, consumer-loss findings from the loss roots), from which an
//! [`crate::analysis::Analysis`] renders its findings ([`Run::finish_parts`]).

use super::violations::Leftovers;
use super::Run;
use crate::analysis::findings::{FindingStore, Msg, Rec, StoreParts};
use crate::analysis::roots::Root;
use crate::analysis::Rule;
use crate::analysis::{LossSummary, SortedPairs};
use crate::consumers::VerdictKind;

impl Run {
    /// Enter the finishing stage: list the children whose parent never arrived.
    pub(super) fn start_finish(&mut self) {
        // Plain loops (no iterator-adapter `collect` instances).
        let leftovers = self.waiting.take_all();
        // In no particular order: a child waits for one parent, so each gives the only
        // `unknown-parent` finding of its event, and the store sorts the findings by event.
        // The work: each leftover, each model's loss summary, the store.
        self.fin = Finishing {
            total: leftovers.len() + self.tracks.len() + 1,
            leftovers,
            ..Finishing::default()
        };
    }

    /// One slice of the finishing work (about `budget` findings). Returns the work done and
    /// whether the step was a heavy one (a sort, a model's loss summary) after which the
    /// current [`Run::advance`] call should return.
    pub(super) fn finish_step(&mut self, budget: usize) -> (usize, bool) {
        let mut work = 0usize;
        let mut heavy = false;
        match self.fin.step {
            FinishStep::Leftovers => {
                let fin = &mut self.fin;
                // Children whose parent never arrived anywhere, from the end, giving the
                // memory back as the findings take it (an orphan-heavy trace has a waiter per
                // event).
                while let Some((p, w, hashes)) = fin.leftovers.pop() {
                    work += 1;
                    if !self.presence.ever(Some(p)) {
                        let mut r = Rec::new(
                            Rule::UnknownParent,
                            w.child as usize,
                            w.line,
                            w.loc.pos,
                            w.loc.source,
                            Msg::Unknown { group: w.group },
                        );
                        r.hashes = hashes;
                        r.parent = Some(w.parent);
                        self.raw.push(r);
                    }
                    if work >= budget {
                        break;
                    }
                }
                if fin.leftovers.is_empty() {
                    fin.step = FinishStep::Losses;
                    // The lanes and waiters are done with.
                    self.presence = Default::default();
                    self.waiting = Default::default();
                }
            }
            FinishStep::Losses => {
                // One model's loss summary per step (sorts its lost hashes).
                let fin = &mut self.fin;
                let c = fin.losses.len();
                let (Some(kind), Some(track), Some(kinds)) = (
                    self.config.consumers.get(c),
                    self.tracks.get_mut(c),
                    self.kinds.get(c),
                ) else {
                    fin.step = FinishStep::Store;
                    return (1, false);
                };
                // Only the roots are needed from here on.
                track.clear_root_of();
                let lost = self
                    .lost_blocks
                    .get_mut(c)
                    .map(std::mem::take)
                    .unwrap_or_default();
                let replayed = |x: usize| kinds.get(x) == Some(&VerdictKind::Replayed);
                // Plain loops (no iterator-adapter `collect` instances). `ALL` is in key order.
                let mut counts = Vec::new();
                for k in VerdictKind::ALL {
                    let n = track.counts[k as usize];
                    if n > 0 {
                        counts.push((k, n));
                    }
                }
                let verdicts = SortedPairs::from_sorted(counts);
                // Events still lost (not replayed later) and their blocks.
                let (mut events_lost, mut blocks_lost) = track.lost_total;
                for &(e, n) in &track.lost_pending {
                    if replayed(e as usize) {
                        events_lost -= 1;
                        blocks_lost -= n as usize;
                    }
                }
                track.lost_pending = Vec::new();
                for (&(e, _), &n) in track.lost_events.iter().zip(&track.lost_counts) {
                    if !replayed(e as usize) {
                        events_lost += 1;
                        blocks_lost += n as usize;
                    }
                }
                track.lost_counts = Vec::new();
                let mut hashes: Vec<u64> = Vec::new();
                for &(e, h) in &lost {
                    if !replayed(e) {
                        hashes.push(h);
                    }
                }
                drop(lost);
                crate::sort::sort_u64(&mut hashes);
                hashes.dedup();
                // The roots move to the store (the summary's prefixes are rebuilt from them
                // when read); the few replayed later stay aside for their cascades.
                let mut roots = std::mem::take(&mut track.roots);
                let mut aside = Vec::new();
                if roots.iter().any(|r| replayed(r.at())) {
                    for r in &roots {
                        if replayed(r.at()) {
                            aside.push(*r);
                        }
                    }
                    roots.retain(|r| !replayed(r.at()));
                }
                fin.replayed.push(aside);
                fin.roots.push(roots);
                // Moved, not copied (the store reads only the roots).
                let mut lost_events = std::mem::take(&mut track.lost_events);
                lost_events.retain(|&(e, r)| !replayed(e as usize) && !replayed(r as usize));
                fin.losses.push(LossSummary {
                    consumer: kind.as_str().into(),
                    blocks_lost,
                    events_lost,
                    pending_at_end: verdicts.get(&VerdictKind::Pending).copied().unwrap_or(0),
                    verdicts,
                    unreachable_prefixes: Vec::new(),
                    lost_hashes: hashes,
                    lost_events,
                });
                work = 1;
                heavy = true;
            }
            FinishStep::Store => {
                // Sort the compact findings; the consumer-loss ones come from the roots.
                let store = FindingStore::new(StoreParts {
                    recs: std::mem::take(&mut self.raw),
                    losses: std::mem::take(&mut self.fin.losses),
                    roots: std::mem::take(&mut self.fin.roots),
                    replayed: std::mem::take(&mut self.fin.replayed),
                    places: std::mem::take(&mut self.places),
                    consumers: self.config.consumers.clone(),
                    kinds: std::mem::take(&mut self.kinds),
                    levels: self.config.rules.clone(),
                    sources: self.index.idx.sources.clone(),
                    tiers: self.index.idx.tiers.clone(),
                    workers: self.workers,
                });
                let fin = &mut self.fin;
                fin.step = FinishStep::Done;
                fin.store = store;
                work = 1;
                heavy = true;
            }
            FinishStep::Done => {}
        }
        let fin = &mut self.fin;
        if fin.step == FinishStep::Done {
            fin.done = fin.total;
        }
        fin.done = fin.done.saturating_add(work);
        (work, heavy)
    }
}

/// Which part of the finishing work a [`Run`] is doing.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) enum FinishStep {
    #[default]
    Leftovers,
    Losses,
    Store,
    Done,
}

/// State of the finishing stage.
#[derive(Default)]
pub(super) struct Finishing {
    pub(super) step: FinishStep,
    pub(super) leftovers: Leftovers,
    /// The compact findings, once [`FinishStep::Store`] has run (empty before).
    pub(super) store: FindingStore,
    pub(super) losses: Vec<LossSummary>,
    /// Per model: its loss roots, and those replayed later (see [`FindingStore`]).
    pub(super) roots: Vec<Vec<Root>>,
    pub(super) replayed: Vec<Vec<Root>>,
    pub(super) done: usize,
    pub(super) total: usize,
}
