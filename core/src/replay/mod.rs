//! The replay engine: a cursor over a trace's delivered events, for stepping through what each
//! router model did.
//!
//! The cursor counts applied events: cursor `c` shows the state after events `0..c` (so `0` is
//! before the first event and `len()` after the last); "the event at the cursor" is `c - 1`.
//!
//! # How seeking stays cheap
//! [`Replay::new`] (or [`ReplayBuilder`], the same work in slices) runs the analysis once and
//! records, as compact version-stamped histories (a "fat node" persistent structure),
//! everything a snapshot shows:
//! * per event and consumer a 4-byte verdict (kind, status, interned reason), with sorted side
//!   tables for missing parents and non-uniform per-block outcomes;
//! * per consumer and lane (source × tier) the counters after every event that changed them,
//!   with an index by event so that a step applies or reverts only that event's changes;
//! * per event one 64-byte, line-aligned row: where its lane changes end, distinct blocks
//!   stored, findings and jobs started up to it, and what the UI shows of the event (first
//!   hash, parent, kind, its batch's line and seq, 16-bit tier / source / DP rank / position
//!   with a fallback to the index, job and its position in the job, whether another job is
//!   active after it): a snapshot at cursor `c` reads row `c - 1`, not the trace (the trace only
//!   for the hashes of events naming more than one block);
//! * static tables by dense block id (`blocks.rs`): each block's first store (parent, event),
//!   its children, the events naming it; each job's events, and a compact 32-byte row per job
//!   (a `Job` is rebuilt from it with interned source and tier names);
//! * every `K` events a checkpoint of the lane counters, stored inline in the change log (a
//!   header, then one entry per lane) and found through a small per-checkpoint index (`K`
//!   grows with the number of lanes so that checkpoints cost a few bytes per event).
//!
//! A seek restores the checkpoint at or before the cursor and applies the recorded lane changes
//! of at most `K - 1` events: one contiguous run of the change log (`O(K)`, independent of the
//! trace length; [`Replay::seek_work`] counts it), never a replay; a step is
//! `O(changes of one event)`; memory grows linearly with the trace (checkpoints hold lane
//! counters only, not consumer states, so never `N²/K`). `core/benches/analysis.rs` measures
//! seek cost at 10k vs 1M events, the work per seek and the bytes per event of the recording;
//! `core/examples/seek_probe.rs` times seek and snapshot parts and is the callgrind probe.
//! A seek + snapshot at a random cursor reads the per-checkpoint index, one change run and one
//! row (plus a job row when the event belongs to a job): on a large trace these are still
//! cache and TLB misses that a small trace keeps in cache, so the cost is not perfectly flat
//! (see ARCHITECTURE.md for the measured ratio).
//!
//! # Example
//! ```
//! use kvscope_core::analysis::{AnalysisConfig, Rule};
//! use kvscope_core::consumers::{ConsumerKind, VerdictKind};
//! use kvscope_core::consumers::testkit::{batch, h, stored, trace};
//! use kvscope_core::replay::{Replay, ViolationFilter};
//!
//! let t = trace(vec![batch("pod-a", 0, vec![
//!     stored(&[1], None, Some("GPU"), 16),
//!     stored(&[3], Some(2), Some("CPU"), 16), // child first (legacy order)
//!     stored(&[2], Some(1), Some("CPU"), 16),
//! ])]);
//! let mut r = Replay::new(t, &AnalysisConfig::default());
//! assert_eq!(r.len(), 3);
//!
//! // Jump to the first child-before-parent violation and apply that event.
//! let filter = ViolationFilter { rule: Some(Rule::ChildBeforeParentInJob), consumer: None };
//! let at = r.next_violation(&filter).unwrap();
//! assert_eq!(at, 1);
//! r.seek(at + 1);
//! let snap = r.snapshot();
//! assert_eq!(snap.cursor, 2);
//! let llmd = snap.consumers.iter().find(|c| c.consumer == ConsumerKind::Llmd).unwrap();
//! assert_eq!(llmd.total.dropped, 1); // llm-d dropped block 3
//!
//! // What the step onto event 1 changed, for the UI to highlight.
//! let step = r.step_at(1).unwrap();
//! let v = step.verdicts.iter().find(|v| v.consumer == ConsumerKind::Llmd).unwrap();
//! assert_eq!(v.verdict.verdict, VerdictKind::DroppedOrphan);
//! assert_eq!(v.verdict.missing_parent, Some(h(2)));
//!
//! // Snapshots are plain serde data.
//! let json = serde_json::to_string(&snap).unwrap();
//! assert!(json.contains("\"cursor\":2"));
//! ```

use std::borrow::Cow;
type HashMap<K, V> = hashbrown::HashMap<K, V, rustc_hash::FxBuildHasher>;

mod blocks;

use blocks::BlockTables;

use serde::{Deserialize, Serialize};

use crate::analysis::{Analysis, AnalysisConfig, Finding, Job, Recorder, Rule, Run, Stage};
use crate::consumers::{
    push_block, slot, str_hash, BlockVerdict, Blocks, ConsumerKind, EventVerdict, HashChain,
    LaneCounts, LaneKey, Resolution, VerdictKind,
};
use crate::event::KvEvent;
use crate::trace::{Trace, TraceRecord};
use std::sync::Arc;

/// A compact verdict: kind, interned status and reason (4 bytes).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Compact {
    kind: VerdictKind,
    status: u8,
    reason: u16,
}

/// One lane change: counters of `lane` of consumer `consumer` after its event (the event is
/// implied by the change's position, see `Row::changes`).
#[derive(Clone, Copy, Debug)]
struct Change {
    consumer: u8,
    lane: u16,
    counts: [i32; 4],
}

fn pack(c: &LaneCounts) -> [i32; 4] {
    let clamp = |v: i64| v.clamp(i32::MIN as i64, i32::MAX as i64) as i32;
    [
        clamp(c.indexed),
        clamp(c.pending),
        clamp(c.dropped),
        clamp(c.unreachable),
    ]
}

fn unpack(a: [i32; 4]) -> LaneCounts {
    LaneCounts {
        indexed: a[0] as i64,
        pending: a[1] as i64,
        dropped: a[2] as i64,
        unreachable: a[3] as i64,
    }
}

/// Per event `e`: where its lane changes end, the counts a snapshot at cursor `e + 1` shows
/// and what the UI shows of the event, side by side: a seek and a snapshot at cursor `c` read
/// row `c - 1` (one or two cache lines) instead of following pointers into the trace and the
/// index. 64 bytes, aligned: one cache line.
#[derive(Clone, Copy, Debug, Default)]
#[repr(align(64))]
struct Row {
    /// End of event `e`'s changes in `changes` (= changes of events up to `e`, and
    /// checkpoints before it).
    changes_end: u32,
    /// Distinct blocks stored by events up to `e`.
    first_stores: u32,
    /// Findings (violations and other findings) at events up to `e`.
    findings: u32,
    /// Jobs whose first event is at or before `e` (jobs are numbered in that order).
    jobs: u32,
    /// Event `c`'s first block hash (u64-normalised), see [`Row::ONE_HASH`].
    hash: u64,
    /// Event `c`'s parent hash, see [`Row::PARENT`].
    parent: u64,
    /// Its batch's line / batch number and publisher sequence number (filled in when the
    /// replay is finished).
    origin: u64,
    seq: u64,
    /// Its tier id, source id, DP rank and position in its batch, when each fits in 16 bits
    /// (else [`Row::WIDE`] is set and they come from the index).
    tier: u16,
    source: u16,
    dp_rank: u16,
    pos: u16,
    /// Its job id (`u32::MAX`: none).
    job: u32,
    /// Event kind (bits 0–1: [`Row::STORED`], [`Row::REMOVED`], [`Row::CLEARED`]), flags, and
    /// in bits 8–31 the event's position in its job (saturated at [`Row::ORDINAL_MAX`]).
    flags: u32,
}

const _: () = assert!(std::mem::size_of::<Row>() == 64);

impl Row {
    const STORED: u32 = 0;
    const REMOVED: u32 = 1;
    const CLEARED: u32 = 2;
    const KIND: u32 = 3;
    /// `parent` holds the parent hash.
    const PARENT: u32 = 1 << 2;
    /// The event names exactly one block: `hash`.
    const ONE_HASH: u32 = 1 << 3;
    /// The event names more than one block: read them from the trace.
    const MORE_HASHES: u32 = 1 << 4;
    /// `tier`, `source`, `dp_rank` or `pos` did not fit: read them from the index.
    const WIDE: u32 = 1 << 5;
    /// Some job other than the event's own is active at the cursor after it (else a
    /// snapshot there needs no job scan).
    const OTHER_JOBS: u32 = 1 << 6;
    const ORDINAL_SHIFT: u32 = 8;
    const ORDINAL_MAX: u32 = (1 << 24) - 1;

    fn kind_name(&self) -> &'static str {
        match self.flags & Row::KIND {
            Row::STORED => "BlockStored",
            Row::REMOVED => "BlockRemoved",
            _ => "AllBlocksCleared",
        }
    }

    /// The event's position in its job, unless saturated.
    fn ordinal(&self) -> Option<usize> {
        let o = self.flags >> Row::ORDINAL_SHIFT;
        (o < Row::ORDINAL_MAX).then_some(o as usize)
    }
}

/// A job, compact: [`Replay::job`] builds the [`Job`] from it (32 bytes instead of the `Job`
/// and its two strings).
#[derive(Clone, Copy, Debug)]
struct JobRow {
    job_id: u64,
    first_event: u32,
    last_event: u32,
    events: u32,
    /// Source and tier ids (of its first event, as the index names the job).
    source: u32,
    tier: u32,
    /// [`JobRow::JOB_ID`], [`JobRow::INFERRED`].
    flags: u8,
    kind: Option<crate::trace::ProvenanceKind>,
}

impl JobRow {
    const JOB_ID: u8 = 1;
    const INFERRED: u8 = 2;
}

/// `v` in 16 bits (`u16::MAX` when it does not fit, see [`Row::WIDE`]).
fn narrow(v: u32) -> u16 {
    u16::try_from(v).unwrap_or(u16::MAX)
}

/// Marks a checkpoint header in `Recording::changes` (`counts[0]`: number of entries after it).
const CHECKPOINT: u8 = u8::MAX;

/// Everything recorded during the analysis pass.
#[derive(Default)]
struct Recording {
    /// Number of consumers.
    consumers: usize,
    strings: Vec<Cow<'static, str>>,
    /// String ids by content hash.
    string_ids: HashChain,
    /// `((address, length), id)` of static strings already interned (a small cache).
    static_ids: Vec<((usize, usize), u16)>,
    verdicts: Vec<Vec<Compact>>,
    /// `(verdict key, missing parent)`, sorted by key (see [`verdict_key`]).
    missing: Vec<(u64, u64)>,
    /// `(verdict key, per-block outcomes)` where they differ from the event's, sorted by key.
    blocks: Vec<(u64, Box<[BlockVerdict]>)>,
    resolutions: Vec<(u32, u8, Resolution)>,
    lane_keys: Vec<LaneKey>,
    /// Lane key (`source << 32 | tier`) → lane slot.
    lane_ids: HashMap<u64, u32>,
    changes: Vec<Change>,
    /// Per (consumer, lane slot): indices into `changes`, in event order.
    /// (index `lane slot · consumers + consumer`).
    per_lane: Vec<Vec<u32>>,
    /// Per cursor `0..=n` (the last one added when closed).
    rows: Vec<Row>,
    /// Jobs started by the events recorded so far.
    jobs_started: u32,
    /// Block topology and touches.
    blocks_seen: BlockTables,
    /// Per job: its events.
    job_events: Vec<Vec<u32>>,
    /// Events between lane checkpoints (0 until the index is known).
    checkpoint_every: usize,
    /// Per checkpoint (cursor `k · K`): the index of its header in `changes`.
    checkpoint_at: Vec<u32>,
    /// Lane counters after the events recorded so far.
    lane_state: Vec<Vec<Option<[i32; 4]>>>,
}

impl Recording {
    /// Checkpoint the lane counters (at the cursor of the next event) into `changes`: a header
    /// ([`CHECKPOINT`], `counts[0]` = number of entries) and one entry per lane seen, so that a
    /// seek reads the checkpoint and the changes after it as one run.
    fn checkpoint(&mut self) {
        let at = self.changes.len();
        self.checkpoint_at.push(at as u32);
        self.changes.push(Change {
            consumer: CHECKPOINT,
            lane: 0,
            counts: [0; 4],
        });
        for (c, lanes) in self.lane_state.iter().enumerate() {
            for (l, v) in lanes.iter().enumerate() {
                if let Some(v) = v {
                    self.changes.push(Change {
                        consumer: c as u8,
                        lane: l as u16,
                        counts: *v,
                    });
                }
            }
        }
        let entries = (self.changes.len() - at - 1) as i32;
        if let Some(h) = self.changes.get_mut(at) {
            h.counts[0] = entries;
        }
    }

    /// Close the tables after the last event (`n` events).
    fn close(&mut self, n: usize) {
        if self.checkpoint_every == 0 {
            self.checkpoint_every = checkpoint_interval(0);
        }
        self.end_event();
        if n.is_multiple_of(self.checkpoint_every) {
            self.checkpoint();
        }
        // The tables are complete: drop the growth slack (up to half of them).
        self.rows.shrink_to_fit();
        self.changes.shrink_to_fit();
    }

    /// The last recorded event's changes end here.
    fn end_event(&mut self) {
        let end = self.changes.len() as u32;
        if let Some(row) = self.rows.last_mut() {
            row.changes_end = end;
        }
    }

    /// The checkpoint header at cursor `c` (a multiple of `K`): its index in `changes` and
    /// its number of entries.
    fn checkpoint_header(&self, c: usize) -> Option<(usize, usize)> {
        let at = *self.checkpoint_at.get(c / self.checkpoint_every.max(1))? as usize;
        let h = self.changes.get(at).filter(|h| h.consumer == CHECKPOINT)?;
        Some((at, h.counts[0].max(0) as usize))
    }

    /// First index into `changes` of event `e`'s own changes (after its checkpoint, if any).
    fn changes_begin(&self, e: usize) -> u32 {
        if e.is_multiple_of(self.checkpoint_every.max(1)) {
            if let Some((at, m)) = self.checkpoint_header(e) {
                return (at + 1 + m) as u32;
            }
        }
        match e.checked_sub(1) {
            Some(p) => self.changes_end(p),
            None => 0,
        }
    }

    /// End of event `e`'s changes in `changes`.
    fn changes_end(&self, e: usize) -> u32 {
        self.rows
            .get(e)
            .map_or(self.changes.len() as u32, |r| r.changes_end)
    }

    fn intern(&mut self, s: Option<&Cow<'static, str>>) -> u16 {
        let Some(s) = s else { return 0 };
        // Statuses and most reasons are static strings: recognise them by address first.
        let addr = match s {
            Cow::Borrowed(b) => Some((b.as_ptr() as usize, b.len())),
            Cow::Owned(_) => None,
        };
        if let Some(a) = addr {
            if let Some(e) = self.static_ids.iter().find(|e| e.0 == a) {
                return e.1;
            }
        }
        let stat = match s {
            Cow::Borrowed(b) => Some(*b),
            Cow::Owned(_) => None,
        };
        let id = self.intern_slow(s, stat);
        if let Some(a) = addr {
            if self.static_ids.len() < 32 {
                self.static_ids.push((a, id));
            }
        }
        id
    }

    /// Intern `s` by content (`stat`: the same string when it is static, kept borrowed).
    fn intern_slow(&mut self, s: &str, stat: Option<&'static str>) -> u16 {
        let h = str_hash(s);
        let strings = &self.strings;
        if let Some(id) = self.string_ids.find(h, |id| {
            strings.get(id as usize).map(|x| x.as_ref()) == Some(s)
        }) {
            return id as u16;
        }
        if self.strings.is_empty() {
            self.strings.push(Cow::Borrowed(""));
        }
        let id = u16::try_from(self.strings.len()).unwrap_or(u16::MAX);
        if id == u16::MAX {
            return id;
        }
        let owned: Cow<'static, str> = match stat {
            Some(b) => Cow::Borrowed(b),
            None => Cow::Owned(s.to_owned()),
        };
        self.strings.push(owned);
        self.string_ids.push(h, id as u32);
        id
    }

    fn string(&self, id: u16) -> Option<Cow<'static, str>> {
        if id == 0 {
            return None;
        }
        Some(
            self.strings
                .get(id as usize)
                .cloned()
                .unwrap_or(Cow::Borrowed("…")),
        )
    }

    fn lane_slot(&mut self, k: LaneKey) -> u16 {
        let key = (k.source as u64) << 32 | k.tier as u64;
        if let Some(id) = self.lane_ids.get(&key) {
            return *id as u16;
        }
        let id = self.lane_keys.len() as u16;
        self.lane_keys.push(k);
        self.lane_ids.insert(key, id as u32);
        id
    }

    /// Change indices of lane slot `lane` of consumer `c`, in event order.
    fn lane_changes(&self, c: u8, lane: u16) -> Option<&Vec<u32>> {
        self.per_lane
            .get(lane as usize * self.consumers.max(1) + c as usize)
    }
}

impl Recorder for Recording {
    fn start(&mut self, index: &crate::analysis::EventIndex) {
        // The lane count is bounded by consumers × sources × tiers.
        let lanes = self.consumers.max(1) * index.sources.len() * index.tiers.len();
        self.checkpoint_every = checkpoint_interval(lanes);
        self.job_events = vec![Vec::new(); index.jobs.len()];
    }

    fn event(
        &mut self,
        event: usize,
        loc: &crate::analysis::EventLoc,
        ev: &KvEvent,
        ids: &[u32],
        parent: Option<u32>,
    ) {
        if self.checkpoint_every == 0 {
            self.checkpoint_every = checkpoint_interval(0);
        }
        self.end_event();
        if event.is_multiple_of(self.checkpoint_every) {
            self.checkpoint();
        }
        let mut ordinal = Row::ORDINAL_MAX;
        if let Some(list) = self.job_events.get_mut(loc.job as usize) {
            ordinal = (list.len() as u32).min(Row::ORDINAL_MAX);
            list.push(event as u32);
            self.jobs_started = self.jobs_started.max(loc.job.saturating_add(1));
        }
        let hashes = ev.block_hashes();
        let (kind, parent_hash) = match ev {
            KvEvent::BlockStored(e) => (Row::STORED, e.parent_block_hash.as_ref()),
            KvEvent::BlockRemoved(_) => (Row::REMOVED, None),
            KvEvent::AllBlocksCleared => (Row::CLEARED, None),
        };
        let mut flags = kind | ordinal << Row::ORDINAL_SHIFT;
        flags |= match hashes.len() {
            0 => 0,
            1 => Row::ONE_HASH,
            _ => Row::MORE_HASHES,
        };
        if parent_hash.is_some() {
            flags |= Row::PARENT;
        }
        let stored = matches!(ev, KvEvent::BlockStored(_));
        self.blocks_seen.add(event as u32, ids, stored, parent);
        self.rows.push(Row {
            changes_end: u32::MAX,
            first_stores: self.blocks_seen.first_stores,
            findings: 0,
            jobs: self.jobs_started,
            hash: hashes.first().map_or(0, |h| h.as_u64()),
            parent: parent_hash.map_or(0, |p| p.as_u64()),
            origin: 0,
            seq: 0,
            tier: narrow(loc.tier),
            source: narrow(loc.source),
            dp_rank: narrow(loc.dp_rank),
            pos: narrow(loc.pos),
            job: loc.job,
            flags: if [loc.tier, loc.source, loc.dp_rank, loc.pos]
                .iter()
                .any(|v| *v >= u16::MAX as u32)
            {
                flags | Row::WIDE
            } else {
                flags
            },
        });
    }

    fn verdict(
        &mut self,
        event: usize,
        consumer: usize,
        v: &EventVerdict,
        resolved: &[Resolution],
    ) {
        let c = consumer as u8;
        let e = event as u32;
        let key = verdict_key(consumer, event);
        if self.verdicts.len() <= consumer {
            self.verdicts.resize_with(consumer + 1, Vec::new);
        }
        let status = self.intern(v.status.as_ref());
        let reason = self.intern(v.reason.as_ref());
        let status = u8::try_from(status).unwrap_or(u8::MAX);
        if let Some(list) = self.verdicts.get_mut(consumer) {
            list.push(Compact {
                kind: v.verdict,
                status,
                reason,
            });
        }
        if let Some(p) = v.missing_parent {
            self.missing.push((key, p));
        }
        if v.blocks
            .iter()
            .any(|b| b.verdict != v.verdict || b.reason.is_some())
        {
            self.blocks
                .push((key, v.blocks.to_vec().into_boxed_slice()));
        }
        for r in resolved {
            self.resolutions.push((e, c, r.clone()));
        }
    }

    fn lanes(&mut self, _event: usize, consumer: usize, changed: &[(LaneKey, LaneCounts)]) {
        for &(k, v) in changed {
            let lane = self.lane_slot(k);
            let idx = self.changes.len() as u32;
            let counts = pack(&v);
            self.changes.push(Change {
                consumer: consumer as u8,
                lane,
                counts,
            });
            if self.lane_state.len() <= consumer {
                self.lane_state.resize_with(consumer + 1, Vec::new);
            }
            if let Some(state) = self.lane_state.get_mut(consumer) {
                *slot(state, lane as u32) = Some(counts);
            }
            let at = lane as u32 * self.consumers.max(1) as u32 + consumer as u32;
            slot(&mut self.per_lane, at).push(idx);
        }
    }
}

/// Filter for [`Replay::next_violation`] / [`Replay::prev_violation`].
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ViolationFilter {
    /// Only findings of this rule (reorder rules at any level, including `allow`; other rules
    /// at `warn` or `deny`).
    #[serde(default)]
    pub rule: Option<Rule>,
    /// Only events this consumer loses (dropped, misrooted, truncated, pending or skipped
    /// stores). With `rule`, both must hold.
    #[serde(default)]
    pub consumer: Option<ConsumerKind>,
}

/// A delivered event, as the UI shows it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct EventInfo {
    /// Global 0-based index.
    pub index: usize,
    /// 1-based JSONL line / msgpack batch number.
    pub line: u64,
    /// 0-based index in its batch.
    pub pos: usize,
    /// Source name.
    pub source: String,
    /// DP rank.
    pub dp_rank: u32,
    /// Publisher sequence number of its batch.
    pub seq: u64,
    /// Tier label.
    pub tier: String,
    /// `BlockStored`, `BlockRemoved` or `AllBlocksCleared`.
    #[serde(rename = "type")]
    pub kind: String,
    /// Block hashes (u64-normalised).
    pub hashes: Vec<u64>,
    /// Parent (stores only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent: Option<u64>,
    /// Interned job id, when the event belongs to a job.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub job: Option<u32>,
}

/// One lane's counters.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LaneSnapshot {
    /// Source name.
    pub source: String,
    /// Tier label.
    pub tier: String,
    /// Counters.
    pub counts: LaneCounts,
}

/// One consumer's state at the cursor.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConsumerSnapshot {
    /// The model.
    pub consumer: ConsumerKind,
    /// Per lane (source × tier), sorted by source then tier.
    pub lanes: Vec<LaneSnapshot>,
    /// Sum over lanes.
    pub total: LaneCounts,
}

/// A job's progress at the cursor.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobProgress {
    /// The job.
    pub job: Job,
    /// Events of the job delivered so far.
    pub delivered: usize,
    /// Child-before-parent-in-job violations in it so far.
    pub violations: usize,
}

/// The full state at the cursor (plain data).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Snapshot {
    /// Number of applied events.
    pub cursor: usize,
    /// Total number of events.
    pub total: usize,
    /// The event at the cursor (`cursor - 1`), if any.
    pub last_event: Option<EventInfo>,
    /// Per consumer state.
    pub consumers: Vec<ConsumerSnapshot>,
    /// Jobs started but not finished at the cursor, plus the current event's job.
    pub active_jobs: Vec<JobProgress>,
    /// Distinct blocks stored so far (by any source, any tier).
    pub blocks_seen: usize,
    /// Findings (all levels) at events before the cursor.
    pub findings_so_far: usize,
}

/// A lane whose counters an event changed.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LaneChange {
    /// Source name.
    pub source: String,
    /// Tier label.
    pub tier: String,
    /// Before the event.
    pub before: LaneCounts,
    /// After the event.
    pub after: LaneCounts,
}

/// What one consumer did with one event.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConsumerStep {
    /// The model.
    pub consumer: ConsumerKind,
    /// Its verdict (as produced at delivery; `final_verdict` says if it changed later).
    pub verdict: EventVerdict,
    /// The final verdict when a later event changed it (a pending event replayed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub final_verdict: Option<VerdictKind>,
    /// Earlier events this one resolved (replayed orphans).
    pub resolved: Vec<Resolution>,
    /// Lanes whose counters changed.
    pub lanes: Vec<LaneChange>,
}

/// The diff between cursor `event` and `event + 1`: what applying that event changed.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Step {
    /// The event.
    pub event: EventInfo,
    /// Per consumer outcome.
    pub verdicts: Vec<ConsumerStep>,
    /// Findings at this event (all levels).
    pub findings: Vec<Finding>,
}

/// What is known about one block at the cursor.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BlockInfo {
    /// The hash.
    pub hash: u64,
    /// Parent named by its first store (if stored before the cursor).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent: Option<u64>,
    /// Event of its first store, if before the cursor.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_stored: Option<usize>,
    /// Children first stored before the cursor.
    pub children: Vec<u64>,
    /// Per consumer: the outcome for this block at the last event before the cursor that
    /// named it, with that event's index.
    pub last_outcome: Vec<(ConsumerKind, usize, VerdictKind)>,
}

/// The replay engine (see the module docs).
pub struct Replay {
    /// Shared, not copied: a caller that keeps the trace (the npm package's `Trace`) and
    /// replays it holds it once.
    trace: Arc<Trace>,
    analysis: Analysis,
    rec: Recording,
    /// Per job `j`: `job_violations[job_violation_at[j]..job_violation_at[j + 1]]` are the
    /// events of its within-job violations, sorted (one flat table: most jobs have none, and
    /// then a snapshot reads one small array).
    job_violation_at: Vec<u32>,
    job_violations: Vec<u32>,
    /// Per job: what a snapshot shows of it, compact (its source and tier interned).
    job_rows: Vec<JobRow>,
    /// Longest job span in events (bounds the active-job scan).
    max_job_span: usize,
    finding_events: Vec<(usize, usize)>,
    cursor: usize,
    /// Per consumer, by lane slot: the counters at the cursor (`None`: lane not yet seen).
    lanes_now: Vec<Vec<Option<[i32; 4]>>>,
}

/// The sort key of consumer `c`'s verdict on event `e` (verdicts are recorded in this order).
fn verdict_key(c: usize, e: usize) -> u64 {
    (e as u64) << 8 | (c as u64 & 0xff)
}

/// Set lane `lane` of consumer `c` in a per-consumer, per-slot lane table.
fn set_lane(lanes: &mut [Vec<Option<[i32; 4]>>], c: u8, lane: u16, counts: [i32; 4]) {
    if let Some(slot) = lanes
        .get_mut(c as usize)
        .and_then(|m| m.get_mut(lane as usize))
    {
        *slot = Some(counts);
    }
}

/// Lane checkpoints: every `k` events, where `k` (a power of two, at least 8) keeps their
/// memory near `lanes · 20 / k` ≤ ~10 bytes per event, and a seek applies the changes of at
/// most `k - 1` events.
fn checkpoint_interval(lanes: usize) -> usize {
    (lanes.saturating_mul(2))
        .next_power_of_two()
        .clamp(8, 1 << 16)
}

/// Which part of the work a [`ReplayBuilder`] is doing.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BuildPhase {
    /// Indexing the trace (sources, tiers, jobs, sequence numbers).
    Index,
    /// Running the consumer models and the violation index over the events, recording what
    /// the replay needs (then freeing the models, one per call).
    Analysis,
    /// Assembling findings (levels, per-model verdicts and cascades) and loss summaries; `done`
    /// and `total` count findings-sized work units, not events.
    Finish,
    /// Everything is done: [`ReplayBuilder::finish`] only builds small tables (one pass over
    /// the events' rows).
    Done,
}

/// How far a [`ReplayBuilder`] is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BuildProgress {
    /// The current phase.
    pub phase: BuildPhase,
    /// Work done in this phase (events, except in [`BuildPhase::Finish`]).
    pub done: usize,
    /// Work in this phase (the trace's events, except in [`BuildPhase::Finish`]).
    pub total: usize,
}

impl BuildProgress {
    /// Overall completion in `0.0..=1.0` (indexing and finishing count for a tenth of the work
    /// each).
    pub fn fraction(&self) -> f64 {
        let part = if self.total == 0 {
            1.0
        } else {
            self.done.min(self.total) as f64 / self.total as f64
        };
        match self.phase {
            BuildPhase::Index => 0.1 * part,
            BuildPhase::Analysis => 0.1 + 0.8 * part,
            BuildPhase::Finish => 0.9 + 0.1 * part,
            BuildPhase::Done => 1.0,
        }
    }
}

/// Builds a [`Replay`] in slices, so that a caller (the web app) can keep its UI responsive and
/// show progress on large traces:
///
/// ```
/// use kvscope_core::analysis::AnalysisConfig;
/// use kvscope_core::consumers::testkit::{batch, stored, trace};
/// use kvscope_core::replay::{BuildPhase, ReplayBuilder};
///
/// let t = trace(vec![batch("pod-a", 0, vec![
///     stored(&[1], None, Some("GPU"), 16),
///     stored(&[2], Some(1), Some("GPU"), 16),
/// ])]);
/// let mut b = ReplayBuilder::new(t, &AnalysisConfig::default()); // cheap
/// while !b.is_done() {
///     let p = b.advance(1); // about one event (or finding) of work per call
///     assert!(p.done <= p.total);
///     if p.phase == BuildPhase::Analysis {
///         assert_eq!(p.total, 2); // events
///     }
/// }
/// assert_eq!(b.progress().phase, BuildPhase::Done);
/// let replay = b.finish();
/// assert_eq!(replay.len(), 2);
/// ```
///
/// [`Replay::new`] is `ReplayBuilder::new(..).finish()`: the result does not depend on how the
/// work was sliced. Every step of [`ReplayBuilder::advance`] is bounded by its budget (whole
/// batch records while indexing, single events, then findings) except a few whole steps that
/// each end their call: freeing one model's state, sorting the findings (by small keys), one
/// model's loss summary (sorting its lost block hashes). [`ReplayBuilder::finish`] after
/// [`ReplayBuilder::is_done`] makes one pass over the per-cursor rows and the findings.
pub struct ReplayBuilder {
    trace: Arc<Trace>,
    run: Run,
    rec: Recording,
}

impl ReplayBuilder {
    /// Start building a replay of `trace` (cheap: counts the events). Pass an `Arc<Trace>` to
    /// share a trace the caller keeps instead of copying it.
    pub fn new(trace: impl Into<Arc<Trace>>, config: &AnalysisConfig) -> ReplayBuilder {
        let trace = trace.into();
        let run = Run::new(&trace, config);
        let rec = Recording {
            consumers: config.consumers.len(),
            ..Recording::default()
        };
        ReplayBuilder { trace, run, rec }
    }

    /// Do about `budget` events of work (at least one batch record or event) and report
    /// progress.
    pub fn advance(&mut self, budget: usize) -> BuildProgress {
        if !self.is_done() {
            self.run
                .advance(&self.trace, budget, None, Some(&mut self.rec));
        }
        self.progress()
    }

    /// Where the build is.
    pub fn progress(&self) -> BuildProgress {
        let phase = match self.run.stage() {
            Stage::Index => BuildPhase::Index,
            Stage::Events | Stage::Release => BuildPhase::Analysis,
            Stage::Finish => BuildPhase::Finish,
            Stage::Done => BuildPhase::Done,
        };
        BuildProgress {
            phase,
            done: self.run.done(),
            total: self.run.stage_total(),
        }
    }

    /// Whether all the sliced work is done (then [`ReplayBuilder::finish`] is cheap).
    pub fn is_done(&self) -> bool {
        self.run.stage() == Stage::Done
    }

    /// The trace being analysed.
    pub fn trace(&self) -> &Trace {
        &self.trace
    }

    /// Complete the work (all of it when called early) and return the replay, cursor at 0.
    pub fn finish(mut self) -> Replay {
        while !self.is_done() {
            self.advance(usize::MAX);
        }
        let ReplayBuilder {
            trace,
            run,
            mut rec,
        } = self;
        let (analysis, interner) = run.finish_parts(&trace);
        let n = analysis.index.events.len();
        rec.close(n);
        rec.blocks_seen.interner = interner;
        // (event, k) for k over violations then other findings, sorted: both lists are sorted
        // by event, so a merge (violations first on ties) does it.
        let reorders = analysis.violations.len();
        // Plain loops into vectors here (no iterator-adapter `collect` instances: wasm size).
        let mut others: Vec<usize> = Vec::new();
        for f in &analysis.findings {
            if !f.rule.is_reorder() {
                others.push(f.event);
            }
        }
        let mut finding_events: Vec<(usize, usize)> = Vec::with_capacity(reorders + others.len());
        let mut a = analysis
            .violations
            .iter()
            .map(|f| f.event)
            .enumerate()
            .peekable();
        let mut b = others.iter().enumerate().peekable();
        loop {
            let take_a = match (a.peek(), b.peek()) {
                (Some((_, ea)), Some((_, eb))) => *ea <= **eb,
                (Some(_), None) => true,
                (None, Some(_)) => false,
                (None, None) => break,
            };
            let next = if take_a {
                a.next().map(|(k, e)| (e, k))
            } else {
                b.next().map(|(k, e)| (*e, reorders + k))
            };
            finding_events.extend(next);
        }
        let consumers = analysis.config.consumers.len();
        // Within-job violations by job, sorted by event: (job, event) pairs sorted, then
        // offsets per job.
        // As `(job, event)` key/index pairs, so the crate's one sort serves (code size).
        let mut pairs: Vec<(u64, u32)> = Vec::new();
        for f in &analysis.violations {
            if f.rule != Rule::ChildBeforeParentInJob {
                continue;
            }
            if let Some(job) = analysis.index.events.get(f.event).map(|l| l.job) {
                if job != u32::MAX {
                    pairs.push((u64::from(job), f.event as u32));
                }
            }
        }
        crate::sort::sort_keyed(&mut pairs);
        let jobs = analysis.index.jobs.len();
        let mut job_violation_at = Vec::with_capacity(jobs + 1);
        let mut k = 0usize;
        for j in 0..=jobs as u32 {
            while pairs.get(k).is_some_and(|p| p.0 < u64::from(j)) {
                k += 1;
            }
            job_violation_at.push(k as u32);
        }
        let mut job_violations = Vec::with_capacity(pairs.len());
        for p in pairs {
            job_violations.push(p.1);
        }
        // Batch display data into the rows (batches' events are consecutive, in record order).
        let mut rows = rec.rows.iter_mut();
        for b in trace.batches() {
            for row in rows.by_ref().take(b.events.len()) {
                row.origin = b.origin;
                row.seq = b.seq;
            }
        }
        // Jobs active at each cursor other than the event's own: jobs are open at cursors
        // `first_event + 1 ..= last_event`, i.e. after events `first_event .. last_event`.
        let n_rows = rec.rows.len();
        let mut open = vec![0i32; n_rows + 1];
        for j in &analysis.index.jobs {
            if let (Some(a), Some(b)) = (open.get_mut(j.first_event), Some(j.last_event)) {
                *a += 1;
                if let Some(b) = open.get_mut(b) {
                    *b -= 1;
                }
            }
        }
        let mut now = 0i32;
        for (e, row) in rec.rows.iter_mut().enumerate() {
            now += open.get(e).copied().unwrap_or(0);
            let own = analysis
                .index
                .jobs
                .get(row.job as usize)
                .is_some_and(|j| j.last_event > e);
            if now - i32::from(own) > 0 {
                row.flags |= Row::OTHER_JOBS;
            }
        }
        drop(open);
        let mut job_rows = Vec::with_capacity(analysis.index.jobs.len());
        for j in &analysis.index.jobs {
            let loc = analysis.index.events.get(j.first_event);
            job_rows.push(JobRow {
                job_id: j.job_id.unwrap_or(0),
                first_event: j.first_event as u32,
                last_event: j.last_event as u32,
                events: j.events as u32,
                source: loc.map_or(0, |l| l.source),
                tier: loc.map_or(0, |l| l.tier),
                flags: if j.job_id.is_some() {
                    JobRow::JOB_ID
                } else {
                    0
                } | if j.inferred { JobRow::INFERRED } else { 0 },
                kind: j.kind,
            });
        }
        let max_job_span = analysis
            .index
            .jobs
            .iter()
            .map(|j| j.last_event - j.first_event + 1)
            .max()
            .unwrap_or(0);
        // Findings at events up to each event: one pass over the rows and the sorted findings.
        let mut k = 0usize;
        for (e, row) in rec.rows.iter_mut().enumerate() {
            while finding_events.get(k).is_some_and(|f| f.0 <= e) {
                k += 1;
            }
            row.findings = k as u32;
        }
        let lanes = rec.lane_keys.len();
        Replay {
            trace,
            analysis,
            rec,
            job_violation_at,
            job_violations,
            job_rows,
            max_job_span,
            finding_events,
            cursor: 0,
            lanes_now: vec![vec![None; lanes]; consumers],
        }
    }
}

impl Replay {
    /// Analyse `trace` and build the replay index in one go; the cursor starts at 0. For large
    /// traces in an interactive app, use [`ReplayBuilder`] to do the same work in slices.
    pub fn new(trace: impl Into<Arc<Trace>>, config: &AnalysisConfig) -> Replay {
        ReplayBuilder::new(trace, config).finish()
    }

    /// Number of delivered events.
    pub fn len(&self) -> usize {
        self.analysis.index.events.len()
    }

    /// Whether the trace has no events.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The cursor (number of applied events).
    pub fn cursor(&self) -> usize {
        self.cursor
    }

    /// The analysis (findings, violations, losses).
    pub fn analysis(&self) -> &Analysis {
        &self.analysis
    }

    /// The trace.
    pub fn trace(&self) -> &Trace {
        &self.trace
    }

    fn changes_of(&self, event: usize) -> &[Change] {
        let a = self.rec.changes_begin(event) as usize;
        let b = self.rec.changes_end(event) as usize;
        self.rec.changes.get(a..b).unwrap_or(&[])
    }

    /// Counters of a lane before change `idx` (the previous change of that lane, or zero).
    fn before_change(&self, idx: u32) -> [i32; 4] {
        let Some(ch) = self.rec.changes.get(idx as usize) else {
            return [0; 4];
        };
        let Some(list) = self.rec.lane_changes(ch.consumer, ch.lane) else {
            return [0; 4];
        };
        let pos = list.partition_point(|x| *x < idx);
        match pos.checked_sub(1).and_then(|p| list.get(p)) {
            Some(prev) => self
                .rec
                .changes
                .get(*prev as usize)
                .map_or([0; 4], |c| c.counts),
            None => [0; 4],
        }
    }

    /// Job `j`, built from its compact row (equal to `analysis().index.jobs[j]`).
    fn job(&self, j: u32) -> Option<Job> {
        let r = self.job_rows.get(j as usize)?;
        let index = &self.analysis.index;
        Some(Job {
            id: j,
            job_id: (r.flags & JobRow::JOB_ID != 0).then_some(r.job_id),
            inferred: r.flags & JobRow::INFERRED != 0,
            source: index
                .sources
                .get(r.source as usize)
                .cloned()
                .unwrap_or_default(),
            tier: index
                .tiers
                .get(r.tier as usize)
                .map(|t| t.label())
                .unwrap_or_default(),
            kind: r.kind,
            first_event: r.first_event as usize,
            last_event: r.last_event as usize,
            events: r.events as usize,
        })
    }

    /// Within-job violations of job `j` at events before `c`.
    fn job_violations_before(&self, j: u32, c: usize) -> usize {
        let at = |j: u32| self.job_violation_at.get(j as usize).map(|a| *a as usize);
        match (at(j), at(j + 1)) {
            (Some(a), Some(b)) if a < b => self
                .job_violations
                .get(a..b)
                .map_or(0, |l| l.partition_point(|e| (*e as usize) < c)),
            _ => 0,
        }
    }

    /// Apply the event at the cursor and advance. Returns what changed, `None` at the end.
    pub fn step_forward(&mut self) -> Option<Step> {
        if self.cursor >= self.len() {
            return None;
        }
        let e = self.cursor;
        let (a, b) = (self.rec.changes_begin(e), self.rec.changes_end(e));
        for idx in a..b {
            if let Some(ch) = self.rec.changes.get(idx as usize).copied() {
                set_lane(&mut self.lanes_now, ch.consumer, ch.lane, ch.counts);
            }
        }
        self.cursor += 1;
        self.step_at(e)
    }

    /// Revert the event at the cursor and move back. Returns what that event had changed.
    pub fn step_back(&mut self) -> Option<Step> {
        if self.cursor == 0 {
            return None;
        }
        let e = self.cursor - 1;
        let (a, b) = (self.rec.changes_begin(e), self.rec.changes_end(e));
        for idx in (a..b).rev() {
            let before = self.before_change(idx);
            if let Some(ch) = self.rec.changes.get(idx as usize).copied() {
                set_lane(&mut self.lanes_now, ch.consumer, ch.lane, before);
            }
        }
        self.cursor = e;
        self.step_at(e)
    }

    /// Move the cursor to `cursor` (clamped to `0..=len()`): restore the lane checkpoint at or
    /// before it, then apply the recorded changes of the events in between (one contiguous
    /// run of `changes`).
    pub fn seek(&mut self, cursor: usize) {
        let cursor = cursor.min(self.len());
        for m in &mut self.lanes_now {
            m.fill(None);
        }
        let (from, to) = self.seek_run(cursor);
        for ch in self.rec.changes.get(from..to).unwrap_or(&[]) {
            set_lane(&mut self.lanes_now, ch.consumer, ch.lane, ch.counts);
        }
        self.cursor = cursor;
    }

    /// The run of `changes` a seek to `cursor` applies: the entries of the checkpoint at or
    /// before it, then the changes of the events up to the cursor.
    fn seek_run(&self, cursor: usize) -> (usize, usize) {
        let every = self.rec.checkpoint_every.max(1);
        let Some((at, m)) = self.rec.checkpoint_header(cursor - cursor % every) else {
            return (0, 0);
        };
        let from = at + 1;
        let to = if cursor.is_multiple_of(every) {
            from + m
        } else {
            self.rec.changes_end(cursor - 1) as usize
        };
        (from, to.max(from))
    }

    /// How many recorded lane entries (checkpoint entries plus changes) a seek to `cursor`
    /// applies: at most the lanes seen plus `K - 1` events' changes, whatever the trace length
    /// (what `benches/analysis.rs` reports next to the seek time).
    pub fn seek_work(&self, cursor: usize) -> usize {
        let (from, to) = self.seek_run(cursor.min(self.len()));
        to - from
    }

    fn matches(&self, event: usize, finding: Option<&Finding>, filter: &ViolationFilter) -> bool {
        if let Some(rule) = filter.rule {
            if finding.is_none_or(|f| f.rule != rule) {
                return false;
            }
        }
        if let Some(kind) = filter.consumer {
            let lost = matches!(self.event_kind(event), Some("BlockStored"))
                && self
                    .analysis
                    .verdict_kind(kind, event)
                    .is_some_and(|v| !matches!(v, VerdictKind::Applied | VerdictKind::Replayed));
            if !lost {
                return false;
            }
        }
        true
    }

    fn event_kind(&self, event: usize) -> Option<&'static str> {
        (event < self.len())
            .then(|| self.rec.rows.get(event))
            .flatten()
            .map(Row::kind_name)
    }

    fn finding(&self, k: usize) -> Option<&Finding> {
        let reorders = self.analysis.violations.len();
        if k < reorders {
            self.analysis.violations.get(k)
        } else {
            self.analysis
                .findings
                .iter()
                .filter(|f| !f.rule.is_reorder())
                .nth(k - reorders)
        }
    }

    /// The next event after the cursor's event (index ≥ cursor) that matches `filter`: a
    /// finding (violation) when `rule` is set or neither is set, an event the consumer loses
    /// when only `consumer` is set. Seek to `index + 1` to apply it.
    pub fn next_violation(&self, filter: &ViolationFilter) -> Option<usize> {
        if filter.rule.is_none() && filter.consumer.is_some() {
            return (self.cursor..self.len()).find(|e| self.matches(*e, None, filter));
        }
        let start = self
            .finding_events
            .partition_point(|(e, _)| *e < self.cursor);
        self.finding_events
            .get(start..)?
            .iter()
            .find(|(e, k)| self.matches(*e, self.finding(*k), filter))
            .map(|(e, _)| *e)
    }

    /// The previous matching event before the cursor's event (index < cursor - 1).
    pub fn prev_violation(&self, filter: &ViolationFilter) -> Option<usize> {
        let end = self.cursor.saturating_sub(1);
        if filter.rule.is_none() && filter.consumer.is_some() {
            return (0..end).rev().find(|e| self.matches(*e, None, filter));
        }
        let stop = self.finding_events.partition_point(|(e, _)| *e < end);
        self.finding_events
            .get(..stop)?
            .iter()
            .rev()
            .find(|(e, k)| self.matches(*e, self.finding(*k), filter))
            .map(|(e, _)| *e)
    }

    /// Describe event `i`, from its row and its batch's (the trace itself only for the hashes
    /// of events naming more than one block).
    pub fn event_info(&self, i: usize) -> Option<EventInfo> {
        if i >= self.len() {
            return None;
        }
        let row = self.rec.rows.get(i)?;
        let index = &self.analysis.index;
        let (tier, source, dp_rank, pos) = if row.flags & Row::WIDE != 0 {
            let l = index.events.get(i)?;
            (l.tier, l.source, l.dp_rank, l.pos)
        } else {
            (
                row.tier as u32,
                row.source as u32,
                row.dp_rank as u32,
                row.pos as u32,
            )
        };
        let hashes = if row.flags & Row::ONE_HASH != 0 {
            vec![row.hash]
        } else if row.flags & Row::MORE_HASHES != 0 {
            let (_, ev) = index.event(&self.trace, i)?;
            let mut v = Vec::with_capacity(ev.block_hashes().len());
            for h in ev.block_hashes() {
                v.push(h.as_u64());
            }
            v
        } else {
            Vec::new()
        };
        Some(EventInfo {
            index: i,
            line: row.origin,
            pos: pos as usize,
            source: index
                .sources
                .get(source as usize)
                .cloned()
                .unwrap_or_default(),
            dp_rank,
            seq: row.seq,
            tier: index
                .tiers
                .get(tier as usize)
                .map(|t| t.label())
                .unwrap_or_default(),
            kind: row.kind_name().into(),
            hashes,
            parent: (row.flags & Row::PARENT != 0).then_some(row.parent),
            job: (row.job != u32::MAX).then_some(row.job),
        })
    }

    /// Consumer `c`'s verdict on event `i`, as produced at delivery.
    fn verdict(&self, c: usize, i: usize, hashes: &[u64]) -> Option<EventVerdict> {
        let cv = self.rec.verdicts.get(c)?.get(i)?;
        let key = verdict_key(c, i);
        let blocks_at = self.rec.blocks.binary_search_by_key(&key, |e| e.0).ok();
        let stored = blocks_at.and_then(|k| self.rec.blocks.get(k));
        let mut blocks = Blocks::with_capacity(stored.map_or(hashes.len(), |(_, b)| b.len()));
        match stored {
            Some((_, b)) => {
                for bv in b.iter() {
                    blocks.push(bv.clone());
                }
            }
            None => {
                for &h in hashes {
                    push_block(&mut blocks, h, cv.kind, None);
                }
            }
        }
        Some(EventVerdict {
            verdict: cv.kind,
            missing_parent: self
                .rec
                .missing
                .binary_search_by_key(&key, |e| e.0)
                .ok()
                .and_then(|k| self.rec.missing.get(k))
                .map(|e| e.1),
            reason: self.rec.string(cv.reason),
            status: self.rec.string(cv.status as u16),
            blocks: if matches!(cv.kind, VerdictKind::Cleared) {
                Blocks::new()
            } else {
                blocks
            },
        })
    }

    fn lane_names(&self, lane: u16) -> (String, String) {
        let k = self
            .rec
            .lane_keys
            .get(lane as usize)
            .copied()
            .unwrap_or_default();
        (
            self.analysis
                .index
                .sources
                .get(k.source as usize)
                .cloned()
                .unwrap_or_default(),
            self.analysis
                .index
                .tiers
                .get(k.tier as usize)
                .map(|t| t.label())
                .unwrap_or_default(),
        )
    }

    /// What applying event `i` changed (the diff between cursors `i` and `i + 1`).
    pub fn step_at(&self, i: usize) -> Option<Step> {
        let event = self.event_info(i)?;
        let start = self.rec.resolutions.partition_point(|r| (r.0 as usize) < i);
        let mut verdicts = Vec::new();
        for (c, kind) in self.analysis.config.consumers.iter().enumerate() {
            let verdict = self.verdict(c, i, &event.hashes)?;
            let final_kind = self.analysis.verdict_kind(*kind, i);
            let mut resolved = Vec::new();
            for r in self.rec.resolutions.get(start..).unwrap_or(&[]) {
                if r.0 as usize != i {
                    break;
                }
                if r.1 as usize == c {
                    resolved.push(r.2.clone());
                }
            }
            let a = self.rec.changes_begin(i);
            let mut lanes = Vec::new();
            for (k, ch) in self.changes_of(i).iter().enumerate() {
                if ch.consumer as usize != c {
                    continue;
                }
                let (source, tier) = self.lane_names(ch.lane);
                lanes.push(LaneChange {
                    source,
                    tier,
                    before: unpack(self.before_change(a + k as u32)),
                    after: unpack(ch.counts),
                });
            }
            verdicts.push(ConsumerStep {
                consumer: *kind,
                final_verdict: final_kind.filter(|k| *k != verdict.verdict),
                verdict,
                resolved,
                lanes,
            });
        }
        let from = self.finding_events.partition_point(|(e, _)| *e < i);
        let mut findings = Vec::new();
        for &(e, k) in self.finding_events.get(from..).unwrap_or(&[]) {
            if e != i {
                break;
            }
            findings.extend(self.finding(k).cloned());
        }
        Some(Step {
            event,
            verdicts,
            findings,
        })
    }

    /// The full state at the cursor.
    pub fn snapshot(&self) -> Snapshot {
        let consumers = self
            .analysis
            .config
            .consumers
            .iter()
            .enumerate()
            .map(|(c, kind)| {
                let mut lanes: Vec<LaneSnapshot> = self
                    .lanes_now
                    .get(c)
                    .map(|m| {
                        m.iter()
                            .enumerate()
                            .filter_map(|(lane, counts)| {
                                let counts = (*counts)?;
                                let (source, tier) = self.lane_names(lane as u16);
                                Some(LaneSnapshot {
                                    source,
                                    tier,
                                    counts: unpack(counts),
                                })
                            })
                            .collect()
                    })
                    .unwrap_or_default();
                crate::sort::insertion_sort_by(&mut lanes, |a, b| {
                    (&a.source, &a.tier) < (&b.source, &b.tier)
                });
                let mut total = LaneCounts::default();
                for l in &lanes {
                    total.indexed += l.counts.indexed;
                    total.pending += l.counts.pending;
                    total.dropped += l.counts.dropped;
                    total.unreachable += l.counts.unreachable;
                }
                ConsumerSnapshot {
                    consumer: *kind,
                    lanes,
                    total,
                }
            })
            .collect();
        let c = self.cursor;
        let current = c.checked_sub(1).and_then(|e| self.rec.rows.get(e));
        let current_job = current.map(|r| r.job).filter(|j| *j != u32::MAX);
        // Jobs are interned in order of their first event: only jobs starting within the
        // longest job span before the cursor can still be active (walked back from the last
        // job started, in the compact job table).
        let row = current.copied().unwrap_or_default();
        let lo = c.saturating_sub(self.max_job_span);
        let scan = if current.is_some_and(|r| r.flags & Row::OTHER_JOBS != 0) {
            0..row.jobs
        } else {
            0..0
        };
        let mut active: Vec<u32> = Vec::new();
        for j in scan.rev() {
            let Some(r) = self.job_rows.get(j as usize) else {
                break;
            };
            if (r.first_event as usize) < lo {
                break;
            }
            if r.last_event as usize >= c {
                active.push(j);
            }
        }
        active.reverse();
        if let Some(j) = current_job.filter(|j| (*j as usize) < self.job_rows.len()) {
            if !active.contains(&j) {
                active.push(j);
            }
        }
        let mut active_jobs = Vec::new();
        for j in active.into_iter().take(256) {
            let Some(job) = self.job(j) else {
                continue;
            };
            active_jobs.push(JobProgress {
                job,
                // The current event's job: its position in the job says it (no list
                // lookup).
                delivered: match current.filter(|r| r.job == j).and_then(Row::ordinal) {
                    Some(o) => o + 1,
                    None => self
                        .rec
                        .job_events
                        .get(j as usize)
                        .map_or(0, |l| l.partition_point(|e| (*e as usize) < c)),
                },
                violations: self.job_violations_before(j, c),
            });
        }
        Snapshot {
            cursor: c,
            total: self.len(),
            last_event: c.checked_sub(1).and_then(|e| self.event_info(e)),
            consumers,
            active_jobs,
            blocks_seen: row.first_stores as usize,
            findings_so_far: row.findings as usize,
        }
    }

    /// Topology and per-consumer outcome of one block, as of the cursor.
    pub fn block(&self, hash: u64) -> BlockInfo {
        let c = self.cursor;
        let tables = &self.rec.blocks_seen;
        let first = tables.first_store(hash).filter(|(e, _)| *e < c);
        let children = tables
            .children(hash)
            .filter(|h| tables.first_store(*h).is_some_and(|(e, _)| e < c))
            .collect();
        let mut last_outcome = Vec::new();
        if let Some(e) = tables.touches(hash).take_while(|e| *e < c).last() {
            let hashes = self.event_info(e).map(|x| x.hashes).unwrap_or_default();
            for (ci, kind) in self.analysis.config.consumers.iter().enumerate() {
                if let Some(v) = self.verdict(ci, e, &hashes) {
                    let k = v
                        .blocks
                        .iter()
                        .find(|b| b.hash == hash)
                        .map_or(v.verdict, |b| b.verdict);
                    let k = match self.analysis.verdict_kind(*kind, e) {
                        Some(VerdictKind::Replayed) => VerdictKind::Replayed,
                        _ => k,
                    };
                    last_outcome.push((*kind, e, k));
                }
            }
        }
        BlockInfo {
            hash,
            parent: first.and_then(|(_, p)| p),
            first_stored: first.map(|(e, _)| e),
            children,
            last_outcome,
        }
    }

    /// Approximate heap bytes held by the replay index (not counting the trace itself).
    pub fn index_bytes(&self) -> usize {
        let n = self.len();
        n * std::mem::size_of::<crate::analysis::EventLoc>()
            + self
                .rec
                .verdicts
                .iter()
                .map(|v| v.capacity() * std::mem::size_of::<Compact>())
                .sum::<usize>()
            + self
                .analysis
                .verdict_kinds
                .iter()
                .map(|v| v.capacity())
                .sum::<usize>()
            + self.rec.changes.capacity() * std::mem::size_of::<Change>()
            + self
                .rec
                .per_lane
                .iter()
                .map(|v| 24 + v.capacity() * 4)
                .sum::<usize>()
            + self.rec.rows.capacity() * std::mem::size_of::<Row>()
            + self.rec.checkpoint_at.capacity() * 4
            + self.job_rows.capacity() * std::mem::size_of::<JobRow>()
            + (self.job_violation_at.capacity() + self.job_violations.capacity()) * 4
            + self.rec.blocks_seen.bytes()
            + self
                .rec
                .job_events
                .iter()
                .map(|v| 24 + v.capacity() * 4)
                .sum::<usize>()
            + self.rec.missing.capacity() * 16
            + self
                .rec
                .blocks
                .iter()
                .map(|b| 24 + b.1.len() * std::mem::size_of::<BlockVerdict>())
                .sum::<usize>()
    }

    /// Records of the trace that are not batches (header, gaps), for display.
    pub fn non_batch_records(&self) -> impl Iterator<Item = &TraceRecord> + '_ {
        self.trace
            .records
            .iter()
            .filter(|r| !matches!(r, TraceRecord::Batch(_)))
    }
}

#[cfg(test)]
mod tests;
