//! The analysis pass as a resumable state machine ([`Run`]): index the trace, check sequence
//! numbers, feed every event to the consumer models and the violation index, then assemble the
//! [`Analysis`]. Each stage can be advanced by a budget of events, so a caller (the replay
//! builder, hence the web app) can do the work in slices and show progress; [`super::analyze`]
//! runs it in one go.

mod event;
mod finish;
mod losses;
mod seq;
mod violations;

use super::identity::GroupIds;
use super::{
    Analysis, AnalysisConfig, BlockKeys, EventIndex, EventLoc, Finding, IndexBuilder, VerdictSink,
};
use crate::consumers::Interner;
use crate::consumers::{
    AnyConsumer, EventIds, EventVerdict, LaneCounts, LaneKey, Resolution, SlabMap, VerdictKind,
};
use crate::event::{KvEvent, Tier};
use crate::trace::{Trace, TraceRecord};
use finish::{FinishStep, Finishing};
use losses::LossTrack;
use violations::{Presence, Waiter};

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
    /// Last seq per (source, rank), by `source << 32 | dp_rank`; gap records
    /// (`(event, record)`).
    last_seq: SlabMap<Option<u64>>,
    gap_records: Vec<(usize, usize)>,
    consumers: Vec<AnyConsumer>,
    kinds: Vec<Vec<VerdictKind>>,
    lost_blocks: Vec<Vec<(usize, u64)>>,
    tracks: Vec<LossTrack>,
    presence: Presence,
    /// The models' block ids (by hash).
    interner: Interner,
    /// The analysis' block ids (by group and hash).
    keys: BlockKeys,
    /// Scratch: the current event's block ids and parent id, by hash (the models') and by
    /// group and hash (the analysis').
    ids: EventIds,
    gids: GroupIds,
    /// Engine ids (`source << 32 | dp_rank` → id + 1): the violation index's lanes are
    /// (engine, tier).
    engines: SlabMap<u32>,
    engine_count: u32,
    /// Workers reporting the store jobs ([`AnalysisConfig::workers_for`]).
    workers: u32,
    /// Children waiting for a parent, by the parent's block id.
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
            last_seq: SlabMap::default(),
            gap_records: Vec::new(),
            consumers: Vec::new(),
            kinds: Vec::new(),
            lost_blocks: Vec::new(),
            tracks: Vec::new(),
            presence: Presence::default(),
            interner: Interner::default(),
            keys: BlockKeys::default(),
            ids: EventIds::default(),
            gids: GroupIds::default(),
            engines: SlabMap::default(),
            engine_count: 0,
            workers: config.workers_for(trace),
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

    /// Assemble the [`Analysis`] (runs any remaining work first; after [`Stage::Done`] it only
    /// moves results).
    pub(crate) fn finish(self, trace: &Trace) -> Analysis {
        self.finish_parts(trace).0
    }

    /// [`Run::finish`], also returning the analysis' block ids.
    pub(crate) fn finish_parts(mut self, trace: &Trace) -> (Analysis, BlockKeys) {
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
            findings: fin.findings,
            violations: fin.violations,
            verdict_kinds: kinds,
            losses: fin.losses,
        };
        (analysis, keys)
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
