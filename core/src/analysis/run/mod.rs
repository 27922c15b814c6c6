//! The analysis pass as a resumable state machine ([`Run`]): index the trace, check sequence
//! numbers, feed every event to the consumer models and the violation index, then assemble the
//! [`Analysis`]. Each stage can be advanced by a budget of events, so a caller (the replay
//! builder, hence the web app) can do the work in slices and show progress; [`super::analyze`]
//! runs it in one go.
//!
//! The same pass also runs on a stream ([`Run::streaming`], [`Run::push`]): each record is
//! indexed and its events delivered as it comes, the index keeps only the current batch, and
//! the result is a [`super::Report`] with compact findings, so memory is the models' state and
//! the findings, not the trace.

mod event;
mod finish;
mod losses;
mod preconditions;
mod recycle;
mod seq;
mod violations;

use super::findings::{FindingStore, Rec};
use super::identity::GroupIds;
use super::roots::Places;
use super::{
    Analysis, AnalysisConfig, BlockKeys, EventIndex, EventLoc, Finding, IndexBuilder, Report,
    VerdictSink,
};
use crate::consumers::Interner;
use crate::consumers::{
    AnyConsumer, BlockSizes, EventIds, EventVerdict, LaneCounts, LaneKey, Resolution, SlabMap,
    VerdictKind,
};
use crate::event::KvEvent;
use crate::trace::{Trace, TraceRecord};
use finish::{FinishStep, Finishing};
pub(crate) use losses::LossTrack;
use violations::{Presence, PrimaryPairs, Waiter, Waiting};

/// Receives every consumer's verdict and lane changes (the replay engine's recorder).
pub(crate) trait Recorder {
    /// The index is complete; events follow.
    fn start(&mut self, index: &EventIndex);
    /// Event `event` (at `loc`, naming blocks `ids`, stored under `parent`: the analysis'
    /// `(group, hash)` block ids, see [`BlockKeys`]), before any model sees it.
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

/// The most block ids a whole-trace run sizes its per-id tables for up front (about 250 bytes
/// an id over the interner and the models). A trace's stored block hashes can name the same
/// blocks many times over (a prefix stored again after each eviction): the cap bounds the room
/// such a trace leaves unused. Beyond it the tables grow by doubling, as in a streaming run.
const RESERVED_IDS_MAX: usize = 1 << 20;

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
    /// Block hashes the trace stores (0 streaming): the tables with a row per block id are
    /// sized for them, up to [`RESERVED_IDS_MAX`], when the events start
    /// ([`Interner::reserve`]).
    blocks: usize,
    stage: Stage,
    index: IndexBuilder,
    /// The next record to index.
    next_record: usize,
    /// Last seq per (source, rank), by `source << 32 | dp_rank`; gap findings waiting for the
    /// next event's line.
    last_seq: SlabMap<Option<u64>>,
    pending_gaps: Vec<Finding>,
    consumers: Vec<AnyConsumer>,
    kinds: Vec<Vec<VerdictKind>>,
    /// Per model: every lost block (event, hash), for the loss summaries' `lost_hashes`;
    /// only for [`super::analyze`] (`compare` reads them), not a streaming run.
    lost_blocks: Vec<Vec<(usize, u64)>>,
    tracks: Vec<LossTrack>,
    /// Where each loss root is and its hashes, by root event (ascending): a root is always the
    /// event being delivered, so the models share one row per root event.
    places: Places,
    presence: Presence,
    /// The models' block ids (by hash).
    interner: Interner,
    /// The analysis' block ids (by group and hash).
    keys: BlockKeys,
    /// Hashes of blocks whose ids were released after they had been stored (see
    /// `recycle.rs`): what [`Presence`]'s `ever` said of them.
    gone: recycle::Gone,
    /// Ids of the blocks removed by the current record (streaming), for [`Run::recycle`].
    removed: Vec<u32>,
    /// Ids of removed blocks still referred to, looked at again when there are `sweep_at`.
    deferred: Vec<u32>,
    sweep_at: usize,
    /// Scratch: the current event's block ids and parent id, by hash (the models') and by
    /// group and hash (the analysis').
    ids: EventIds,
    gids: GroupIds,
    /// Engine ids (`source << 32 | dp_rank` → id + 1): the violation index's lanes are
    /// (engine, tier).
    engines: SlabMap<u32>,
    engine_count: u32,
    /// The last event's engine key and id.
    last_engine: Option<(u64, u32)>,
    /// Workers reporting the store jobs ([`AnalysisConfig::workers_for`]); whether a header
    /// gave them (streaming).
    workers: u32,
    header_workers: bool,
    /// Streaming: whether the models are built, and how many sources' engine block sizes they
    /// know.
    started: bool,
    known_sizes: usize,
    /// Children waiting for a parent, by the parent's block id.
    waiting: Waiting,
    /// Scratch: the waiters of one parent being resolved.
    resolving: Vec<Waiter>,
    /// The class of each primary-tier (CPU) inversion, by (engine, parent block id, child's
    /// first hash): a secondary tier's cascade copies a CPU store job's keys in its order, so
    /// the same pair inverted there has the same class (`docs/rules.md`, "Jobs and evidence").
    primary_pairs: PrimaryPairs,
    /// The findings so far, compact.
    raw: Vec<Rec>,
    resolved: Vec<Resolution>,
    /// The finishing stage's state.
    fin: Finishing,
    /// Scratch: lane changes of one model for one event.
    lane_changes: Vec<(LaneKey, LaneCounts)>,
    /// The routing-precondition watcher.
    pre: crate::analysis::preconditions::Preconditions,
    next: usize,
}

impl Run {
    /// A run over `trace` (cheap: counts the trace's events and the block hashes it stores).
    pub(crate) fn new(trace: &Trace, config: &AnalysisConfig) -> Run {
        // The events, and the block hashes stored (about the block ids: see `start_events`).
        let (mut total, mut blocks) = (0, 0);
        for r in &trace.records {
            if let TraceRecord::Batch(b) = r {
                total += b.events.len();
                for ev in &b.events {
                    if let KvEvent::BlockStored(s) = ev {
                        blocks += s.block_hashes.len();
                    }
                }
            }
        }
        let mut run = Run::streaming(config);
        run.index.streaming = false;
        run.index.idx.events.reserve_exact(total);
        run.index.records.1 = trace.records.len();
        run.total = total;
        run.blocks = blocks.min(RESERVED_IDS_MAX);
        run.workers = config.workers_for(trace);
        run.header_workers = true;
        run
    }

    /// A run fed record by record with [`Run::push`] (see the module docs).
    pub(crate) fn streaming(config: &AnalysisConfig) -> Run {
        let mut index = IndexBuilder::default();
        index.streaming = true;
        Run {
            config: config.clone(),
            total: 0,
            blocks: 0,
            stage: Stage::Index,
            index,
            next_record: 0,
            last_seq: SlabMap::default(),
            pending_gaps: Vec::new(),
            consumers: Vec::new(),
            kinds: Vec::new(),
            lost_blocks: Vec::new(),
            tracks: Vec::new(),
            places: Places::default(),
            presence: Presence::default(),
            interner: Interner::default(),
            keys: BlockKeys::default(),
            gone: Default::default(),
            removed: Vec::new(),
            deferred: Vec::new(),
            sweep_at: 1024,
            ids: EventIds::default(),
            gids: GroupIds::default(),
            engines: SlabMap::default(),
            engine_count: 0,
            last_engine: None,
            workers: config.workers.unwrap_or(1).max(1),
            header_workers: false,
            started: false,
            known_sizes: 0,
            waiting: Waiting::default(),
            resolving: Vec::new(),
            primary_pairs: PrimaryPairs::default(),
            raw: Vec::new(),
            resolved: Vec::new(),
            lane_changes: Vec::new(),
            fin: Finishing::default(),
            pre: Default::default(),
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
            Stage::Index => self.index.event_count(),
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

    /// Do about `budget` events of work (at least one unit), crossing stages as needed, but
    /// the call that completes the index ends there. Returns the work done.
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
                        self.resolve_gaps(0);
                        self.start_events();
                        if let Some(r) = recorder.as_mut() {
                            r.start(&self.index.idx);
                        }
                        self.stage = Stage::Events;
                        // The events cost more each than the records: a budget sized for
                        // indexing must not run on into them (this call ends here).
                        spent = budget;
                    }
                }
                Stage::Events => {
                    let n = self.index.event_count();
                    let start = self.next;
                    let end = start.saturating_add(left).min(n);
                    while self.next < end {
                        let i = self.next;
                        let batch = match self.index.loc(i) {
                            Some(loc) => match trace.records.get(loc.record as usize) {
                                Some(TraceRecord::Batch(b)) => Some(b),
                                _ => None,
                            },
                            None => None,
                        };
                        if let Some(b) = batch {
                            self.event(
                                b,
                                i,
                                sink.as_deref_mut(),
                                recorder.as_mut().map(|r| &mut **r as &mut dyn Recorder),
                            );
                        }
                        self.next += 1;
                    }
                    spent += (end - start).max(1);
                    if self.next >= n {
                        self.precondition_findings();
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
                    let (work, heavy) = self.finish_step(left);
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

    /// Streaming: index record `rec` and deliver its events to the models at once.
    pub(crate) fn push(&mut self, rec: &TraceRecord, mut sink: Option<&mut VerdictSink<'_>>) {
        let ri = self.next_record;
        self.next_record += 1;
        let first = self.index.event_count();
        if let TraceRecord::Batch(b) = rec {
            self.interner.warm(&b.events);
        }
        self.index_record(ri, rec);
        let TraceRecord::Batch(b) = rec else {
            return;
        };
        if !self.started {
            self.start_events();
            self.started = true;
        } else {
            self.learn_block_sizes();
        }
        if self.index.multi_group {
            self.keys.index_keys(&self.interner);
        }
        for i in first..first + b.events.len() {
            self.event(b, i, sink.as_deref_mut(), None);
        }
        self.next = first + b.events.len();
        self.total = self.next;
    }

    /// Streaming: events delivered so far.
    pub(crate) fn events(&self) -> usize {
        self.index.event_count()
    }

    /// Streaming: every record was pushed; assemble the report.
    pub(crate) fn report(mut self) -> Report {
        self.resolve_gaps(0);
        if !self.started {
            self.start_events();
        }
        self.precondition_findings();
        // What only the events needed: the models, the block ids, the engines.
        self.consumers = Vec::new();
        self.interner = Interner::default();
        self.keys = BlockKeys::default();
        self.engines = SlabMap::default();
        self.last_engine = None;
        self.pre = Default::default();
        self.start_finish();
        self.stage = Stage::Finish;
        while self.stage != Stage::Done {
            let (_, _) = self.finish_step(usize::MAX);
            if self.fin.step == FinishStep::Done {
                self.stage = Stage::Done;
            }
        }
        Report {
            config: self.config,
            events: self.index.event_count(),
            jobs: self.index.job_count(),
            sources: self.index.idx.sources,
            findings: {
                let mut store = self.fin.store;
                store.count_all();
                store
            },
        }
    }

    /// Streaming: a source's engine block size became known; `auto` router block sizes
    /// resolve against what is known so far (a batch-by-batch reader cannot look ahead).
    fn learn_block_sizes(&mut self) {
        let sizes = &self.index.idx.engine_block_sizes;
        let known = sizes.iter().filter(|s| s.is_some()).count();
        if known == self.known_sizes {
            return;
        }
        self.known_sizes = known;
        let cc = &self.config.consumer_config;
        for c in &mut self.consumers {
            match c {
                AnyConsumer::Llmd(m) => {
                    m.set_block_sizes(BlockSizes::resolve(cc.llmd_canonical_block_size, sizes))
                }
                AnyConsumer::Dynamo(m) => {
                    m.set_block_sizes(BlockSizes::resolve(cc.dynamo_kv_block_size, sizes))
                }
                _ => {}
            }
        }
    }

    /// Build the models once the index (hence the engine block sizes) is known.
    fn start_events(&mut self) {
        let index = &self.index.idx;
        self.known_sizes = index
            .engine_block_sizes
            .iter()
            .filter(|s| s.is_some())
            .count();
        let n = if self.index.streaming {
            0
        } else {
            index.events.len()
        };
        self.interner.reserve(self.blocks);
        self.keys.reserve(self.blocks);
        self.presence.reserve(self.blocks);
        let c = self.config.consumers.len();
        // One loop (no `collect` instance per vector).
        self.consumers = Vec::with_capacity(c);
        self.kinds = Vec::with_capacity(c);
        self.lost_blocks = Vec::with_capacity(c);
        self.tracks = Vec::with_capacity(c);
        for k in &self.config.consumers {
            let mut model = AnyConsumer::for_engines(
                *k,
                &self.config.consumer_config,
                &index.engine_block_sizes,
            );
            model.reserve(self.blocks);
            self.consumers.push(model);
            self.kinds.push(Vec::with_capacity(n));
            if !self.index.streaming {
                self.lost_blocks.push(Vec::new());
            }
            self.tracks.push(LossTrack::default());
        }
    }

    /// Assemble the [`Analysis`] (runs any remaining work first; after [`Stage::Done`] it only
    /// renders the findings and moves results).
    pub(crate) fn finish(self, trace: &Trace) -> Analysis {
        let (mut analysis, _, mut s) = self.finish_parts(trace);
        (analysis.findings, analysis.violations) = s.rendered();
        analysis.verdict_kinds = s.take_kinds();
        analysis.losses = s.take_losses();
        analysis
    }

    /// A finished run's event index and compact findings (a replay builds its tables from
    /// them before it takes them with [`Run::finish_parts`]).
    pub(crate) fn results(&mut self) -> (&EventIndex, &mut FindingStore) {
        (&self.index.idx, &mut self.fin.store)
    }

    /// [`Run::finish`] without rendering: the analysis without its findings, the block ids,
    /// and the compact findings, which hold the verdicts and loss summaries.
    pub(crate) fn finish_parts(mut self, trace: &Trace) -> (Analysis, BlockKeys, FindingStore) {
        while self.stage != Stage::Done {
            self.advance(trace, usize::MAX, None, None);
        }
        let Run {
            config,
            index,
            keys,
            interner,
            kinds,
            fin,
            ..
        } = self;
        let keys = if index.multi_group {
            keys
        } else {
            keys.by_hash(interner)
        };
        let analysis = Analysis {
            index: index.idx,
            config,
            findings: Vec::new(),
            violations: Vec::new(),
            verdict_kinds: kinds,
            losses: fin.losses,
        };
        (analysis, keys, fin.store)
    }
}

// What only a comparison's `SideBuilder` reads (feature `compare`).
#[cfg(feature = "compare")]
impl Run {
    /// Streaming: the index (the last batch's event locations, the sources and tiers so far).
    pub(crate) fn index(&self) -> &IndexBuilder {
        &self.index
    }
}

#[cfg(test)]
mod tests {
    use super::{Run, Stage, RESERVED_IDS_MAX};
    use crate::analysis::AnalysisConfig;
    use crate::consumers::testkit::{batch, stored, trace};

    /// The indexing call that ends the index ends there, whatever its budget (the page sizes
    /// budgets by the cost of the stage it is in); the tables with a row per block id are then
    /// sized for the block hashes the trace stores.
    #[test]
    fn the_index_ends_its_call_and_sizes_the_per_id_tables() {
        let t = trace(vec![
            batch("a", 0, vec![stored(&[1, 2, 3], None, Some("GPU"), 16)]),
            batch("a", 1, vec![stored(&[4], Some(3), Some("GPU"), 16)]),
        ]);
        let mut run = Run::new(&t, &AnalysisConfig::default());
        assert_eq!(run.blocks, 4);
        run.advance(&t, usize::MAX, None, None);
        assert_eq!((run.stage, run.next), (Stage::Events, 0));
        assert!(run.interner.capacity() >= 4);
        run.advance(&t, usize::MAX, None, None);
        assert_ne!(run.stage, Stage::Events);
        assert!(run.interner.hash(3).is_some() && run.interner.hash(4).is_none());
        // A streaming run does not know the trace: nothing reserved.
        assert_eq!(Run::streaming(&AnalysisConfig::default()).blocks, 0);
    }

    /// A trace that stores more block hashes than the cap sizes the tables for the cap only
    /// (its hashes may name far fewer blocks).
    #[test]
    fn the_reservation_is_capped() {
        let hashes: Vec<u64> = (1..=RESERVED_IDS_MAX as u64 + 5).collect();
        let t = trace(vec![batch(
            "a",
            0,
            vec![stored(&hashes, None, Some("GPU"), 16)],
        )]);
        assert_eq!(
            Run::new(&t, &AnalysisConfig::default()).blocks,
            RESERVED_IDS_MAX
        );
    }
}
