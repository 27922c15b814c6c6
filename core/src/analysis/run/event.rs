//! One event through the consumer models, the loss bookkeeping and the violation index.

use super::violations::{How, PrimaryPairs, Scope, Waiter};
use super::{Recorder, Run};
use crate::analysis::findings::{Msg, Rec, Why};
use crate::analysis::roots::{Root, RootAt};
use crate::analysis::IndexBuilder;
use crate::analysis::{EventLoc, Evidence, JobEvidence, ReorderClass, Rule, VerdictSink};
use crate::consumers::{Hashes, VerdictKind};
use crate::event::KvEvent;
use crate::event::Tier;
use crate::room::make_room;
use crate::trace::{ProvenanceKind, TraceBatch};

impl Run {
    /// Feed event `i` (of batch `b`, indexed) to the models and the violation index.
    pub(super) fn event(
        &mut self,
        b: &TraceBatch,
        i: usize,
        mut sink: Option<&mut VerdictSink<'_>>,
        mut recorder: Option<&mut dyn Recorder>,
    ) {
        let Some(loc) = self.index.loc(i) else {
            return;
        };
        let Some(ev) = b.events.get(loc.pos as usize) else {
            return;
        };
        let ctx = loc.ctx(i, b);
        let origin = b.origin;
        // Block ids (and the parent's): by hash for the models, by group and hash for the
        // violation index and the recorder.
        self.ids.fill(&mut self.interner, ev);
        if self.index.multi_group {
            self.gids.fill(&mut self.keys, ev);
        } else {
            self.gids
                .copy(&mut self.keys, &self.ids, ev, !self.index.streaming);
        }
        let group = self.gids.group;
        let parent_id = self.gids.parent;
        if let Some(r) = recorder.as_mut() {
            r.event(i, &loc, ev, &self.gids.blocks, parent_id);
        }
        let engine_key = (loc.source as u64) << 32 | loc.dp_rank as u64;
        let engine = match self.last_engine {
            // The events of a batch share their engine: one look-up per batch.
            Some((k, e)) if k == engine_key => e,
            _ => {
                let slot = self.engines.entry(engine_key);
                if *slot == 0 {
                    self.engine_count += 1;
                    *slot = self.engine_count;
                }
                self.last_engine = Some((engine_key, *slot - 1));
                *slot - 1
            }
        };
        let at = self.precondition_at(i, &loc, origin);
        self.pre.event(b, at, ev);
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
                    // Block ids from the event's own (no interner look-up) where they are the
                    // event's parent and blocks.
                    let parent_root = v.missing_parent.and_then(|p| {
                        let id = match ev {
                            KvEvent::BlockStored(e)
                                if e.parent_block_hash.as_ref().map(|h| h.as_u64()) == Some(p) =>
                            {
                                self.ids.parent
                            }
                            _ => self.interner.get(p),
                        };
                        t.root_of_id(id, group, p).map(|r| r as usize)
                    });
                    let root = parent_root.unwrap_or(i);
                    // Roots are made in event order: a new root is the last (on the anchor
                    // stream a search of Dynamo's 500k roots per orphan was 6% of the time).
                    let found = match t.roots.last() {
                        Some(last) if last.at() == root => Ok(t.roots.len() - 1),
                        Some(last) if last.at() < root => Err(t.roots.len()),
                        None => Err(0),
                        Some(_) => t.roots.binary_search_by_key(&root, Root::at),
                    };
                    let at = match found {
                        Ok(at) => at,
                        Err(at) => {
                            // A new root is this event (the models share its place).
                            make_room(&mut t.roots, 1, i, self.total);
                            self.places.make_room(i, self.total);
                            let place = RootAt::new(origin, loc.pos, loc.source);
                            let r = self.places.root(
                                c,
                                root as u32,
                                place,
                                v.missing_parent,
                                lost.first().copied(),
                            );
                            t.roots.insert(at, r);
                            at
                        }
                    };
                    let n = u32::try_from(lost.len()).unwrap_or(u32::MAX);
                    if let Some(entry) = t.roots.get_mut(at) {
                        entry.events = entry.events.saturating_add(1);
                        entry.blocks = entry.blocks.saturating_add(n);
                    }
                    if self.index.streaming {
                        // Totals only (a list per lost event is what `analyze` keeps for the
                        // replay); a pending event can still be replayed.
                        t.lost_total.0 += 1;
                        t.lost_total.1 += lost.len();
                        if v.verdict == VerdictKind::Pending {
                            t.lost_pending.push((i as u32, n));
                        }
                    } else {
                        make_room(&mut t.lost_events, 1, i, self.total);
                        make_room(&mut t.lost_counts, 1, i, self.total);
                        t.lost_events.push((i as u32, root as u32));
                        t.lost_counts.push(n);
                    }
                    for (k, b) in v.blocks.iter().enumerate() {
                        if matches!(b.verdict, VerdictKind::Applied | VerdictKind::Replayed) {
                            continue;
                        }
                        let id = match (self.ids.hashes.get(k), self.ids.blocks.get(k)) {
                            (Some(&h), Some(&id)) if h == b.hash => Some(id),
                            _ => self.interner.get(b.hash),
                        };
                        t.set_root_of_id(id, group, b.hash, root as u32);
                    }
                    // The lost hashes themselves only for `analyze` (`compare` reads them).
                    if let Some(l) = self.lost_blocks.get_mut(c) {
                        make_room(l, lost.len(), i, self.total);
                        for h in &lost {
                            l.push((i, *h));
                        }
                    }
                }
            }
        }
        // Violation index.
        let index = &self.index;
        let presence = &mut self.presence;
        let ids = &self.gids.blocks;
        let waiting = &mut self.waiting;
        let primary_pairs = &mut self.primary_pairs;
        let raw = &mut self.raw;
        let gone = &mut self.gone;
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
                        let child_id = ids.first().copied().unwrap_or(u32::MAX);
                        if child_id != u32::MAX {
                            if let Some(h) = presence.slot(child_id) {
                                h.waiters += 1;
                            }
                        }
                        // A parent whose id was released had been stored if it is in `gone`.
                        if !gone.is_empty() && !presence.ever(Some(pid)) && gone.contains(p) {
                            if let Some(h) = presence.slot(pid) {
                                h.ever = true;
                            }
                        }
                        let w = Waiter {
                            loc,
                            line: origin,
                            parent: p,
                            first: hashes.first().copied().unwrap_or_default(),
                            child: i as u32,
                            child_id,
                            group,
                            how: How::new(scope, promotion),
                        };
                        waiting.push(pid, w, hashes);
                    }
                }
                let mut doubles = Hashes::new();
                for (h, id) in hashes.iter().zip(ids) {
                    if !presence.add(*id, engine, loc.tier) {
                        doubles.push(*h);
                    }
                }
                if !doubles.is_empty() {
                    let mut r = Rec::new(
                        Rule::DoubleStore,
                        i,
                        origin,
                        loc.pos,
                        loc.source,
                        Msg::Double {
                            tier: loc.tier,
                            group,
                        },
                    );
                    r.hashes = doubles;
                    raw.push(r);
                }
                // Resolve children waiting for these blocks.
                for (h, id) in hashes.iter().zip(ids) {
                    if waiting.is_empty() {
                        break;
                    }
                    let ws = &mut self.resolving;
                    ws.clear();
                    if !waiting.take(*id, ws) {
                        continue;
                    }
                    for w in ws.drain(..) {
                        if let Some(h) = presence.held.get_mut(w.child_id as usize) {
                            h.waiters = h.waiters.saturating_sub(1);
                        }
                        let same_lane = w.same_engine(&loc) && w.loc.tier == loc.tier;
                        let class = if same_lane {
                            let tier = index.idx.tiers.get(loc.tier as usize);
                            let c = match classify(index, self.workers, &w, &loc) {
                                (.., Why::Secondary) => {
                                    copied(primary_pairs, presence, index, engine, *id, &w)
                                }
                                c => c,
                            };
                            if tier == Some(&Tier::Cpu) {
                                primary_pairs.insert((engine, *id, w.first), c.0);
                            }
                            Some(c)
                        } else if w.same_engine(&loc) && w.how.scope() >= Scope::Source {
                            Some((ReorderClass::CrossTier, Evidence::Lanes, Why::Lanes))
                        } else if !w.same_engine(&loc) && w.how.scope() == Scope::Global {
                            Some((ReorderClass::CrossSource, Evidence::Lanes, Why::Lanes))
                        } else {
                            None
                        };
                        let Some((mut class, mut evidence, why)) = class else {
                            // Still waiting (back at the end of the list: the kept ones stay
                            // in order).
                            if let Some(h) = presence.held.get_mut(w.child_id as usize) {
                                h.waiters += 1;
                            }
                            waiting.wait(*id, w);
                            continue;
                        };
                        if class != ReorderClass::InJob && (w.how.promotion() || promotion) {
                            class = ReorderClass::Promotion;
                            evidence = Evidence::Lanes;
                        }
                        let inferred = w.loc.job != u32::MAX
                            && index
                                .evidence_of(w.loc.job)
                                .is_some_and(|e| e != JobEvidence::Provenance);
                        let mut r = Rec::new(
                            class.rule(),
                            w.child as usize,
                            w.line,
                            w.loc.pos,
                            w.loc.source,
                            Msg::Reorder {
                                first: w.first,
                                tier: loc.tier,
                                group,
                                // The parent's source, only across engines.
                                from: (!w.same_engine(&loc)).then_some(loc.source),
                                why,
                            },
                        );
                        r.hashes = waiting.hashes(&w);
                        r.parent = Some(*h);
                        r.related = Some(i);
                        r.inferred = inferred;
                        r.class = Some((class, evidence));
                        raw.push(r);
                    }
                }
            }
            KvEvent::BlockRemoved(_) => {
                let mut unknown = Hashes::new();
                for (&h, id) in self.ids.hashes.iter().zip(ids) {
                    if !presence.remove(Some(*id), engine, loc.tier) {
                        unknown.push(h);
                    }
                }
                if !unknown.is_empty() {
                    let mut r = Rec::new(
                        Rule::RemoveUnknown,
                        i,
                        origin,
                        loc.pos,
                        loc.source,
                        Msg::Removed {
                            tier: loc.tier,
                            group,
                        },
                    );
                    r.hashes = unknown;
                    raw.push(r);
                }
            }
            KvEvent::AllBlocksCleared => {
                let cleared = presence.clear_source(engine);
                if index.streaming {
                    // Ids the engine held, for `Run::recycle` (as a removal's).
                    self.removed.extend_from_slice(&cleared);
                }
            }
        }
        if matches!(ev, KvEvent::BlockRemoved(_)) && self.index.streaming {
            self.removed.extend_from_slice(&self.ids.blocks);
        }
    }
}

/// The class of a same-lane inversion of waiter `w` by its parent (at `loc`), from the best evidence both events have (see `docs/rules.md`, "Jobs and evidence").
fn classify(
    index: &IndexBuilder,
    workers: u32,
    w: &Waiter,
    loc: &EventLoc,
) -> (ReorderClass, Evidence, Why) {
    if w.loc.job == u32::MAX || loc.job == u32::MAX {
        return (ReorderClass::AcrossJobs, Evidence::NoJob, Why::NoJob);
    }
    if w.loc.record != loc.record {
        return (
            ReorderClass::AcrossJobs,
            Evidence::SeparateBatches,
            Why::SeparateBatches,
        );
    }
    let (child_ev, parent_ev) = (index.evidence_of(w.loc.job), index.evidence_of(loc.job));
    let same_job = w.loc.job == loc.job;
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
                .idx
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
            let order = index
                .idx
                .batch_order_of(w.child as usize)
                .unwrap_or_default();
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

/// The class of a secondary-tier inversion whose jobs rest only on the batch structure, from
/// the CPU-tier job it copies: vLLM's tiering manager cascades each completed CPU store job to
/// every secondary tier as one job of the same keys in the same order (`complete_store`,
/// `vllm/v1/kv_offload/tiering/manager.py`; the file tier publishes a finished job's keys in
/// that order, `tiering/fs/manager.py`). So the pair inverted in the CPU tier keeps that class;
/// a pair the CPU tier holds (both blocks) without that inversion came in parent-first order
/// there, so here it crosses two cascade jobs. Otherwise (the CPU tier's events are not in the
/// capture) it stays ambiguous.
fn copied(
    pairs: &PrimaryPairs,
    presence: &super::violations::Presence,
    index: &IndexBuilder,
    engine: u32,
    parent: u32,
    w: &Waiter,
) -> (ReorderClass, Evidence, Why) {
    if let Some(&class) = pairs.get(&(engine, parent, w.first)) {
        return (class, Evidence::Cascade, Why::Cascade);
    }
    let cpu = index.idx.tiers.iter().position(|t| *t == Tier::Cpu);
    match cpu {
        Some(t)
            if presence.holds(parent, engine, t as u32)
                && presence.holds(w.child_id, engine, t as u32) =>
        {
            (ReorderClass::AcrossJobs, Evidence::Cascade, Why::Cascade)
        }
        _ => (
            ReorderClass::Ambiguous,
            Evidence::BatchOrder,
            Why::Secondary,
        ),
    }
}
