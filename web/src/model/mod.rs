//! The debugger's view-model: a loaded trace flattened into delivery-ordered events with lanes
//! and parent→child edges for drawing, over the core's [`Replay`] (consumer models, violation
//! index, snapshots, step diffs). Pure Rust (no DOM), tested natively.
//!
//! Cursor positions are indices into [`Model::events`] (every event of every batch, in delivery
//! order). The timeline's x axis is that index, not `ts`: vLLM stamps a whole batch with one
//! `ts`, and delivery order is what consumers see.

use rustc_hash::FxHashMap as HashMap;
use std::sync::{Mutex, MutexGuard, OnceLock};

use kvscope_core::analysis::{AnalysisConfig, EventIndex, Job, Rule};
use kvscope_core::event::{KvEvent, Tier};
use kvscope_core::replay::{BuildPhase, BuildProgress, Replay, ReplayBuilder, ViolationFilter};
use kvscope_core::trace::{EventMap, Provenance, Trace, TraceBatch, TraceHeader, TraceRecord};

mod describe;
mod edges;
mod lane;
mod layout;
mod listing;
mod query;
mod sort;
#[cfg(test)]
mod tests;
pub mod topology;

pub use lane::{JobLane, Lane, LaneMode, MAX_JOB_LANES};
pub use layout::Scan;
use listing::Listing;
pub use listing::Violation;
pub use sort::{insertion_sort, sort_by_u64};

pub use query::{match_note, next_match, Query, GRAMMAR};

/// One event of the trace, located by its batch and position in the batch (the core's
/// [`EventMap`] gives it for a cursor position).
pub use kvscope_core::trace::EventAt;

/// How a parent→child edge relates to delivery order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EdgeKind {
    /// The parent was delivered before the child in the same lane (normal).
    Forward,
    /// The child was delivered before its parent in the same lane: drawn as a red backwards
    /// arrow; this is the ordering violation routers drop blocks over.
    ChildFirst,
    /// The parent is only known from another lane (e.g. the GPU copy of a CPU block).
    CrossLane,
}

/// A parent→child edge between two events (the events storing the parent and the child).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Edge {
    /// Event that stored the parent block.
    pub parent: u32,
    /// Event whose `parent_block_hash` names that block.
    pub child: u32,
    /// Relation to delivery order.
    pub kind: EdgeKind,
}

/// Kind of an event, for colouring and filtering.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventKind {
    /// `BlockStored`.
    Stored,
    /// `BlockRemoved`.
    Removed,
    /// `AllBlocksCleared`.
    Cleared,
}

impl EventKind {
    /// The kind's bit in the timeline's bins (1 stored, 2 removed, 4 cleared).
    pub fn bit(self) -> u8 {
        match self {
            EventKind::Stored => 1,
            EventKind::Removed => 2,
            EventKind::Cleared => 4,
        }
    }
}

/// A loaded trace, ready to render.
pub struct Model {
    /// Display name (file name, URL or `demo`).
    pub name: String,
    /// The header record, if any.
    pub header: Option<TraceHeader>,
    /// The trace and the analysis in progress, until the replay engine takes the trace over
    /// ([`Model::analyse`], [`Model::analyse_some`]).
    pending: Mutex<Pending>,
    /// The analysis' configuration (the page's settings: the worker count).
    config: AnalysisConfig,
    /// The core's replay engine, once analysed; it then owns the trace. Locked briefly to read
    /// the trace or to seek and snapshot (single-threaded in the browser, so never contended).
    replay: OnceLock<Mutex<Replay>>,
    /// The analysis' findings, once analysed (nothing before: the page shows no opinion of
    /// its own while the analysis runs).
    analysed: OnceLock<Listing>,
    /// The findings listed so far, once the replay engine is done (a million are listed a
    /// slice at a time, see [`Model::analyse_some`]).
    listing: Mutex<Listing>,
    /// Number of batches.
    pub batch_count: usize,
    /// Index of the first event of each batch (in batch order; an empty batch has the index
    /// of the next event): the timeline's axis labels events with their batch.
    batch_starts: Vec<u32>,
    /// Number of gap records.
    pub gaps: usize,
    /// Where every event sits, in delivery order (the core's one event-location map).
    pub events: EventMap,
    /// Lanes in display order.
    pub lanes: Vec<Lane>,
    /// Kind of each event (a column, for fast rendering).
    pub kinds: Vec<EventKind>,
    /// Lane index of each event (`AllBlocksCleared`: lane of its batch's source's first lane, or 0).
    pub lane_of: Vec<u16>,
    /// Parent→child edges, sorted by child.
    pub edges: Vec<Edge>,
    /// Indices into `edges`, sorted by parent (for [`Model::children_of`]).
    by_parent: Vec<u32>,
    /// Whether `edges` and `by_parent` are indexed ([`Model::index_edges`]).
    edges_indexed: bool,
    /// The edge index under way ([`Model::index_edges_some`]).
    edge_build: Option<Box<edges::EdgeBuilder>>,
    /// Per block of [`BIN_BLOCK`] events and lane, the OR of the events' [`EventKind::bit`]s:
    /// zoomed far out, the timeline bins whole blocks instead of single events.
    blocks: Vec<u8>,
    /// Part of a trace: the records a load has read so far ([`crate::read`]), or those before
    /// its error. A newer load clears it at once rather than when its own timeline paints.
    pub partial: bool,
}

/// Events per block of the timeline's coarse bins ([`Model::bins`]).
pub const BIN_BLOCK: usize = 64;

/// The analysis of a [`Model`] before it is done.
enum Pending {
    /// Not started: the trace.
    Trace(Trace),
    /// Under way: the core's resumable builder (it owns the trace meanwhile).
    Building(Box<ReplayBuilder>),
    /// Done: the replay engine owns the trace.
    Done,
}

/// The rule of per-model loss findings, left out of the default violation navigation.
pub const CONSUMER_LOSS: &str = "consumer-loss";

/// Whether a violation passes a rule filter: the core's [`ViolationFilter::for_rule`] (`None`:
/// the rules that mark an event's order, [`Rule::marks_order`]).
pub fn rule_matches(v: &Violation, rule: Option<&str>) -> bool {
    match rule {
        Some(r) => v.rule == r,
        None => v.marks_order,
    }
}

/// Errors from [`Model::from_trace`].
#[derive(Debug, PartialEq, Eq)]
pub enum ModelError {
    /// More events than the debugger indexes (u32).
    TooLarge(usize),
}

impl std::fmt::Display for ModelError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ModelError::TooLarge(n) => write!(
                f,
                "trace has {n} events; the debugger handles at most {}",
                u32::MAX
            ),
        }
    }
}

impl Model {
    /// Flatten a trace, run the core's analysis (all consumer models) and index it for drawing.
    pub fn from_trace(name: &str, trace: Trace, mode: LaneMode) -> Result<Model, ModelError> {
        let m = Self::from_trace_timed(name, trace, mode, &mut |_| {})?;
        m.analyse();
        Ok(m)
    }

    /// Flatten a trace and lay it out for drawing (lanes, edges, child-first findings), without
    /// the core's analysis: call [`Model::analyse`] later. Calls `mark(phase)` after each phase
    /// (`flatten`, `lanes`, `edges`) so the caller can time them.
    pub fn from_trace_timed(
        name: &str,
        trace: Trace,
        mode: LaneMode,
        mark: &mut dyn FnMut(&'static str),
    ) -> Result<Model, ModelError> {
        let mut model = Model::flatten(name, trace)?;
        mark("flatten");
        model.layout_lanes(mode);
        mark("lanes");
        model.index_edges();
        mark("edges");
        Ok(model)
    }

    /// Flatten a trace into delivery-ordered events, not laid out yet: call
    /// [`Model::layout_lanes`] and [`Model::index_edges`] (or [`Model::layout`]) next. The
    /// loader yields to the browser between these steps.
    pub fn flatten(name: &str, trace: Trace) -> Result<Model, ModelError> {
        let mut m = Model::empty(name);
        m.extend(&mut { trace.records })?;
        Ok(m)
    }

    /// A model of no records yet ([`Model::extend`] adds them).
    pub fn empty(name: &str) -> Model {
        Model {
            name: name.to_owned(),
            header: None,
            pending: Mutex::new(Pending::Trace(Trace::default())),
            config: AnalysisConfig::default(),
            replay: OnceLock::new(),
            analysed: OnceLock::new(),
            listing: Mutex::new(Listing::default()),
            batch_count: 0,
            batch_starts: Vec::new(),
            gaps: 0,
            events: EventMap::default(),
            lanes: Vec::new(),
            kinds: Vec::new(),
            lane_of: Vec::new(),
            edges: Vec::new(),
            by_parent: Vec::new(),
            edges_indexed: false,
            edge_build: None,
            blocks: Vec::new(),
            partial: false,
        }
    }

    /// Move `records` (read since) to the end of the trace (the loader shows the trace read so
    /// far while it reads on); lay the lanes out again after. Before the analysis only: once it
    /// has started, `records` stay where they are. Past the debugger's limit, the error (the
    /// load stops there).
    pub fn extend(&mut self, records: &mut Vec<TraceRecord>) -> Result<(), ModelError> {
        let Pending::Trace(t) = self.pending.get_mut().unwrap_or_else(|e| e.into_inner()) else {
            return Ok(());
        };
        for rec in records.drain(..) {
            match &rec {
                TraceRecord::Header(h) if self.header.is_none() => self.header = Some(h.clone()),
                TraceRecord::Gap(_) => self.gaps += 1,
                TraceRecord::Batch(b) => {
                    let total = self.kinds.len() + b.events.len();
                    if total > u32::MAX as usize || t.records.len() >= u32::MAX as usize {
                        return Err(ModelError::TooLarge(total));
                    }
                    self.events.push(t.records.len(), b.events.len());
                    self.batch_starts.push(self.kinds.len() as u32);
                    self.kinds.extend(b.events.iter().map(|ev| match ev {
                        KvEvent::BlockStored(_) => EventKind::Stored,
                        KvEvent::BlockRemoved(_) => EventKind::Removed,
                        KvEvent::AllBlocksCleared => EventKind::Cleared,
                    }));
                }
                _ => {}
            }
            t.records.push(rec);
        }
        self.batch_count = self.events.batch_count();
        Ok(())
    }

    /// Set the worker count the analysis assumes (`None`: the trace header's `world_size`, else
    /// 1; see `AnalysisConfig::workers`). Takes effect for an analysis not started yet.
    pub fn set_workers(&mut self, workers: Option<u32>) {
        self.config.workers = workers;
    }

    /// This model's trace laid out again in `mode`, with the same analysis settings, not
    /// analysed yet (a copy: the caller replaces this model with it).
    pub fn relaid(&self, mode: LaneMode) -> Result<Model, ModelError> {
        let trace = self.with_trace(|t| t.clone());
        let mut m = Model::flatten(&self.name, trace)?;
        m.config = self.config.clone();
        m.layout(mode);
        Ok(m)
    }

    /// The worker count the trace itself gives (its header's `world_size`, else 1): what the
    /// analysis assumes without a setting.
    pub fn trace_workers(&self) -> u32 {
        self.with_trace(|t| AnalysisConfig::default().workers_for(t))
    }

    /// Run the core's analysis (all consumer models and the violation index; see
    /// `kvscope_core::replay::Replay::new`), or the rest of it, if it has not completed yet.
    /// Synchronous: the app uses [`Model::analyse_some`] instead.
    pub fn analyse(&self) {
        while self.analyse_some(usize::MAX).is_some() {}
    }

    /// Do about `budget` events of the analysis (`kvscope_core::replay::ReplayBuilder`) and
    /// report how far it is; `None` once it is done (the replay engine and the findings are
    /// then available). The app calls this in slices of a few tens of milliseconds so the page
    /// stays responsive.
    ///
    /// The end is spread over several calls, so no single slice does all of it at a million
    /// events: the last slice of the core's work, then `ReplayBuilder::finish` (the replay
    /// engine is available after it), then the findings in the page's form, about `budget`
    /// per call (progress in [`BuildPhase::Done`] counts them).
    pub fn analyse_some(&self, budget: usize) -> Option<BuildProgress> {
        if self.analysed.get().is_some() {
            return None;
        }
        if let Some(replay) = self.replay() {
            // The findings in the page's form, about `budget` at a time (a million take a few
            // hundred milliseconds): sized once, not grown by doubling.
            let total = replay.finding_count();
            let mut listing = self.listing.lock().unwrap_or_else(|e| e.into_inner());
            let from = listing.violations.len();
            if listing.violations.capacity() < total {
                listing.violations.reserve_exact(total - from);
            }
            for (k, f) in replay.findings_from(from).take(budget.max(1)) {
                listing.push(Violation::new(k, &f));
            }
            drop(replay);
            if listing.violations.len() < total {
                return Some(BuildProgress {
                    phase: BuildPhase::Done,
                    done: listing.violations.len(),
                    total,
                });
            }
            let _ = self.analysed.set(std::mem::take(&mut *listing));
            return None;
        }
        let mut pending = self.pending.lock().unwrap_or_else(|e| e.into_inner());
        let mut builder = match std::mem::replace(&mut *pending, Pending::Done) {
            Pending::Trace(t) => Box::new(ReplayBuilder::new(t, &self.config)),
            Pending::Building(b) => b,
            Pending::Done => return None,
        };
        if !builder.is_done() {
            let progress = builder.advance(budget);
            *pending = Pending::Building(builder);
            return Some(progress);
        }
        drop(pending);
        let _ = self.replay.set(Mutex::new(builder.finish()));
        Some(BuildProgress {
            phase: BuildPhase::Done,
            done: 0,
            total: 0,
        })
    }

    /// Whether [`Model::analyse`] has run.
    pub fn is_analysed(&self) -> bool {
        self.analysed.get().is_some()
    }

    /// The analysis' findings, sorted by event (the core's `Replay::findings_by_event`); empty
    /// until the analysis is done.
    pub fn violations(&self) -> &[Violation] {
        self.analysed.get().map_or(&[], |l| &l.violations[..])
    }

    /// The replay engine (locked), once analysed.
    pub fn replay(&self) -> Option<MutexGuard<'_, Replay>> {
        self.replay
            .get()
            .map(|r| r.lock().unwrap_or_else(|e| e.into_inner()))
    }

    /// Run `f` with the trace.
    pub fn with_trace<R>(&self, f: impl FnOnce(&Trace) -> R) -> R {
        if let Some(r) = self.replay() {
            return f(r.trace());
        }
        let pending = self.pending.lock().unwrap_or_else(|e| e.into_inner());
        match &*pending {
            Pending::Trace(t) => f(t),
            Pending::Building(b) => f(b.trace()),
            Pending::Done => {
                drop(pending);
                // The builder just handed over to the replay engine.
                match self.replay() {
                    Some(r) => f(r.trace()),
                    None => f(&Trace::default()),
                }
            }
        }
    }

    /// Number of events.
    pub fn len(&self) -> usize {
        self.events.len()
    }

    /// Whether the trace has no events.
    pub fn is_empty(&self) -> bool {
        self.events.is_empty()
    }

    /// Run `f` with the batch, event and provenance at cursor position `i`.
    pub fn with_event<R>(
        &self,
        i: u32,
        f: impl FnOnce(&TraceBatch, &KvEvent, Option<&Provenance>) -> R,
    ) -> Option<R> {
        let r = self.events.get(i as usize)?;
        self.with_trace(|t| {
            let b = batch_of(t, r)?;
            let ev = b.events.get(r.pos as usize)?;
            Some(f(
                b,
                ev,
                b.provenance.as_ref().and_then(|p| p.get(r.pos as usize)),
            ))
        })
    }

    /// The ordinal (0-based, among the trace's batches) of event `i`'s batch.
    pub fn batch_ordinal(&self, i: u32) -> usize {
        self.batch_starts
            .partition_point(|s| *s <= i)
            .saturating_sub(1)
    }

    /// Seconds from the first batch's `ts` to event `i`'s batch's (`None` when unknown).
    pub fn seconds_at(&self, i: u32) -> Option<f64> {
        let r = self.events.get(i as usize)?;
        self.with_trace(|t| {
            let first = t.records.iter().find_map(|r| match r {
                TraceRecord::Batch(b) => Some(b.ts),
                _ => None,
            })?;
            Some(batch_of(t, r)?.ts - first)
        })
    }

    /// Kind of the event at a cursor position.
    pub fn kind_at(&self, i: u32) -> Option<EventKind> {
        self.kinds.get(i as usize).copied()
    }

    /// Whether the event at `i` is a violation (of the rules [`rule_matches`] keeps by default).
    /// O(log violations).
    pub fn is_violation(&self, i: u32) -> bool {
        self.order_events().binary_search(&i).is_ok()
    }

    /// The events that are violations ([`Model::is_violation`]), ascending and distinct; empty
    /// until the analysis is done.
    pub fn order_events(&self) -> &[u32] {
        self.analysed.get().map_or(&[], |l| &l.order_events[..])
    }

    /// [`Model::order_events`] within `lo..=hi`.
    pub fn order_events_in(&self, lo: u32, hi: u32) -> &[u32] {
        let e = self.order_events();
        let a = e.partition_point(|&x| x < lo);
        let b = e.partition_point(|&x| x <= hi);
        e.get(a..b.max(a)).unwrap_or_default()
    }

    /// A violation's sentence (the core's finding message; empty before the analysis). Locks
    /// the replay engine: not inside [`Model::with_event`] or [`Model::with_trace`].
    pub fn message(&self, v: &Violation) -> String {
        self.replay()
            .and_then(|r| r.finding(v.id as usize).map(|f| f.message))
            .unwrap_or_default()
    }

    /// Violations at event `i`.
    pub fn violations_at(&self, i: u32) -> impl Iterator<Item = &Violation> {
        let start = self.violations().partition_point(|v| v.event < i);
        self.violations()[start..]
            .iter()
            .take_while(move |v| v.event == i)
    }

    /// How many findings the violation list shows for a rule filter (see [`rule_matches`]):
    /// the one count the header and the list both show. Counted as the findings were listed.
    pub fn violation_count(&self, rule: Option<&str>) -> usize {
        self.analysed.get().map_or(0, |l| l.count(rule))
    }

    /// Positions in [`Model::violations`] of the findings the default filter keeps
    /// ([`rule_matches`] with no rule), ascending: the violation list's rows.
    pub fn marked_rows(&self) -> &[u32] {
        self.analysed.get().map_or(&[], |l| &l.marked[..])
    }

    /// Rule names present, sorted.
    pub fn rules(&self) -> Vec<String> {
        self.analysed.get().map(Listing::rules).unwrap_or_default()
    }

    /// The first violation strictly after event `cursor` (`None`: from the start) of `rule`, or
    /// of the rules that mark an event's order: the core's `Replay::next_violation_after`.
    /// `None` while the analysis runs.
    pub fn next_violation(&self, cursor: Option<u32>, rule: Option<&str>) -> Option<u32> {
        let filter = Self::filter(rule)?;
        let r = self.replay()?;
        let e = r.next_violation_after(cursor.map(|c| c as usize), &filter)?;
        u32::try_from(e).ok()
    }

    /// The last violation strictly before event `cursor` (same filter as
    /// [`Model::next_violation`]): the core's `Replay::prev_violation_before`.
    pub fn prev_violation(&self, cursor: u32, rule: Option<&str>) -> Option<u32> {
        let filter = Self::filter(rule)?;
        let r = self.replay()?;
        let e = r.prev_violation_before(cursor as usize, &filter)?;
        u32::try_from(e).ok()
    }

    /// The core's filter for a rule name (`None` for a name the core does not know).
    fn filter(rule: Option<&str>) -> Option<ViolationFilter> {
        Some(ViolationFilter::for_rule(match rule {
            Some(r) => Some(r.parse::<Rule>().ok()?),
            None => None,
        }))
    }

    /// Edges whose child lies in `[lo, hi]` (edges are sorted by child).
    pub fn edges_with_child_in(&self, lo: u32, hi: u32) -> &[Edge] {
        let a = self.edges.partition_point(|e| e.child < lo);
        let b = self.edges.partition_point(|e| e.child <= hi);
        &self.edges[a..b.max(a)]
    }

    /// Edges into event `i` (its parent links).
    pub fn parents_of(&self, i: u32) -> &[Edge] {
        self.edges_with_child_in(i, i)
    }

    /// Edges out of event `i` (its children), by child. O(log edges + children).
    pub fn children_of(&self, i: u32) -> impl Iterator<Item = &Edge> + '_ {
        let parent = |k: &u32| self.edges.get(*k as usize).map_or(u32::MAX, |e| e.parent);
        let a = self.by_parent.partition_point(|k| parent(k) < i);
        let b = self.by_parent.partition_point(|k| parent(k) <= i);
        self.by_parent
            .get(a..b.max(a))
            .unwrap_or_default()
            .iter()
            .filter_map(|k| self.edges.get(*k as usize))
    }
}

/// The batch record an event belongs to.
pub fn batch_of(t: &Trace, r: EventAt) -> Option<&TraceBatch> {
    match t.records.get(r.record as usize)? {
        TraceRecord::Batch(b) => Some(b),
        _ => None,
    }
}
