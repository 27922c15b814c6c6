//! One event through the consumer models, the loss bookkeeping and the violation index.

use super::violations::{Scope, Waiter};
use super::{source_name_of, tier_label, Recorder, Run};
use crate::analysis::{Finding, Rule, UnreachablePrefix, VerdictSink};
use crate::consumers::{Hashes, VerdictKind};
use crate::event::KvEvent;
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
        // Block ids (and the parent's), for the violation index and the recorder.
        self.ids.fill(&mut self.interner, ev);
        let parent_id = self.ids.parent;
        if let Some(r) = recorder.as_mut() {
            r.event(i, &loc, ev, &self.ids.blocks, parent_id);
        }
        let resolved = &mut self.resolved;
        let recording = recorder.is_some();
        // Consumers.
        for (c, consumer) in self.consumers.iter_mut().enumerate() {
            resolved.clear();
            consumer.set_lane_log(recording);
            let v = consumer.apply_ids(&ctx, ev, &self.ids, resolved);
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
                        .and_then(|p| t.root_of.get(&p).map(|r| *r as usize));
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
                    for h in &lost {
                        t.root_of.insert(*h, root as u32);
                        if let Some(l) = self.lost_blocks.get_mut(c) {
                            l.push((i, *h));
                        }
                    }
                }
            }
        }
        // Violation index.
        let presence = &mut self.presence;
        let ids = &self.ids.blocks;
        let waiting = &mut self.waiting;
        let raw = &mut self.raw;
        match ev {
            KvEvent::BlockStored(e) => {
                let hashes = &self.ids.hashes;
                let promotion = ctx
                    .provenance
                    .is_some_and(|p| p.kind == ProvenanceKind::Promotion);
                if let Some(p) = e.parent_block_hash.as_ref().map(|p| p.as_u64()) {
                    if let Some(scope) = presence.scope_missing(parent_id, loc.source, loc.tier) {
                        // A parent stored earlier in this same event cannot be missing.
                        waiting.entry(p).push(Waiter {
                            child: i,
                            source: loc.source,
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
                    if !presence.add(*id, loc.source, loc.tier) {
                        doubles.push(*h);
                    }
                }
                if !doubles.is_empty() {
                    raw.push(
                        Finding::new(
                            Rule::DoubleStore,
                            i,
                            format!(
                                "stored into {} again while already held",
                                tier_label(index, loc.tier)
                            ),
                        )
                        .at(origin, loc.pos as usize)
                        .source(source_name)
                        .hashes(doubles),
                    );
                }
                // Resolve children waiting for these hashes.
                for h in hashes {
                    if waiting.is_empty() {
                        break;
                    }
                    let Some(ws) = waiting.remove(*h) else {
                        continue;
                    };
                    let mut keep = Vec::new();
                    for w in ws {
                        let same_lane = w.source == loc.source && w.tier == loc.tier;
                        let rule = if same_lane {
                            if w.job == loc.job && w.job != u32::MAX {
                                Some(Rule::ChildBeforeParentInJob)
                            } else {
                                Some(Rule::ChildBeforeParentAcrossJobs)
                            }
                        } else if w.source == loc.source && w.scope >= Scope::Source {
                            Some(Rule::CrossTierReorder)
                        } else if w.source != loc.source && w.scope == Scope::Global {
                            Some(Rule::CrossSourceReorder)
                        } else {
                            None
                        };
                        let Some(mut rule) = rule else {
                            keep.push(w);
                            continue;
                        };
                        if rule != Rule::ChildBeforeParentInJob && (w.promotion || promotion) {
                            rule = Rule::PromotionReorder;
                        }
                        let wloc = index.events.get(w.child).copied().unwrap_or(loc);
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
                        // " from <source>" only across sources (one `format!`, no inner one).
                        let (from, from_source) = if loc.source != w.source {
                            (" from ", source_name)
                        } else {
                            ("", "")
                        };
                        let msg = format!(
                            "block {} delivered before its parent {}, which arrives at event {} ({}{}{}){}",
                            w.hashes.first().copied().unwrap_or_default(),
                            h,
                            i,
                            tier_label(index, loc.tier),
                            from,
                            from_source,
                            if inferred { "; job inferred from batch structure" } else { "" }
                        );
                        raw.push(
                            Finding::new(rule, w.child, msg)
                                .at(worigin, wloc.pos as usize)
                                .source(wsource)
                                .hashes(w.hashes.to_vec())
                                .parent(*h)
                                .related(i)
                                .inferred(inferred),
                        );
                    }
                    if !keep.is_empty() {
                        *waiting.entry(*h) = keep;
                    }
                }
            }
            KvEvent::BlockRemoved(_) => {
                let mut unknown = Vec::new();
                for (&h, id) in self.ids.hashes.iter().zip(ids) {
                    if !presence.remove(Some(*id), loc.source, loc.tier) {
                        unknown.push(h);
                    }
                }
                if !unknown.is_empty() {
                    raw.push(
                        Finding::new(
                            Rule::RemoveUnknown,
                            i,
                            format!(
                                "removed from {} which does not hold it",
                                tier_label(index, loc.tier)
                            ),
                        )
                        .at(origin, loc.pos as usize)
                        .source(source_name)
                        .hashes(unknown),
                    );
                }
            }
            KvEvent::AllBlocksCleared => presence.clear_source(loc.source),
        }
    }
}
