//! The finishing stage: unknown parents, consumer-loss findings, levels, verdicts and
//! cascades attached, loss summaries.

use super::violations::Waiter;
use super::{source_name_of, Run};
use crate::analysis::{Finding, Level, LossSummary, Rule, SortedPairs};
use crate::consumers::VerdictKind;
use crate::trace::{Trace, TraceRecord};

impl Run {
    /// Enter the finishing stage: list the children whose parent never arrived.
    pub(super) fn start_finish(&mut self) {
        // Plain loops (no iterator-adapter `collect` instances).
        let mut leftovers: Vec<(u64, Waiter)> = Vec::new();
        for (p, ws) in self.waiting.take_all() {
            for w in ws {
                leftovers.push((p, w));
            }
        }
        // Stable by child.
        let mut keyed: Vec<(u64, u32)> = Vec::with_capacity(leftovers.len());
        for (i, (_, w)) in leftovers.iter().enumerate() {
            keyed.push((w.child as u64, i as u32));
        }
        crate::sort::sort_keyed(&mut keyed);
        let leftovers = crate::sort::permute(leftovers, keyed.into_iter().map(|(_, i)| i));
        let roots: usize = self.tracks.iter().map(|t| t.roots.len()).sum();
        let most = self.raw.len() + leftovers.len() + roots;
        self.fin = Finishing {
            total: leftovers.len() + roots + 2 * most + self.tracks.len(),
            leftovers: leftovers.into_iter(),
            ..Finishing::default()
        };
    }

    /// One slice of the finishing work (about `budget` findings). Returns the work done and
    /// whether the step was a heavy one (a sort, a model's loss summary) after which the
    /// current [`Run::advance`] call should return.
    pub(super) fn finish_step(&mut self, trace: &Trace, budget: usize) -> (usize, bool) {
        let index = &self.index.idx;
        let fin = &mut self.fin;
        let mut work = 0usize;
        let mut heavy = false;
        match fin.step {
            FinishStep::Leftovers => {
                // Children whose parent never arrived anywhere.
                for (p, w) in fin.leftovers.by_ref() {
                    work += 1;
                    if !self.presence.ever(Some(p as u32)) {
                        let (group, p) = (w.group, w.parent);
                        if let Some(wloc) = index.events.get(w.child).copied() {
                            let worigin = match trace.records.get(wloc.record as usize) {
                                Some(TraceRecord::Batch(b)) => b.origin,
                                _ => 0,
                            };
                            let wsource = source_name_of(index, w.source);
                            self.raw.push(
                                Finding::new(
                                    Rule::UnknownParent,
                                    w.child,
                                    if group == 0 {
                                        format!("parent {p} is never stored in this trace")
                                    } else {
                                        format!(
                                            "parent {p} is never stored in KV group {group} in this trace"
                                        )
                                    },
                                )
                                .at(worigin, wloc.pos as usize)
                                .source(wsource)
                                .hashes(w.hashes.to_vec())
                                .parent(p),
                            );
                        }
                    }
                    if work >= budget {
                        break;
                    }
                }
                if fin.leftovers.len() == 0 {
                    fin.step = FinishStep::LossFindings;
                    // Only `ever` is needed from here on (free the rest early).
                    self.presence.by_source = Vec::new();
                }
            }
            FinishStep::LossFindings => {
                // Consumer-loss findings: one per unreachable prefix root.
                while work < budget {
                    let (Some(kind), Some(track), Some(kinds)) = (
                        self.config.consumers.get(fin.model),
                        self.tracks.get(fin.model),
                        self.kinds.get(fin.model),
                    ) else {
                        fin.step = FinishStep::Sort;
                        break;
                    };
                    let Some(root) = track.roots.get(fin.pos) else {
                        fin.model += 1;
                        fin.pos = 0;
                        continue;
                    };
                    fin.pos += 1;
                    work += 1;
                    let Some(loc) = index.events.get(root.event).copied() else {
                        continue;
                    };
                    let origin = match trace.records.get(loc.record as usize) {
                        Some(TraceRecord::Batch(b)) => b.origin,
                        _ => 0,
                    };
                    let verdict = kinds.get(root.event).copied();
                    if verdict == Some(VerdictKind::Replayed) {
                        continue;
                    }
                    let src = source_name_of(index, loc.source);
                    self.raw.push(
                        Finding::new(
                            Rule::ConsumerLoss,
                            root.event,
                            format!(
                                "{}: {} ({} event(s), {} block(s) lost including cascade)",
                                kind.as_str(),
                                verdict.map_or("lost", VerdictKind::as_str),
                                root.events,
                                root.blocks
                            ),
                        )
                        .at(origin, loc.pos as usize)
                        .source(src)
                        .hashes(root.first_block.map_or_else(Vec::new, |b| vec![b]))
                        .parent_opt(root.missing_parent),
                    );
                }
                if fin.step == FinishStep::Sort {
                    fin.model = 0;
                    fin.pos = 0;
                    // The sort gets a call of its own.
                    heavy = true;
                }
            }
            FinishStep::Sort => {
                // The rule takes the key's low 5 bits.
                const _: () = assert!(Rule::ALL.len() <= 32);
                // By (event, rule), stable: sort small keys; the findings move only once, when
                // they are split.
                let mut order: Vec<(u64, u32)> = Vec::with_capacity(self.raw.len());
                for (k, f) in self.raw.iter().enumerate() {
                    order.push((((f.event as u64) << 5) | f.rule as u64, k as u32));
                }
                crate::sort::sort_keyed(&mut order);
                fin.order = Vec::with_capacity(order.len());
                for (_, k) in order {
                    fin.order.push(k);
                }
                // Room for the split (no reallocation of large vectors later).
                let reorders = self.raw.iter().filter(|f| f.rule.is_reorder()).count();
                let reported = self
                    .raw
                    .iter()
                    .filter(|f| self.config.rules.level(f.rule) != Level::Allow)
                    .count();
                fin.violations.reserve_exact(reorders);
                fin.findings.reserve_exact(reported);
                fin.step = FinishStep::Attach;
                work = 1;
                heavy = true;
            }
            FinishStep::Attach => {
                // Attach verdicts and cascades, apply levels.
                let end = fin.pos.saturating_add(budget).min(fin.order.len());
                for k in fin.order.get(fin.pos..end).unwrap_or(&[]) {
                    let Some(f) = self.raw.get_mut(*k as usize) else {
                        continue;
                    };
                    f.level = self.config.rules.level(f.rule);
                    // Gaps are not tied to an event's verdicts; neither are findings without a
                    // line.
                    if f.line == 0 || matches!(f.rule, Rule::SeqGap | Rule::SeqGapRecovered) {
                        continue;
                    }
                    for ((kind, track), kinds) in self
                        .config
                        .consumers
                        .iter()
                        .zip(&self.tracks)
                        .zip(&self.kinds)
                    {
                        if let Some(v) = kinds.get(f.event) {
                            f.verdicts.insert(kind.as_str().into(), *v);
                        }
                        f.cascade
                            .insert(kind.as_str().into(), track.cascade(f.event));
                    }
                }
                work = end - fin.pos;
                fin.pos = end;
                if fin.pos >= fin.order.len() {
                    fin.step = FinishStep::Split;
                    fin.pos = 0;
                }
            }
            FinishStep::Split => {
                // Reorders (all levels) and reported findings (warn and deny).
                let end = fin.pos.saturating_add(budget).min(fin.order.len());
                for k in fin.order.get(fin.pos..end).unwrap_or(&[]) {
                    let Some(f) = self.raw.get_mut(*k as usize) else {
                        continue;
                    };
                    let f = std::mem::replace(f, finding_placeholder());
                    if f.rule.is_reorder() {
                        fin.violations.push(f.clone());
                    }
                    if f.level != Level::Allow {
                        fin.findings.push(f);
                    }
                }
                work = end - fin.pos;
                fin.pos = end;
                if fin.pos >= fin.order.len() {
                    self.raw = Vec::new();
                    fin.order = Vec::new();
                    fin.step = FinishStep::Losses;
                    fin.pos = 0;
                    // The loss summaries get calls of their own.
                    heavy = true;
                }
            }
            FinishStep::Losses => {
                // One model's loss summary per step (sorts its lost hashes).
                let c = fin.losses.len();
                let (Some(kind), Some(track), Some(kinds)) = (
                    self.config.consumers.get(c),
                    self.tracks.get(c),
                    self.kinds.get(c),
                ) else {
                    fin.step = FinishStep::Done;
                    fin.done = fin.total;
                    return (1, false);
                };
                let lost = self.lost_blocks.get(c).map(Vec::as_slice).unwrap_or(&[]);
                // Plain loops (no iterator-adapter `collect` instances). `ALL` is in key order.
                let mut counts = Vec::new();
                for k in VerdictKind::ALL {
                    let n = track.counts[k as usize];
                    if n > 0 {
                        counts.push((k, n));
                    }
                }
                let verdicts = SortedPairs::from_sorted(counts);
                // Lost blocks of events still lost (not replayed later); the events are
                // counted once per run of equal events (`lost` is in event order).
                let mut hashes: Vec<u64> = Vec::new();
                let mut events_lost = 0usize;
                let mut last_event = None;
                for &(e, h) in lost {
                    if kinds.get(e) == Some(&VerdictKind::Replayed) {
                        continue;
                    }
                    if last_event != Some(e) {
                        events_lost += 1;
                        last_event = Some(e);
                    }
                    hashes.push(h);
                }
                let blocks_lost = hashes.len();
                crate::sort::sort_u64(&mut hashes);
                hashes.dedup();
                let mut prefixes = Vec::new();
                for r in &track.roots {
                    if kinds.get(r.event) != Some(&VerdictKind::Replayed) {
                        prefixes.push(r.clone());
                    }
                }
                let mut lost_events = Vec::new();
                for &(e, r) in &track.lost_events {
                    let replayed = |x: u32| kinds.get(x as usize) == Some(&VerdictKind::Replayed);
                    if !replayed(e) && !replayed(r) {
                        lost_events.push((e, r));
                    }
                }
                fin.losses.push(LossSummary {
                    consumer: kind.as_str().into(),
                    blocks_lost,
                    events_lost,
                    pending_at_end: verdicts.get(&VerdictKind::Pending).copied().unwrap_or(0),
                    verdicts,
                    unreachable_prefixes: prefixes,
                    lost_hashes: hashes,
                    lost_events,
                });
                work = 1;
                heavy = true;
            }
            FinishStep::Done => {}
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
    LossFindings,
    Sort,
    Attach,
    Split,
    Losses,
    Done,
}

/// State of the finishing stage.
#[derive(Default)]
pub(super) struct Finishing {
    pub(super) step: FinishStep,
    pub(super) leftovers: std::vec::IntoIter<(u64, Waiter)>,
    /// Model being summarised (loss findings).
    pub(super) model: usize,
    /// Position in the current list (roots, `order`).
    pub(super) pos: usize,
    /// Indices into `raw` in (event, rule) order.
    pub(super) order: Vec<u32>,
    pub(super) violations: Vec<Finding>,
    pub(super) findings: Vec<Finding>,
    pub(super) losses: Vec<LossSummary>,
    pub(super) done: usize,
    pub(super) total: usize,
}

/// An empty finding (no allocation), left behind when findings are moved out.
pub(super) fn finding_placeholder() -> Finding {
    Finding::new(Rule::SeqGap, 0, String::new())
}
