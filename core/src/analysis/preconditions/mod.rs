//! Routing preconditions: what makes a real router lose everything, or most of it, without
//! saying so (`docs/rules.md`, "Routing preconditions"), named from the trace and from the
//! router models' verdicts.
//!
//! [`Preconditions`] watches every delivered event (and every model's verdict on it) during
//! the analysis' event stage; once the events are done it reports **one finding per
//! condition** (per router and source, per pair of sources, per restart) with counts, so a
//! condition that explains thousands of losses is one line of the report, not thousands.

use crate::consumers::llmd::Llmd;
use crate::consumers::{content_hash, AnyConsumer, ConsumerKind, EventVerdict, Map, VerdictKind};
use crate::event::{ExtraValue, KvEvent};
use crate::trace::TraceBatch;

mod findings;

pub(crate) use super::watch::{At, Context, SILENT_SOURCE_FACTOR};

/// How many hashes a finding lists (the message gives the full count).
const LISTED_HASHES: usize = 32;

/// One condition, aggregated: where it was first seen and how much it covers.
#[derive(Clone, Debug)]
struct Tally {
    first: At,
    batches: usize,
    events: usize,
    blocks: usize,
    /// A second count (missing-spec-kind: removals; pod-entry-overflow: evicted entries;
    /// silent-source: ignored stores).
    other: usize,
    last_record: u32,
    /// Hashes of the first occurrence.
    hashes: Vec<u64>,
    /// Detail (missing-spec-kind: the groups; silent-source: the first reason).
    notes: Vec<String>,
}

impl Tally {
    fn new(first: At, hashes: &[u64]) -> Tally {
        Tally {
            first,
            batches: 0,
            events: 0,
            blocks: 0,
            other: 0,
            last_record: u32::MAX,
            hashes: hashes.iter().take(LISTED_HASHES).copied().collect(),
            notes: Vec::new(),
        }
    }

    /// Count one event of `blocks` blocks at `at`.
    fn count(&mut self, at: At, blocks: usize) {
        if self.last_record != at.record {
            self.batches += 1;
            self.last_record = at.record;
        }
        self.events += 1;
        self.blocks += blocks;
    }

    fn note(&mut self, note: &str) {
        if !self.notes.iter().any(|n| n == note) {
            self.notes.push(note.to_owned());
        }
    }
}

/// Tallies by key, in first-seen order, found by the key packed into a `u64`.
#[derive(Debug)]
struct Tallies<K> {
    list: Vec<(K, Tally)>,
    index: Places,
}

impl<K> Default for Tallies<K> {
    fn default() -> Self {
        Tallies {
            list: Vec::new(),
            index: Places::default(),
        }
    }
}

/// Places in a [`Tallies`] list by packed key (not generic: one copy of this code).
#[derive(Debug)]
struct Places {
    map: Map<u64, u32>,
    /// Recent keys and their places, direct-mapped by the key's low bits (`u32::MAX`: none):
    /// consecutive events mostly share their keys, one per model (a probe of `map` per model
    /// per event was a tenth of the watcher's time).
    recent: [(u64, u32); 8],
}

impl Default for Places {
    fn default() -> Self {
        Places {
            map: Map::default(),
            recent: [(0, u32::MAX); 8],
        }
    }
}

impl Places {
    /// The place of `packed`, or else `next` (recorded as its place) and `false`.
    fn place(&mut self, packed: u64, next: usize) -> (usize, bool) {
        let slot = ((packed ^ packed >> 32) & 7) as usize;
        if let Some(&(p, i)) = self.recent.get(slot) {
            if p == packed && i != u32::MAX {
                return (i as usize, true);
            }
        }
        let (i, found) = match self.map.get(&packed) {
            Some(i) => (*i as usize, true),
            None => {
                self.map.insert(packed, next as u32);
                (next, false)
            }
        };
        if let Some(r) = self.recent.get_mut(slot) {
            *r = (packed, i as u32);
        }
        (i, found)
    }
}

impl<K> Tallies<K> {
    /// The tally of `key` (packed: `packed`), new at `at` with `hashes` if unseen.
    fn get(&mut self, packed: u64, key: K, at: At, hashes: &[u64]) -> &mut Tally {
        let (i, found) = self.index.place(packed, self.list.len());
        if !found {
            self.list.push((key, Tally::new(at, hashes)));
        }
        &mut self.list[i].1
    }
}

/// The causes of a `batch_decode_error` the models name (the rest are `undecodable`).
const CAUSES: [&str; 6] = [
    "small_int_hash",
    "empty_bytes_hash",
    "extra_keys_entry_not_array",
    "extra_keys_map_key_not_string",
    "bytes_hash",
    "undecodable",
];

/// A root block's extra keys as `hash-seed-mismatch` compares them.
#[derive(Clone, Debug, PartialEq)]
enum Extra {
    /// The event has no `extra_keys` (connector events carry none).
    Absent,
    /// The root block's entry (`None`: nil).
    Entry(Option<ExtraValue>),
}

impl Extra {
    /// Equal, or absent on either side.
    fn compatible(&self, other: &Extra) -> bool {
        matches!((self, other), (Extra::Absent, _) | (_, Extra::Absent)) || self == other
    }
}

/// One root block seen (of the source its group names): its hash and extra keys.
#[derive(Clone, Debug)]
struct Root {
    hash: u64,
    extra: Extra,
    event: usize,
}

/// A pair of sources that stored the same leading tokens under different hashes.
#[derive(Clone, Debug)]
struct Mismatch {
    /// The later store (the finding's location) and the earlier one.
    at: At,
    other_event: usize,
    other_source: u32,
    /// This hash, the other source's.
    hashes: [u64; 2],
    roots: usize,
    /// Extra keys absent on some side: a cache salt would explain it too.
    salt_possible: bool,
}

/// One batch carrying events: its time in microseconds as an order-preserving `u64`
/// ([`ts_key`]) and where it starts (its first event's [`At`], whose `pos` is 0): 32 bytes a
/// batch, where `(ts, source, At)` took 48 (one row per batch of the trace: on a trace of
/// one-event batches the largest item left in a streaming `check`).
#[derive(Clone, Copy, Debug)]
struct BatchAt {
    ts: u64,
    line: u64,
    event: u64,
    source: u32,
    record: u32,
}

impl BatchAt {
    fn new(ts: u64, at: At) -> BatchAt {
        BatchAt {
            ts,
            line: at.line,
            event: at.event as u64,
            source: at.source,
            record: at.record,
        }
    }

    /// Where the batch starts.
    fn at(&self) -> At {
        At {
            event: self.event as usize,
            line: self.line,
            pos: 0,
            source: self.source,
            record: self.record,
        }
    }
}

/// `ts` (seconds) as whole microseconds in an order-preserving `u64` (differences of two keys
/// are microseconds).
fn ts_key(ts: f64) -> u64 {
    ((ts * 1e6).round() as i64 as u64) ^ (1 << 63)
}

/// The precondition watcher of one analysis run (see the module docs).
#[derive(Debug, Default)]
pub(crate) struct Preconditions {
    /// `undecodable-batch`: by (consumer, source, cause).
    undecodable: Tallies<(ConsumerKind, u32, &'static str)>,
    /// `missing-spec-kind`: by source (`other`: skipped removals).
    missing_kind: Tallies<u32>,
    /// `pod-entry-overflow`: by source (`other`: evicted entries), and llm-d's eviction
    /// counter after the previous event.
    overflow: Tallies<u32>,
    llmd_evicted: u64,
    /// `silent-source` (ignored entirely): by (consumer, source): `events` stores, `other`
    /// ignored ones.
    ignored: Tallies<(ConsumerKind, u32)>,
    /// `router-block-size-mismatch`: by (source, block size): the stores carrying tokens.
    sizes: Tallies<(u32, u32)>,
    /// `hash-seed-mismatch`: root blocks by content key, and the pairs found.
    /// Per content key (by `root_at`): its roots grouped by source, sources in order of first
    /// appearance; and every `(content key, source, hash)` seen.
    root_at: Map<u64, u32>,
    roots: Vec<Vec<(u32, Vec<Root>)>>,
    root_seen: Map<(u64, u32, u64), ()>,
    mismatches: Vec<Mismatch>,
    /// `silent-source` (timing): every batch carrying events.
    batches: Vec<BatchAt>,
    /// `stale-after-restart`: per publisher (`source << 32 | dp_rank`), the `seq` of its last
    /// batch carrying events; and where each batch whose `seq` went back starts (what llm-d
    /// sees as a restart: the findings point there).
    last_seq: Map<u64, u64>,
    restarts: Vec<At>,
}

impl Preconditions {
    /// Watch event `ev` at `at` (before or after the models: the trace-only checks).
    pub(crate) fn event(&mut self, b: &TraceBatch, at: At, ev: &KvEvent) {
        if at.pos == 0 {
            if b.ts.is_finite() {
                self.batches.push(BatchAt::new(ts_key(b.ts), at));
            }
            let key = u64::from(at.source) << 32 | u64::from(b.dp_rank.unwrap_or(0));
            if let Some(last) = self.last_seq.insert(key, b.seq) {
                if b.seq < last {
                    self.restarts.push(at);
                }
            }
        }
        let KvEvent::BlockStored(e) = ev else {
            return;
        };
        if e.token_ids.is_empty() {
            return;
        }
        let first = e.block_hashes.first().map(|h| h.as_u64());
        let n = e.block_hashes.len();
        self.sizes
            .get(
                u64::from(at.source) << 32 | u64::from(e.block_size),
                (at.source, e.block_size),
                at,
                first.as_slice(),
            )
            .count(at, n);
        // A root block: no parent (vLLM writes `None`; llm-d also takes 0 as the root).
        let root = e.parent_block_hash.as_ref().is_none_or(|p| p.as_u64() == 0);
        let bs = e.block_size as usize;
        let (Some(first), Some(tokens)) = (first, e.token_ids.get(..bs)) else {
            return;
        };
        if !root || bs == 0 {
            return;
        }
        let lora = e.lora_name.as_deref().filter(|n| !n.is_empty());
        let key = content_hash(e.block_size as u64, tokens, lora);
        let extra = match &e.extra_keys {
            None => Extra::Absent,
            Some(x) => Extra::Entry(x.first().cloned().flatten()),
        };
        self.root(key, at, first, extra);
    }

    /// A root block of source `at.source` with content key `key`, hash `hash`.
    ///
    /// Per key, the roots are grouped by source (in order of first appearance) and every
    /// `(key, source, hash)` seen is in a set, so a root costs a look-up per other source
    /// instead of a scan of every root with that key (a trace whose requests all start with
    /// the same tokens under new hashes was quadratic: `docs/performance.md`).
    fn root(&mut self, key: u64, at: At, hash: u64, extra: Extra) {
        if self.root_seen.insert((key, at.source, hash), ()).is_some() {
            return;
        }
        let slot = match self.root_at.get(&key) {
            Some(i) => *i as usize,
            None => {
                self.root_at.insert(key, self.roots.len() as u32);
                self.roots.push(Vec::new());
                self.roots.len() - 1
            }
        };
        let Some(groups) = self.roots.get_mut(slot) else {
            return;
        };
        for (other, theirs) in groups.iter() {
            let other = *other;
            if other == at.source || self.root_seen.contains_key(&(key, other, hash)) {
                continue;
            }
            let Some(r) = theirs.iter().find(|r| r.extra.compatible(&extra)) else {
                continue;
            };
            let salt = r.extra == Extra::Absent || extra == Extra::Absent;
            let pair = |m: &Mismatch| {
                (m.at.source == at.source && m.other_source == other)
                    || (m.at.source == other && m.other_source == at.source)
            };
            match self.mismatches.iter_mut().find(|m| pair(m)) {
                Some(m) => {
                    m.roots += 1;
                    m.salt_possible |= salt;
                }
                None => self.mismatches.push(Mismatch {
                    at,
                    other_event: r.event,
                    other_source: other,
                    hashes: [hash, r.hash],
                    roots: 1,
                    salt_possible: salt,
                }),
            }
        }
        let root = Root {
            hash,
            extra,
            event: at.event,
        };
        match groups.iter_mut().find(|g| g.0 == at.source) {
            Some(g) => g.1.push(root),
            None => groups.push((at.source, vec![root])),
        }
    }

    /// Watch model `consumer`'s verdict `v` on event `ev` (blocks `hashes`) at `at`.
    pub(crate) fn verdict(
        &mut self,
        consumer: &AnyConsumer,
        at: At,
        ev: &KvEvent,
        hashes: &[u64],
        v: &EventVerdict,
    ) {
        let kind = consumer.kind();
        let reason = v.reason.as_deref();
        if reason == Some("batch_decode_error") {
            let named = v.status.as_deref().unwrap_or(match kind {
                ConsumerKind::Dynamo => "bytes_hash",
                _ => "undecodable",
            });
            let code = CAUSES
                .iter()
                .position(|c| *c == named)
                .unwrap_or(CAUSES.len() - 1);
            let cause = CAUSES[code];
            let blocks = if matches!(ev, KvEvent::BlockStored(_)) {
                hashes.len()
            } else {
                0
            };
            self.undecodable
                .get(
                    (kind as u64) << 40 | (code as u64) << 32 | u64::from(at.source),
                    (kind, at.source, cause),
                    at,
                    hashes,
                )
                .count(at, blocks);
        }
        if let KvEvent::BlockStored(_) = ev {
            let t = self.ignored.get(
                (kind as u64) << 32 | u64::from(at.source),
                (kind, at.source),
                at,
                hashes,
            );
            t.count(at, hashes.len());
            if v.verdict == VerdictKind::Ignored {
                t.other += 1;
                t.note(reason.unwrap_or("ignored"));
            }
        }
        if let AnyConsumer::Llmd(m) = consumer {
            self.llmd(m, at, ev, hashes, reason);
        }
    }

    /// The llm-d-only conditions: stores and removals skipped for a missing kind, pod entries
    /// evicted by the per-key LRU.
    fn llmd(&mut self, m: &Llmd, at: At, ev: &KvEvent, hashes: &[u64], reason: Option<&str>) {
        match ev {
            KvEvent::BlockStored(e)
                if reason == Some("unsupported_cache_kind")
                    && e.kv_cache_spec_kind.as_deref().is_none_or(str::is_empty) =>
            {
                let t = self
                    .missing_kind
                    .get(at.source.into(), at.source, at, hashes);
                t.count(at, hashes.len());
                if let Some(g) = e.group_idx {
                    t.note(&g.to_string());
                }
            }
            KvEvent::BlockRemoved(_) if reason == Some("removals_skipped_unknown_group") => {
                self.missing_kind
                    .get(at.source.into(), at.source, at, hashes)
                    .other += 1;
            }
            _ => {}
        }
        let evicted = m.pod_entries_evicted();
        if evicted > self.llmd_evicted {
            let t = self.overflow.get(at.source.into(), at.source, at, hashes);
            t.count(at, hashes.len());
            t.other += (evicted - self.llmd_evicted) as usize;
        }
        self.llmd_evicted = evicted;
    }
}
