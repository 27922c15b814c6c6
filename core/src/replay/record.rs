//! What the analysis pass records for the replay: compact verdicts, the lane change log with
//! its checkpoints, one row per event and one per job ([`Recording`], the analysis' [`Recorder`]).

use std::borrow::Cow;
type HashMap<K, V> = hashbrown::HashMap<K, V, rustc_hash::FxBuildHasher>;

use super::BlockTables;
use crate::analysis::Recorder;
use crate::consumers::{
    slot, str_hash, BlockVerdict, EventVerdict, HashChain, LaneCounts, LaneKey, Resolution,
    VerdictKind,
};
use crate::event::KvEvent;

/// A compact verdict: kind, interned status and reason (4 bytes).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Compact {
    pub(super) kind: VerdictKind,
    pub(super) status: u8,
    pub(super) reason: u16,
}

/// One lane change: counters of `lane` of consumer `consumer` after its event (the event is
/// implied by the change's position, see `Row::changes`).
#[derive(Clone, Copy, Debug)]
pub(super) struct Change {
    pub(super) consumer: u8,
    pub(super) lane: u16,
    pub(super) counts: [i32; 4],
    /// The index plus one of the same lane's previous change (0: none; checkpoint entries
    /// leave it 0): what a step back restores, one link instead of a list per lane.
    pub(super) prev: u32,
}

pub(super) fn pack(c: &LaneCounts) -> [i32; 4] {
    let clamp = |v: i64| v.clamp(i32::MIN as i64, i32::MAX as i64) as i32;
    [
        clamp(c.indexed),
        clamp(c.pending),
        clamp(c.dropped),
        clamp(c.unreachable),
    ]
}

pub(super) fn unpack(a: [i32; 4]) -> LaneCounts {
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
pub(super) struct Row {
    /// End of event `e`'s changes in `changes` (= changes of events up to `e`, and
    /// checkpoints before it).
    pub(super) changes_end: u32,
    /// Distinct blocks stored by events up to `e`.
    pub(super) first_stores: u32,
    /// Findings (violations and other findings) at events up to `e`.
    pub(super) findings: u32,
    /// Jobs whose first event is at or before `e` (jobs are numbered in that order).
    pub(super) jobs: u32,
    /// Event `c`'s first block hash (u64-normalised), see [`Row::ONE_HASH`].
    pub(super) hash: u64,
    /// Event `c`'s parent hash, see [`Row::PARENT`].
    pub(super) parent: u64,
    /// Its batch's line / batch number and publisher sequence number (filled in when the
    /// replay is finished).
    pub(super) origin: u64,
    pub(super) seq: u64,
    /// Its tier id, source id, DP rank and position in its batch, when each fits in 16 bits
    /// (else [`Row::WIDE`] is set and they come from the index).
    pub(super) tier: u16,
    pub(super) source: u16,
    pub(super) dp_rank: u16,
    pub(super) pos: u16,
    /// Its job id (`u32::MAX`: none).
    pub(super) job: u32,
    /// Event kind (bits 0–1: [`Row::STORED`], [`Row::REMOVED`], [`Row::CLEARED`]), flags, and
    /// in bits 8–31 the event's position in its job (saturated at [`Row::ORDINAL_MAX`]).
    pub(super) flags: u32,
}

const _: () = assert!(std::mem::size_of::<Row>() == 64);

impl Row {
    pub(super) const STORED: u32 = 0;
    pub(super) const REMOVED: u32 = 1;
    pub(super) const CLEARED: u32 = 2;
    pub(super) const KIND: u32 = 3;
    /// `parent` holds the parent hash.
    pub(super) const PARENT: u32 = 1 << 2;
    /// The event names exactly one block: `hash`.
    pub(super) const ONE_HASH: u32 = 1 << 3;
    /// The event names more than one block: read them from the trace.
    pub(super) const MORE_HASHES: u32 = 1 << 4;
    /// `tier`, `source`, `dp_rank` or `pos` did not fit: read them from the index.
    pub(super) const WIDE: u32 = 1 << 5;
    /// Some job other than the event's own is active at the cursor after it (else a
    /// snapshot there needs no job scan).
    pub(super) const OTHER_JOBS: u32 = 1 << 6;
    pub(super) const ORDINAL_SHIFT: u32 = 8;
    pub(super) const ORDINAL_MAX: u32 = (1 << 24) - 1;

    pub(super) fn kind_name(&self) -> &'static str {
        match self.flags & Row::KIND {
            Row::STORED => "BlockStored",
            Row::REMOVED => "BlockRemoved",
            _ => "AllBlocksCleared",
        }
    }

    /// The event's position in its job, unless saturated.
    pub(super) fn ordinal(&self) -> Option<usize> {
        let o = self.flags >> Row::ORDINAL_SHIFT;
        (o < Row::ORDINAL_MAX).then_some(o as usize)
    }
}

/// A job, compact: [`Replay::job`] builds the [`Job`] from it (32 bytes instead of the `Job`
/// and its two strings).
#[derive(Clone, Copy, Debug)]
pub(super) struct JobRow {
    pub(super) job_id: u64,
    pub(super) first_event: u32,
    pub(super) last_event: u32,
    pub(super) events: u32,
    /// Source and tier ids (of its first event, as the index names the job).
    pub(super) source: u32,
    pub(super) tier: u32,
    /// [`JobRow::JOB_ID`], [`JobRow::INFERRED`].
    pub(super) flags: u8,
    pub(super) kind: Option<crate::trace::ProvenanceKind>,
    pub(super) evidence: crate::analysis::JobEvidence,
}

impl JobRow {
    pub(super) const JOB_ID: u8 = 1;
    pub(super) const INFERRED: u8 = 2;
}

/// `v` in 16 bits (`u16::MAX` when it does not fit, see [`Row::WIDE`]).
pub(super) fn narrow(v: u32) -> u16 {
    u16::try_from(v).unwrap_or(u16::MAX)
}

/// Marks a checkpoint header in `Recording::changes` (`counts[0]`: number of entries after it).
const CHECKPOINT: u8 = u8::MAX;

/// Everything recorded during the analysis pass.
#[derive(Default)]
pub(super) struct Recording {
    /// Number of consumers.
    pub(super) consumers: usize,
    pub(super) strings: Vec<Cow<'static, str>>,
    /// String ids by content hash.
    pub(super) string_ids: HashChain,
    /// `((address, length), id)` of static strings already interned (a small cache).
    pub(super) static_ids: Vec<((usize, usize), u16)>,
    pub(super) verdicts: Vec<Vec<Compact>>,
    /// `(verdict key, missing parent)`, sorted by key (see [`verdict_key`]).
    pub(super) missing: Vec<(u64, u64)>,
    /// `(verdict key, per-block outcomes)` where they differ from the event's, sorted by key.
    pub(super) blocks: Vec<(u64, Box<[BlockVerdict]>)>,
    pub(super) resolutions: Vec<(u32, u8, Resolution)>,
    pub(super) lane_keys: Vec<LaneKey>,
    /// Lane key (`source << 32 | tier`) → lane slot.
    pub(super) lane_ids: HashMap<u64, u32>,
    /// The last lane key looked up and its slot.
    pub(super) last_lane: Option<(u64, u16)>,
    pub(super) changes: Vec<Change>,
    /// Per (consumer, lane slot): the index plus one of its last change so far (index `lane
    /// slot · consumers + consumer`; 0: none), see [`Change::prev`].
    pub(super) last_change: Vec<u32>,
    /// Per cursor `0..=n` (the last one added when closed).
    pub(super) rows: Vec<Row>,
    /// Jobs started by the events recorded so far.
    pub(super) jobs_started: u32,
    /// Block topology and touches.
    pub(super) blocks_seen: BlockTables,
    /// Per job: its events.
    pub(super) job_events: Vec<Vec<u32>>,
    /// Events between lane checkpoints (0 until the index is known).
    pub(super) checkpoint_every: usize,
    /// Per checkpoint (cursor `k · K`): the index of its header in `changes`.
    pub(super) checkpoint_at: Vec<u32>,
    /// Lane counters after the events recorded so far.
    pub(super) lane_state: Vec<Vec<Option<[i32; 4]>>>,
}

impl Recording {
    /// Checkpoint the lane counters (at the cursor of the next event) into `changes`: a header
    /// ([`CHECKPOINT`], `counts[0]` = number of entries) and one entry per lane seen, so that a
    /// seek reads the checkpoint and the changes after it as one run.
    pub(super) fn checkpoint(&mut self) {
        let at = self.changes.len();
        self.checkpoint_at.push(at as u32);
        self.changes.push(Change {
            consumer: CHECKPOINT,
            lane: 0,
            counts: [0; 4],
            prev: 0,
        });
        for (c, lanes) in self.lane_state.iter().enumerate() {
            for (l, v) in lanes.iter().enumerate() {
                if let Some(v) = v {
                    self.changes.push(Change {
                        consumer: c as u8,
                        lane: l as u16,
                        counts: *v,
                        prev: 0,
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
    pub(super) fn close(&mut self, n: usize) {
        if self.checkpoint_every == 0 {
            self.checkpoint_every = checkpoint_interval(0);
        }
        self.end_event();
        if n.is_multiple_of(self.checkpoint_every) {
            self.checkpoint();
        }
        // The tables are complete: drop a large slack (an estimate far off). A small one
        // stays: shrinking copies the table (in wasm, a hundred megabytes at a million
        // events), while the untouched slack costs address space only.
        if self.rows.capacity() / 2 > self.rows.len() {
            self.rows.shrink_to_fit();
        }
        if self.changes.capacity() / 2 > self.changes.len() {
            self.changes.shrink_to_fit();
        }
    }

    /// The last recorded event's changes end here.
    pub(super) fn end_event(&mut self) {
        let end = self.changes.len() as u32;
        if let Some(row) = self.rows.last_mut() {
            row.changes_end = end;
        }
    }

    /// The checkpoint header at cursor `c` (a multiple of `K`): its index in `changes` and
    /// its number of entries.
    pub(super) fn checkpoint_header(&self, c: usize) -> Option<(usize, usize)> {
        let at = *self.checkpoint_at.get(c / self.checkpoint_every.max(1))? as usize;
        let h = self.changes.get(at).filter(|h| h.consumer == CHECKPOINT)?;
        Some((at, h.counts[0].max(0) as usize))
    }

    /// First index into `changes` of event `e`'s own changes (after its checkpoint, if any).
    pub(super) fn changes_begin(&self, e: usize) -> u32 {
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
    pub(super) fn changes_end(&self, e: usize) -> u32 {
        self.rows
            .get(e)
            .map_or(self.changes.len() as u32, |r| r.changes_end)
    }

    pub(super) fn intern(&mut self, s: Option<&Cow<'static, str>>) -> u16 {
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
    pub(super) fn intern_slow(&mut self, s: &str, stat: Option<&'static str>) -> u16 {
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

    pub(super) fn string(&self, id: u16) -> Option<Cow<'static, str>> {
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

    pub(super) fn lane_slot(&mut self, k: LaneKey) -> u16 {
        let key = (k.source as u64) << 32 | k.tier as u64;
        // The models change the same lane for an event, one after the other.
        if let Some((last, id)) = self.last_lane {
            if last == key {
                return id;
            }
        }
        let id = match self.lane_ids.get(&key) {
            Some(id) => *id as u16,
            None => {
                let id = self.lane_keys.len() as u16;
                self.lane_keys.push(k);
                self.lane_ids.insert(key, id as u32);
                id
            }
        };
        self.last_lane = Some((key, id));
        id
    }
}

impl Recorder for Recording {
    #[inline]
    fn start(&mut self, index: &crate::analysis::EventIndex) {
        // The lane count is bounded by consumers × sources × tiers.
        let lanes = self.consumers.max(1) * index.sources.len() * index.tiers.len();
        self.checkpoint_every = checkpoint_interval(lanes);
        self.job_events = vec![Vec::new(); index.jobs.len()];
        // The per-event tables' sizes are known (or, for the lane changes, about one per
        // event and model): reserved once, not grown by doubling. In wasm every growth of a
        // large vector copies it into fresh memory; at a million events that was the page's
        // largest single cost (about a tenth of the analysis, in `realloc`).
        let n = index.events.len();
        self.rows.reserve_exact(n);
        self.verdicts = Vec::with_capacity(self.consumers);
        for _ in 0..self.consumers {
            self.verdicts.push(Vec::with_capacity(n));
        }
        // One change per event and model, each checkpoint's header and lanes, and a
        // sixteenth more: running past the estimate near the end doubles (copies) the table
        // in one slice, while unused room costs address space only.
        let every = self.checkpoint_every.max(1);
        self.changes
            .reserve(n.saturating_mul(self.consumers) + (n / every + 1) * (lanes + 1) + n / 16);
        self.blocks_seen.reserve(n);
    }

    #[inline]
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

    #[inline]
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

    #[inline]
    fn lanes(&mut self, _event: usize, consumer: usize, changed: &[(LaneKey, LaneCounts)]) {
        for &(k, v) in changed {
            let lane = self.lane_slot(k);
            let idx = self.changes.len() as u32;
            let counts = pack(&v);
            let at = lane as u32 * self.consumers.max(1) as u32 + consumer as u32;
            let last = slot(&mut self.last_change, at);
            let prev = *last;
            *last = idx + 1;
            self.changes.push(Change {
                consumer: consumer as u8,
                lane,
                counts,
                prev,
            });
            if self.lane_state.len() <= consumer {
                self.lane_state.resize_with(consumer + 1, Vec::new);
            }
            if let Some(state) = self.lane_state.get_mut(consumer) {
                *slot(state, lane as u32) = Some(counts);
            }
        }
    }
}

/// The sort key of consumer `c`'s verdict on event `e` (verdicts are recorded in this order).
pub(super) fn verdict_key(c: usize, e: usize) -> u64 {
    (e as u64) << 8 | (c as u64 & 0xff)
}

/// Lane checkpoints: every `k` events, where `k` (a power of two, at least 8) keeps their
/// memory near `lanes · 20 / k` ≤ ~10 bytes per event, and a seek applies the changes of at
/// most `k - 1` events.
pub(super) fn checkpoint_interval(lanes: usize) -> usize {
    (lanes.saturating_mul(2))
        .next_power_of_two()
        .clamp(8, 1 << 16)
}
