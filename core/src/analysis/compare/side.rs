//! One trace's side of a comparison ([`Side`]), compact: what the alignment, the counts and
//! the explanations read, and nothing they do not. Per event its name (`align.rs`'s key) and
//! batch, per model its final verdicts, the ordering violations as ids and hashes, the finding
//! counts, the first reported finding of each other rule, and the loss summaries.
//!
//! A side is built from a whole trace and its [`Analysis`] ([`Side::of`], the page's Compare
//! dialog) or record by record as a trace is read ([`SideBuilder`], `kvscope diff`): the trace
//! is never held and no finding is rendered but the few an explanation quotes, so comparing
//! two captures costs about two streaming analyses (`docs/performance.md`).

use super::super::findings::FindingStore;
use super::super::{
    Analysis, AnalysisConfig, Analyzer, EventLoc, Finding, Level, LossSummary, Rule,
};
use crate::consumers::{ConsumerKind, VerdictKind};
use crate::event::{KvEvent, Tier};
use crate::trace::{EventMap, Trace, TraceRecord};

type HashMap<K, V> = hashbrown::HashMap<K, V, rustc_hash::FxBuildHasher>;

/// No id (no tier label, no related event).
pub(super) const NONE: u32 = u32::MAX;

/// Where an event is: its engine, the analysis' tier and the tier the event names (a trace has
/// a handful of these: each event keeps an id, [`Row::place`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(super) struct Place {
    /// Interned source id (the analysis index's) and DP rank.
    pub(super) source: u32,
    pub(super) dp_rank: u32,
    /// The analysis' tier id (provenance can name a STORAGE tier's ownership).
    pub(super) tier: u32,
    /// The tier the event itself names, as an index into [`Side::labels`] ([`NONE`]: none,
    /// `AllBlocksCleared`).
    pub(super) label: u32,
}

/// One event, compact (24 bytes): its place, KV group, kind, first block and batch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Row {
    /// Its first block hash (when [`Row::HAS_FIRST`] is set).
    first: u64,
    /// Index into [`Side::places`].
    pub(super) place: u32,
    /// Its KV group.
    pub(super) group: u32,
    /// Its batch's 0-based ordinal.
    pub(super) batch: u32,
    /// 0 stored, 1 removed, 2 cleared; plus [`Row::HAS_FIRST`].
    kind: u8,
}

impl Row {
    const HAS_FIRST: u8 = 0x80;

    /// Its first block hash, if it names a block.
    pub(super) fn first(&self) -> Option<u64> {
        (self.kind & Row::HAS_FIRST != 0).then_some(self.first)
    }

    /// 0 stored, 1 removed, 2 cleared.
    pub(super) fn kind(&self) -> u8 {
        self.kind & !Row::HAS_FIRST
    }

    /// The event type's name.
    pub(super) fn type_name(&self) -> &'static str {
        match self.kind() {
            0 => "BlockStored",
            1 => "BlockRemoved",
            _ => "AllBlocksCleared",
        }
    }
}

/// Builds a side's rows: interns places and the tiers events name.
#[derive(Default)]
struct Rows {
    rows: Vec<Row>,
    places: Vec<Place>,
    place_ids: HashMap<Place, u32>,
    labels: Vec<Tier>,
}

impl Rows {
    /// Add event `ev`, indexed at `loc`, in batch `batch`.
    fn push(&mut self, ev: &KvEvent, loc: &EventLoc, batch: u32) {
        let (kind, group) = match ev {
            KvEvent::BlockStored(e) => (0, e.group_idx.unwrap_or(0)),
            KvEvent::BlockRemoved(e) => (1, e.group_idx.unwrap_or(0)),
            KvEvent::AllBlocksCleared => (2, 0),
        };
        // A trace has a handful of tiers: a linear search.
        let labels = &mut self.labels;
        let label = ev
            .tier()
            .map_or(NONE, |t| match labels.iter().position(|x| *x == t) {
                Some(p) => p as u32,
                None => {
                    labels.push(t);
                    (labels.len() - 1) as u32
                }
            });
        let place = Place {
            source: loc.source,
            dp_rank: loc.dp_rank,
            tier: loc.tier,
            label,
        };
        let places = &mut self.places;
        let place = *self.place_ids.entry(place).or_insert_with(|| {
            places.push(place);
            (places.len() - 1) as u32
        });
        let first = ev.block_hashes().first().map(|h| h.as_u64());
        self.rows.push(Row {
            first: first.unwrap_or(0),
            place,
            group,
            batch,
            kind: kind | if first.is_some() { Row::HAS_FIRST } else { 0 },
        });
    }

    /// Move the rows, places and labels into `side`.
    fn into_side(self, side: &mut Side) {
        side.rows = self.rows;
        side.places = self.places;
        side.labels = self.labels;
    }
}

/// A child-before-parent violation (any level), compact.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Violation {
    pub(super) event: u32,
    /// The later parent store ([`NONE`]: none).
    pub(super) related: u32,
    pub(super) group: u32,
    pub(super) rule: Rule,
    /// The child's first block.
    pub(super) first: Option<u64>,
    pub(super) parent: Option<u64>,
    /// Its message, kept only when it names no parent (an explanation then quotes it).
    pub(super) message: Option<Box<str>>,
}

impl Violation {
    fn of(f: &Finding) -> Violation {
        Violation {
            event: u32::try_from(f.event).unwrap_or(NONE),
            related: f
                .related_event
                .map_or(NONE, |r| u32::try_from(r).unwrap_or(NONE)),
            group: f.group,
            rule: f.rule,
            first: f.hashes.first().copied(),
            parent: f.parent,
            message: f.parent.is_none().then(|| f.message.as_str().into()),
        }
    }
}

/// One trace's side of a comparison (see the module docs).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Side {
    /// Per event, in delivery order, and where the events are.
    pub(super) rows: Vec<Row>,
    pub(super) places: Vec<Place>,
    /// The analysis' interned sources and tiers ([`Place::source`], [`Place::tier`]).
    pub(super) sources: Vec<String>,
    pub(super) tiers: Vec<Tier>,
    /// The tiers events name ([`Place::label`]).
    pub(super) labels: Vec<Tier>,
    /// The models, and per model the final verdict of every event.
    pub(super) consumers: Vec<ConsumerKind>,
    pub(super) kinds: Vec<Vec<VerdictKind>>,
    /// Every child-before-parent violation (any level), in event order.
    pub(super) violations: Vec<Violation>,
    /// Per rule ([`Rule::ALL`]'s order): violations of an ordering rule (any level), reported
    /// findings of any other.
    pub(super) counts: Vec<usize>,
    /// The first reported finding of each rule that is not an ordering rule: rule, event and
    /// message.
    pub(super) firsts: Vec<(Rule, usize, String)>,
    /// Per model: its losses, with every lost hash.
    pub(super) losses: Vec<LossSummary>,
    /// Per event: the first ordering rule it breaks (sorted by event).
    rules: Vec<(u32, Rule)>,
}

impl Side {
    /// The side of `trace`, analysed as `analysis` (whole: [`super::compare_traces`]).
    pub fn of(trace: &Trace, analysis: &Analysis) -> Side {
        let mut side = Side::judged(analysis);
        let map = EventMap::new(trace);
        let mut rows = Rows::default();
        rows.rows.reserve_exact(map.len());
        for (at, loc) in map.iter().zip(&analysis.index.events) {
            let ev = match trace.records.get(at.record as usize) {
                Some(TraceRecord::Batch(b)) => b.events.get(at.pos as usize),
                _ => None,
            };
            if let Some(ev) = ev {
                rows.push(ev, loc, at.batch);
            }
        }
        rows.into_side(&mut side);
        side.sources.clone_from(&analysis.index.sources);
        side.tiers.clone_from(&analysis.index.tiers);
        side
    }

    /// What [`super::compare`] reads of an analysis: everything but the events.
    pub(super) fn judged(a: &Analysis) -> Side {
        let mut side = Side {
            consumers: a.config.consumers.clone(),
            kinds: a.verdict_kinds.clone(),
            violations: a.violations.iter().map(Violation::of).collect(),
            counts: vec![0; Rule::ALL.len()],
            losses: a.losses.clone(),
            ..Side::default()
        };
        // A comparison reads the lost hashes, not the lost events.
        for l in &mut side.losses {
            l.lost_events = Vec::new();
        }
        for f in &a.violations {
            side.count(f.rule);
        }
        for f in a.findings.iter().filter(|f| !f.rule.is_reorder()) {
            if side.count(f.rule) == 1 {
                side.firsts.push((f.rule, f.event, f.message.clone()));
            }
        }
        side.index_rules();
        side
    }

    /// Count one finding of `rule`; returns the count.
    fn count(&mut self, rule: Rule) -> usize {
        match self.counts.get_mut(rule as usize) {
            Some(n) => {
                *n += 1;
                *n
            }
            None => 0,
        }
    }

    fn index_rules(&mut self) {
        self.rules.clear();
        for v in &self.violations {
            if self.rules.last().is_none_or(|r| r.0 != v.event) {
                self.rules.push((v.event, v.rule));
            }
        }
    }

    /// Number of events.
    pub fn len(&self) -> usize {
        self.rows.len()
    }

    /// Whether the trace has no events.
    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// Findings of `rule` (see [`Side::counts`]).
    pub(super) fn rule_count(&self, rule: Rule) -> usize {
        self.counts.get(rule as usize).copied().unwrap_or(0)
    }

    /// The first ordering rule event `i` breaks.
    pub(super) fn rule(&self, i: usize) -> Option<Rule> {
        let k = self.rules.binary_search_by_key(&(i as u32), |r| r.0).ok()?;
        self.rules.get(k).map(|r| r.1)
    }

    /// Event `i`.
    pub(super) fn row(&self, i: usize) -> Option<&Row> {
        self.rows.get(i)
    }

    /// The final verdict of event `i` for `kind`.
    pub(super) fn verdict_kind(&self, kind: ConsumerKind, i: usize) -> Option<VerdictKind> {
        let c = self.consumers.iter().position(|k| *k == kind)?;
        self.kinds.get(c)?.get(i).copied()
    }

    /// The loss summary of `kind`.
    pub(super) fn loss(&self, kind: ConsumerKind) -> Option<&LossSummary> {
        self.losses.iter().find(|l| l.consumer == kind.as_str())
    }

    /// Where event row `r` is.
    pub(super) fn place(&self, r: &Row) -> Place {
        self.places.get(r.place as usize).copied().unwrap_or(Place {
            source: NONE,
            dp_rank: NONE,
            tier: NONE,
            label: NONE,
        })
    }

    /// The tier label event row `r` names, if any.
    pub(super) fn label(&self, r: &Row) -> Option<String> {
        self.labels
            .get(self.place(r).label as usize)
            .map(Tier::label)
    }
}

/// A [`Side`] built as a trace is read, record by record (a streaming [`Analyzer`] that also
/// keeps each event's compact row and the lost hashes; see the module docs).
pub struct SideBuilder {
    analyzer: Analyzer,
    rows: Rows,
    batches: u32,
    /// Per model (the configuration's order): every block a store did not apply, with its
    /// event (the loss summaries' `lost_hashes` once the events replayed later are left out;
    /// collected here from the verdicts, so the streaming run itself keeps no such list).
    lost: Vec<Vec<(u32, u64)>>,
    consumers: Vec<ConsumerKind>,
}

impl SideBuilder {
    /// A side analysed with `config`, before any record.
    pub fn new(config: &AnalysisConfig) -> SideBuilder {
        SideBuilder {
            analyzer: Analyzer::new(config),
            rows: Rows::default(),
            batches: 0,
            lost: vec![Vec::new(); config.consumers.len()],
            consumers: config.consumers.clone(),
        }
    }

    /// Feed the next record.
    pub fn push(&mut self, rec: &TraceRecord) {
        let first = self.analyzer.events();
        let TraceRecord::Batch(b) = rec else {
            self.analyzer.push(rec);
            return;
        };
        let (lost, consumers) = (&mut self.lost, &self.consumers);
        self.analyzer.push_with(rec, &mut |i, kind, v, _| {
            let stored = matches!(
                b.events.get(i.wrapping_sub(first)),
                Some(KvEvent::BlockStored(_))
            );
            let c = consumers.iter().position(|k| *k == kind);
            if let (true, Some(l)) = (stored, c.and_then(|c| lost.get_mut(c))) {
                for blk in &v.blocks {
                    if !matches!(blk.verdict, VerdictKind::Applied | VerdictKind::Replayed) {
                        l.push((i as u32, blk.hash));
                    }
                }
            }
        });
        let index = self.analyzer.index();
        for (k, ev) in b.events.iter().enumerate() {
            if let Some(loc) = index.loc(first + k) {
                self.rows.push(ev, &loc, self.batches);
            }
        }
        self.batches += 1;
    }

    /// Every record was fed: the side.
    pub fn finish(self) -> Side {
        let tiers = self.analyzer.index().idx.tiers.clone();
        let report = self.analyzer.finish();
        let mut store: FindingStore = report.findings;
        let mut side = Side {
            sources: report.sources,
            tiers,
            consumers: report.config.consumers.clone(),
            counts: vec![0; Rule::ALL.len()],
            ..Side::default()
        };
        let mut cur = Default::default();
        while let Some(f) = store.next(&mut cur) {
            if f.rule.is_reorder() {
                side.count(f.rule);
                let Some((group, first, parent)) = f.block() else {
                    continue;
                };
                side.violations.push(Violation {
                    event: u32::try_from(f.event).unwrap_or(NONE),
                    related: f
                        .related_event()
                        .map_or(NONE, |r| u32::try_from(r).unwrap_or(NONE)),
                    group,
                    rule: f.rule,
                    first,
                    parent,
                    message: parent.is_none().then(|| f.render().message.into()),
                });
            } else if f.level != Level::Allow && side.count(f.rule) == 1 {
                side.firsts.push((f.rule, f.event, f.render().message));
            }
        }
        self.rows.into_side(&mut side);
        side.losses = store.take_losses();
        side.kinds = store.take_kinds();
        // The lost hashes of events not replayed later, sorted and de-duplicated (as
        // `analyze`'s loss summaries keep them).
        for ((l, lost), kinds) in side.losses.iter_mut().zip(self.lost).zip(&side.kinds) {
            let replayed = |e: u32| kinds.get(e as usize) == Some(&VerdictKind::Replayed);
            let mut hashes: Vec<u64> = Vec::with_capacity(lost.len());
            hashes.extend(lost.iter().filter(|x| !replayed(x.0)).map(|x| x.1));
            drop(lost);
            hashes.sort_unstable();
            hashes.dedup();
            l.lost_hashes = hashes;
        }
        side.index_rules();
        side
    }
}
