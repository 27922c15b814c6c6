//! One event through the consumer models, the loss bookkeeping and the violation index.

use super::violations::{Scope, Waiter};
use super::{source_name_of, tier_label, Recorder, Run};
use crate::analysis::{
    EventIndex, EventLoc, Evidence, Finding, JobEvidence, ReorderClass, Rule, UnreachablePrefix,
    VerdictSink,
};
use crate::consumers::{Hashes, VerdictKind};
use crate::event::KvEvent;
use crate::event::Tier;
use crate::trace::{ProvenanceKind, Trace, TraceRecord};

impl Run {
    /// Feed event `i` to the models and the violation index.
    pub(super) fn event(
        &mut self,
        trace: &Trace,
        i: usize,
        mut sink: Option<&mut VerdictSink<'_>>,
        mut recorder: Option<&mut dyn Recorder>,
    ) {
        let index = &self.index.idx;
        let Some((ctx, ev)) = index.ctx(trace, i) else {
            return;
        };
        let Some(loc) = index.events.get(i).copied() else {
            return;
        };
        let origin = match trace.records.get(loc.record as usize) {
            Some(TraceRecord::Batch(b)) => b.origin,
            _ => 0,
        };
        let source_name = source_name_of(index, loc.source);
        // Block ids (and the parent's): by hash for the models, by group and hash for the
        // violation index and the recorder.
        self.ids.fill(&mut self.interner, ev);
        if self.index.multi_group {
            self.gids.fill(&mut self.keys, ev);
        } else {
            self.gids.copy(&mut self.keys, &self.ids, ev);
        }
        let group = self.gids.group;
        let parent_id = self.gids.parent;
        if let Some(r) = recorder.as_mut() {
            r.event(i, &loc, ev, &self.gids.blocks, parent_id);
        }
        let engine = {
            let slot = self
                .engines
                .entry((loc.source as u64) << 32 | loc.dp_rank as u64);
            if *slot == 0 {
                self.engine_count += 1;
                *slot = self.engine_count;
            }
            *slot - 1
        };
        let at = self.precondition_at(i, &loc, origin);
        self.pre.event(trace, at, ev);
        let resolved = &mut self.resolved;
        let recording = recorder.is_some();
        // Consumers.
        for (c, consumer) in self.consumers.iter_mut().enumerate() {
            resolved.clear();
            consumer.set_lane_log(recording);
            let v = crate::consumers::Consumer::apply(consumer, &ctx, ev, &self.ids, resolved);
            self.pre.verdict(consumer, at, ev, &self.ids.hashes, &v);
            if let Some(s) = sink.as_mut() {
                s(i, consumer.kind(), &v, resolved);
            }
            if let Some(r) = recorder.as_mut() {
                r.verdict(i, c, &v, resolved);
                self.lane_changes.clear();
                consumer.take_lane_changes(&mut self.lane_changes);
                r.lanes(i, c, &self.lane_changes);
            }
            let (Some(kinds), Some(t)) = (self.kinds.get_mut(c), self.tracks.get_mut(c)) else {
                continue;
            };
            kinds.push(v.verdict);
            t.counts[v.verdict as usize] += 1;
            for r in resolved.iter() {
                if let Some(k) = kinds.get_mut(r.event) {
                    t.counts[*k as usize] -= 1;
                    t.counts[r.verdict as usize] += 1;
                    *k = r.verdict;
                }
            }
            if matches!(ev, KvEvent::BlockStored(_)) {
                let mut lost = Hashes::new();
                for b in &v.blocks {
                    if !matches!(b.verdict, VerdictKind::Applied | VerdictKind::Replayed) {
                        lost.push(b.hash);
                    }
                }
                if !lost.is_empty() {
                    let parent_root = v
                        .missing_parent
                        .and_then(|p| t.root_of.get(&(group, p)).map(|r| *r as usize));
                    let root = parent_root.unwrap_or(i);
                    let at = match t.roots.binary_search_by_key(&root, |r| r.event) {
                        Ok(at) => at,
                        Err(at) => {
                            t.roots.insert(
                                at,
                                UnreachablePrefix {
                                    event: root,
                                    missing_parent: v.missing_parent,
                                    first_block: lost.first().copied(),
                                    events: 0,
                                    blocks: 0,
                                },
                            );
                            at
                        }
                    };
                    if let Some(entry) = t.roots.get_mut(at) {
                        entry.events += 1;
                        entry.blocks += lost.len();
                    }
                    t.lost_events.push((i as u32, root as u32));
                    for h in &lost {
                        t.root_of.insert((group, *h), root as u32);
                        if let Some(l) = self.lost_blocks.get_mut(c) {
                            l.push((i, *h));
                        }
                    }
                }
            }
        }
        // Violation index.
        let presence = &mut self.presence;
        let ids = &self.gids.blocks;
        let waiting = &mut self.waiting;
        let raw = &mut self.raw;
        match ev {
            KvEvent::BlockStored(e) => {
                let hashes = &self.ids.hashes;
                let promotion = ctx
                    .provenance
                    .is_some_and(|p| p.kind == ProvenanceKind::Promotion);
                if let (Some(p), Some(pid)) =
                    (e.parent_block_hash.as_ref().map(|p| p.as_u64()), parent_id)
                {
                    if let Some(scope) = presence.scope_missing(Some(pid), engine, loc.tier) {
                        // A parent stored earlier in this same event cannot be missing.
                        waiting.entry(pid as u64).push(Waiter {
                            child: i,
                            source: loc.source,
                            engine,
                            group,
                            parent: p,
                            tier: loc.tier,
                            job: loc.job,
                            scope,
                            promotion,
                            hashes: hashes.clone(),
                        });
                    }
                }
                let mut doubles = Vec::new();
                for (h, id) in hashes.iter().zip(ids) {
                    if !presence.add(*id, engine, loc.tier) {
                        doubles.push(*h);
                    }
                }
                if !doubles.is_empty() {
                    raw.push(
                        Finding::new(
                            Rule::DoubleStore,
                            i,
                            format!(
                                "stored into {}{} again while already held",
                                tier_label(index, loc.tier),
                                GroupNote(group)
                            ),
                        )
                        .at(origin, loc.pos as usize)
                        .source(source_name)
                        .hashes(doubles)
                        .group(group),
                    );
                }
                // Resolve children waiting for these blocks.
                for (h, id) in hashes.iter().zip(ids) {
                    if waiting.is_empty() {
                        break;
                    }
                    let Some(ws) = waiting.remove(*id as u64) else {
                        continue;
                    };
                    let mut keep = Vec::new();
                    for w in ws {
                        let same_lane = w.engine == engine && w.tier == loc.tier;
                        let wloc = index.events.get(w.child).copied().unwrap_or(loc);
                        let class = if same_lane {
                            Some(classify(index, self.workers, &w, &wloc, i, &loc))
                        } else if w.engine == engine && w.scope >= Scope::Source {
                            Some((ReorderClass::CrossTier, Evidence::Lanes, Why::Lanes))
                        } else if w.engine != engine && w.scope == Scope::Global {
                            Some((ReorderClass::CrossSource, Evidence::Lanes, Why::Lanes))
                        } else {
                            None
                        };
                        let Some((mut class, mut evidence, why)) = class else {
                            keep.push(w);
                            continue;
                        };
                        if class != ReorderClass::InJob && (w.promotion || promotion) {
                            class = ReorderClass::Promotion;
                            evidence = Evidence::Lanes;
                        }
                        let inferred = wloc.job != u32::MAX
                            && index
                                .jobs
                                .get(wloc.job as usize)
                                .is_some_and(|j| j.inferred);
                        let worigin = match trace.records.get(wloc.record as usize) {
                            Some(TraceRecord::Batch(b)) => b.origin,
                            _ => 0,
                        };
                        let wsource = source_name_of(index, w.source);
                        // " from <source>" only across engines (one `format!`, no inner one).
                        let (from, from_source) = if engine != w.engine {
                            (" from ", source_name)
                        } else {
                            ("", "")
                        };
                        let msg = format!(
                            "block {} delivered before its parent {}, which arrives at event {} ({}{}{}{}){}",
                            w.hashes.first().copied().unwrap_or_default(),
                            h,
                            i,
                            tier_label(index, loc.tier),
                            GroupNote(group),
                            from,
                            from_source,
                            Because { why, class, workers: self.workers },
                        );
                        raw.push(
                            Finding::new(class.rule(), w.child, msg)
                                .at(worigin, wloc.pos as usize)
                                .source(wsource)
                                .hashes(w.hashes.to_vec())
                                .group(w.group)
                                .parent(*h)
                                .related(i)
                                .inferred(inferred)
                                .classed(class, evidence),
                        );
                    }
                    if !keep.is_empty() {
                        *waiting.entry(*id as u64) = keep;
                    }
                }
            }
            KvEvent::BlockRemoved(_) => {
                let mut unknown = Vec::new();
                for (&h, id) in self.ids.hashes.iter().zip(ids) {
                    if !presence.remove(Some(*id), engine, loc.tier) {
                        unknown.push(h);
                    }
                }
                if !unknown.is_empty() {
                    raw.push(
                        Finding::new(
                            Rule::RemoveUnknown,
                            i,
                            format!(
                                "removed from {}{} which does not hold it",
                                tier_label(index, loc.tier),
                                GroupNote(group)
                            ),
                        )
                        .at(origin, loc.pos as usize)
                        .source(source_name)
                        .hashes(unknown)
                        .group(group),
                    );
                }
            }
            KvEvent::AllBlocksCleared => presence.clear_source(engine),
        }
    }
}

/// Why a same-lane inversion got its class (rendered by [`Because`]).
#[derive(Clone, Copy)]
enum Why {
    /// Cross-tier / cross-source / promotion: the lanes said it.
    Lanes,
    /// No job (GPU-tier events).
    NoJob,
    /// Different batches.
    SeparateBatches,
    /// Provenance job ids (the parent's job, when another).
    Provenance,
    /// GPU events partition the batch into store jobs.
    GpuEvents,
    /// The request's runs in the batch: descents, runs.
    BatchOrder(u32, u32),
    /// A secondary tier without provenance or GPU events.
    Secondary,
    /// The child's and the parent's jobs rest on different evidence.
    Mixed,
}

/// The class of a same-lane inversion of waiter `w` (at `wloc`) by its parent (event `i` at
/// `loc`), from the best evidence both events have (see `docs/rules.md`, "Jobs and evidence").
fn classify(
    index: &EventIndex,
    workers: u32,
    w: &Waiter,
    wloc: &EventLoc,
    i: usize,
    loc: &EventLoc,
) -> (ReorderClass, Evidence, Why) {
    if w.job == u32::MAX || loc.job == u32::MAX {
        return (ReorderClass::AcrossJobs, Evidence::NoJob, Why::NoJob);
    }
    if wloc.record != loc.record {
        return (
            ReorderClass::AcrossJobs,
            Evidence::SeparateBatches,
            Why::SeparateBatches,
        );
    }
    let (child_ev, parent_ev) = (index.job_evidence(w.child), index.job_evidence(i));
    let same_job = w.job == loc.job;
    match (child_ev, parent_ev) {
        (Some(JobEvidence::Provenance), Some(JobEvidence::Provenance)) => (
            if same_job {
                ReorderClass::InJob
            } else {
                ReorderClass::AcrossJobs
            },
            Evidence::Provenance,
            Why::Provenance,
        ),
        (Some(JobEvidence::GpuEvents), Some(JobEvidence::GpuEvents)) => (
            if same_job {
                ReorderClass::InJob
            } else {
                ReorderClass::AcrossJobs
            },
            Evidence::GpuEvents,
            Why::GpuEvents,
        ),
        (Some(JobEvidence::BatchRun), Some(JobEvidence::BatchRun)) => {
            let primary = index
                .tiers
                .get(loc.tier as usize)
                .is_some_and(|t| *t == Tier::Cpu);
            if !primary {
                return (
                    ReorderClass::Ambiguous,
                    Evidence::BatchOrder,
                    Why::Secondary,
                );
            }
            let order = index.batch_order_of(w.child).unwrap_or_default();
            let why = Why::BatchOrder(order.descents, order.runs);
            if order.descents >= workers {
                (ReorderClass::InJob, Evidence::BatchOrder, why)
            } else {
                (ReorderClass::Ambiguous, Evidence::BatchOrder, why)
            }
        }
        _ => (ReorderClass::Ambiguous, Evidence::BatchOrder, Why::Mixed),
    }
}

/// The evidence part of a child-before-parent message.
struct Because {
    why: Why,
    class: ReorderClass,
    workers: u32,
}

impl std::fmt::Display for Because {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let w = self.workers;
        let s = if w == 1 { "" } else { "s" };
        match (self.why, self.class) {
            (Why::Lanes | Why::NoJob, _) => Ok(()),
            (Why::SeparateBatches, _) => {
                f.write_str("; in another batch (a job's events are published in one batch)")
            }
            (Why::Provenance, ReorderClass::InJob) => f.write_str("; one job by provenance"),
            (Why::Provenance, _) => f.write_str("; another job by provenance"),
            (Why::GpuEvents, ReorderClass::InJob) => f.write_str(
                "; one store job by the GPU events (same request, same step)",
            ),
            (Why::GpuEvents, _) => f.write_str(
                "; another store job by the GPU events (another request or step)",
            ),
            (Why::BatchOrder(d, r), ReorderClass::InJob) => write!(
                f,
                "; job inferred from batch structure: this request's {r} runs in the batch start with {d} descent(s), more than {w} worker{s} allow (at most {}), so a job is in set order",
                w - 1
            ),
            (Why::BatchOrder(d, r), _) => write!(
                f,
                "; ambiguous: this request's {r} runs in the batch start with {d} descent(s), which {w} worker{s} completing jobs out of order allow (at most {}); GPU-tier events in the capture, provenance, or a lower worker count (--workers) would decide it",
                w - 1
            ),
            (Why::Secondary, _) => f.write_str(
                "; ambiguous: secondary-tier jobs complete asynchronously, so only provenance or GPU-tier events in the capture would decide it",
            ),
            (Why::Mixed, _) => f.write_str(
                "; ambiguous: the child's and the parent's jobs rest on different evidence; provenance or GPU-tier events for both would decide it",
            ),
        }
    }
}

/// " group N" for KV groups other than 0 (nothing for a single-group trace).
struct GroupNote(u32);

impl std::fmt::Display for GroupNote {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.0 == 0 {
            Ok(())
        } else {
            write!(f, " group {}", self.0)
        }
    }
}
