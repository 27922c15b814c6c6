//! The analysis pass as a resumable state machine ([`Run`]): index the trace, check sequence
//! numbers, feed every event to the consumer models and the violation index, then assemble the
//! [`Analysis`]. Each stage can be advanced by a budget of events, so a caller (the replay
//! builder, hence the web app) can do the work in slices and show progress; [`super::analyze`]
//! runs it in one go.

use std::collections::BTreeMap;

use super::{
    Analysis, AnalysisConfig, EventIndex, EventLoc, Finding, IndexBuilder, Level, LossSummary,
    Rule, UnreachablePrefix, VerdictSink,
};
use crate::consumers::{
    hashes_of, AnyConsumer, Consumer, EventVerdict, Hashes, LaneCounts, LaneKey, Resolution,
    VerdictKind,
};
use crate::event::{KvEvent, Tier};
use crate::trace::{ProvenanceKind, Trace, TraceRecord};

type HashMap<K, V> = std::collections::HashMap<K, V, rustc_hash::FxBuildHasher>;
type HashSet<K> = std::collections::HashSet<K, rustc_hash::FxBuildHasher>;

/// Receives every consumer's verdict and lane changes (the replay engine's recorder).
pub(crate) trait Recorder {
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

/// Lane presence for the violation index (what a tier of a source holds).
#[derive(Default)]
struct Presence {
    lane: HashSet<(u64, u32, u32)>,
    source: HashMap<(u64, u32), u32>,
    global: HashMap<u64, u32>,
    ever: HashSet<u64>,
}

impl Presence {
    fn add(&mut self, h: u64, s: u32, t: u32) -> bool {
        self.ever.insert(h);
        if !self.lane.insert((h, s, t)) {
            return false;
        }
        *self.source.entry((h, s)).or_default() += 1;
        *self.global.entry(h).or_default() += 1;
        true
    }
    fn remove(&mut self, h: u64, s: u32, t: u32) -> bool {
        if !self.lane.remove(&(h, s, t)) {
            return false;
        }
        dec(&mut self.source, (h, s));
        dec(&mut self.global, h);
        true
    }
    fn clear_source(&mut self, s: u32) {
        let gone: Vec<(u64, u32, u32)> = self.lane.iter().filter(|k| k.1 == s).copied().collect();
        for (h, s, t) in gone {
            self.remove(h, s, t);
        }
    }
    fn scope_missing(&self, h: u64, s: u32, t: u32) -> Option<Scope> {
        if self.lane.contains(&(h, s, t)) {
            None
        } else if self.source.contains_key(&(h, s)) {
            Some(Scope::Lane)
        } else if self.global.contains_key(&h) {
            Some(Scope::Source)
        } else {
            Some(Scope::Global)
        }
    }
}

fn dec<K: std::hash::Hash + Eq>(m: &mut HashMap<K, u32>, k: K) {
    if let Some(v) = m.get_mut(&k) {
        *v -= 1;
        if *v == 0 {
            m.remove(&k);
        }
    }
}

/// Per-consumer loss bookkeeping during a run.
#[derive(Default)]
struct LossTrack {
    /// Lost block → root lost event.
    root_of: HashMap<u64, usize>,
    /// Root event → (events, blocks, missing parent, first block).
    roots: BTreeMap<usize, UnreachablePrefix>,
    /// Event → number of later events lost because of it.
    cascade: HashMap<usize, usize>,
    /// Final verdict counts (kept up to date as pending events resolve).
    counts: [usize; VerdictKind::COUNT],
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
    last_seq: HashMap<(u32, u32), u64>,
    empty_batches: Vec<usize>,
    gap_records: Vec<(usize, usize)>,
    consumers: Vec<AnyConsumer>,
    kinds: Vec<Vec<VerdictKind>>,
    lost_blocks: Vec<Vec<(usize, u64)>>,
    tracks: Vec<LossTrack>,
    presence: Presence,
    waiting: HashMap<u64, Vec<Waiter>>,
    raw: Vec<Finding>,
    resolved: Vec<Resolution>,
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
            last_seq: HashMap::default(),
            gap_records: Vec::new(),
            consumers: Vec::new(),
            kinds: Vec::new(),
            lost_blocks: Vec::new(),
            tracks: Vec::new(),
            presence: Presence::default(),
            waiting: HashMap::default(),
            raw: Vec::new(),
            resolved: Vec::new(),
            lane_changes: Vec::new(),
            next: 0,
        }
    }

    /// Number of delivered events in the trace.
    pub(crate) fn total(&self) -> usize {
        self.total
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
            Stage::Done => self.total,
        }
    }

    /// The event index (complete once past [`Stage::Index`]).
    pub(crate) fn index(&self) -> &EventIndex {
        &self.index.idx
    }

    /// Events fed to the models so far (`0..events_done()`).
    pub(crate) fn events_done(&self) -> usize {
        self.next
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
                        self.stage = Stage::Done;
                    }
                    return spent.max(1);
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
        let Some(prev) = self.last_seq.insert(key, b.seq) else {
            return;
        };
        if b.seq == prev.wrapping_add(1) {
            return;
        }
        self.raw.push(Finding {
            rule: Rule::SeqGap,
            level: Level::Warn,
            event: gi,
            line: b.origin,
            index: 0,
            source: b.source.clone(),
            hashes: vec![],
            parent: None,
            related_event: None,
            inferred: false,
            message: if b.seq > prev {
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
            },
            verdicts: BTreeMap::new(),
            cascade: BTreeMap::new(),
        });
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
            self.raw.push(Finding {
                rule: if g.recovered {
                    Rule::SeqGapRecovered
                } else {
                    Rule::SeqGap
                },
                level: Level::Warn,
                event: at,
                line: line.unwrap_or(0),
                index: 0,
                source: g.source.clone(),
                hashes: vec![],
                parent: None,
                related_event: None,
                inferred: false,
                message: format!(
                    "gap record: dp_rank {:?} expected seq {}, received {}{}",
                    g.dp_rank,
                    g.expected_seq,
                    g.received_seq,
                    if g.recovered {
                        " (recovered)"
                    } else {
                        " (not recovered)"
                    }
                ),
                verdicts: BTreeMap::new(),
                cascade: BTreeMap::new(),
            });
        }
    }

    /// Build the models once the index (hence the engine block sizes) is known.
    fn start_events(&mut self) {
        let index = &self.index.idx;
        let n = index.events.len();
        self.consumers = self
            .config
            .consumers
            .iter()
            .map(|k| {
                AnyConsumer::for_engines(
                    *k,
                    &self.config.consumer_config,
                    &index.engine_block_sizes,
                )
            })
            .collect();
        let c = self.consumers.len();
        self.kinds = (0..c).map(|_| Vec::with_capacity(n)).collect();
        self.lost_blocks = vec![Vec::new(); c];
        self.tracks = (0..c).map(|_| LossTrack::default()).collect();
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
        let source_name: &str = index
            .sources
            .get(loc.source as usize)
            .map(String::as_str)
            .unwrap_or("");
        let resolved = &mut self.resolved;
        let recording = recorder.is_some();
        // Consumers.
        for (c, consumer) in self.consumers.iter_mut().enumerate() {
            resolved.clear();
            consumer.set_lane_log(recording);
            let v = consumer.apply(&ctx, ev, resolved);
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
                let lost: Hashes = v
                    .blocks
                    .iter()
                    .filter(|b| !matches!(b.verdict, VerdictKind::Applied | VerdictKind::Replayed))
                    .map(|b| b.hash)
                    .collect();
                if !lost.is_empty() {
                    let parent_root = v.missing_parent.and_then(|p| t.root_of.get(&p).copied());
                    let root = parent_root.unwrap_or(i);
                    if parent_root.is_some() {
                        *t.cascade.entry(root).or_default() += 1;
                    }
                    let entry = t.roots.entry(root).or_insert(UnreachablePrefix {
                        event: root,
                        missing_parent: v.missing_parent,
                        first_block: lost.first().copied(),
                        events: 0,
                        blocks: 0,
                    });
                    entry.events += 1;
                    entry.blocks += lost.len();
                    for h in &lost {
                        t.root_of.insert(*h, root);
                        if let Some(l) = self.lost_blocks.get_mut(c) {
                            l.push((i, *h));
                        }
                    }
                }
            }
        }
        // Violation index.
        let presence = &mut self.presence;
        let waiting = &mut self.waiting;
        let raw = &mut self.raw;
        match ev {
            KvEvent::BlockStored(e) => {
                let hashes = hashes_of(&e.block_hashes);
                let promotion = ctx
                    .provenance
                    .is_some_and(|p| p.kind == ProvenanceKind::Promotion);
                if let Some(p) = e.parent_block_hash.as_ref().map(|p| p.as_u64()) {
                    if let Some(scope) = presence.scope_missing(p, loc.source, loc.tier) {
                        // A parent stored earlier in this same event cannot be missing.
                        waiting.entry(p).or_default().push(Waiter {
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
                for h in &hashes {
                    if !presence.add(*h, loc.source, loc.tier) {
                        doubles.push(*h);
                    }
                }
                if !doubles.is_empty() {
                    raw.push(finding(
                        Rule::DoubleStore,
                        i,
                        origin,
                        &loc,
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
                for h in &hashes {
                    let Some(ws) = waiting.remove(h) else {
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
                        let wsource = index
                            .sources
                            .get(w.source as usize)
                            .cloned()
                            .unwrap_or_default();
                        let msg = format!(
                            "block {} delivered before its parent {}, which arrives at event {} ({}{}){}",
                            w.hashes.first().copied().unwrap_or_default(),
                            h,
                            i,
                            tier_label(index, loc.tier),
                            if loc.source != w.source { format!(" from {source_name}") } else { String::new() },
                            if inferred { "; job inferred from batch structure" } else { "" }
                        );
                        raw.push(finding(
                            rule,
                            w.child,
                            worigin,
                            &wloc,
                            &wsource,
                            w.hashes.to_vec(),
                            Some(*h),
                            Some(i),
                            inferred,
                            msg,
                        ));
                    }
                    if !keep.is_empty() {
                        waiting.insert(*h, keep);
                    }
                }
            }
            KvEvent::BlockRemoved(e) => {
                let mut unknown = Vec::new();
                for h in e.block_hashes.iter().map(|h| h.as_u64()) {
                    if !presence.remove(h, loc.source, loc.tier) {
                        unknown.push(h);
                    }
                }
                if !unknown.is_empty() {
                    raw.push(finding(
                        Rule::RemoveUnknown,
                        i,
                        origin,
                        &loc,
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

    /// Assemble the [`Analysis`] (runs any remaining work first). Cost: sorting the findings
    /// and the lost block hashes; nothing proportional to the number of events.
    pub(crate) fn finish(mut self, trace: &Trace) -> Analysis {
        while self.stage != Stage::Done {
            self.advance(trace, usize::MAX, None, None);
        }
        let Run {
            config,
            index,
            waiting,
            presence,
            mut raw,
            kinds,
            lost_blocks,
            tracks,
            ..
        } = self;
        let index = index.idx;
        // Children whose parent never arrived anywhere.
        let mut leftovers: Vec<(u64, Waiter)> = waiting
            .into_iter()
            .flat_map(|(p, ws)| ws.into_iter().map(move |w| (p, w)))
            .collect();
        leftovers.sort_by_key(|(_, w)| w.child);
        for (p, w) in leftovers {
            if presence.ever.contains(&p) {
                continue;
            }
            let wloc = index.events.get(w.child).copied();
            let Some(wloc) = wloc else { continue };
            let worigin = match trace.records.get(wloc.record as usize) {
                Some(TraceRecord::Batch(b)) => b.origin,
                _ => 0,
            };
            let wsource = index
                .sources
                .get(w.source as usize)
                .cloned()
                .unwrap_or_default();
            raw.push(finding(
                Rule::UnknownParent,
                w.child,
                worigin,
                &wloc,
                &wsource,
                w.hashes.to_vec(),
                Some(p),
                None,
                false,
                format!("parent {p} is never stored in this trace"),
            ));
        }

        // Consumer-loss findings: one per unreachable prefix root.
        for ((kind, track), kinds) in config.consumers.iter().zip(&tracks).zip(&kinds) {
            for root in track.roots.values() {
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
                let src = index
                    .sources
                    .get(loc.source as usize)
                    .cloned()
                    .unwrap_or_default();
                raw.push(finding(
                    Rule::ConsumerLoss,
                    root.event,
                    origin,
                    &loc,
                    &src,
                    root.first_block.into_iter().collect(),
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
        }

        // Attach verdicts and cascades, apply levels.
        raw.sort_by_key(|f| (f.event, f.rule));
        for f in &mut raw {
            f.level = config.rules.level(f.rule);
            // Gaps are not tied to an event's verdicts; neither are findings without a line.
            if f.line == 0 || matches!(f.rule, Rule::SeqGap | Rule::SeqGapRecovered) {
                continue;
            }
            for ((kind, track), kinds) in config.consumers.iter().zip(&tracks).zip(&kinds) {
                if let Some(v) = kinds.get(f.event) {
                    f.verdicts.insert(kind.as_str().into(), *v);
                }
                let casc = track.cascade.get(&f.event).copied().unwrap_or(0);
                f.cascade.insert(kind.as_str().into(), casc);
            }
        }
        let violations: Vec<Finding> = raw
            .iter()
            .filter(|f| f.rule.is_reorder())
            .cloned()
            .collect();
        let findings: Vec<Finding> = raw
            .into_iter()
            .filter(|f| f.level != Level::Allow)
            .collect();

        let losses = config
            .consumers
            .iter()
            .zip(&tracks)
            .zip(&kinds)
            .zip(&lost_blocks)
            .map(|(((kind, track), kinds), lost)| {
                let verdicts: BTreeMap<VerdictKind, usize> = VerdictKind::ALL
                    .iter()
                    .filter_map(|k| {
                        let n = track.counts[*k as usize];
                        (n > 0).then_some((*k, n))
                    })
                    .collect();
                let still_lost = |e: &usize| kinds.get(*e) != Some(&VerdictKind::Replayed);
                let mut events: Vec<usize> =
                    lost.iter().map(|(e, _)| *e).filter(still_lost).collect();
                events.dedup();
                let mut hashes: Vec<u64> = lost
                    .iter()
                    .filter(|(e, _)| still_lost(e))
                    .map(|(_, h)| *h)
                    .collect();
                let blocks_lost = hashes.len();
                hashes.sort_unstable();
                hashes.dedup();
                let prefixes = track
                    .roots
                    .values()
                    .filter(|r| kinds.get(r.event) != Some(&VerdictKind::Replayed))
                    .cloned()
                    .collect();
                LossSummary {
                    consumer: kind.as_str().into(),
                    blocks_lost,
                    events_lost: events.len(),
                    pending_at_end: verdicts.get(&VerdictKind::Pending).copied().unwrap_or(0),
                    verdicts,
                    unreachable_prefixes: prefixes,
                    lost_hashes: hashes,
                }
            })
            .collect();

        Analysis {
            index,
            config,
            findings,
            violations,
            verdict_kinds: kinds,
            losses,
        }
    }
}

fn tier_label(index: &EventIndex, tier: u32) -> String {
    index
        .tiers
        .get(tier as usize)
        .map(Tier::label)
        .unwrap_or_default()
}

#[allow(clippy::too_many_arguments)]
fn finding(
    rule: Rule,
    event: usize,
    line: u64,
    loc: &EventLoc,
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
        index: loc.pos as usize,
        source: source.to_owned(),
        hashes,
        parent,
        related_event,
        inferred,
        message,
        verdicts: BTreeMap::new(),
        cascade: BTreeMap::new(),
    }
}
