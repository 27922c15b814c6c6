//! Ordering analysis of a trace: the violation index (every child delivered before its
//! parent, classified), lint findings with levels, the consumer models' verdicts and losses,
//! and the comparison of two traces of the same scenario.
//!
//! ```
//! use kvscope_core::analysis::{analyze, AnalysisConfig, Rule};
//! use kvscope_core::consumers::testkit::{batch, stored, trace};
//!
//! // One CPU job announcing child 2 before its parent 1 (legacy order).
//! let t = trace(vec![batch("pod-a", 0, vec![
//!     stored(&[2], Some(1), Some("CPU"), 16),
//!     stored(&[1], None, Some("CPU"), 16),
//! ])]);
//! let a = analyze(&t, &AnalysisConfig::default());
//! assert_eq!(a.count(Rule::ChildBeforeParentInJob), 1);
//! assert!(a.has_deny());
//! ```

pub mod compare;
pub mod rules;

use std::collections::BTreeMap;

type HashMap<K, V> = std::collections::HashMap<K, V, rustc_hash::FxBuildHasher>;
type HashSet<K> = std::collections::HashSet<K, rustc_hash::FxBuildHasher>;

use serde::{Deserialize, Serialize};

pub use compare::{compare, TraceDiff};
pub use rules::{Level, Rule, RuleError, RuleLevels};

use crate::consumers::{
    AnyConsumer, Consumer, ConsumerConfig, ConsumerKind, EventCtx, EventVerdict, Resolution,
    VerdictKind,
};
use crate::event::{KvEvent, Tier};
use crate::trace::{ProvenanceKind, Trace, TraceRecord};

/// What to analyse and how.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct AnalysisConfig {
    /// Consumer models to run (all by default).
    pub consumers: Vec<ConsumerKind>,
    /// Their configuration.
    pub consumer_config: ConsumerConfig,
    /// Rule levels.
    pub rules: RuleLevels,
}

impl Default for AnalysisConfig {
    fn default() -> Self {
        AnalysisConfig {
            consumers: ConsumerKind::ALL.to_vec(),
            consumer_config: ConsumerConfig::default(),
            rules: RuleLevels::default(),
        }
    }
}

/// Where one delivered event sits in the trace (compact: 24 bytes per event).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EventLoc {
    /// Index of the batch record in `Trace::records`.
    pub record: u32,
    /// 0-based index of the event in its batch.
    pub pos: u32,
    /// Interned source id (see [`Analysis::sources`]).
    pub source: u32,
    /// Interned tier id (see [`Analysis::tiers`]).
    pub tier: u32,
    /// DP rank (0 when absent).
    pub dp_rank: u32,
    /// Interned job id (see [`Analysis::jobs`]), `u32::MAX` for none (GPU events).
    pub job: u32,
}

/// The flat, global index of a trace's delivered events.
#[derive(Clone, Debug, Default)]
pub struct EventIndex {
    /// One entry per event, in delivery order.
    pub events: Vec<EventLoc>,
    /// Source names by id.
    pub sources: Vec<String>,
    /// Tiers by id.
    pub tiers: Vec<Tier>,
    /// Jobs by id.
    pub jobs: Vec<Job>,
    /// Engine block size per source id: the `block_size` of the source's first `BlockStored`
    /// that carries tokens (what `auto` router block sizes resolve to).
    pub engine_block_sizes: Vec<Option<u32>>,
}

/// A transfer job: explicit (provenance `job_id`) or inferred (a batch's run of consecutive
/// same-medium connector events).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Job {
    /// Interned id.
    pub id: u32,
    /// The provenance job id, when explicit.
    pub job_id: Option<u64>,
    /// True when inferred from batch structure (no provenance).
    pub inferred: bool,
    /// Source name.
    pub source: String,
    /// Tier label.
    pub tier: String,
    /// Provenance kind of its first event, when known.
    pub kind: Option<ProvenanceKind>,
    /// Global index of its first event.
    pub first_event: usize,
    /// Global index of its last event.
    pub last_event: usize,
    /// Number of events.
    pub events: usize,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum JobKey {
    Explicit(u32, u32, u64),
    Inferred(u32, u32),
}

impl EventIndex {
    /// Build the index (interning sources, tiers and jobs).
    pub fn build(trace: &Trace) -> EventIndex {
        let mut idx = EventIndex::default();
        let mut sources: HashMap<String, u32> = HashMap::default();
        let mut tiers: HashMap<Tier, u32> = HashMap::default();
        let mut jobs: HashMap<JobKey, u32> = HashMap::default();
        for (ri, rec) in trace.records.iter().enumerate() {
            let TraceRecord::Batch(b) = rec else { continue };
            let sid = match sources.get(b.source.as_str()) {
                Some(id) => *id,
                None => {
                    let id = idx.sources.len() as u32;
                    idx.sources.push(b.source.clone());
                    idx.engine_block_sizes.push(None);
                    sources.insert(b.source.clone(), id);
                    id
                }
            };
            let mut run = 0u32;
            let mut prev_medium: Option<Option<&str>> = None;
            for (pos, ev) in b.events.iter().enumerate() {
                if let KvEvent::BlockStored(st) = ev {
                    if !st.token_ids.is_empty() {
                        if let Some(slot @ None) = idx.engine_block_sizes.get_mut(sid as usize) {
                            *slot = Some(st.block_size);
                        }
                    }
                }
                let prov = b.provenance.as_ref().and_then(|p| p.get(pos));
                let tier = match ev.tier() {
                    Some(Tier::Storage(None)) => match prov {
                        Some(p) if p.tier.starts_with("STORAGE") => {
                            Tier::Storage(p.tier.split_once(':').map(|x| x.1.to_owned()))
                        }
                        _ => Tier::Storage(None),
                    },
                    Some(t) => t,
                    None => Tier::Gpu,
                };
                let tid = *tiers.entry(tier.clone()).or_insert_with(|| {
                    idx.tiers.push(tier.clone());
                    (idx.tiers.len() - 1) as u32
                });
                let medium = ev.medium();
                if prev_medium != Some(medium) {
                    run += 1;
                    prev_medium = Some(medium);
                }
                let key = match prov.and_then(|p| p.job_id) {
                    Some(j) => Some(JobKey::Explicit(sid, tid, j)),
                    None if prov.is_none()
                        && tier != Tier::Gpu
                        && !matches!(ev, KvEvent::AllBlocksCleared) =>
                    {
                        Some(JobKey::Inferred(ri as u32, run))
                    }
                    None => None,
                };
                let gi = idx.events.len();
                let job = match key {
                    None => u32::MAX,
                    Some(k) => {
                        let inferred = matches!(k, JobKey::Inferred(..));
                        let id = *jobs.entry(k).or_insert_with(|| {
                            idx.jobs.push(Job {
                                id: idx.jobs.len() as u32,
                                job_id: prov.and_then(|p| p.job_id),
                                inferred,
                                source: b.source.clone(),
                                tier: tier.label(),
                                kind: prov.map(|p| p.kind),
                                first_event: gi,
                                last_event: gi,
                                events: 0,
                            });
                            (idx.jobs.len() - 1) as u32
                        });
                        if let Some(j) = idx.jobs.get_mut(id as usize) {
                            j.last_event = gi;
                            j.events += 1;
                        }
                        id
                    }
                };
                idx.events.push(EventLoc {
                    record: ri as u32,
                    pos: pos as u32,
                    source: sid,
                    tier: tid,
                    dp_rank: b.dp_rank.unwrap_or(0),
                    job,
                });
            }
        }
        idx
    }

    /// The event at a global index.
    pub fn event<'t>(
        &self,
        trace: &'t Trace,
        i: usize,
    ) -> Option<(&'t crate::trace::TraceBatch, &'t KvEvent)> {
        let loc = self.events.get(i)?;
        match trace.records.get(loc.record as usize)? {
            TraceRecord::Batch(b) => b.events.get(loc.pos as usize).map(|e| (b, e)),
            _ => None,
        }
    }

    /// The consumer context of event `i`.
    pub fn ctx<'t>(&self, trace: &'t Trace, i: usize) -> Option<(EventCtx<'t>, &'t KvEvent)> {
        let loc = self.events.get(i)?;
        let (b, ev) = self.event(trace, i)?;
        let ctx = EventCtx {
            index: i,
            source: loc.source,
            dp_rank: loc.dp_rank,
            tier: loc.tier,
            provenance: b.provenance.as_ref().and_then(|p| p.get(loc.pos as usize)),
            batch: &b.events,
        };
        Some((ctx, ev))
    }
}

/// One reported finding.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Finding {
    /// The rule.
    pub rule: Rule,
    /// Its level in this run.
    pub level: Level,
    /// Global index of the offending event (the child, the removal, the batch after a gap).
    pub event: usize,
    /// 1-based JSONL line / msgpack batch number of that event (0 when not tied to an event).
    pub line: u64,
    /// 0-based index of the event in its batch.
    pub index: usize,
    /// Source name.
    pub source: String,
    /// The hashes concerned.
    pub hashes: Vec<u64>,
    /// The parent concerned (reorders, unknown parents).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent: Option<u64>,
    /// Global index of the related event (the later parent store for reorders).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub related_event: Option<usize>,
    /// Whether the job classification was inferred (no provenance).
    #[serde(default)]
    pub inferred: bool,
    /// Human-readable detail.
    pub message: String,
    /// Per consumer: the event's final verdict.
    #[serde(default)]
    pub verdicts: BTreeMap<String, VerdictKind>,
    /// Per consumer: how many later events were lost because this one was dropped.
    #[serde(default)]
    pub cascade: BTreeMap<String, usize>,
}

/// A prefix a consumer can no longer route to: a lost event whose loss was not caused by an
/// earlier loss, and what it took down with it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct UnreachablePrefix {
    /// Global index of the root lost event.
    pub event: usize,
    /// The parent it could not attach to (none for truncations / skips).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub missing_parent: Option<u64>,
    /// Its first block.
    pub first_block: Option<u64>,
    /// Events lost in total (itself plus its cascade).
    pub events: usize,
    /// Blocks lost in total.
    pub blocks: usize,
}

/// What one consumer model lost over the whole trace.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LossSummary {
    /// The model.
    pub consumer: String,
    /// Stored blocks not indexed or not reachable at the end.
    pub blocks_lost: usize,
    /// `BlockStored` events with at least one lost block.
    pub events_lost: usize,
    /// Final verdict counts over all events.
    pub verdicts: BTreeMap<VerdictKind, usize>,
    /// Events still pending at the end (ideal).
    pub pending_at_end: usize,
    /// Unreachable prefixes (root losses with their cascade), in delivery order.
    pub unreachable_prefixes: Vec<UnreachablePrefix>,
    /// Every lost block hash, sorted and de-duplicated (for comparisons).
    #[serde(skip)]
    pub lost_hashes: Vec<u64>,
}

/// The result of analysing a trace.
#[derive(Clone, Debug)]
pub struct Analysis {
    /// The event index.
    pub index: EventIndex,
    /// The configuration used.
    pub config: AnalysisConfig,
    /// Findings at warn or deny level (allow-level ones are dropped), in event order.
    pub findings: Vec<Finding>,
    /// All child-before-parent violations regardless of level (indices into the full list
    /// below), sorted by event.
    pub violations: Vec<Finding>,
    /// Per consumer (in `config.consumers` order): the final verdict kind of every event.
    pub verdict_kinds: Vec<Vec<VerdictKind>>,
    /// Per consumer: loss summary.
    pub losses: Vec<LossSummary>,
}

impl Analysis {
    /// Number of reported findings of `rule` (0 for allowed rules).
    pub fn count(&self, rule: Rule) -> usize {
        self.findings.iter().filter(|f| f.rule == rule).count()
    }

    /// Whether any deny-level finding exists.
    pub fn has_deny(&self) -> bool {
        self.findings.iter().any(|f| f.level == Level::Deny)
    }

    /// The loss summary of one consumer.
    pub fn loss(&self, kind: ConsumerKind) -> Option<&LossSummary> {
        self.losses.iter().find(|l| l.consumer == kind.as_str())
    }

    /// The final verdict kind of event `i` for `kind`.
    pub fn verdict_kind(&self, kind: ConsumerKind, i: usize) -> Option<VerdictKind> {
        let c = self.config.consumers.iter().position(|k| *k == kind)?;
        self.verdict_kinds.get(c)?.get(i).copied()
    }

    /// Total number of delivered events.
    pub fn event_count(&self) -> usize {
        self.index.events.len()
    }
}

/// A callback receiving `(event index, consumer, verdict at delivery, resolutions)`.
pub type VerdictSink<'a> = dyn FnMut(usize, ConsumerKind, &EventVerdict, &[Resolution]) + 'a;

/// Analyse a trace.
pub fn analyze(trace: &Trace, config: &AnalysisConfig) -> Analysis {
    run_inner(trace, config, None, None)
}

/// Analyse a trace and stream every consumer verdict to `sink` (event index, consumer, verdict)
/// as it is produced (used by `kvscope verdicts`). Resolutions of earlier pending events are
/// reported through the returned [`Analysis`]' `verdict_kinds`.
pub fn analyze_with(
    trace: &Trace,
    config: &AnalysisConfig,
    sink: &mut VerdictSink<'_>,
) -> Analysis {
    run_inner(trace, config, Some(sink), None)
}

/// Receives every consumer's verdict and lane changes (the replay engine's recorder).
pub(crate) trait Recorder {
    fn verdict(&mut self, event: usize, consumer: usize, v: &EventVerdict, resolved: &[Resolution]);
    fn lanes(
        &mut self,
        event: usize,
        consumer: usize,
        before: &crate::consumers::Lanes,
        after: &crate::consumers::Lanes,
    );
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
    hashes: Vec<u64>,
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
}

pub(crate) fn run_inner(
    trace: &Trace,
    config: &AnalysisConfig,
    mut sink: Option<&mut VerdictSink<'_>>,
    mut recorder: Option<&mut dyn Recorder>,
) -> Analysis {
    let index = EventIndex::build(trace);
    let n = index.events.len();
    let mut consumers: Vec<AnyConsumer> = config
        .consumers
        .iter()
        .map(|k| AnyConsumer::for_engines(*k, &config.consumer_config, &index.engine_block_sizes))
        .collect();
    let mut kinds: Vec<Vec<VerdictKind>> = vec![Vec::with_capacity(n); consumers.len()];
    let mut lost_blocks: Vec<Vec<(usize, u64)>> = vec![Vec::new(); consumers.len()];
    let mut tracks: Vec<LossTrack> = (0..consumers.len()).map(|_| LossTrack::default()).collect();
    let mut presence = Presence::default();
    let mut waiting: HashMap<u64, Vec<Waiter>> = HashMap::default();
    let mut raw: Vec<Finding> = Vec::new();
    let mut resolved = Vec::new();
    let mut last_seq: HashMap<(u32, u32), u64> = HashMap::default();
    let mut gap_records: Vec<(usize, &crate::trace::SeqGap)> = Vec::new();

    // Gap records and sequence numbers (per record, before its events).
    let mut gi = 0usize;
    for rec in &trace.records {
        match rec {
            TraceRecord::Gap(g) => gap_records.push((gi, g)),
            TraceRecord::Batch(b) => {
                if let Some(loc) = index.events.get(gi) {
                    let key = (loc.source, b.dp_rank.unwrap_or(0));
                    if let Some(prev) = last_seq.insert(key, b.seq) {
                        if b.seq != prev.wrapping_add(1) {
                            raw.push(Finding {
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
                                    format!("dp_rank {}: expected seq {}, got {} ({} batch(es) missing)", key.1, prev + 1, b.seq, b.seq - prev - 1)
                                } else {
                                    format!("dp_rank {}: seq went back from {} to {} (publisher restart or duplicate)", key.1, prev, b.seq)
                                },
                                verdicts: BTreeMap::new(),
                                cascade: BTreeMap::new(),
                            });
                        }
                    }
                }
                gi += b.events.len();
            }
            _ => {}
        }
    }
    for (at, g) in gap_records {
        let line = index
            .events
            .get(at)
            .and_then(|l| match trace.records.get(l.record as usize) {
                Some(TraceRecord::Batch(b)) => Some(b.origin),
                _ => None,
            });
        raw.push(Finding {
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

    for i in 0..n {
        let Some((ctx, ev)) = index.ctx(trace, i) else {
            continue;
        };
        let Some(loc) = index.events.get(i).copied() else {
            continue;
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
        // Consumers.
        for (c, consumer) in consumers.iter_mut().enumerate() {
            resolved.clear();
            let before = recorder.as_ref().map(|_| consumer.lanes().clone());
            let v = consumer.apply(&ctx, ev, &mut resolved);
            if let Some(s) = sink.as_mut() {
                s(i, consumer.kind(), &v, &resolved);
            }
            if let (Some(r), Some(before)) = (recorder.as_mut(), before) {
                r.verdict(i, c, &v, &resolved);
                r.lanes(i, c, &before, consumer.lanes());
            }
            kinds[c].push(v.verdict);
            for r in &resolved {
                if let Some(k) = kinds[c].get_mut(r.event) {
                    *k = r.verdict;
                }
            }
            if matches!(ev, KvEvent::BlockStored(_)) {
                let lost: Vec<u64> = v
                    .blocks
                    .iter()
                    .filter(|b| !matches!(b.verdict, VerdictKind::Applied | VerdictKind::Replayed))
                    .map(|b| b.hash)
                    .collect();
                if !lost.is_empty() {
                    let t = &mut tracks[c];
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
                        lost_blocks[c].push((i, *h));
                    }
                }
            }
        }
        // Violation index.
        match ev {
            KvEvent::BlockStored(e) => {
                let hashes: smallvec::SmallVec<[u64; 4]> =
                    e.block_hashes.iter().map(|h| h.as_u64()).collect();
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
                            hashes: hashes.to_vec(),
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
                            tier_label(&index, loc.tier)
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
                            tier_label(&index, loc.tier),
                            if loc.source != w.source { format!(" from {source_name}") } else { String::new() },
                            if inferred { "; job inferred from batch structure" } else { "" }
                        );
                        raw.push(finding(
                            rule,
                            w.child,
                            worigin,
                            &wloc,
                            &wsource,
                            w.hashes,
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
                            tier_label(&index, loc.tier)
                        ),
                    ));
                }
            }
            KvEvent::AllBlocksCleared => presence.clear_source(loc.source),
        }
    }
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
            w.hashes,
            Some(p),
            None,
            false,
            format!("parent {p} is never stored in this trace"),
        ));
    }

    // Consumer-loss findings: one per unreachable prefix root.
    for (c, kind) in config.consumers.iter().enumerate() {
        for root in tracks[c].roots.values() {
            let Some(loc) = index.events.get(root.event).copied() else {
                continue;
            };
            let origin = match trace.records.get(loc.record as usize) {
                Some(TraceRecord::Batch(b)) => b.origin,
                _ => 0,
            };
            let verdict = kinds[c].get(root.event).copied();
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
        let is_gap = matches!(f.rule, Rule::SeqGap | Rule::SeqGapRecovered);
        if f.line == 0 && !is_gap {
            continue;
        }
        for (c, kind) in config.consumers.iter().enumerate() {
            if is_gap {
                break;
            }
            if let Some(v) = kinds[c].get(f.event) {
                f.verdicts.insert(kind.as_str().into(), *v);
            }
            let casc = tracks[c].cascade.get(&f.event).copied().unwrap_or(0);
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
        .enumerate()
        .map(|(c, kind)| {
            let mut verdicts = BTreeMap::new();
            for k in &kinds[c] {
                *verdicts.entry(*k).or_insert(0usize) += 1;
            }
            let still_lost = |e: &usize| kinds[c].get(*e) != Some(&VerdictKind::Replayed);
            let mut events: Vec<usize> = lost_blocks[c]
                .iter()
                .map(|(e, _)| *e)
                .filter(still_lost)
                .collect();
            events.dedup();
            let mut hashes: Vec<u64> = lost_blocks[c]
                .iter()
                .filter(|(e, _)| still_lost(e))
                .map(|(_, h)| *h)
                .collect();
            let blocks_lost = hashes.len();
            hashes.sort_unstable();
            hashes.dedup();
            let prefixes = tracks[c]
                .roots
                .values()
                .filter(|r| kinds[c].get(r.event) != Some(&VerdictKind::Replayed))
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
        config: config.clone(),
        findings,
        violations,
        verdict_kinds: kinds,
        losses,
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

#[cfg(test)]
mod tests;
