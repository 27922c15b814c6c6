//! Models of the routers that consume vLLM KV events, each shaped like the real code and named
//! after it (see `docs/consumers.md` and the reference `kv-event-consumers.md` §2, §4–§6):
//!
//! * [`llmd::Llmd`]: llm-d's indexer (`pkg/kvevents/pool.go`, 2026-01 →): global
//!   engine-hash → request-key map, unknown parent drops the whole `BlockStored`.
//! * [`dynamo::Dynamo`]: Dynamo 1.6 (`dynamo-kv-router` 1.6.1): device `RadixTree` per
//!   `(worker, dp_rank)` plus the order-insensitive `LowerTierIndexer` for CPU/STORAGE/DISK.
//! * [`sglang::Sglang`]: SGLang's sgl-router `HashTree` (`experimental/sgl-router/.../tree.rs`):
//!   global `by_hash`, unknown parent attaches the chain to the root (misrooted).
//! * [`ideal::Ideal`]: the reference consumer that holds orphans until their parent arrives.
//!
//! Every model consumes events in delivery order through the [`Consumer`] trait and returns an
//! [`EventVerdict`] per event, with per-block outcomes where the real consumer works per
//! block. Per-block state lives in vectors indexed by dense block ids (an interner: one
//! `rustc-hash` Fx map from hash to id, shared with the analysis), other state in Fx hash maps
//! with packed `u64` keys where possible: `Map<u64, u32>` itself or `SlabMap` (values in a
//! vector behind one), so that few distinct map types keep the wasm small; the replay engine
//! records what it needs as it goes instead of copying states.

pub mod dynamo;
pub mod ideal;
pub mod llmd;
pub mod sglang;

use std::borrow::Cow;

use serde::{Deserialize, Serialize};

use crate::event::KvEvent;
use crate::trace::Provenance;

/// What a consumer did with an event or with one block of it.
///
/// The names are the ones issue 3 uses; `cleared` is added for `AllBlocksCleared`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum VerdictKind {
    /// Indexed and reachable.
    Applied,
    /// Not indexed because the parent was unknown (`missing_parent` says which).
    DroppedOrphan,
    /// Indexed, but under the wrong parent (attached to the root): unreachable for routing.
    Misrooted,
    /// Held until the parent arrives (ideal consumer).
    Pending,
    /// A previously pending event (or block) applied once its parent arrived.
    Replayed,
    /// Partly applied: blocks after the first bad one were dropped.
    Truncated,
    /// A removal that took effect.
    Removed,
    /// A removal of a hash the consumer did not hold.
    RemoveUnknown,
    /// Deliberately skipped (`reason` says why).
    Ignored,
    /// `AllBlocksCleared` applied.
    Cleared,
}

impl VerdictKind {
    /// Every kind, in declaration (and `Ord`) order.
    pub const ALL: [VerdictKind; 10] = [
        VerdictKind::Applied,
        VerdictKind::DroppedOrphan,
        VerdictKind::Misrooted,
        VerdictKind::Pending,
        VerdictKind::Replayed,
        VerdictKind::Truncated,
        VerdictKind::Removed,
        VerdictKind::RemoveUnknown,
        VerdictKind::Ignored,
        VerdictKind::Cleared,
    ];

    /// Number of kinds (`VerdictKind as usize` is below it).
    pub const COUNT: usize = Self::ALL.len();

    /// The snake_case name used in JSON and reports.
    pub fn as_str(self) -> &'static str {
        match self {
            VerdictKind::Applied => "applied",
            VerdictKind::DroppedOrphan => "dropped_orphan",
            VerdictKind::Misrooted => "misrooted",
            VerdictKind::Pending => "pending",
            VerdictKind::Replayed => "replayed",
            VerdictKind::Truncated => "truncated",
            VerdictKind::Removed => "removed",
            VerdictKind::RemoveUnknown => "remove_unknown",
            VerdictKind::Ignored => "ignored",
            VerdictKind::Cleared => "cleared",
        }
    }

    /// Whether this outcome loses a stored block (it is not, and will not be, reachable).
    pub fn is_loss(self) -> bool {
        matches!(
            self,
            VerdictKind::DroppedOrphan | VerdictKind::Misrooted | VerdictKind::Truncated
        )
    }
}

/// The outcome for one block of an event.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BlockVerdict {
    /// The block hash (normalised to u64, llm-d style: bytes → last 8 bytes big-endian).
    pub hash: u64,
    /// What happened to it.
    pub verdict: VerdictKind,
    /// Why, for drops and skips.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<Cow<'static, str>>,
}

/// A consumer's verdict on one delivered event.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct EventVerdict {
    /// The event-level outcome.
    pub verdict: VerdictKind,
    /// For `dropped_orphan` / `misrooted` / `pending`: the parent that was not found.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub missing_parent: Option<u64>,
    /// Why, for `ignored` / `truncated` and other non-obvious outcomes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<Cow<'static, str>>,
    /// The consumer's own status name, when it has one (Dynamo's
    /// `kv_cache_events_applied{status}`: `ok`, `parent_block_not_found`, `block_not_found`,
    /// `invalid_block_sequence`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<Cow<'static, str>>,
    /// Per-block outcomes, in the event's block order (empty for `AllBlocksCleared`).
    #[serde(default)]
    pub blocks: Blocks,
}

/// Per-block outcomes of one event: a vector with one block inline (most events carry one
/// block), so a verdict costs no allocation. Serialises as a JSON array.
pub type Blocks = smallvec::SmallVec<[BlockVerdict; 1]>;

/// An event's block hashes, normalised to u64 (inline up to 2: no allocation for the usual
/// one-block event). Also llm-d's request keys per engine hash: one `SmallVec` type for both.
pub(crate) type Hashes = smallvec::SmallVec<[u64; 2]>;

/// Dense ids for block hashes (stored, removed or named as a parent), in order of first
/// appearance: one hash lookup per hash per event, after which per-block state lives in
/// vectors indexed by id, which keeps the blocks of one chain next to each other in memory.
/// The analysis shares one interner between the violation index, the models and the replay
/// tables; a model used on its own ([`Consumer::apply`]) keeps a private one.
#[derive(Clone, Debug, Default)]
pub(crate) struct Interner {
    ids: Map<u64, u32>,
    hashes: Vec<u64>,
}

impl Interner {
    /// The id of `h`, assigned if new.
    pub(crate) fn intern(&mut self, h: u64) -> u32 {
        let next = u32::try_from(self.hashes.len()).unwrap_or(u32::MAX);
        let id = *self.ids.entry(h).or_insert(next);
        if id == next && self.hashes.len() < u32::MAX as usize {
            self.hashes.push(h);
        }
        id
    }

    /// The id of `h`, if it was ever seen.
    pub(crate) fn get(&self, h: u64) -> Option<u32> {
        self.ids.get(&h).copied()
    }

    /// The hash of `id`.
    #[allow(dead_code)] // the replay's block tables use the analysis' (group, hash) ids now
    pub(crate) fn hash(&self, id: u32) -> Option<u64> {
        self.hashes.get(id as usize).copied()
    }

    /// Approximate heap bytes.
    #[allow(dead_code)] // the replay's block tables use the analysis' (group, hash) ids now
    pub(crate) fn bytes(&self) -> usize {
        self.ids.capacity() * 13 + self.hashes.capacity() * 8
    }
}

/// The dense ids of one event's blocks (in block order) and of its parent, with the blocks'
/// u64-normalised hashes (normalised once per event for every model and the violation index).
#[derive(Clone, Debug, Default)]
pub(crate) struct EventIds {
    pub(crate) blocks: smallvec::SmallVec<[u32; 4]>,
    pub(crate) parent: Option<u32>,
    /// The blocks' hashes, normalised to u64 (same order as `blocks`).
    pub(crate) hashes: Hashes,
}

impl EventIds {
    /// Intern the blocks and parent of `ev`.
    pub(crate) fn fill(&mut self, interner: &mut Interner, ev: &KvEvent) {
        self.blocks.clear();
        self.hashes.clear();
        for h in ev.block_hashes() {
            let h = h.as_u64();
            self.hashes.push(h);
            self.blocks.push(interner.intern(h));
        }
        self.parent = match ev {
            KvEvent::BlockStored(e) => e
                .parent_block_hash
                .as_ref()
                .map(|p| interner.intern(p.as_u64())),
            _ => None,
        };
    }

    /// The id of block `i`.
    pub(crate) fn block(&self, i: usize) -> u32 {
        self.blocks.get(i).copied().unwrap_or(u32::MAX)
    }
}

/// `v[id]`, growing `v` with defaults as needed (ids are dense, so this is an amortised push).
pub(crate) fn slot<T: Default>(v: &mut Vec<T>, id: u32) -> &mut T {
    let i = id as usize;
    if i >= v.len() {
        v.resize_with(i + 1, T::default);
    }
    // In range after the resize.
    &mut v[i]
}

/// The lanes holding one block, in insertion order (inline up to 2: a block usually sits in a
/// GPU and a CPU lane). Kept as packed `source << 32 | tier` in the crate's [`Hashes`] vector
/// type: one `SmallVec` type less (wasm size). Used by llm-d, the ideal model and the
/// violation index.
#[derive(Clone, Debug, Default)]
pub(crate) struct LaneList(Hashes);

impl LaneList {
    fn pack(lane: LaneKey) -> u64 {
        (lane.source as u64) << 32 | lane.tier as u64
    }

    fn unpack(k: u64) -> LaneKey {
        LaneKey {
            source: (k >> 32) as u32,
            tier: k as u32,
        }
    }

    /// Add `lane`; false if it was already there.
    pub(crate) fn add(&mut self, lane: LaneKey) -> bool {
        let k = Self::pack(lane);
        if self.0.contains(&k) {
            return false;
        }
        self.0.push(k);
        true
    }

    /// Remove `lane`; false if it was not there.
    pub(crate) fn remove(&mut self, lane: LaneKey) -> bool {
        let k = Self::pack(lane);
        match self.0.iter().position(|x| *x == k) {
            Some(p) => {
                self.0.remove(p);
                true
            }
            None => false,
        }
    }

    /// Whether `lane` is there.
    pub(crate) fn contains(&self, lane: LaneKey) -> bool {
        self.0.contains(&Self::pack(lane))
    }

    /// Whether a lane of source `source` is there.
    pub(crate) fn has_source(&self, source: u32) -> bool {
        self.0.iter().any(|k| (k >> 32) as u32 == source)
    }

    /// Whether no lane is there.
    pub(crate) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Remove source `source`'s lanes, in list order, counting each in `book` (when given) as
    /// one indexed block less (`AllBlocksCleared`; one loop instead of a `retain` per caller).
    pub(crate) fn drop_source(&mut self, source: u32, mut book: Option<&mut LaneBook>) {
        let mut i = 0;
        while let Some(k) = self.0.get(i).copied() {
            let l = Self::unpack(k);
            if l.source == source {
                self.0.remove(i);
                if let Some(b) = book.as_deref_mut() {
                    b.bump(l, LaneCounts::indexed_by(-1));
                }
            } else {
                i += 1;
            }
        }
    }
}

/// Append one block's outcome to `out`, with an optional static reason: what the models'
/// per-block loops call (one out-of-line copy of the push instead of one per site: wasm size).
#[inline(never)]
pub(crate) fn push_block(
    out: &mut Blocks,
    hash: u64,
    verdict: VerdictKind,
    reason: Option<&'static str>,
) {
    out.push(BlockVerdict {
        hash,
        verdict,
        reason: reason.map(Cow::Borrowed),
    });
}

impl EventVerdict {
    /// A verdict with the same outcome for every block.
    pub fn uniform(verdict: VerdictKind, hashes: impl IntoIterator<Item = u64>) -> Self {
        let hashes: Vec<u64> = hashes.into_iter().collect();
        Self::of(verdict, &hashes)
    }

    /// [`EventVerdict::uniform`] over a slice (what the models call: one copy of the code
    /// instead of one per iterator type).
    pub(crate) fn of(verdict: VerdictKind, hashes: &[u64]) -> Self {
        let mut blocks = Blocks::with_capacity(hashes.len());
        // Inline pushes here: this is every event's path (push_block is for the rarer ones).
        for &hash in hashes {
            blocks.push(BlockVerdict {
                hash,
                verdict,
                reason: None,
            });
        }
        Self::of_blocks(verdict, blocks)
    }

    /// A verdict with these per-block outcomes and nothing else set.
    fn of_blocks(verdict: VerdictKind, blocks: Blocks) -> Self {
        EventVerdict {
            verdict,
            missing_parent: None,
            reason: None,
            status: None,
            blocks,
        }
    }

    /// [`EventVerdict::of`] with a static reason: what the models return for skips and drops
    /// (one call instead of a builder chain moving the verdict at every site: wasm size).
    pub(crate) fn because(verdict: VerdictKind, hashes: &[u64], reason: &'static str) -> Self {
        let mut v = Self::of(verdict, hashes);
        v.reason = Some(Cow::Borrowed(reason));
        v
    }

    /// The verdict on a removal with these per-block outcomes: `removed` if any block was
    /// removed, else `remove_unknown` if any was unknown, else `ignored` for no blocks, else the
    /// first block's outcome. Shared by the models (one copy of this code).
    pub(crate) fn removal(blocks: Blocks) -> Self {
        let any = |k: VerdictKind| blocks.iter().any(|b| b.verdict == k);
        let verdict = if any(VerdictKind::Removed) {
            VerdictKind::Removed
        } else if any(VerdictKind::RemoveUnknown) {
            VerdictKind::RemoveUnknown
        } else {
            blocks.first().map_or(VerdictKind::Ignored, |b| b.verdict)
        };
        Self::of_blocks(verdict, blocks)
    }

    /// Set the reason (builder style).
    pub fn with_reason(mut self, reason: impl Into<Cow<'static, str>>) -> Self {
        self.reason = Some(reason.into());
        self
    }

    /// Set the missing parent (builder style).
    pub fn with_missing_parent(mut self, parent: u64) -> Self {
        self.missing_parent = Some(parent);
        self
    }

    /// Set the consumer-native status (builder style).
    pub fn with_status(mut self, status: &'static str) -> Self {
        self.status = Some(Cow::Borrowed(status));
        self
    }

    /// Number of blocks whose outcome is a loss.
    pub fn lost_blocks(&self) -> usize {
        self.blocks.iter().filter(|b| b.verdict.is_loss()).count()
    }
}

/// A later outcome for an earlier event (the ideal consumer's `replayed`, or a pending event
/// dropped on buffer overflow).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Resolution {
    /// Global index of the earlier (pending) event.
    pub event: usize,
    /// Its final outcome (`replayed` or `dropped_orphan`).
    pub verdict: VerdictKind,
    /// The blocks it concerned.
    pub hashes: Vec<u64>,
}

/// Where an event was delivered from, as the consumers see it.
#[derive(Clone, Copy, Debug)]
pub struct EventCtx<'a> {
    /// Global 0-based index of the event over all batches' events, in delivery order.
    pub index: usize,
    /// Interned source id (index into the analysis' source table).
    pub source: u32,
    /// The batch's DP rank (0 when absent).
    pub dp_rank: u32,
    /// Interned tier id (index into the analysis' tier table; see [`crate::event::Tier`]).
    pub tier: u32,
    /// Provenance of the event, when the trace has it.
    pub provenance: Option<&'a Provenance>,
    /// Every event of the batch that delivered this one (in batch order): a consumer that
    /// decodes whole batches (Dynamo's `decode_event_batch`) loses all of them together.
    pub batch: &'a [KvEvent],
}

/// One lane of a consumer's index: blocks of one source in one tier.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct LaneKey {
    /// Interned source id.
    pub source: u32,
    /// Interned tier id.
    pub tier: u32,
}

/// Counters of a lane.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LaneCounts {
    /// Blocks currently indexed (reachable or not).
    pub indexed: i64,
    /// Blocks currently held pending.
    pub pending: i64,
    /// Blocks dropped so far (cumulative: orphans, truncations, overflow).
    pub dropped: i64,
    /// Blocks indexed but unreachable (misrooted), currently.
    pub unreachable: i64,
}

impl LaneCounts {
    /// A delta of `n` indexed blocks (see [`LaneBook::bump`]).
    pub(crate) fn indexed_by(n: i64) -> Self {
        LaneCounts {
            indexed: n,
            ..LaneCounts::default()
        }
    }

    /// A delta of `n` pending blocks.
    pub(crate) fn pending_by(n: i64) -> Self {
        LaneCounts {
            pending: n,
            ..LaneCounts::default()
        }
    }

    /// A delta of `n` dropped blocks.
    pub(crate) fn dropped_by(n: i64) -> Self {
        LaneCounts {
            dropped: n,
            ..LaneCounts::default()
        }
    }
}

/// Per-lane counters kept incrementally by every model (cheap snapshots): a small map sorted
/// by lane (a trace has few lanes; a sorted vector needs no tree code).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Lanes {
    entries: Vec<(LaneKey, LaneCounts)>,
}

impl Lanes {
    /// No lanes.
    pub fn new() -> Self {
        Lanes::default()
    }

    /// The counters of `lane`, if it was ever touched.
    pub fn get(&self, lane: &LaneKey) -> Option<&LaneCounts> {
        let i = self.entries.binary_search_by_key(lane, |e| e.0).ok()?;
        self.entries.get(i).map(|e| &e.1)
    }

    /// Whether `lane` was ever touched.
    pub fn contains_key(&self, lane: &LaneKey) -> bool {
        self.get(lane).is_some()
    }

    /// The lanes and their counters, sorted by lane.
    pub fn iter(&self) -> impl Iterator<Item = (&LaneKey, &LaneCounts)> + '_ {
        self.entries.iter().map(|(k, v)| (k, v))
    }

    /// Number of lanes.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether no lane was touched.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The counters of `lane`, created at zero if new.
    fn entry(&mut self, lane: LaneKey) -> &mut LaneCounts {
        let i = match self.entries.binary_search_by_key(&lane, |e| e.0) {
            Ok(i) => i,
            Err(i) => {
                self.entries.insert(i, (lane, LaneCounts::default()));
                i
            }
        };
        // In range: found or just inserted at `i`.
        &mut self.entries[i].1
    }
}

/// The hash map used by the models.
pub(crate) type Map<K, V> = hashbrown::HashMap<K, V, rustc_hash::FxBuildHasher>;

/// An exact index over dense ids `0..n` by a 64-bit hash of what they name (strings, job
/// keys): [`Map<u64, u32>`] to the first id with a hash, then a chain through the ids sharing
/// it. Equality is the caller's (`same`), so hash collisions only lengthen a chain; no
/// hash-table code per key type (wasm size).
#[derive(Clone, Debug, Default)]
pub(crate) struct HashChain {
    first: Map<u64, u32>,
    /// Per id: the next id with the same hash (`u32::MAX`: none).
    next: Vec<u32>,
}

impl HashChain {
    /// The id with hash `hash` for which `same(id)` holds.
    pub(crate) fn find(&self, hash: u64, mut same: impl FnMut(u32) -> bool) -> Option<u32> {
        let mut id = *self.first.get(&hash)?;
        loop {
            if same(id) {
                return Some(id);
            }
            id = *self.next.get(id as usize)?;
        }
    }

    /// Record `id` (the next dense id, not already present) under `hash`.
    pub(crate) fn push(&mut self, hash: u64, id: u32) {
        if self.next.len() <= id as usize {
            self.next.resize(id as usize + 1, u32::MAX);
        }
        let head = self.first.entry(hash).or_insert(id);
        if *head != id {
            // Link in after the head (chain order does not matter).
            let after = std::mem::replace(slot(&mut self.next, *head), id);
            *slot(&mut self.next, id) = after;
        }
    }
}

/// A 64-bit hash of a string (for [`HashChain`], which compares the strings themselves, so
/// only the spread matters): Fx-style, one multiply per 8-byte little-endian word and one for
/// the length. A small loop instead of rustc-hash's string hashing, which is about 750 bytes of
/// wasm; the strings hashed (source names, job keys, statuses and reasons) are short.
pub(crate) fn str_hash(s: &str) -> u64 {
    /// rustc-hash 2's multiplier.
    const K: u64 = 0xf135_7aea_2e62_a9c5;
    let mut h = (s.len() as u64).wrapping_mul(K);
    for word in s.as_bytes().chunks(8) {
        let mut w = 0u64;
        for (i, b) in word.iter().enumerate() {
            w |= (*b as u64) << (8 * i);
        }
        h = (h.rotate_left(26) ^ w).wrapping_mul(K);
    }
    h
}

/// A map from `u64` keys to values kept in a vector: [`Map<u64, u32>`] (key → slot) plus a
/// `Vec` per value type, instead of a copy of the hash-table code per value type (wasm size).
/// Freed slots are reused. Iteration order is unspecified (like a hash map's).
#[derive(Clone, Debug)]
pub(crate) struct SlabMap<V> {
    index: Map<u64, u32>,
    slots: Vec<(u64, V)>,
    free: Vec<u32>,
}

impl<V> Default for SlabMap<V> {
    fn default() -> Self {
        SlabMap {
            index: Map::default(),
            slots: Vec::new(),
            free: Vec::new(),
        }
    }
}

impl<V: Default> SlabMap<V> {
    /// Whether no key is present.
    pub(crate) fn is_empty(&self) -> bool {
        self.index.is_empty()
    }

    /// The value of `key`, mutable.
    pub(crate) fn get_mut(&mut self, key: u64) -> Option<&mut V> {
        let i = *self.index.get(&key)? as usize;
        self.slots.get_mut(i).map(|s| &mut s.1)
    }

    /// The value of `key`, inserted as `V::default()` if absent.
    pub(crate) fn entry(&mut self, key: u64) -> &mut V {
        let i = match self.index.get(&key) {
            Some(i) => *i as usize,
            None => {
                let i = match self.free.pop() {
                    Some(i) => i as usize,
                    None => {
                        self.slots.push((key, V::default()));
                        self.slots.len() - 1
                    }
                };
                if let Some(s) = self.slots.get_mut(i) {
                    s.0 = key;
                }
                self.index.insert(key, i as u32);
                i
            }
        };
        // In range: an index entry always names a slot.
        &mut self.slots[i].1
    }

    /// Remove `key`, returning its value.
    pub(crate) fn remove(&mut self, key: u64) -> Option<V> {
        let i = self.index.remove(&key)?;
        self.free.push(i);
        self.slots
            .get_mut(i as usize)
            .map(|s| std::mem::take(&mut s.1))
    }

    /// The keys present (unspecified order).
    pub(crate) fn keys(&self) -> impl Iterator<Item = u64> + '_ {
        self.index.keys().copied()
    }

    /// Remove every entry, returning them (unspecified order).
    pub(crate) fn take_all(&mut self) -> Vec<(u64, V)> {
        let mut slots = std::mem::take(&mut self.slots);
        // A loop, not a `filter_map` + `collect` instance per value type.
        let mut out = Vec::with_capacity(self.index.len());
        for (k, i) in self.index.drain() {
            if let Some(s) = slots.get_mut(i as usize) {
                out.push((k, std::mem::take(&mut s.1)));
            }
        }
        self.free.clear();
        out
    }
}

/// A model's lane counters plus, while the replay engine records, the lanes changed by the
/// current event (so that recording costs no copy of the counters per event).
#[derive(Clone, Debug, Default)]
pub(crate) struct LaneBook {
    lanes: Lanes,
    /// Lanes bumped since the last [`LaneBook::take_changes`], with their counters before
    /// (`None`: the lane did not exist). Only kept while `logging`.
    // A plain `Vec` (its buffer is reused from event to event): one SmallVec type less.
    touched: Vec<(LaneKey, Option<LaneCounts>)>,
    logging: bool,
}

impl LaneBook {
    /// Add `d` to one lane's counters (a delta, not a closure: one copy of this code).
    pub(crate) fn bump(&mut self, key: LaneKey, d: LaneCounts) {
        if self.logging && !self.touched.iter().any(|t| t.0 == key) {
            self.touched.push((key, self.lanes.get(&key).copied()));
        }
        let c = self.lanes.entry(key);
        c.indexed += d.indexed;
        c.pending += d.pending;
        c.dropped += d.dropped;
        c.unreachable += d.unreachable;
    }

    /// The counters.
    pub(crate) fn lanes(&self) -> &Lanes {
        &self.lanes
    }

    /// Start or stop logging changes.
    fn set_logging(&mut self, on: bool) {
        self.logging = on;
        self.touched.clear();
    }

    /// Append the lanes whose counters differ from before the logged changes (sorted by lane,
    /// with their new counters) to `out` and forget the log.
    fn take_changes(&mut self, out: &mut Vec<(LaneKey, LaneCounts)>) {
        let from = out.len();
        for (k, before) in self.touched.drain(..) {
            let after = self.lanes.get(&k).copied();
            if after != before {
                out.push((k, after.unwrap_or_default()));
            }
        }
        if let Some(new) = out.get_mut(from..) {
            crate::sort::insertion_sort_by(new, |a, b| a.0 < b.0);
        }
    }
}

/// The common interface of the consumer models.
pub trait Consumer {
    /// The model's name (`llmd`, `dynamo`, `sglang`, `ideal`).
    fn name(&self) -> &'static str;
    /// Apply one delivered event. Later outcomes for earlier events (e.g. replayed orphans)
    /// are pushed to `resolved`.
    fn apply(
        &mut self,
        ctx: &EventCtx<'_>,
        ev: &KvEvent,
        resolved: &mut Vec<Resolution>,
    ) -> EventVerdict;
    /// Forget everything (router restart).
    fn reset(&mut self);
    /// Per-lane counters of the current state.
    fn lanes(&self) -> &Lanes;
}

/// The consumer models kvscope knows, by name.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ConsumerKind {
    /// [`llmd::Llmd`].
    Llmd,
    /// [`dynamo::Dynamo`].
    Dynamo,
    /// [`sglang::Sglang`].
    Sglang,
    /// [`ideal::Ideal`].
    Ideal,
}

impl ConsumerKind {
    /// All models, in report order.
    pub const ALL: [ConsumerKind; 4] = [
        ConsumerKind::Llmd,
        ConsumerKind::Dynamo,
        ConsumerKind::Sglang,
        ConsumerKind::Ideal,
    ];

    /// The model's name.
    pub fn as_str(self) -> &'static str {
        match self {
            ConsumerKind::Llmd => "llmd",
            ConsumerKind::Dynamo => "dynamo",
            ConsumerKind::Sglang => "sglang",
            ConsumerKind::Ideal => "ideal",
        }
    }

    /// Parse a model name (`llmd`/`llm-d`, `dynamo`, `sglang`, `ideal`).
    pub fn parse(name: &str) -> Option<ConsumerKind> {
        match name.to_ascii_lowercase().as_str() {
            "llmd" | "llm-d" | "llm_d" => Some(ConsumerKind::Llmd),
            "dynamo" => Some(ConsumerKind::Dynamo),
            "sglang" | "sgl-router" => Some(ConsumerKind::Sglang),
            "ideal" => Some(ConsumerKind::Ideal),
            _ => None,
        }
    }
}

/// Configuration of all models.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct ConsumerConfig {
    /// llm-d's `blockSizeTokens` (canonical block size); `None` (the default) = `auto`: the
    /// engine block size the trace shows (see [`BlockSizes`]).
    pub llmd_canonical_block_size: Option<u32>,
    /// Dynamo's `kv_block_size`; `None` (the default) = `auto` (see [`BlockSizes`]).
    pub dynamo_kv_block_size: Option<u32>,
    /// Dynamo: clear every DP rank of the worker on `AllBlocksCleared` (`clear_all_blocks`)
    /// instead of only the emitting rank (what `RadixTree::apply_event` does in 1.6.1).
    pub dynamo_clear_all_ranks: bool,
    /// Ideal consumer: how many orphan events may be held pending at once; default 1024.
    pub ideal_pending_limit: usize,
}

impl Default for ConsumerConfig {
    fn default() -> Self {
        ConsumerConfig {
            llmd_canonical_block_size: None,
            dynamo_kv_block_size: None,
            dynamo_clear_all_ranks: false,
            ideal_pending_limit: 1024,
        }
    }
}

/// A router's block-size setting resolved for one trace: a fixed value for every source, or
/// `auto` = each source's engine block size (the `block_size` of its first `BlockStored` that
/// carries tokens), falling back to the first engine block size of the trace, then to
/// [`BlockSizes::FALLBACK`]. A real deployment configures the router with the engines' block
/// size; `auto` reproduces that instead of assuming 16.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BlockSizes {
    per_source: std::sync::Arc<[u32]>,
    fallback: u32,
}

impl BlockSizes {
    /// The size used when neither a setting nor the trace gives one (vLLM's default
    /// `block_size`, llm-d's default `blockSizeTokens`).
    pub const FALLBACK: u32 = 16;

    /// One size for every source (0 is treated as 1).
    pub fn fixed(size: u32) -> Self {
        BlockSizes {
            per_source: std::sync::Arc::from([]),
            fallback: size.max(1),
        }
    }

    /// `setting` if given, else `auto` from `engine` (per interned source id: the engine block
    /// size, when the source stored tokens).
    pub fn resolve(setting: Option<u32>, engine: &[Option<u32>]) -> Self {
        if let Some(s) = setting {
            return BlockSizes::fixed(s);
        }
        let fallback = engine
            .iter()
            .flatten()
            .copied()
            .find(|s| *s > 0)
            .unwrap_or(Self::FALLBACK);
        // A loop into a vector, then one copy into the `Arc` (no `Arc` `FromIterator` code).
        let mut per_source = Vec::with_capacity(engine.len());
        for s in engine {
            per_source.push(s.filter(|v| *v > 0).unwrap_or(fallback));
        }
        BlockSizes {
            per_source: per_source.into(),
            fallback,
        }
    }

    /// The size for interned source `source`.
    pub fn for_source(&self, source: u32) -> u32 {
        self.per_source
            .get(source as usize)
            .copied()
            .unwrap_or(self.fallback)
    }
}

/// One model, any kind (what the analysis and the replay engine hold).
#[derive(Clone, Debug)]
pub enum AnyConsumer {
    /// llm-d.
    Llmd(llmd::Llmd),
    /// Dynamo.
    Dynamo(dynamo::Dynamo),
    /// SGLang.
    Sglang(sglang::Sglang),
    /// Ideal.
    Ideal(ideal::Ideal),
}

impl AnyConsumer {
    /// Build a model of `kind` with `config`, without a trace (`auto` block sizes fall back
    /// to [`BlockSizes::FALLBACK`]).
    pub fn new(kind: ConsumerKind, config: &ConsumerConfig) -> Self {
        Self::for_engines(kind, config, &[])
    }

    /// Build a model of `kind` with `config` for a trace whose sources (by interned id) use
    /// engine block sizes `engine` (`EventIndex::engine_block_sizes`); `auto` settings resolve
    /// against them.
    pub fn for_engines(
        kind: ConsumerKind,
        config: &ConsumerConfig,
        engine: &[Option<u32>],
    ) -> Self {
        match kind {
            ConsumerKind::Llmd => AnyConsumer::Llmd(llmd::Llmd::with_block_sizes(
                BlockSizes::resolve(config.llmd_canonical_block_size, engine),
            )),
            ConsumerKind::Dynamo => AnyConsumer::Dynamo(dynamo::Dynamo::with_block_sizes(
                BlockSizes::resolve(config.dynamo_kv_block_size, engine),
                config.dynamo_clear_all_ranks,
            )),
            ConsumerKind::Sglang => AnyConsumer::Sglang(sglang::Sglang::default()),
            ConsumerKind::Ideal => {
                AnyConsumer::Ideal(ideal::Ideal::new(config.ideal_pending_limit))
            }
        }
    }

    /// Its kind.
    pub fn kind(&self) -> ConsumerKind {
        match self {
            AnyConsumer::Llmd(_) => ConsumerKind::Llmd,
            AnyConsumer::Dynamo(_) => ConsumerKind::Dynamo,
            AnyConsumer::Sglang(_) => ConsumerKind::Sglang,
            AnyConsumer::Ideal(_) => ConsumerKind::Ideal,
        }
    }

    fn inner(&self) -> &dyn Consumer {
        match self {
            AnyConsumer::Llmd(c) => c,
            AnyConsumer::Dynamo(c) => c,
            AnyConsumer::Sglang(c) => c,
            AnyConsumer::Ideal(c) => c,
        }
    }

    fn book(&mut self) -> &mut LaneBook {
        match self {
            AnyConsumer::Llmd(c) => &mut c.lanes,
            AnyConsumer::Dynamo(c) => &mut c.lanes,
            AnyConsumer::Sglang(c) => &mut c.lanes,
            AnyConsumer::Ideal(c) => &mut c.lanes,
        }
    }

    /// [`Consumer::apply`] with the event's block ids given (from the analysis' shared
    /// interner).
    pub(crate) fn apply_ids(
        &mut self,
        ctx: &EventCtx<'_>,
        ev: &KvEvent,
        ids: &EventIds,
        resolved: &mut Vec<Resolution>,
    ) -> EventVerdict {
        match self {
            AnyConsumer::Llmd(c) => c.apply_ids(ctx, ev, ids, resolved),
            AnyConsumer::Dynamo(c) => c.apply_ids(ctx, ev, ids, resolved),
            AnyConsumer::Sglang(c) => c.apply_ids(ctx, ev, ids, resolved),
            AnyConsumer::Ideal(c) => c.apply_ids(ctx, ev, ids, resolved),
        }
    }

    /// Log lane changes per event (for [`AnyConsumer::take_lane_changes`]) or not.
    pub(crate) fn set_lane_log(&mut self, on: bool) {
        if self.book().logging != on {
            self.book().set_logging(on);
        }
    }

    /// Append the lanes the last event changed (sorted, with their new counters) to `out`;
    /// nothing unless logging is on.
    pub(crate) fn take_lane_changes(&mut self, out: &mut Vec<(LaneKey, LaneCounts)>) {
        self.book().take_changes(out);
    }

    fn inner_mut(&mut self) -> &mut dyn Consumer {
        match self {
            AnyConsumer::Llmd(c) => c,
            AnyConsumer::Dynamo(c) => c,
            AnyConsumer::Sglang(c) => c,
            AnyConsumer::Ideal(c) => c,
        }
    }
}

impl Consumer for AnyConsumer {
    fn name(&self) -> &'static str {
        self.inner().name()
    }
    fn apply(
        &mut self,
        ctx: &EventCtx<'_>,
        ev: &KvEvent,
        resolved: &mut Vec<Resolution>,
    ) -> EventVerdict {
        self.inner_mut().apply(ctx, ev, resolved)
    }
    fn reset(&mut self) {
        self.inner_mut().reset()
    }
    fn lanes(&self) -> &Lanes {
        self.inner().lanes()
    }
}

/// A stand-in content hash of a block's tokens (and salt), used where a consumer recomputes
/// its own hash from `token_ids` (llm-d request keys, Dynamo `LocalBlockHash`). Only equality
/// matters: these hash spaces never need to match the real ones.
pub(crate) fn content_hash(parent: u64, tokens: &[u32], salt: Option<&str>) -> u64 {
    use std::hash::Hasher;
    let mut h =
        siphasher::sip::SipHasher13::new_with_keys(0x6b76_7363_6f70_6501, 0x0102_0304_0506_0708);
    h.write_u64(parent);
    h.write_usize(tokens.len());
    for t in tokens {
        h.write_u32(*t);
    }
    if let Some(s) = salt {
        h.write(s.as_bytes());
    }
    h.finish()
}

pub mod testkit;
