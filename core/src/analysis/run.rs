//! The analysis pass as a resumable state machine ([`Run`]): index the trace, check sequence
//! numbers, feed every event to the consumer models and the violation index, then assemble the
//! [`Analysis`]. Each stage can be advanced by a budget of events, so a caller (the replay
//! builder, hence the web app) can do the work in slices and show progress; [`super::analyze`]
//! runs it in one go.

use super::{
    Analysis, AnalysisConfig, EventIndex, EventLoc, Finding, IndexBuilder, Level, LossSummary,
    Rule, SortedPairs, UnreachablePrefix, VerdictSink,
};
pub(crate) use crate::consumers::Interner;
use crate::consumers::{
    AnyConsumer, EventIds, EventVerdict, Hashes, LaneCounts, LaneKey, Resolution, SlabMap,
    VerdictKind,
};
use crate::event::{KvEvent, Tier};
use crate::trace::{ProvenanceKind, Trace, TraceRecord};

type HashMap<K, V> = hashbrown::HashMap<K, V, rustc_hash::FxBuildHasher>;

/// Receives every consumer's verdict and lane changes (the replay engine's recorder).
pub(crate) trait Recorder {
    /// The index is complete; events follow.
    fn start(&mut self, index: &EventIndex);
    /// Event `event` (at `loc`, naming blocks `ids`, stored under `parent`), before any model
    /// sees it.
    fn event(
        &mut self,
        event: usize,
        loc: &EventLoc,
        ev: &KvEvent,
        ids: &[u32],
        parent: Option<u32>,
    );
    fn verdict(&mut self, event: usize, consumer: usize, v: &EventVerdict, resolved: &[Resolution]);
    /// The lanes event `event` changed for `consumer`, sorted, with their new counters.
    fn lanes(&mut self, event: usize, consumer: usize, changed: &[(LaneKey, LaneCounts)]);
}

#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Scope {
    Lane,
    Source,
    Global,
}

struct Waiter {
    child: usize,
    source: u32,
    tier: u32,
    job: u32,
    scope: Scope,
    promotion: bool,
    hashes: Hashes,
}

/// Which lanes hold one block (usually one or two: inline) and whether it was ever stored.
#[derive(Clone, Default)]
struct Held {
    /// `(source, tier)` as a [`LaneKey`]: the models' lane-list type (one `SmallVec` type less).
    lanes: crate::consumers::LaneList,
    ever: bool,
}

fn lane(source: u32, tier: u32) -> LaneKey {
    LaneKey { source, tier }
}

/// Lane presence for the violation index (what each tier of each source holds), by block id.
#[derive(Default)]
struct Presence {
    held: Vec<Held>,
    /// Per source: blocks it stored since its last clear (may include removed ones).
    by_source: Vec<Vec<u32>>,
}

impl Presence {
    fn slot(&mut self, id: u32) -> Option<&mut Held> {
        let i = id as usize;
        if i >= self.held.len() {
            self.held.resize(i + 1, Held::default());
        }
        self.held.get_mut(i)
    }
    /// Store `id` into lane `(s, t)`; false if the lane already held it.
    fn add(&mut self, id: u32, s: u32, t: u32) -> bool {
        let Some(h) = self.slot(id) else {
            return true;
        };
        h.ever = true;
        if !h.lanes.add(lane(s, t)) {
            return false;
        }
        if let Some(list) = self.by_source.get_mut(s as usize) {
            list.push(id);
        } else {
            self.by_source.resize(s as usize + 1, Vec::new());
            if let Some(list) = self.by_source.get_mut(s as usize) {
                list.push(id);
            }
        }
        true
    }
    /// Remove `id` from lane `(s, t)`; false if the lane did not hold it.
    fn remove(&mut self, id: Option<u32>, s: u32, t: u32) -> bool {
        let Some(h) = id.and_then(|id| self.held.get_mut(id as usize)) else {
            return false;
        };
        h.lanes.remove(lane(s, t))
    }
    fn clear_source(&mut self, s: u32) {
        let Some(list) = self.by_source.get_mut(s as usize) else {
            return;
        };
        for id in std::mem::take(list) {
            if let Some(h) = self.held.get_mut(id as usize) {
                h.lanes.drop_source(s, None);
            }
        }
    }
    fn scope_missing(&self, id: Option<u32>, s: u32, t: u32) -> Option<Scope> {
        let Some(h) = id.and_then(|id| self.held.get(id as usize)) else {
            return Some(Scope::Global);
        };
        if h.lanes.contains(lane(s, t)) {
            None
        } else if h.lanes.has_source(s) {
            Some(Scope::Lane)
        } else if !h.lanes.is_empty() {
            Some(Scope::Source)
        } else {
            Some(Scope::Global)
        }
    }
    fn ever(&self, id: Option<u32>) -> bool {
        id.and_then(|id| self.held.get(id as usize))
            .is_some_and(|h| h.ever)
    }
}

/// Per-consumer loss bookkeeping during a run.
#[derive(Default)]
struct LossTrack {
    /// Lost block → root lost event.
    root_of: HashMap<u64, u32>,
    /// Unreachable prefixes, by root event (ascending: a root is created at the event being
    /// processed). Its cascade (later events lost because of it) is `events - 1`.
    roots: Vec<UnreachablePrefix>,
    /// Final verdict counts (kept up to date as pending events resolve).
    counts: [usize; VerdictKind::COUNT],
}

impl LossTrack {
    fn root(&self, event: usize) -> Option<&UnreachablePrefix> {
        let i = self.roots.binary_search_by_key(&event, |r| r.event).ok()?;
        self.roots.get(i)
    }

    /// Events lost later because `event` was lost.
    fn cascade(&self, event: usize) -> usize {
        self.root(event).map_or(0, |r| r.events.saturating_sub(1))
    }
}

/// Where a [`Run`] is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Stage {
    /// Interning sources, tiers and jobs, checking sequence numbers (by records; progress in
    /// events).
    Index,
    /// Feeding events to the models and the violation index.
    Events,
    /// Freeing the models' states, one model per [`Run::advance`] call (freeing a model of a
    /// 1M-event trace takes tens of milliseconds).
    Release,
    /// Assembling findings and losses, in slices (a legacy trace can have a finding per job).
    Finish,
    /// Every event processed; [`Run::finish`] assembles the result.
    Done,
}

/// The resumable analysis pass (see the module docs).
pub(crate) struct Run {
    config: AnalysisConfig,
    total: usize,
    stage: Stage,
    index: IndexBuilder,
    /// The next record to index.
    next_record: usize,
    /// Last seq per (source, rank); empty batches waiting for the next event's source; gap
    /// records (`(event, record)`).
    /// By `source << 32 | dp_rank`.
    last_seq: SlabMap<Option<u64>>,
    empty_batches: Vec<usize>,
    gap_records: Vec<(usize, usize)>,
    consumers: Vec<AnyConsumer>,
    kinds: Vec<Vec<VerdictKind>>,
    lost_blocks: Vec<Vec<(usize, u64)>>,
    tracks: Vec<LossTrack>,
    presence: Presence,
    interner: Interner,
    /// Scratch: the current event's block ids and parent id.
    ids: EventIds,
    /// Children waiting for a parent, by parent hash.
    waiting: SlabMap<Vec<Waiter>>,
    raw: Vec<Finding>,
    resolved: Vec<Resolution>,
    /// The finishing stage's state.
    fin: Finishing,
    /// Scratch: lane changes of one model for one event.
    lane_changes: Vec<(LaneKey, LaneCounts)>,
    next: usize,
}

impl Run {
    /// A run over `trace` (cheap: counts the trace's events).
    pub(crate) fn new(trace: &Trace, config: &AnalysisConfig) -> Run {
        let total = trace
            .records
            .iter()
            .map(|r| match r {
                TraceRecord::Batch(b) => b.events.len(),
                _ => 0,
            })
            .sum();
        Run {
            config: config.clone(),
            total,
            stage: Stage::Index,
            index: IndexBuilder::default(),
            next_record: 0,
            empty_batches: Vec::new(),
            last_seq: SlabMap::default(),
            gap_records: Vec::new(),
            consumers: Vec::new(),
            kinds: Vec::new(),
            lost_blocks: Vec::new(),
            tracks: Vec::new(),
            presence: Presence::default(),
            interner: Interner::default(),
            ids: EventIds::default(),
            waiting: SlabMap::default(),
            raw: Vec::new(),
            resolved: Vec::new(),
            lane_changes: Vec::new(),
            fin: Finishing::default(),
            next: 0,
        }
    }

    /// The current stage.
    pub(crate) fn stage(&self) -> Stage {
        self.stage
    }

    /// Work done in the current stage, in events.
    pub(crate) fn done(&self) -> usize {
        match self.stage {
            Stage::Index => self.index.idx.events.len(),
            Stage::Events | Stage::Release => self.next,
            Stage::Finish => self.fin.done.min(self.fin.total),
            Stage::Done => self.total,
        }
    }

    /// The size of the current stage's work (events, or finishing units).
    pub(crate) fn stage_total(&self) -> usize {
        match self.stage {
            Stage::Finish => self.fin.total,
            _ => self.total,
        }
    }

    /// Do about `budget` events of work (at least one unit), crossing stages as needed.
    /// Returns the work done.
    pub(crate) fn advance(
        &mut self,
        trace: &Trace,
        budget: usize,
        mut sink: Option<&mut VerdictSink<'_>>,
        mut recorder: Option<&mut dyn Recorder>,
    ) -> usize {
        let budget = budget.max(1);
        let mut spent = 0usize;
        while spent < budget && self.stage != Stage::Done {
            let left = budget - spent;
            match self.stage {
                Stage::Index => {
                    spent += self.index_records(trace, left);
                    if self.next_record >= trace.records.len() {
                        self.gap_findings(trace);
                        self.start_events();
                        if let Some(r) = recorder.as_mut() {
                            r.start(&self.index.idx);
                        }
                        self.stage = Stage::Events;
                    }
                }
                Stage::Events => {
                    let n = self.index.idx.events.len();
                    let start = self.next;
                    let end = start.saturating_add(left).min(n);
                    while self.next < end {
                        self.event(
                            trace,
                            self.next,
                            sink.as_deref_mut(),
                            recorder.as_mut().map(|r| &mut **r as &mut dyn Recorder),
                        );
                        self.next += 1;
                    }
                    spent += (end - start).max(1);
                    if self.next >= n {
                        self.stage = Stage::Release;
                    }
                }
                Stage::Release => {
                    // One model per call: this call ends here.
                    drop(self.consumers.pop());
                    if self.consumers.is_empty() {
                        self.start_finish();
                        self.stage = Stage::Finish;
                    }
                    return spent.max(1);
                }
                Stage::Finish => {
                    let (work, heavy) = self.finish_step(trace, left);
                    spent += work.max(1);
                    if self.fin.step == FinishStep::Done {
                        self.stage = Stage::Done;
                    }
                    if heavy {
                        // A sort or a per-model summary: this call ends here.
                        return spent;
                    }
                }
                Stage::Done => {}
            }
        }
        spent
    }

    /// Index whole records (and check their sequence numbers) until about `budget` events are
    /// done; at least one record per call. Returns the work done.
    fn index_records(&mut self, trace: &Trace, budget: usize) -> usize {
        let mut spent = 0usize;
        while spent < budget {
            let ri = self.next_record;
            let Some(rec) = trace.records.get(ri) else {
                break;
            };
            self.next_record += 1;
            let gi = self.index.idx.events.len();
            match rec {
                TraceRecord::Gap(_) => {
                    self.gap_records.push((gi, ri));
                    spent += 1;
                }
                TraceRecord::Batch(b) => {
                    self.index.batch(ri, b);
                    match self.index.idx.events.get(gi).map(|l| l.source) {
                        // An empty batch is checked under the source of the next delivered
                        // event (the event at its global index), once that is known.
                        None => self.empty_batches.push(ri),
                        Some(sid) => {
                            for e in std::mem::take(&mut self.empty_batches) {
                                if let Some(TraceRecord::Batch(eb)) = trace.records.get(e) {
                                    self.check_seq(eb, gi, sid);
                                }
                            }
                            self.check_seq(b, gi, sid);
                        }
                    }
                    spent += b.events.len().max(1);
                }
                _ => spent += 1,
            }
        }
        spent
    }

    /// A `seq-gap` finding when batch `b` (first event `gi`, source id `sid`) does not follow
    /// the previous batch of its (source, rank).
    fn check_seq(&mut self, b: &crate::trace::TraceBatch, gi: usize, sid: u32) {
        let key = (sid, b.dp_rank.unwrap_or(0));
        let last = self.last_seq.entry((key.0 as u64) << 32 | key.1 as u64);
        let Some(prev) = last.replace(b.seq) else {
            return;
        };
        if b.seq == prev.wrapping_add(1) {
            return;
        }
        let message = if b.seq > prev {
            format!(
                "dp_rank {}: expected seq {}, got {} ({} batch(es) missing)",
                key.1,
                prev + 1,
                b.seq,
                b.seq - prev - 1
            )
        } else {
            format!(
                "dp_rank {}: seq went back from {} to {} (publisher restart or duplicate)",
                key.1, prev, b.seq
            )
        };
        self.raw.push(finding(
            Rule::SeqGap,
            gi,
            b.origin,
            0,
            &b.source,
            vec![],
            None,
            None,
            false,
            message,
        ));
    }

    /// Findings for gap records (after every sequence finding, as before slicing).
    fn gap_findings(&mut self, trace: &Trace) {
        let index = &self.index.idx;
        for (at, ri) in std::mem::take(&mut self.gap_records) {
            let Some(TraceRecord::Gap(g)) = trace.records.get(ri) else {
                continue;
            };
            let line =
                index
                    .events
                    .get(at)
                    .and_then(|l| match trace.records.get(l.record as usize) {
                        Some(TraceRecord::Batch(b)) => Some(b.origin),
                        _ => None,
                    });
            // `{:?}` of the rank spelled out (no `Debug` code for it in the wasm).
            let (some, rank, close): (&str, &dyn std::fmt::Display, &str) = match &g.dp_rank {
                Some(r) => ("Some(", r, ")"),
                None => ("None", &"", ""),
            };
            self.raw.push(finding(
                if g.recovered {
                    Rule::SeqGapRecovered
                } else {
                    Rule::SeqGap
                },
                at,
                line.unwrap_or(0),
                0,
                &g.source,
                vec![],
                None,
                None,
                false,
                format!(
                    "gap record: dp_rank {some}{rank}{close} expected seq {}, received {}{}",
                    g.expected_seq,
                    g.received_seq,
                    if g.recovered {
                        " (recovered)"
                    } else {
                        " (not recovered)"
                    }
                ),
            ));
        }
    }

    /// Build the models once the index (hence the engine block sizes) is known.
    fn start_events(&mut self) {
        let index = &self.index.idx;
        let n = index.events.len();
        let c = self.config.consumers.len();
        // One loop (no `collect` instance per vector).
        self.consumers = Vec::with_capacity(c);
        self.kinds = Vec::with_capacity(c);
        self.lost_blocks = Vec::with_capacity(c);
        self.tracks = Vec::with_capacity(c);
        for k in &self.config.consumers {
            self.consumers.push(AnyConsumer::for_engines(
                *k,
                &self.config.consumer_config,
                &index.engine_block_sizes,
            ));
            self.kinds.push(Vec::with_capacity(n));
            self.lost_blocks.push(Vec::new());
            self.tracks.push(LossTrack::default());
        }
    }

    /// Feed event `i` to the models and the violation index.
    fn event(
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
            let v = crate::consumers::Consumer::apply(consumer, &ctx, ev, &self.ids, resolved);
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
                    raw.push(finding(
                        Rule::DoubleStore,
                        i,
                        origin,
                        loc.pos as usize,
                        source_name,
                        doubles,
                        None,
                        None,
                        false,
                        format!(
                            "stored into {} again while already held",
                            tier_label(index, loc.tier)
                        ),
                    ));
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
                        raw.push(finding(
                            rule,
                            w.child,
                            worigin,
                            wloc.pos as usize,
                            wsource,
                            w.hashes.to_vec(),
                            Some(*h),
                            Some(i),
                            inferred,
                            msg,
                        ));
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
                    raw.push(finding(
                        Rule::RemoveUnknown,
                        i,
                        origin,
                        loc.pos as usize,
                        source_name,
                        unknown,
                        None,
                        None,
                        false,
                        format!(
                            "removed from {} which does not hold it",
                            tier_label(index, loc.tier)
                        ),
                    ));
                }
            }
            KvEvent::AllBlocksCleared => presence.clear_source(loc.source),
        }
    }

    /// Assemble the [`Analysis`] (runs any remaining work first; after [`Stage::Done`] it only
    /// moves results).
    pub(crate) fn finish(self, trace: &Trace) -> Analysis {
        self.finish_parts(trace).0
    }

    /// [`Run::finish`], also returning the block id interner.
    pub(crate) fn finish_parts(mut self, trace: &Trace) -> (Analysis, Interner) {
        while self.stage != Stage::Done {
            self.advance(trace, usize::MAX, None, None);
        }
        let Run {
            config,
            index,
            interner,
            kinds,
            fin,
            ..
        } = self;
        let analysis = Analysis {
            index: index.idx,
            config,
            findings: fin.findings,
            violations: fin.violations,
            verdict_kinds: kinds,
            losses: fin.losses,
        };
        (analysis, interner)
    }

    /// Enter the finishing stage: list the children whose parent never arrived.
    fn start_finish(&mut self) {
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
    fn finish_step(&mut self, trace: &Trace, budget: usize) -> (usize, bool) {
        let index = &self.index.idx;
        let fin = &mut self.fin;
        let mut work = 0usize;
        let mut heavy = false;
        match fin.step {
            FinishStep::Leftovers => {
                // Children whose parent never arrived anywhere.
                for (p, w) in fin.leftovers.by_ref() {
                    work += 1;
                    if !self.presence.ever(self.interner.get(p)) {
                        if let Some(wloc) = index.events.get(w.child).copied() {
                            let worigin = match trace.records.get(wloc.record as usize) {
                                Some(TraceRecord::Batch(b)) => b.origin,
                                _ => 0,
                            };
                            let wsource = source_name_of(index, w.source);
                            self.raw.push(finding(
                                Rule::UnknownParent,
                                w.child,
                                worigin,
                                wloc.pos as usize,
                                wsource,
                                w.hashes.to_vec(),
                                Some(p),
                                None,
                                false,
                                format!("parent {p} is never stored in this trace"),
                            ));
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
                    self.raw.push(finding(
                        Rule::ConsumerLoss,
                        root.event,
                        origin,
                        loc.pos as usize,
                        src,
                        root.first_block.map_or_else(Vec::new, |b| vec![b]),
                        root.missing_parent,
                        None,
                        false,
                        format!(
                            "{}: {} ({} event(s), {} block(s) lost including cascade)",
                            kind.as_str(),
                            verdict.map_or("lost", VerdictKind::as_str),
                            root.events,
                            root.blocks
                        ),
                    ));
                }
                if fin.step == FinishStep::Sort {
                    fin.model = 0;
                    fin.pos = 0;
                    // The sort gets a call of its own.
                    heavy = true;
                }
            }
            FinishStep::Sort => {
                // The rule takes the key's low 4 bits.
                const _: () = assert!(Rule::ALL.len() <= 16);
                // By (event, rule), stable: sort small keys; the findings move only once, when
                // they are split.
                let mut order: Vec<(u64, u32)> = Vec::with_capacity(self.raw.len());
                for (k, f) in self.raw.iter().enumerate() {
                    order.push((((f.event as u64) << 4) | f.rule as u64, k as u32));
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
                fin.losses.push(LossSummary {
                    consumer: kind.as_str().into(),
                    blocks_lost,
                    events_lost,
                    pending_at_end: verdicts.get(&VerdictKind::Pending).copied().unwrap_or(0),
                    verdicts,
                    unreachable_prefixes: prefixes,
                    lost_hashes: hashes,
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
enum FinishStep {
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
struct Finishing {
    step: FinishStep,
    leftovers: std::vec::IntoIter<(u64, Waiter)>,
    /// Model being summarised (loss findings).
    model: usize,
    /// Position in the current list (roots, `order`).
    pos: usize,
    /// Indices into `raw` in (event, rule) order.
    order: Vec<u32>,
    violations: Vec<Finding>,
    findings: Vec<Finding>,
    losses: Vec<LossSummary>,
    done: usize,
    total: usize,
}

/// An empty finding (no allocation), left behind when findings are moved out.
fn finding_placeholder() -> Finding {
    Finding {
        rule: Rule::SeqGap,
        level: Level::Allow,
        event: 0,
        line: 0,
        index: 0,
        source: String::new(),
        hashes: Vec::new(),
        parent: None,
        related_event: None,
        inferred: false,
        message: String::new(),
        verdicts: SortedPairs::new(),
        cascade: SortedPairs::new(),
    }
}

/// The name of interned source `source` ("" if unknown): borrowed, [`finding`] copies it.
fn source_name_of(index: &EventIndex, source: u32) -> &str {
    index
        .sources
        .get(source as usize)
        .map_or("", String::as_str)
}

fn tier_label(index: &EventIndex, tier: u32) -> String {
    index
        .tiers
        .get(tier as usize)
        .map(Tier::label)
        .unwrap_or_default()
}

/// A finding at the default level (the configured level is applied when the run finishes).
#[allow(clippy::too_many_arguments)]
fn finding(
    rule: Rule,
    event: usize,
    line: u64,
    index: usize,
    source: &str,
    hashes: Vec<u64>,
    parent: Option<u64>,
    related_event: Option<usize>,
    inferred: bool,
    message: String,
) -> Finding {
    Finding {
        rule,
        level: rule.default_level(),
        event,
        line,
        index,
        source: source.to_owned(),
        hashes,
        parent,
        related_event,
        inferred,
        message,
        verdicts: SortedPairs::new(),
        cascade: SortedPairs::new(),
    }
}
