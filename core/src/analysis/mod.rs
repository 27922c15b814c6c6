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

#[cfg(feature = "compare")]
pub mod compare;
mod findings;
mod identity;
mod index;
mod pairs;
#[cfg(feature = "preconditions")]
mod preconditions;
#[cfg(not(feature = "preconditions"))]
#[path = "preconditions/off.rs"]
mod preconditions;
mod roots;
pub mod rules;
mod run;
mod watch;

/// Whether this build checks the routing-precondition rules (kvscope-core's `preconditions`
/// cargo feature; without it those rules exist but never fire: docs/rules.md).
pub const PRECONDITIONS: bool = cfg!(feature = "preconditions");

use serde::{Deserialize, Serialize};

pub(crate) use findings::Cursor as FindingCursor;
pub use findings::{FindingRef, FindingStore};
pub(crate) use identity::BlockKeys;
pub(crate) use index::IndexBuilder;
pub use index::{BatchOrder, EventIndex, EventLoc, Job, JobEvidence};
pub use pairs::SortedPairs;
pub use roots::Losses;
pub use rules::{Level, Rule, RuleError, RuleLevels};
pub(crate) use run::{Recorder, Run, Stage};

use crate::consumers::{ConsumerConfig, ConsumerKind, EventVerdict, Resolution, VerdictKind};
use crate::trace::{Trace, TraceHeader, TraceRecord};

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
    /// Number of workers (vLLM's `parallel_config.world_size`) that reported the trace's store
    /// jobs: with `W` workers, jobs finishing in one step can come out with up to `W - 1`
    /// descents (see [`BatchOrder`]). `None`: the trace header's `meta.world_size`, else 1.
    pub workers: Option<u32>,
    /// `silent-source`: a source that publishes nothing for more than this many times its
    /// median interval between batches, while other sources publish, is reported (default 10).
    pub silent_source_factor: u32,
}

impl AnalysisConfig {
    /// The worker count for `trace`: [`AnalysisConfig::workers`], else the header's
    /// `meta.world_size`, else 1 (vLLM's default world size); at least 1.
    pub fn workers_for(&self, trace: &Trace) -> u32 {
        let from_header = || {
            trace.records.iter().find_map(|r| match r {
                TraceRecord::Header(h) => header_workers(h),
                _ => None,
            })
        };
        self.workers.or_else(from_header).unwrap_or(1).max(1)
    }
}

/// A header's `meta.world_size`.
fn header_workers(h: &TraceHeader) -> Option<u32> {
    h.meta
        .get("world_size")
        .and_then(serde_json::Value::as_u64)
        .map(|w| u32::try_from(w).unwrap_or(u32::MAX))
}

impl Default for AnalysisConfig {
    fn default() -> Self {
        AnalysisConfig {
            consumers: ConsumerKind::ALL.to_vec(),
            consumer_config: ConsumerConfig::default(),
            rules: RuleLevels::default(),
            workers: None,
            silent_source_factor: preconditions::SILENT_SOURCE_FACTOR,
        }
    }
}

/// One reported finding.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Finding {
    /// The rule.
    pub rule: Rule,
    /// Its level in this run.
    pub level: Level,
    /// Global index of the offending event (the child, the removal; for a gap, the first event
    /// at or after the batch that follows it: the event count when no event follows).
    pub event: usize,
    /// 1-based JSONL line / msgpack batch number of that event (0 when not tied to an event).
    pub line: u64,
    /// 0-based index of the event in its batch.
    pub index: usize,
    /// Source name.
    pub source: String,
    /// The hashes concerned.
    pub hashes: Vec<u64>,
    /// The KV cache group of those blocks (`group_idx`; 0, and left out of JSON, for a
    /// single-group engine): a block is named by its group and its hash.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub group: u32,
    /// The parent concerned (reorders, unknown parents).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent: Option<u64>,
    /// Global index of the related event (the later parent store for reorders).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub related_event: Option<usize>,
    /// Whether the job classification was inferred (no provenance).
    #[serde(default)]
    pub inferred: bool,
    /// Child-before-parent findings: the class of the inversion.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub class: Option<ReorderClass>,
    /// Child-before-parent findings: what the class rests on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub evidence: Option<Evidence>,
    /// Human-readable detail.
    pub message: String,
    /// Per consumer: the event's final verdict.
    #[serde(default)]
    pub verdicts: SortedPairs<String, VerdictKind>,
    /// Per consumer: how many later events were lost because this one was dropped.
    #[serde(default)]
    pub cascade: SortedPairs<String, usize>,
}

/// Whether a group index is 0 (serde: single-group findings leave it out).
fn is_zero(g: &u32) -> bool {
    *g == 0
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
            group: 0,
            parent: None,
            related_event: None,
            inferred: false,
            class: None,
            evidence: None,
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

    /// The KV cache group of the blocks concerned.
    pub(crate) fn group(mut self, group: u32) -> Finding {
        self.group = group;
        self
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

    /// The class of a child-before-parent finding and its evidence.
    pub(crate) fn classed(mut self, class: ReorderClass, evidence: Evidence) -> Finding {
        self.class = Some(class);
        self.evidence = Some(evidence);
        self
    }
}

/// The class of a child-before-parent inversion (each has its rule, [`ReorderClass::rule`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ReorderClass {
    /// Child and parent in one transfer job of one lane.
    InJob,
    /// Parent in a later job of the same lane.
    AcrossJobs,
    /// Same lane and batch; the evidence cannot tell one job from several.
    Ambiguous,
    /// The parent only came later in another tier of the same engine.
    CrossTier,
    /// The parent only came later from another engine (source or DP rank).
    CrossSource,
    /// A promotion job delivers the child or the parent.
    Promotion,
}

impl ReorderClass {
    /// The class's name.
    pub fn name(self) -> &'static str {
        match self {
            ReorderClass::InJob => "in-job",
            ReorderClass::AcrossJobs => "across-jobs",
            ReorderClass::Ambiguous => "ambiguous",
            ReorderClass::CrossTier => "cross-tier",
            ReorderClass::CrossSource => "cross-source",
            ReorderClass::Promotion => "promotion",
        }
    }

    /// The rule that reports this class.
    pub fn rule(self) -> Rule {
        match self {
            ReorderClass::InJob => Rule::ChildBeforeParentInJob,
            ReorderClass::AcrossJobs => Rule::ChildBeforeParentAcrossJobs,
            ReorderClass::Ambiguous => Rule::ChildBeforeParentAmbiguous,
            ReorderClass::CrossTier => Rule::CrossTierReorder,
            ReorderClass::CrossSource => Rule::CrossSourceReorder,
            ReorderClass::Promotion => Rule::PromotionReorder,
        }
    }
}

/// What the class of a child-before-parent finding rests on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Evidence {
    /// Provenance job ids of the child and the parent.
    Provenance,
    /// The GPU-tier events that partition the connector events into store jobs.
    GpuEvents,
    /// The order of the request's runs in the batch against the worker count (see
    /// [`BatchOrder`]).
    BatchOrder,
    /// Child and parent in different batches (a job's events are published in one batch).
    SeparateBatches,
    /// Neither is in a transfer job (GPU-tier events: one per request, group and step).
    NoJob,
    /// The lanes that held the parent (cross-tier, cross-source, promotion).
    Lanes,
    /// A secondary tier's store copies a CPU-tier store job (same keys, same order): the CPU
    /// tier's order of the same pair.
    Cascade,
}

impl Evidence {
    /// The evidence's name.
    pub fn name(self) -> &'static str {
        match self {
            Evidence::Provenance => "provenance",
            Evidence::GpuEvents => "gpu-events",
            Evidence::BatchOrder => "batch-order",
            Evidence::SeparateBatches => "separate-batches",
            Evidence::NoJob => "no-job",
            Evidence::Lanes => "lanes",
            Evidence::Cascade => "cascade",
        }
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
    /// Every lost block hash, sorted and de-duplicated (for comparisons; [`analyze`] only: a
    /// streaming [`Report`] leaves it empty rather than keep a list of every lost block).
    #[serde(skip)]
    pub lost_hashes: Vec<u64>,
    /// Every event with a lost block, with the root event of the prefix it was lost under
    /// (itself for a root), ascending by event; replayed events left out.
    #[serde(skip)]
    pub lost_events: Vec<(u32, u32)>,
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

/// The analysis of a trace read record by record ([`Analyzer`]): counts, losses and the
/// findings as a compact [`FindingStore`], rendered one at a time when shown. Unlike an
/// [`Analysis`] it has no per-event index: memory is the findings, one verdict byte per event
/// and model, and the loss summaries.
#[derive(Clone, Debug)]
pub struct Report {
    /// The configuration used.
    pub config: AnalysisConfig,
    /// Number of delivered events.
    pub events: usize,
    /// Number of transfer jobs (explicit and inferred).
    pub jobs: usize,
    /// Source names, by interned id.
    pub sources: Vec<String>,
    /// Every finding, compact, and the loss summaries (whose unreachable prefixes the
    /// `consumer-loss` findings are read from: see [`Report::losses`]).
    pub findings: FindingStore,
}

impl Report {
    /// Per consumer (in `config.consumers` order): its losses (prefixes rebuilt as read).
    pub fn losses(&self) -> impl ExactSizeIterator<Item = Losses<'_>> + '_ {
        self.findings.losses()
    }

    /// Whether any deny-level finding exists.
    pub fn has_deny(&self) -> bool {
        self.findings.count_level(Level::Deny) > 0
    }

    /// The final verdict kind of event `i` for `kind`.
    pub fn verdict_kind(&self, kind: ConsumerKind, i: usize) -> Option<VerdictKind> {
        let c = self.config.consumers.iter().position(|k| *k == kind)?;
        self.findings.verdict(c, i)
    }
}

/// The analysis pass fed one record at a time, for a trace too large to hold (`kvscope check`
/// and `verdicts` read through [`crate::wire::stream`] into it). Given the records of a trace
/// in order, its [`Report`] holds the same findings, losses and verdicts as [`analyze`] on the
/// whole trace, with one difference: an `auto` router block size resolves against the engine
/// block sizes seen so far, where [`analyze`] knows every source's before the first event.
///
/// ```
/// use kvscope_core::analysis::{analyze, Analyzer, AnalysisConfig, Rule};
/// use kvscope_core::consumers::testkit::{batch, stored, trace};
///
/// let t = trace(vec![batch("pod-a", 0, vec![
///     stored(&[2], Some(1), Some("CPU"), 16),
///     stored(&[1], None, Some("CPU"), 16),
/// ])]);
/// let config = AnalysisConfig::default();
/// let mut a = Analyzer::new(&config);
/// for rec in &t.records {
///     a.push(rec);
/// }
/// let report = a.finish();
/// assert_eq!(report.findings.count(Rule::ChildBeforeParentInJob), 1);
/// let rendered: Vec<_> = report.findings.iter().map(|f| f.render()).collect();
/// assert_eq!(rendered, analyze(&t, &config).findings);
/// ```
pub struct Analyzer {
    run: Run,
}

impl Analyzer {
    /// An analysis with `config`, before any record.
    pub fn new(config: &AnalysisConfig) -> Analyzer {
        Analyzer {
            run: Run::streaming(config),
        }
    }

    /// Feed the next record.
    pub fn push(&mut self, rec: &TraceRecord) {
        self.run.push(rec, None);
        self.run.recycle();
    }

    /// Feed the next record, streaming every consumer verdict to `sink` (as
    /// [`analyze_with`]).
    pub fn push_with(&mut self, rec: &TraceRecord, sink: &mut VerdictSink<'_>) {
        self.run.push(rec, Some(sink));
        self.run.recycle();
    }

    /// Events delivered so far.
    pub fn events(&self) -> usize {
        self.run.events()
    }

    /// Every record was fed: the report.
    pub fn finish(self) -> Report {
        self.run.report()
    }
}

#[cfg(test)]
mod tests;

// What only a comparison's `SideBuilder` reads (feature `compare`).
#[cfg(feature = "compare")]
impl Analyzer {
    /// The index so far: the last record's event locations, the sources and tiers.
    pub(crate) fn index(&self) -> &IndexBuilder {
        self.run.index()
    }
}
