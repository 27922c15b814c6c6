//! llm-d's KV-event indexer, as of 2026 (`llm-d/llm-d-router` `pkg/kvevents/pool.go`
//! `processEventBatch`, `pkg/kvcache/kvblock/{in_memory.go,token_processor.go}`,
//! `pkg/kvevents/event_dedup_filter.go` at `ebab6879`; `docs/consumers.md`).
//!
//! State, shaped like the real one:
//! * `engine_to_req`: the **global** engine-hash → request-keys map shared by all pods and
//!   tiers (`GetRequestKey` returns the last request key);
//! * `req_to_pods`: request key → pod entries `(pod, tier, group)`;
//! * `dedup`: refcounts `refs[pod][(tier, group, hash)]` (llm-d-kv-cache #680);
//! * `groups`: the per-pod group catalogue learned from stores (#627).
//!
//! The per-engine-hash parts (`engine_to_req`, the dedup refcounts and the held lanes) live in
//! one slot per dense block id (see `Interner` in the parent module) rather than in three hash
//! maps: same contents, one memory access per block.
//!
//! Rules: an unknown non-zero parent drops the whole `BlockStored` (since `6f62751`, #243);
//! parent `0`/nil is the root; request keys are chained over canonical blocks of
//! `canonical_block_size` tokens and the partial tail is dropped, so sub-canonical events create
//! no mapping; token-less events are tier updates of known keys (#561); removals are
//! refcounted and evict per hash; `AllBlocksCleared` drops the pod's entries but keeps the
//! engine mappings (#626). Request keys are a stand-in chain hash (the real FNV-64a-over-CBOR
//! keys are an independent hash space that never needs to match vLLM's).

use smallvec::SmallVec;

use super::{
    content_hash, push_block, slot, BlockSizes, BlockVerdict, Blocks, Consumer, EventCtx, EventIds,
    EventVerdict, Hashes, Interner, LaneBook, LaneCounts, LaneKey, LaneList, Lanes, Map,
    Resolution, SlabMap, VerdictKind,
};
use crate::event::{BlockRemoved, BlockStored, KvEvent};

/// A pod entry on a request key: `PodEntry{pod, tier, group}`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PodEntry {
    /// Interned source (pod) id.
    pub pod: u32,
    /// Interned tier id.
    pub tier: u32,
    /// `group_idx`, or -1 when absent.
    pub group: i64,
}

/// Cache kinds llm-d indexes (`full_attention`, `mla_attention`, `sink_full_attention`).
const SUPPORTED_KINDS: [&str; 3] = ["full_attention", "mla_attention", "sink_full_attention"];

/// Request keys of one engine hash (almost always one: inline, no allocation).
type ReqKeys = Hashes;
/// Pod entries with a counter (usually one or two: inline): a block's dedup refcounts, and a
/// request key's pods (counter unused, 0). One `SmallVec` type for both (wasm size).
type Counted = SmallVec<[(PodEntry, u32); 2]>;

/// Pods holding one request key (the counters are unused).
type Pods = Counted;

/// Drop pod `pod`'s entries (only `entry`, when given): one `retain` instance for eviction
/// and clearing, of pods and refcounts alike.
fn drop_pods(list: &mut Counted, pod: u32, entry: Option<PodEntry>) {
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
    /// `(pod << 32 | group)` → supported (1) or not (0).
    groups: Map<u64, u32>,
    pub(super) lanes: LaneBook,
}

impl Llmd {
    /// A model with llm-d's `blockSizeTokens` = `canonical_block_size` (0 is treated as 1).
    pub fn new(canonical_block_size: u32) -> Self {
        Self::with_block_sizes(BlockSizes::fixed(canonical_block_size))
    }

    /// A model whose `blockSizeTokens` may differ per source (`auto`, see [`BlockSizes`]).
    pub fn with_block_sizes(block_sizes: BlockSizes) -> Self {
        Llmd {
            block_sizes,
            blocks: Vec::new(),
            mapped: 0,
            req_to_pods: SlabMap::default(),
            groups: Map::default(),
            lanes: LaneBook::default(),
        }
    }

    /// `GetRequestKey`: the last request key mapped to an engine hash, whose block ids are
    /// `ids` (the interner the model was driven with).
    pub fn request_key_of(&self, ids: &Interner, engine_hash: u64) -> Option<u64> {
        ids.get(engine_hash).and_then(|id| self.req_of(id))
    }

    /// `GetRequestKey` by block id.
    fn req_of(&self, id: u32) -> Option<u64> {
        self.blocks
            .get(id as usize)
            .and_then(|s| s.req.last().copied())
    }

    /// Number of engine hashes with a mapping.
    pub fn mapped_engine_keys(&self) -> usize {
        self.mapped
    }

    /// Set `engine_to_req[id]` (non-empty keys).
    fn map_keys(&mut self, id: u32, keys: ReqKeys) {
        let s = slot(&mut self.blocks, id);
        if s.req.is_empty() {
            self.mapped += 1;
        }
        s.req = keys;
    }

    fn add_entry(&mut self, rk: u64, entry: PodEntry) {
        let pods = self.req_to_pods.entry(rk);
        if !pods.iter().any(|p| p.0 == entry) {
            pods.push((entry, 0));
        }
    }

    fn hold(&mut self, id: u32, lane: LaneKey) {
        if slot(&mut self.blocks, id).held.add(lane) {
            self.lanes.bump(lane, LaneCounts::indexed_by(1));
        }
    }

    fn release(&mut self, id: u32, lane: LaneKey) {
        if self
            .blocks
            .get_mut(id as usize)
            .is_some_and(|s| s.held.remove(lane))
        {
            self.lanes.bump(lane, LaneCounts::indexed_by(-1));
        }
    }

    fn dropped(&mut self, lane: LaneKey, n: usize) {
        self.lanes.bump(lane, LaneCounts::dropped_by(n as i64));
    }

    fn stored(&mut self, ctx: &EventCtx<'_>, e: &BlockStored, ids: &EventIds) -> EventVerdict {
        let lane = LaneKey {
            source: ctx.source,
            tier: ctx.tier,
        };
        let hashes: &[u64] = &ids.hashes;
        let group = e.group_idx.map_or(-1, i64::from);
        if let Some(g) = e.group_idx {
            let supported = e
                .kv_cache_spec_kind
                .as_deref()
                .is_none_or(|k| SUPPORTED_KINDS.contains(&k));
            self.groups
                .insert(group_key(ctx.source, g), supported as u32);
            if !supported {
                self.dropped(lane, hashes.len());
                return EventVerdict::because(
                    VerdictKind::Ignored,
                    hashes,
                    "unsupported_cache_kind",
                );
            }
            let bs = e.block_size as usize;
            if !e.token_ids.is_empty()
                && (bs == 0
                    || !e.token_ids.len().is_multiple_of(bs)
                    || e.token_ids.len() / bs != hashes.len())
            {
                self.dropped(lane, hashes.len());
                return EventVerdict::because(VerdictKind::Ignored, hashes, "non_dense_block_span");
            }
        }
        // The orphan rule: parent 0 / nil is the root; otherwise the parent must be mapped.
        let model = e.lora_name.as_deref().unwrap_or("model");
        let parent_rk = match e.parent_block_hash.as_ref().map(|p| p.as_u64()) {
            None | Some(0) => content_hash(0, &[], Some(model)),
            Some(p) => match ids.parent.and_then(|id| self.req_of(id)) {
                Some(rk) => rk,
                None => {
                    self.dropped(lane, hashes.len());
                    let mut v = EventVerdict::because(
                        VerdictKind::DroppedOrphan,
                        hashes,
                        "Failed to get request key for parent block",
                    );
                    v.missing_parent = Some(p);
                    return v;
                }
            },
        };
        let cbs = self.block_sizes.for_source(ctx.source).max(1) as usize;
        let mut rks = Hashes::with_capacity(e.token_ids.len() / cbs);
        let mut prev = parent_rk;
        for chunk in e.token_ids.chunks_exact(cbs) {
            prev = content_hash(prev, chunk, None);
            rks.push(prev);
        }
        let entry = PodEntry {
            pod: ctx.source,
            tier: ctx.tier,
            group,
        };
        if rks.is_empty() {
            if e.token_ids.is_empty() && !hashes.is_empty() {
                // Token-less offload event: a tier update of known engine keys (#561).
                let mut blocks = Blocks::with_capacity(hashes.len());
                let mut any = false;
                for (i, &h) in hashes.iter().enumerate() {
                    let id = ids.block(i);
                    let keys = self
                        .blocks
                        .get(id as usize)
                        .map(|s| s.req.clone())
                        .filter(|k| !k.is_empty());
                    if let Some(keys) = keys {
                        for rk in keys.iter() {
                            self.add_entry(*rk, entry);
                        }
                        self.hold(id, lane);
                        self.track_store(entry, id);
                        any = true;
                        push_block(&mut blocks, h, VerdictKind::Applied, Some("tier_update"));
                    } else {
                        push_block(
                            &mut blocks,
                            h,
                            VerdictKind::Ignored,
                            Some("tier_update_unknown_key"),
                        );
                    }
                }
                let lost = blocks
                    .iter()
                    .filter(|b| b.verdict == VerdictKind::Ignored)
                    .count();
                self.dropped(lane, lost);
                return EventVerdict {
                    verdict: if any {
                        VerdictKind::Applied
                    } else {
                        VerdictKind::Ignored
                    },
                    missing_parent: None,
                    reason: Some("tier_update".into()),
                    status: None,
                    blocks,
                };
            }
            self.dropped(lane, hashes.len());
            return EventVerdict::because(VerdictKind::Ignored, hashes, "sub_canonical");
        }
        // Pair E[i·|E|/n] → R[i·|R|/n], n = max(|E|, |R|).
        let (ne, nr) = (hashes.len(), rks.len());
        let n = ne.max(nr);
        for rk in &rks {
            self.add_entry(*rk, entry);
        }
        // `i · |E| / n` is non-decreasing in `i` and takes every engine index once n ≥ |E|:
        // collect one engine's keys at a time (no vector of key lists).
        let mut keys = ReqKeys::new();
        let mut engine = 0usize;
        for i in 0..=n {
            let ei = if i < n { i * ne / n } else { ne };
            while engine < ei {
                self.store_engine(ids.block(engine), std::mem::take(&mut keys), entry, lane);
                engine += 1;
            }
            if let Some(rk) = rks.get(i * nr / n).filter(|_| i < n) {
                keys.push(*rk);
            }
        }
        EventVerdict::of(VerdictKind::Applied, hashes)
    }

    /// Map block `id` to `keys` (when any), count it in `lane` and track the store.
    fn store_engine(&mut self, id: u32, keys: ReqKeys, entry: PodEntry, lane: LaneKey) {
        if !keys.is_empty() {
            self.map_keys(id, keys);
        }
        self.hold(id, lane);
        self.track_store(entry, id);
    }

    fn track_store(&mut self, entry: PodEntry, id: u32) {
        let refs = &mut slot(&mut self.blocks, id).refs;
        match refs.iter_mut().find(|r| r.0 == entry) {
            Some(r) => r.1 += 1,
            None => refs.push((entry, 1)),
        }
    }

    fn removed(&mut self, ctx: &EventCtx<'_>, e: &BlockRemoved, ids: &EventIds) -> EventVerdict {
        let lane = LaneKey {
            source: ctx.source,
            tier: ctx.tier,
        };
        let hashes: &[u64] = &ids.hashes;
        let group = e.group_idx.map_or(-1, i64::from);
        if let Some(g) = e.group_idx {
            if self.groups.get(&group_key(ctx.source, g)) != Some(&1) {
                return EventVerdict::because(
                    VerdictKind::Ignored,
                    hashes,
                    "removals_skipped_unknown_group",
                );
            }
        }
        let entry = PodEntry {
            pod: ctx.source,
            tier: ctx.tier,
            group,
        };
        let mut blocks = Blocks::with_capacity(hashes.len());
        let key = entry;
        for (i, &h) in hashes.iter().enumerate() {
            let id = ids.block(i);
            if let Some(refs) = self.blocks.get_mut(id as usize).map(|s| &mut s.refs) {
                if let Some(p) = refs.iter().position(|r| r.0 == key) {
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
            blocks.push(self.evict(h, id, entry, lane));
        }
        EventVerdict::removal(blocks)
    }

    /// `Index.Evict(engine_key, [entry])`.
    fn evict(&mut self, h: u64, id: u32, entry: PodEntry, lane: LaneKey) -> BlockVerdict {
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
        for rk in keys.iter() {
            if let Some(pods) = self.req_to_pods.get_mut(*rk) {
                drop_pods(pods, entry.pod, Some(entry));
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
        self.release(id, lane);
        BlockVerdict {
            hash: h,
            verdict: VerdictKind::Removed,
            reason: None,
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
        match ev {
            KvEvent::BlockStored(e) => self.stored(ctx, e, ids),
            KvEvent::BlockRemoved(e) => self.removed(ctx, e, ids),
            KvEvent::AllBlocksCleared => self.cleared(ctx),
        }
    }

    fn reset(&mut self) {
        *self = Llmd::with_block_sizes(self.block_sizes.clone());
    }

    fn lanes(&self) -> &Lanes {
        self.lanes.lanes()
    }
}
