//! llm-d's KV-event indexer at `llm-d/llm-d-router` `ebab6879` (`pkg/kvevents/pool.go`
//! `processEventBatch`, `pkg/kvevents/event_dedup_filter.go`,
//! `pkg/kvcache/kvblock/{in_memory.go,token_processor.go,extra_keys.go}`; the vLLM adapter's
//! decoding in [`wire`]; `docs/consumers.md`).
//!
//! State, shaped like the real one:
//! * `engine_to_req`: the **global** engine-hash → request-keys map shared by all pods and
//!   tiers (`GetRequestKey` returns the last request key);
//! * `req_to_pods`: request key → pod entries `(pod, tier, group)`, an LRU of at most
//!   [`PODS_PER_KEY`] entries (`defaultPodsPerKey`);
//! * `dedup`: refcounts `refs[pod][(tier, group, hash)]`;
//! * `groups`: the per-pod group catalogue, learnt from stores that name their kind.
//!
//! The per-engine-hash parts (`engine_to_req`, the dedup refcounts and the held lanes) live in
//! one slot per dense block id rather than in three hash maps: same contents, one memory
//! access per block.
//!
//! Rules: a batch `ParseMessage` rejects is lost whole ([`wire::undecodable`]); `medium` is
//! lower-cased (`gpu` when absent) and `ownership` never read, so the model's tier is llm-d's,
//! whatever the analysis' lanes say; a grouped store without a kind takes it from the
//! catalogue or is skipped as `unsupported_cache_kind`; an unknown non-zero parent drops the
//! whole `BlockStored`; request keys are chained over canonical blocks of
//! `canonical_block_size` tokens, salted by `lora_name` (empty = the base model) and folded
//! with the blocks' multimodal hashes, and the partial tail is dropped, so sub-canonical events
//! create no mapping; token-less events are tier updates of the keys that resolve, and once
//! one does, every hash of the event is refcounted; removals are refcounted and evict per
//! hash; `AllBlocksCleared` drops the pod's entries but keeps the engine mappings. Request
//! keys are a stand-in chain hash (the real FNV-64a-over-CBOR keys are an independent hash
//! space that never needs to match vLLM's).

mod entry;
mod seq;
#[cfg(test)]
mod tests;
pub(crate) mod wire;

pub use seq::Restart;

use entry::Entry;

use smallvec::SmallVec;

use super::{
    content_hash, push_block, slot, BatchCheck, BlockSizes, BlockVerdict, Blocks, Consumer,
    EventCtx, EventIds, EventVerdict, Hashes, Interner, LaneBook, LaneCounts, LaneKey, LaneList,
    Lanes, Map, Resolution, SlabMap, VerdictKind,
};
use crate::event::{BlockRemoved, BlockStored, KvEvent};

/// A pod entry on a request key: `PodEntry{pod, tier, group}`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PodEntry {
    /// Interned source (pod) id.
    pub pod: u32,
    /// llm-d's tier (lower-cased `medium`), as the model's own id.
    pub tier: u32,
    /// `group_idx`, or -1 when absent.
    pub group: i64,
}

/// Cache kinds llm-d indexes (`isPrefixIndexableSpecKind`).
const SUPPORTED_KINDS: [&str; 3] = ["full_attention", "mla_attention", "sink_full_attention"];

/// Pod entries one request key keeps (`in_memory.go` `defaultPodsPerKey`): an LRU, so an 11th
/// entry silently evicts the least recently added one.
pub const PODS_PER_KEY: usize = 10;

/// Request keys of one engine hash (almost always one: inline, no allocation).
type ReqKeys = Hashes;
/// Pod entries with a counter (usually one or two: inline): a block's dedup refcounts, and a
/// request key's pods (counter unused, 0). One `SmallVec` type for both (wasm size).
type Counted = SmallVec<[(Entry, u32); 2]>;

/// Pods holding one request key, least recently added first (the counters are unused).
type Pods = Counted;

/// Drop pod `pod`'s entries (only `entry`, when given): one `retain` instance for eviction
/// and clearing, of pods and refcounts alike.
fn drop_pods(list: &mut Counted, pod: u32, entry: Option<Entry>) {
    list.retain(|p| p.0.pod != pod || entry.is_some_and(|e| p.0 != e));
}

/// The `groups` key of a pod's group.
fn group_key(pod: u32, group: u32) -> u64 {
    (pod as u64) << 32 | group as u64
}

/// What llm-d holds for one engine hash.
#[derive(Clone, Debug, Default)]
struct Slot {
    /// `engine_to_req[hash]` (empty: no mapping).
    req: ReqKeys,
    /// The dedup refcounts `refs[pod][(tier, group, hash)]`, as `((pod, tier, group), n)`.
    refs: Counted,
    /// Lanes counting the block as indexed.
    held: LaneList,
}

/// The llm-d model.
#[derive(Clone, Debug)]
pub struct Llmd {
    block_sizes: BlockSizes,
    /// Per dense block id.
    blocks: Vec<Slot>,
    /// Number of engine hashes with a mapping.
    mapped: usize,
    req_to_pods: SlabMap<Pods>,
    /// The group catalogue: `(pod << 32 | group)` → the learnt kind is prefix-indexable (1)
    /// or not (0). Only stores that name a kind teach it.
    groups: Map<u64, u32>,
    /// llm-d's tiers (`normalizeDeviceTier`: lower-cased `medium`, `gpu` when absent), by id.
    tiers: Vec<String>,
    /// By the analysis' tier id: llm-d's tier id (`u32::MAX`: not seen yet).
    tier_of_lane: Vec<u32>,
    /// Why `ParseMessage` rejects the last batch checked, if it does.
    batch_check: BatchCheck<Option<&'static str>>,
    /// The subscriber's replay (see [`Llmd::with_replay`]).
    replay: bool,
    /// Per publisher `(source << 32 | dp_rank)`: the last batch delivered (its `seq`, its
    /// [`EventCtx::batch_start`] and whether replay skipped it).
    last_seq: Map<u64, (u64, usize, bool)>,
    /// Publisher restarts replay did not handle, oldest first.
    restarts: Vec<Restart>,
    /// Pod entries the per-key LRU evicted so far (R7).
    entries_evicted: u64,
    pub(super) lanes: LaneBook,
}

impl Llmd {
    /// A model with llm-d's `blockSizeTokens` = `canonical_block_size` (0 is treated as 1).
    pub fn new(canonical_block_size: u32) -> Self {
        Self::with_block_sizes(BlockSizes::fixed(canonical_block_size))
    }

    /// Replace the block sizes (a streaming analysis learns engine block sizes as it reads).
    pub(crate) fn set_block_sizes(&mut self, block_sizes: BlockSizes) {
        self.block_sizes = block_sizes;
    }

    /// A model whose `blockSizeTokens` may differ per source (`auto`, see [`BlockSizes`]).
    pub fn with_block_sizes(block_sizes: BlockSizes) -> Self {
        Llmd {
            block_sizes,
            blocks: Vec::new(),
            mapped: 0,
            req_to_pods: SlabMap::default(),
            groups: Map::default(),
            tiers: Vec::new(),
            tier_of_lane: Vec::new(),
            batch_check: BatchCheck::default(),
            replay: false,
            last_seq: Map::default(),
            restarts: Vec::new(),
            entries_evicted: 0,
            lanes: LaneBook::default(),
        }
    }

    /// `GetRequestKey`: the last request key mapped to an engine hash, whose block ids are
    /// `ids` (the interner the model was driven with).
    pub fn request_key_of(&self, ids: &Interner, engine_hash: u64) -> Option<u64> {
        ids.get(engine_hash).and_then(|id| self.req_of(id))
    }

    /// The pod entries of a request key, least recently added first.
    pub fn pods_of(&self, request_key: u64) -> Vec<PodEntry> {
        self.req_to_pods
            .get(request_key)
            .map(|p| p.iter().map(|e| e.0.public()).collect())
            .unwrap_or_default()
    }

    /// Room for `blocks` block ids (see [`AnyConsumer::reserve`](super::AnyConsumer::reserve)).
    pub(super) fn reserve(&mut self, blocks: usize) {
        self.blocks.reserve_exact(blocks);
    }

    /// Whether the model refers to block `id` (a streaming analysis gives back the ids of
    /// blocks no model refers to).
    pub(crate) fn uses(&self, id: u32) -> bool {
        // A restart replay did not handle keeps its engine's block ids (`stale`).
        !self.restarts.is_empty()
            || self
                .blocks
                .get(id as usize)
                .is_some_and(|s| !s.req.is_empty() || !s.refs.is_empty() || !s.held.is_empty())
    }

    /// `GetRequestKey` by block id.
    fn req_of(&self, id: u32) -> Option<u64> {
        self.blocks
            .get(id as usize)
            .and_then(|s| s.req.last().copied())
    }

    /// How many pod entries the per-request-key LRU has evicted so far ([`PODS_PER_KEY`], R7):
    /// each one is an 11th `(pod, tier, group)` entry pushing out the oldest.
    pub fn pod_entries_evicted(&self) -> u64 {
        self.entries_evicted
    }

    /// Number of engine hashes with a mapping.
    pub fn mapped_engine_keys(&self) -> usize {
        self.mapped
    }

    /// llm-d's tier id for an event with `medium` (empty or absent: `gpu`) delivered in the
    /// analysis' tier `lane_tier`.
    ///
    /// llm-d lower-cases with Go's `strings.ToLower`, which also maps non-ASCII letters; the
    /// model lower-cases ASCII only (vLLM's media are ASCII names), which keeps Unicode's case
    /// tables out of the npm package (`docs/consumers.md`, R3).
    fn tier(&mut self, lane_tier: u32, medium: Option<&str>) -> u32 {
        let name = medium.filter(|m| !m.is_empty()).unwrap_or("gpu");
        // Compared without lower-casing into a new string (once per event): the names kept
        // are lower-case ASCII, so an ASCII case-insensitive match is the same test.
        let id = match self.tiers.iter().position(|t| t.eq_ignore_ascii_case(name)) {
            Some(i) => i as u32,
            None => {
                self.tiers.push(name.to_ascii_lowercase());
                self.tiers.len() as u32 - 1
            }
        };
        let i = lane_tier as usize;
        if i >= self.tier_of_lane.len() {
            self.tier_of_lane.resize(i + 1, u32::MAX);
        }
        self.tier_of_lane[i] = id;
        id
    }

    /// Why `ParseMessage` rejects the batch that delivered `ctx`'s event, if it does.
    fn batch_failure(&mut self, ctx: &EventCtx<'_>) -> Option<&'static str> {
        self.batch_check
            .of(ctx, |events| events.iter().find_map(wire::undecodable))
    }

    /// Set `engine_to_req[id]` (non-empty keys).
    fn map_keys(&mut self, id: u32, keys: ReqKeys) {
        let s = slot(&mut self.blocks, id);
        if s.req.is_empty() {
            self.mapped += 1;
        }
        s.req = keys;
    }

    /// `PodCache.Add`: `entry` becomes the most recent; past [`PODS_PER_KEY`] the least
    /// recent entry is evicted.
    fn add_entry(&mut self, rk: u64, entry: Entry) {
        let pods = self.req_to_pods.entry(rk);
        if let Some(p) = pods.iter().position(|p| p.0 == entry) {
            pods.remove(p);
        }
        pods.push((entry, 0));
        if pods.len() > PODS_PER_KEY {
            pods.remove(0);
            self.entries_evicted += 1;
        }
    }

    fn hold(&mut self, id: u32, lane: LaneKey) {
        if slot(&mut self.blocks, id).held.add(lane) {
            self.lanes.bump(lane, LaneCounts::indexed_by(1));
        }
    }

    /// Stop counting block `id` in pod `pod`'s lanes of llm-d tier `tier`.
    fn release(&mut self, id: u32, pod: u32, tier: u32) {
        let tier_of_lane = &self.tier_of_lane;
        if let Some(s) = self.blocks.get_mut(id as usize) {
            s.held.drop_where(
                |l| l.source == pod && tier_of_lane.get(l.tier as usize) == Some(&tier),
                Some(&mut self.lanes),
            );
        }
    }

    fn dropped(&mut self, lane: LaneKey, n: usize) {
        self.lanes.bump(lane, LaneCounts::dropped_by(n as i64));
    }

    /// An event-wide skip: `verdict` for every block, counted as dropped.
    fn skip(
        &mut self,
        lane: LaneKey,
        hashes: &[u64],
        verdict: VerdictKind,
        reason: &'static str,
    ) -> EventVerdict {
        self.dropped(lane, hashes.len());
        EventVerdict::because(verdict, hashes, reason)
    }

    fn stored(&mut self, ctx: &EventCtx<'_>, e: &BlockStored, ids: &EventIds) -> EventVerdict {
        let lane = ctx.lane();
        let hashes: &[u64] = &ids.hashes;
        let tier = self.tier(ctx.tier, e.medium.as_deref());
        if let Some(g) = e.group_idx {
            // Learn the group's kind, or take it from the catalogue; unknown means empty.
            let key = group_key(ctx.source, g);
            let kind = e.kv_cache_spec_kind.as_deref().filter(|k| !k.is_empty());
            let supported = match kind {
                Some(kind) => {
                    let ok = SUPPORTED_KINDS.contains(&kind);
                    self.groups.insert(key, ok as u32);
                    ok
                }
                None => self.groups.get(&key) == Some(&1),
            };
            if !supported {
                return self.skip(lane, hashes, VerdictKind::Ignored, "unsupported_cache_kind");
            }
            let bs = e.block_size as usize;
            if !e.token_ids.is_empty() {
                if bs == 0 {
                    return self.skip(lane, hashes, VerdictKind::Ignored, "invalid_block_size");
                }
                if !e.token_ids.len().is_multiple_of(bs) || e.token_ids.len() / bs != hashes.len() {
                    return self.skip(lane, hashes, VerdictKind::Ignored, "non_dense_block_span");
                }
            }
        }
        // The orphan rule: parent 0 / nil is the root; otherwise the parent must be mapped.
        // `lora_name` salts the root unless empty (the base model).
        let model = e
            .lora_name
            .as_deref()
            .filter(|n| !n.is_empty())
            .unwrap_or("model");
        let parent_rk = match e.parent_block_hash.as_ref().map(|p| p.as_u64()) {
            None | Some(0) => content_hash(0, &[], Some(model)),
            Some(p) => match ids.parent.and_then(|id| self.req_of(id)) {
                Some(rk) => rk,
                None => {
                    let mut v = self.skip(
                        lane,
                        hashes,
                        VerdictKind::DroppedOrphan,
                        "Failed to get request key for parent block",
                    );
                    v.missing_parent = Some(p);
                    return v;
                }
            },
        };
        let cbs = self.block_sizes.for_source(ctx.source).max(1) as usize;
        let canonical = e.token_ids.len() / cbs;
        // Multimodal hashes per canonical block (`ParseRawExtraKeys` + `realignExtraFeatures`).
        let extra = match wire::mm_hashes(e.extra_keys.as_deref()) {
            Some(_) if canonical == 0 => None,
            Some(f) => {
                let f = wire::realign(f, canonical);
                if f.len() != canonical {
                    // `TokensToKVBlockKeys`: "extraFeatures length does not match".
                    return self.skip(
                        lane,
                        hashes,
                        VerdictKind::Ignored,
                        "Failed to generate request keys",
                    );
                }
                Some(f)
            }
            None => None,
        };
        let mut rks = Hashes::with_capacity(canonical);
        let mut prev = parent_rk;
        for (i, chunk) in e.token_ids.chunks_exact(cbs).enumerate() {
            let mm = extra
                .as_ref()
                .and_then(|f| f.get(i))
                .and_then(Option::as_ref);
            prev = request_key(prev, chunk, mm.map(Vec::as_slice));
            rks.push(prev);
        }
        let entry = Entry::new(ctx.source, tier, e.group_idx);
        if rks.is_empty() {
            if e.token_ids.is_empty() && !hashes.is_empty() {
                return self.tier_update(lane, entry, ids);
            }
            return self.skip(lane, hashes, VerdictKind::Ignored, "sub_canonical");
        }
        for rk in &rks {
            self.add_entry(*rk, entry);
        }
        // Pair E[i·|E|/n] → R[i·|R|/n], n = max(|E|, |R|). `i · |E| / n` is non-decreasing in
        // `i` and takes every engine index once n ≥ |E|: collect one engine's keys at a time.
        let (ne, nr) = (hashes.len(), rks.len());
        let n = ne.max(nr);
        let mut keys = ReqKeys::new();
        let mut engine = 0usize;
        for i in 0..=n {
            let ei = if i < n { i * ne / n } else { ne };
            while engine < ei {
                let id = ids.block(engine);
                let k = std::mem::take(&mut keys);
                if !k.is_empty() {
                    // `engineToRequestMapping` collects the keys of every position of an engine
                    // hash the event repeats, and `Add` maps it to all of them.
                    if (0..engine).any(|j| ids.block(j) == id) {
                        slot(&mut self.blocks, id).req.extend(k);
                    } else {
                        self.map_keys(id, k);
                    }
                }
                self.hold(id, lane);
                self.track_store(entry, id);
                engine += 1;
            }
            if let Some(rk) = rks.get(i * nr / n).filter(|_| i < n) {
                keys.push(*rk);
            }
        }
        EventVerdict::of(VerdictKind::Applied, hashes)
    }

    /// `handleDeviceTierUpdate`: a token-less event adds `entry` to the last request key of
    /// each engine hash that resolves; once one does, the dedup filter tracks **every** hash of
    /// the event (`trackStore(storeScope, ev.BlockHashes)`), resolved or not.
    fn tier_update(&mut self, lane: LaneKey, entry: Entry, ids: &EventIds) -> EventVerdict {
        let hashes: &[u64] = &ids.hashes;
        let mut blocks = Blocks::with_capacity(hashes.len());
        let mut resolved: ReqKeys = ReqKeys::new();
        for (i, &h) in hashes.iter().enumerate() {
            let id = ids.block(i);
            match self.req_of(id) {
                Some(rk) => {
                    if !resolved.contains(&rk) {
                        resolved.push(rk);
                    }
                    self.hold(id, lane);
                    push_block(&mut blocks, h, VerdictKind::Applied, Some("tier_update"));
                }
                None => push_block(
                    &mut blocks,
                    h,
                    VerdictKind::Ignored,
                    Some("tier_update_unknown_key"),
                ),
            }
        }
        let lost = hashes.len()
            - blocks
                .iter()
                .filter(|b| b.verdict == VerdictKind::Applied)
                .count();
        self.dropped(lane, lost);
        let any = !resolved.is_empty();
        if any {
            for rk in resolved {
                self.add_entry(rk, entry);
            }
            for i in 0..hashes.len() {
                self.track_store(entry, ids.block(i));
            }
        }
        EventVerdict {
            verdict: if any {
                VerdictKind::Applied
            } else {
                VerdictKind::Ignored
            },
            missing_parent: None,
            reason: Some("tier_update".into()),
            status: None,
            blocks,
        }
    }

    fn track_store(&mut self, entry: Entry, id: u32) {
        let refs = &mut slot(&mut self.blocks, id).refs;
        match refs.iter_mut().find(|r| r.0 == entry) {
            Some(r) => r.1 += 1,
            None => refs.push((entry, 1)),
        }
    }

    fn removed(&mut self, ctx: &EventCtx<'_>, e: &BlockRemoved, ids: &EventIds) -> EventVerdict {
        let hashes: &[u64] = &ids.hashes;
        let tier = self.tier(ctx.tier, e.medium.as_deref());
        if let Some(g) = e.group_idx {
            match self.groups.get(&group_key(ctx.source, g)) {
                None => {
                    return EventVerdict::because(
                        VerdictKind::Ignored,
                        hashes,
                        "removals_skipped_unknown_group",
                    )
                }
                Some(0) => {
                    return EventVerdict::because(
                        VerdictKind::Ignored,
                        hashes,
                        "removals_skipped_unsupported_cache_kind",
                    )
                }
                Some(_) => {}
            }
        }
        let entry = Entry::new(ctx.source, tier, e.group_idx);
        let mut blocks = Blocks::with_capacity(hashes.len());
        for (i, &h) in hashes.iter().enumerate() {
            let id = ids.block(i);
            if let Some(refs) = self.blocks.get_mut(id as usize).map(|s| &mut s.refs) {
                if let Some(p) = refs.iter().position(|r| r.0 == entry) {
                    let n = refs.get(p).map_or(0, |r| r.1);
                    if n > 1 {
                        if let Some(r) = refs.get_mut(p) {
                            r.1 = n - 1;
                        }
                        blocks.push(BlockVerdict {
                            hash: h,
                            verdict: VerdictKind::Ignored,
                            reason: Some(format!("refcount_left={}", n - 1).into()),
                        });
                        continue;
                    }
                    refs.remove(p);
                }
            }
            blocks.push(self.evict(h, id, entry));
        }
        EventVerdict::removal(blocks)
    }

    /// `Index.Evict(engine_key, [entry])`: the entry leaves every request key of the engine
    /// hash; request keys left without pods go, and the engine mapping goes once none of its
    /// request keys has a pod (whether or not this entry was there). A known engine hash whose
    /// request keys did not hold the entry (the pod-cache LRU evicted it, or the keys were
    /// re-mapped) is `remove_unknown: evict_removed_nothing`.
    fn evict(&mut self, h: u64, id: u32, entry: Entry) -> BlockVerdict {
        self.release(id, entry.pod, entry.tier());
        let keys = self
            .blocks
            .get(id as usize)
            .map(|s| s.req.clone())
            .filter(|k| !k.is_empty());
        let Some(keys) = keys else {
            return BlockVerdict {
                hash: h,
                verdict: VerdictKind::RemoveUnknown,
                reason: None,
            };
        };
        let mut all_gone = true;
        let mut removed_any = false;
        for rk in keys.iter() {
            if let Some(pods) = self.req_to_pods.get_mut(*rk) {
                let before = pods.len();
                drop_pods(pods, entry.pod, Some(entry));
                removed_any |= pods.len() < before;
                if pods.is_empty() {
                    self.req_to_pods.remove(*rk);
                } else {
                    all_gone = false;
                }
            }
        }
        if all_gone {
            if let Some(s) = self.blocks.get_mut(id as usize) {
                s.req.clear();
                self.mapped -= 1;
            }
        }
        if removed_any {
            BlockVerdict {
                hash: h,
                verdict: VerdictKind::Removed,
                reason: None,
            }
        } else {
            BlockVerdict {
                hash: h,
                verdict: VerdictKind::RemoveUnknown,
                reason: Some("evict_removed_nothing".into()),
            }
        }
    }

    fn cleared(&mut self, ctx: &EventCtx<'_>) -> EventVerdict {
        let pod = ctx.source;
        // Index.Clear(pod): O(N) over every key; engine mappings are kept.
        let keys: Vec<u64> = self.req_to_pods.keys().collect();
        for rk in keys {
            if let Some(pods) = self.req_to_pods.get_mut(rk) {
                drop_pods(pods, pod, None);
                if pods.is_empty() {
                    self.req_to_pods.remove(rk);
                }
            }
        }
        for s in &mut self.blocks {
            s.held.drop_source(pod, Some(&mut self.lanes));
            drop_pods(&mut s.refs, pod, None);
        }
        EventVerdict::of(VerdictKind::Cleared, &[])
    }
}

/// A request key: the stand-in chain hash of one canonical block's tokens under `parent`,
/// folded with the block's multimodal hashes (`prefixHashes`' `extra`).
fn request_key(parent: u64, tokens: &[u32], mm: Option<&[&str]>) -> u64 {
    match mm {
        None => content_hash(parent, tokens, None),
        Some(mm) => {
            let mut salt = String::new();
            for m in mm {
                salt.push_str(&m.len().to_string());
                salt.push(':');
                salt.push_str(m);
            }
            content_hash(parent, tokens, Some(&salt))
        }
    }
}

impl Consumer for Llmd {
    fn name(&self) -> &'static str {
        "llmd"
    }

    fn apply(
        &mut self,
        ctx: &EventCtx<'_>,
        ev: &KvEvent,
        ids: &EventIds,
        _: &mut Vec<Resolution>,
    ) -> EventVerdict {
        if self.watch_seq(ctx) {
            return EventVerdict::because(VerdictKind::Ignored, &ids.hashes, "duplicate_seq");
        }
        if let KvEvent::BlockStored(_) = ev {
            if !self.restarts.is_empty() {
                self.reannounced(ctx.source, &ids.blocks);
            }
        }
        if let Some(why) = self.batch_failure(ctx) {
            // `pool.go` `processRawMessage`: "Failed to parse message", the batch is dropped.
            let lane = ctx.lane();
            let mut v = match ev {
                KvEvent::BlockStored(_) => self.skip(
                    lane,
                    &ids.hashes,
                    VerdictKind::Ignored,
                    "batch_decode_error",
                ),
                _ => EventVerdict::because(VerdictKind::Ignored, &ids.hashes, "batch_decode_error"),
            };
            v.status = Some(why.into());
            return v;
        }
        match ev {
            KvEvent::BlockStored(e) => self.stored(ctx, e, ids),
            KvEvent::BlockRemoved(e) => self.removed(ctx, e, ids),
            KvEvent::AllBlocksCleared => self.cleared(ctx),
        }
    }

    fn reset(&mut self) {
        *self = Llmd::with_block_sizes(self.block_sizes.clone()).with_replay(self.replay);
    }

    fn lanes(&self) -> &Lanes {
        self.lanes.lanes()
    }
}
