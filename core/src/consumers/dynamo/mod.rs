//! NVIDIA Dynamo's KV router, as published in `dynamo-kv-router` 1.6.1 (crates.io;
//! `docs/consumers.md`).
//!
//! * Batch decode (`src/zmq_wire/types.rs` `BlockHashValue` = `Signed(i64) | Unsigned(u64)`,
//!   `services/indexer/listener.rs` `apply_live_batch`): one bytes hash anywhere in a batch
//!   makes `decode_event_batch` fail, and every event of that batch is dropped
//!   (`batch_decode_error`).
//! * Filters (`src/zmq_wire/mod.rs` `ZmqEventNormalizer::preprocess_with_reason`): an
//!   `ownership` field is checked first: `"kvcr"` ⇒ `unsupported_ownership`, any other value ⇒
//!   `unknown_ownership` (stores and removals alike).
//! * Conversion (`src/zmq_wire/convert.rs` `convert_event`): `locality` REMOTE/unknown and
//!   unknown media are dropped; a duplicate hash in a store (parent included) turns the event
//!   into an empty `Removed` (a no-op); `create_stored_blocks` stops at the first block whose
//!   size differs from `kv_block_size` or whose tokens run short (truncation).
//! * Device tier (`src/indexer/radix_tree.rs` `RadixTree` with
//!   `src/indexer/compressed_radix.rs` `NodeState`): compressed edges of
//!   `(LocalBlockHash, ExternalSequenceBlockHash)` with a per-worker coverage cutoff and a
//!   per-`(worker, dp_rank)` lookup. Unknown parent ⇒ `ParentBlockNotFound`, whole event
//!   dropped; removing a block uncovers it and every later block of its edge (its chain);
//!   an unknown hash ⇒ `BlockNotFound` while the known ones are still removed; `Cleared` ⇒
//!   `remove_worker_dp_rank`, which prunes only the nodes the rank's lookup points to (a node
//!   whose hashes were re-stored with other tokens keeps the rank's coverage: class F).
//! * Lower tiers (`src/indexer/lower_tier.rs` `LowerTierIndexer`, one per `StorageTier` and
//!   rank publisher): edges `(parent_hash, local_hash) → child`, no parent check (orphans are
//!   stored), an edge conflict stops the rest of the chain, unknown removals are skipped.
//!
//! Modelling choice (`docs/consumers.md`): this is the WORKER-SIDE index, one `LocalKvIndexer` per
//! rank publisher (`src/indexer/local.rs`: "One LocalKvIndexer belongs to one rank
//! publisher"): a device tree and lower-tier indexers per `(worker, dp_rank)`. A router-side
//! index shared by all workers differs when several workers store the same tokens (a shared
//! node keeps the first worker's engine hash; another worker's split limits a removal's
//! cascade: `tests/dynamo-diff/MISMATCHES.md` classes D, E); that view is not modelled.

use smallvec::SmallVec;

use super::{
    content_hash, push_block, slot, BatchCheck, BlockSizes, Blocks, Consumer, EventCtx, EventIds,
    EventVerdict, Interner, LaneBook, LaneCounts, LaneKey, Lanes, Map, Resolution, VerdictKind,
};
use crate::event::{BlockRemoved, BlockStored, KvEvent};

mod edges;
mod lookup;
mod lower_tier;
mod tree;
use edges::Edges;
use lookup::BlockLookup;
use lower_tier::LowerBlock;
use tree::Node;

/// One block of a store as the tree sees it: `(local hash, engine hash, dense block id)`.
type Blk = (u64, u64, u32);

/// `(worker, dp_rank)`: interned source id and rank.
type Worker = (u32, u32);
type NodeId = u32;

/// Dynamo's `StorageTier` (`protocols.rs` `StorageTier::from_kv_medium`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum StorageTier {
    /// `GPU`, `DEVICE`, or no medium.
    Device,
    /// `CPU`, `CPU_PINNED`, `CPU_TIER1`.
    HostPinned,
    /// `CPU_TIER2`, `DISK`, `NVME`, `STORAGE`.
    Disk,
    /// `EXTERNAL`, `NETWORK`, `REMOTE`, `SHARED`.
    External,
}

impl StorageTier {
    /// `StorageTier::from_kv_medium`; `None` for media Dynamo drops (e.g. `FS`, `OBJ`).
    pub fn from_medium(medium: Option<&str>) -> Option<StorageTier> {
        match medium {
            None | Some("GPU") | Some("DEVICE") => Some(StorageTier::Device),
            Some("CPU") | Some("CPU_PINNED") | Some("CPU_TIER1") => Some(StorageTier::HostPinned),
            Some("CPU_TIER2") | Some("DISK") | Some("NVME") | Some("STORAGE") => {
                Some(StorageTier::Disk)
            }
            Some("EXTERNAL") | Some("NETWORK") | Some("REMOTE") | Some("SHARED") => {
                Some(StorageTier::External)
            }
            Some(_) => None,
        }
    }
}

/// The Dynamo model.
#[derive(Clone, Debug)]
pub struct Dynamo {
    block_sizes: BlockSizes,
    clear_all_ranks: bool,
    /// By node id (nodes are never freed, only unlinked).
    nodes: Vec<Node>,
    /// Root children per worker (`root.children`, split per worker).
    /// By worker id (see `workers`): local hash → node.
    roots: Vec<Map<u64, NodeId>>,
    /// `(worker << 32 | dp_rank)` → dense worker id.
    workers: Map<u64, u32>,
    /// By worker id.
    worker_list: Vec<Worker>,
    /// `lookup[(worker, dp_rank)]: engine hash → node`, stored by dense block id:
    /// `(worker, node, kvscope tier id)` entries.
    lookup: Vec<BlockLookup>,
    /// The workers `lookup` has a map for.
    /// By worker id: whether `lookup` has a map for the worker.
    lookup_workers: Vec<bool>,
    /// Lower tiers: `edges[(tier, publisher, parent, local)] = child`. Each rank publisher's
    /// `LocalKvIndexer` has its own `LowerTierIndexer`s (`indexer/local.rs`), so edges of
    /// different `(worker, dp_rank)`s never conflict.
    edges: Edges,
    /// Lower tiers: `worker_blocks[(tier, worker)][hash] = (parent, local)`, stored by dense
    /// block id.
    worker_blocks: Vec<SmallVec<[LowerBlock; 1]>>,
    pub(super) lanes: LaneBook,
    /// Whether the last batch checked has a bytes hash (undecodable).
    batch_check: BatchCheck<bool>,
    /// Scratch: the current store's blocks (reused from event to event).
    scratch: Vec<Blk>,
    /// A bit per block id that ever entered a device-tree edge (nodes are never freed, and
    /// keep blocks past their cutoff): such an id is never given back ([`Dynamo::uses`]).
    in_tree: Vec<u64>,
    /// Block hashes stored so far and in the whole trace (0: not known), from which a
    /// growing node gets room ([`crate::room`]).
    blocks: (usize, usize),
}

impl Dynamo {
    /// A model with the router's `kv_block_size` and the `AllBlocksCleared` scope.
    pub fn new(kv_block_size: u32, clear_all_ranks: bool) -> Self {
        Self::with_block_sizes(BlockSizes::fixed(kv_block_size), clear_all_ranks)
    }

    /// Replace the block sizes (a streaming analysis learns engine block sizes as it reads).
    pub(crate) fn set_block_sizes(&mut self, block_sizes: BlockSizes) {
        self.block_sizes = block_sizes;
    }

    /// A model whose `kv_block_size` may differ per source (`auto`, see [`BlockSizes`]; the
    /// real normalizer is built per worker with its `kv_block_size`).
    pub fn with_block_sizes(block_sizes: BlockSizes, clear_all_ranks: bool) -> Self {
        Dynamo {
            block_sizes,
            clear_all_ranks,
            nodes: Vec::new(),
            roots: Vec::new(),
            workers: Map::default(),
            worker_list: Vec::new(),
            lookup: Vec::new(),
            lookup_workers: Vec::new(),
            edges: Edges::default(),
            worker_blocks: Vec::new(),
            lanes: LaneBook::default(),
            batch_check: BatchCheck::default(),
            scratch: Vec::new(),
            in_tree: Vec::new(),
            blocks: (0, 0),
        }
    }

    /// Whether the device lookup of `(source, dp_rank)` holds `hash`, whose block ids are
    /// `ids` (the interner the model was driven with).
    pub fn device_has(&self, ids: &Interner, source: u32, dp_rank: u32, hash: u64) -> bool {
        let Some(id) = ids.get(hash) else {
            return false;
        };
        let Some(wid) = self.workers.get(&worker_key((source, dp_rank))) else {
            return false;
        };
        self.lookup
            .get(id as usize)
            .is_some_and(|l| l.get(*wid).is_some())
    }

    /// Room for `blocks` block ids (see [`AnyConsumer::reserve`](super::AnyConsumer::reserve)).
    pub(super) fn reserve(&mut self, blocks: usize) {
        self.lookup.reserve_exact(blocks);
        self.worker_blocks.reserve_exact(blocks);
        self.edges.reserve(blocks);
        self.blocks.1 = blocks;
    }

    /// Whether the model refers to block `id` (a streaming analysis gives back the ids of
    /// blocks no model refers to).
    pub(crate) fn uses(&self, id: u32) -> bool {
        let i = id as usize;
        self.lookup.get(i).is_some_and(|l| !l.is_empty())
            || self.worker_blocks.get(i).is_some_and(|l| !l.is_empty())
            || self
                .in_tree
                .get(i / 64)
                .is_some_and(|w| w >> (i % 64) & 1 == 1)
    }

    /// Mark the ids of `blocks` as in a device-tree edge.
    pub(super) fn mark_in_tree(&mut self, blocks: &[Blk]) {
        for b in blocks {
            let i = b.2 as usize;
            *slot(&mut self.in_tree, (i / 64) as u32) |= 1 << (i % 64);
        }
    }

    /// The model's stand-in `LocalBlockHash` of one block's tokens (salted with `lora_name`).
    pub fn local_hash(tokens: &[u32], lora_name: Option<&str>) -> u64 {
        content_hash(0, tokens, lora_name)
    }

    /// Number of lower-tier edges `(parent, local hash) → child`, summed over tiers and rank
    /// publishers (each publisher has its own lower-tier indexers).
    pub fn lower_tier_edges(&self) -> usize {
        self.edges.len()
    }

    /// Whether Dynamo's `zmq_wire::decode_event_batch` would reject the batch that delivered
    /// `ctx`'s event: `BlockHashValue` (`zmq_wire/types.rs`) is `Signed(i64) | Unsigned(u64)`,
    /// so one bytes hash anywhere in the batch fails the whole decode, and
    /// `services/indexer/listener.rs` `apply_live_batch` drops every event of it.
    fn batch_undecodable(&mut self, ctx: &EventCtx<'_>) -> bool {
        self.batch_check.of(ctx, |events| {
            events.iter().any(|ev| match ev {
                KvEvent::BlockStored(s) => s
                    .block_hashes
                    .iter()
                    .chain(s.parent_block_hash.iter())
                    .any(|h| matches!(h, crate::hash::BlockHash::Bytes(_))),
                KvEvent::BlockRemoved(r) => r
                    .block_hashes
                    .iter()
                    .any(|h| matches!(h, crate::hash::BlockHash::Bytes(_))),
                KvEvent::AllBlocksCleared => false,
            })
        })
    }

    fn lane_delta(&mut self, lane: LaneKey, d: i64) {
        if d != 0 {
            self.lanes.bump(lane, LaneCounts::indexed_by(d));
        }
    }

    /// The dense id of worker `w`.
    fn worker_id(&mut self, w: Worker) -> u32 {
        let next = self.worker_list.len() as u32;
        let id = *self.workers.entry(worker_key(w)).or_insert(next);
        if id == next {
            self.worker_list.push(w);
        }
        id
    }

    /// The checks a store or removal passes before the tree sees it (batch decode, ownership,
    /// locality, medium): its `StorageTier`, or the reason it is ignored. One copy for both
    /// event kinds.
    fn admit(
        &mut self,
        ctx: &EventCtx<'_>,
        ownership: Option<&str>,
        locality: Option<&str>,
        medium: Option<&str>,
    ) -> Result<StorageTier, &'static str> {
        if self.batch_undecodable(ctx) {
            return Err("batch_decode_error");
        }
        if let Some(reason) = ownership_filter(ownership) {
            return Err(reason);
        }
        if matches!(locality, Some(l) if l != "LOCAL") {
            return Err("non_local_locality");
        }
        StorageTier::from_medium(medium).ok_or("unknown_medium")
    }

    fn stored(&mut self, ctx: &EventCtx<'_>, e: &BlockStored, ids: &EventIds) -> EventVerdict {
        let lane = ctx.lane();
        let w: Worker = (ctx.source, ctx.dp_rank);
        let hashes: &[u64] = &ids.hashes;
        self.blocks.0 += hashes.len();
        let tier = match self.admit(
            ctx,
            e.ownership.as_deref(),
            e.locality.as_deref(),
            e.medium.as_deref(),
        ) {
            Ok(tier) => tier,
            Err(reason) => return EventVerdict::because(VerdictKind::Ignored, hashes, reason),
        };
        let parent = e.parent_block_hash.as_ref().map(|p| p.as_u64());
        if has_duplicate(parent, hashes) {
            let mut v = EventVerdict::because(
                VerdictKind::Ignored,
                hashes,
                "duplicate_or_self_referencing_hash",
            );
            v.status = Some("ok".into());
            return v;
        }
        // create_stored_blocks
        let kv_block_size = self.block_sizes.for_source(ctx.source);
        let bs = kv_block_size as usize;
        // The reused scratch vector (no allocation per event, no `SmallVec` type of its own).
        let mut blocks = std::mem::take(&mut self.scratch);
        blocks.clear();
        let mut trunc_reason = None;
        for (i, h) in hashes.iter().enumerate() {
            if e.block_size != kv_block_size {
                trunc_reason = Some("block_size_mismatch");
                break;
            }
            let Some(tokens) = e.token_ids.get(i * bs..(i + 1) * bs) else {
                trunc_reason = Some("token_ids_too_short");
                break;
            };
            blocks.push((
                Self::local_hash(tokens, e.lora_name.as_deref()),
                *h,
                ids.block(i),
            ));
        }
        let v = self.store_blocks(
            w,
            tier,
            (parent, ids.parent),
            &blocks,
            hashes,
            lane,
            trunc_reason,
        );
        self.scratch = blocks;
        v
    }

    /// The tree part of [`Dynamo::stored`]: store `blocks` (the event's decodable prefix of
    /// `hashes`) into `tier`.
    #[allow(clippy::too_many_arguments)]
    fn store_blocks(
        &mut self,
        w: Worker,
        tier: StorageTier,
        (parent, parent_id): (Option<u64>, Option<u32>),
        blocks: &[Blk],
        hashes: &[u64],
        lane: LaneKey,
        trunc_reason: Option<&'static str>,
    ) -> EventVerdict {
        if tier == StorageTier::Device {
            let parent_ids = parent.zip(parent_id);
            if let Err(status) = self.device_store(w, parent_ids, blocks, lane) {
                self.lanes
                    .bump(lane, LaneCounts::dropped_by(hashes.len() as i64));
                let mut v = if status == "parent_block_not_found" {
                    let mut v = EventVerdict::of(VerdictKind::DroppedOrphan, hashes);
                    v.missing_parent = parent;
                    v
                } else {
                    EventVerdict::because(VerdictKind::Ignored, hashes, "self_referencing_store")
                };
                v.status = Some(status.into());
                return v;
            }
            self.finish_store(lane, hashes, blocks.len(), trunc_reason)
        } else {
            let stored = self.lower_store(tier, w, parent, blocks, lane);
            let reason = if stored < blocks.len() {
                Some("edge_conflict")
            } else {
                trunc_reason
            };
            self.finish_store(lane, hashes, stored, reason)
        }
    }

    fn finish_store(
        &mut self,
        lane: LaneKey,
        hashes: &[u64],
        kept: usize,
        reason: Option<&'static str>,
    ) -> EventVerdict {
        let lost = hashes.len() - kept;
        if lost > 0 {
            self.lanes.bump(lane, LaneCounts::dropped_by(lost as i64));
        }
        let mut blocks = Blocks::with_capacity(hashes.len());
        for (i, &hash) in hashes.iter().enumerate() {
            if i < kept {
                push_block(&mut blocks, hash, VerdictKind::Applied, None);
            } else {
                push_block(&mut blocks, hash, VerdictKind::Truncated, reason);
            }
        }
        let verdict = if lost == 0 {
            VerdictKind::Applied
        } else {
            VerdictKind::Truncated
        };
        EventVerdict {
            verdict,
            missing_parent: None,
            reason: if lost > 0 {
                reason.map(Into::into)
            } else {
                None
            },
            status: Some("ok".into()),
            blocks,
        }
    }

    fn removed(&mut self, ctx: &EventCtx<'_>, e: &BlockRemoved, ids: &EventIds) -> EventVerdict {
        let lane = ctx.lane();
        let w: Worker = (ctx.source, ctx.dp_rank);
        let hashes: &[u64] = &ids.hashes;
        let tier = match self.admit(
            ctx,
            e.ownership.as_deref(),
            e.locality.as_deref(),
            e.medium.as_deref(),
        ) {
            Ok(tier) => tier,
            Err(reason) => return EventVerdict::because(VerdictKind::Ignored, hashes, reason),
        };
        let (blocks, device) = if tier == StorageTier::Device {
            (self.device_remove(w, hashes, &ids.blocks, lane), true)
        } else {
            (self.lower_remove(tier, w, hashes, &ids.blocks, lane), false)
        };
        let any_unknown = blocks
            .iter()
            .any(|b| b.verdict == VerdictKind::RemoveUnknown);
        // The blocks are all `removed` or `remove_unknown`.
        let mut v = EventVerdict::removal(blocks);
        v.status = Some(if device && any_unknown {
            "block_not_found".into()
        } else {
            "ok".into()
        });
        v
    }
}

/// The `workers` key of a publisher.
fn worker_key(w: Worker) -> u64 {
    (w.0 as u64) << 32 | w.1 as u64
}

/// Whether the store's hashes (with its parent) repeat one (`convert_event`'s
/// self-reference check); no allocation for the usual short events.
fn has_duplicate(parent: Option<u64>, hashes: &[u64]) -> bool {
    if hashes.len() <= 16 {
        return hashes
            .iter()
            .enumerate()
            .any(|(i, h)| Some(*h) == parent || hashes.get(..i).is_some_and(|s| s.contains(h)));
    }
    // Sorted copy (the crate's one u64 sort; no hash-set type of its own).
    let mut all: Vec<u64> = Vec::with_capacity(hashes.len() + 1);
    all.extend(parent);
    all.extend_from_slice(hashes);
    crate::sort::sort_u64(&mut all);
    all.windows(2).any(|w| w.first() == w.get(1))
}

/// `ZmqEventNormalizer::preprocess_with_reason` (`zmq_wire/mod.rs`): the ownership check runs
/// before every other filter. `KvEventOwnership::from_wire` (`zmq_wire/types.rs`) maps no
/// ownership to `Framework` (kept), `"kvcr"` to `Kvcr` (`unsupported_ownership`, vLLM's KVCR
/// tier, #52067) and anything else to `unknown_ownership`.
fn ownership_filter(ownership: Option<&str>) -> Option<&'static str> {
    match ownership {
        None => None,
        Some("kvcr") => Some("unsupported_ownership"),
        Some(_) => Some("unknown_ownership"),
    }
}

impl Consumer for Dynamo {
    fn name(&self) -> &'static str {
        "dynamo"
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
            KvEvent::AllBlocksCleared => {
                if self.batch_undecodable(ctx) {
                    return EventVerdict::because(VerdictKind::Ignored, &[], "batch_decode_error");
                }
                let w: Worker = (ctx.source, ctx.dp_rank);
                self.lower_clear(w);
                self.device_clear(w);
                let mut v = EventVerdict::of(VerdictKind::Cleared, &[]);
                v.status = Some("ok".into());
                v
            }
        }
    }

    fn reset(&mut self) {
        *self = Dynamo::with_block_sizes(self.block_sizes.clone(), self.clear_all_ranks);
    }

    fn lanes(&self) -> &Lanes {
        self.lanes.lanes()
    }
}
