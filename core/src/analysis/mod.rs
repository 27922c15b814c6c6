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
mod pairs;
pub mod rules;
mod run;

use serde::{Deserialize, Serialize};

pub use compare::{compare, TraceDiff};
pub use pairs::SortedPairs;
pub use rules::{Level, Rule, RuleError, RuleLevels};
pub(crate) use run::{Interner, Recorder, Run, Stage};

use crate::consumers::{
    str_hash, ConsumerConfig, ConsumerKind, EventCtx, EventVerdict, HashChain, Resolution,
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
    /// Interned source id (see [`EventIndex::sources`]).
    pub source: u32,
    /// Interned tier id (see [`EventIndex::tiers`]).
    pub tier: u32,
    /// DP rank (0 when absent).
    pub dp_rank: u32,
    /// Interned job id (see [`EventIndex::jobs`]), `u32::MAX` for none (GPU events).
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

/// Builds an [`EventIndex`] record by record (resumable, see [`Run`]).
#[derive(Default)]
pub(crate) struct IndexBuilder {
    pub(crate) idx: EventIndex,
    /// Source ids by name hash.
    sources: HashChain,
    /// Job ids by key hash, and each job's key.
    jobs: HashChain,
    job_keys: Vec<JobKey>,
}

impl IndexBuilder {
    /// Index batch record `ri`.
    pub(crate) fn batch(&mut self, ri: usize, b: &crate::trace::TraceBatch) {
        let idx = &mut self.idx;
        let sh = str_hash(&b.source);
        let found = self.sources.find(sh, |id| {
            idx.sources.get(id as usize).map(String::as_str) == Some(b.source.as_str())
        });
        let sid = match found {
            Some(id) => id,
            None => {
                let id = idx.sources.len() as u32;
                idx.sources.push(b.source.clone());
                idx.engine_block_sizes.push(None);
                self.sources.push(sh, id);
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
            // A trace has a handful of tiers: a linear search, no hash map type of its own.
            let tid = match idx.tiers.iter().position(|t| *t == tier) {
                Some(id) => id as u32,
                None => {
                    idx.tiers.push(tier.clone());
                    (idx.tiers.len() - 1) as u32
                }
            };
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
                    let kh = {
                        use std::hash::BuildHasher;
                        rustc_hash::FxBuildHasher.hash_one(&k)
                    };
                    let keys = &self.job_keys;
                    let found = self.jobs.find(kh, |id| keys.get(id as usize) == Some(&k));
                    let id = found.unwrap_or_else(|| {
                        let id = idx.jobs.len() as u32;
                        self.jobs.push(kh, id);
                        self.job_keys.push(k);
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
}

impl EventIndex {
    /// Build the index (interning sources, tiers and jobs).
    pub fn build(trace: &Trace) -> EventIndex {
        let mut b = IndexBuilder::default();
        for (ri, rec) in trace.records.iter().enumerate() {
            if let TraceRecord::Batch(batch) = rec {
                b.batch(ri, batch);
            }
        }
        b.idx
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
    pub verdicts: SortedPairs<String, VerdictKind>,
    /// Per consumer: how many later events were lost because this one was dropped.
    #[serde(default)]
    pub cascade: SortedPairs<String, usize>,
}

impl Finding {
    /// A finding of `rule` at event `event`, at the rule's default level (the configured level
    /// is applied when the run finishes); the other fields are set by the builder methods.
    pub(crate) fn new(rule: Rule, event: usize, message: String) -> Finding {
        Finding {
            rule,
            level: rule.default_level(),
            event,
            line: 0,
            index: 0,
            source: String::new(),
            hashes: Vec::new(),
            parent: None,
            related_event: None,
            inferred: false,
            message,
            verdicts: SortedPairs::new(),
            cascade: SortedPairs::new(),
        }
    }

    /// Its batch's line (or batch number) and its position in the batch.
    pub(crate) fn at(mut self, line: u64, index: usize) -> Finding {
        self.line = line;
        self.index = index;
        self
    }

    /// Its source name.
    pub(crate) fn source(mut self, source: &str) -> Finding {
        source.clone_into(&mut self.source);
        self
    }

    /// The hashes concerned.
    pub(crate) fn hashes(mut self, hashes: Vec<u64>) -> Finding {
        self.hashes = hashes;
        self
    }

    /// The parent concerned.
    pub(crate) fn parent(self, parent: u64) -> Finding {
        self.parent_opt(Some(parent))
    }

    /// The parent concerned, if any.
    pub(crate) fn parent_opt(mut self, parent: Option<u64>) -> Finding {
        self.parent = parent;
        self
    }

    /// The related event (the later parent store of a reorder).
    pub(crate) fn related(mut self, event: usize) -> Finding {
        self.related_event = Some(event);
        self
    }

    /// Whether the job classification was inferred.
    pub(crate) fn inferred(mut self, inferred: bool) -> Finding {
        self.inferred = inferred;
        self
    }
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
    pub verdicts: SortedPairs<VerdictKind, usize>,
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
    Run::new(trace, config).finish(trace)
}

/// Analyse a trace and stream every consumer verdict to `sink` (event index, consumer, verdict)
/// as it is produced (used by `kvscope verdicts`). Resolutions of earlier pending events are
/// reported through the returned [`Analysis`]' `verdict_kinds`.
pub fn analyze_with(
    trace: &Trace,
    config: &AnalysisConfig,
    sink: &mut VerdictSink<'_>,
) -> Analysis {
    let mut run = Run::new(trace, config);
    while run.stage() != Stage::Done {
        run.advance(trace, usize::MAX, Some(&mut *sink), None);
    }
    run.finish(trace)
}

#[cfg(test)]
mod tests;
