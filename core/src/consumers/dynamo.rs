//! NVIDIA Dynamo's KV router, as published in `dynamo-kv-router` 1.6.1 (reference
//! `kv-event-consumers.md` §5).
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
//! Modelling choice (DECISIONS.md): this is the WORKER-SIDE index, one `LocalKvIndexer` per
//! rank publisher (`src/indexer/local.rs`: "One LocalKvIndexer belongs to one rank
//! publisher"): a device tree and lower-tier indexers per `(worker, dp_rank)`. A router-side
//! index shared by all workers differs when several workers store the same tokens (a shared
//! node keeps the first worker's engine hash; another worker's split limits a removal's
//! cascade: `tests/dynamo-diff/MISMATCHES.md` classes D, E); that view is not modelled.

use smallvec::SmallVec;

use super::{
    content_hash, push_block, slot, BlockSizes, Blocks, Consumer, EventCtx, EventIds, EventVerdict,
    Interner, LaneBook, LaneCounts, LaneKey, Lanes, Map, Resolution, VerdictKind,
};
use crate::event::{BlockRemoved, BlockStored, KvEvent};

mod edges;
mod lookup;
use edges::Edges;
use lookup::BlockLookup;

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

/// One compressed edge of a worker's device tree (`RadixBlock` + `NodeState`).
#[derive(Clone, Debug, Default)]
struct Node {
    edge: Vec<Blk>,
    /// Engine hash → position in `edge`.
    edge_index: Map<u64, u32>,
    /// The worker covers `edge[..cutoff]` (`full_edge_workers` ⇔ `cutoff == edge.len()`).
    cutoff: usize,
    children: Map<u64, NodeId>,
    parent: Option<NodeId>,
    internal: bool,
}

impl Node {
    fn covers(&self, pos: usize) -> bool {
        pos < self.cutoff
    }
    fn full(&self) -> bool {
        self.cutoff == self.edge.len()
    }
}

/// A lower-tier owner's entry for one block (`worker_blocks[(tier, worker)][hash]`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct LowerBlock {
    tier: StorageTier,
    worker: Worker,
    /// `(parent, local hash)`.
    key: (Option<u64>, u64),
    /// kvscope tier id (for the lane counters).
    lane_tier: u32,
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
    /// Block ids when the model is used on its own ([`Consumer::apply`]).
    own: Interner,
    /// The last batch checked for a bytes hash: `(events address, length, undecodable)`.
    /// Only the address is compared (never dereferenced).
    batch_check: Option<(usize, usize, bool)>,
    /// Scratch: the current store's blocks (reused from event to event).
    scratch: Vec<Blk>,
}

impl Dynamo {
    /// A model with the router's `kv_block_size` and the `AllBlocksCleared` scope.
    pub fn new(kv_block_size: u32, clear_all_ranks: bool) -> Self {
        Self::with_block_sizes(BlockSizes::fixed(kv_block_size), clear_all_ranks)
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
            own: Interner::default(),
            batch_check: None,
            scratch: Vec::new(),
        }
    }

    /// Whether the device lookup of `(source, dp_rank)` holds `hash`.
    pub fn device_has(&self, source: u32, dp_rank: u32, hash: u64) -> bool {
        let Some(id) = self.own.get(hash) else {
            return false;
        };
        let Some(wid) = self.workers.get(&worker_key((source, dp_rank))) else {
            return false;
        };
        self.lookup
            .get(id as usize)
            .is_some_and(|l| l.get(*wid).is_some())
    }

    /// The model's stand-in `LocalBlockHash` of one block's tokens (salted with `lora_name`).
    pub fn local_hash(tokens: &[u32], lora_name: Option<&str>) -> u64 {
        content_hash(0, tokens, lora_name)
    }

    /// The device tree of `(source, dp_rank)` as `RadixTree::dump_tree_as_events` shows it,
    /// one entry per block the rank covers in a node linked to the root: `(parent engine hash,
    /// engine hash, local hash)`, sorted (the dump's edge merging does not change these).
    /// For differential tests: nodes no lookup entry points to are in it too.
    pub fn device_tree_blocks(&self, source: u32, dp_rank: u32) -> Vec<(Option<u64>, u64, u64)> {
        let mut out = Vec::new();
        let Some(root) = self
            .workers
            .get(&worker_key((source, dp_rank)))
            .and_then(|wid| self.roots.get(*wid as usize))
        else {
            return out;
        };
        let mut stack: Vec<(NodeId, Option<u64>)> = root.values().map(|id| (*id, None)).collect();
        while let Some((id, parent)) = stack.pop() {
            let Some(n) = self.nodes.get(id as usize) else {
                continue;
            };
            let mut prev = parent;
            for b in n.edge.iter().take(n.cutoff) {
                out.push((prev, b.1, b.0));
                prev = Some(b.1);
            }
            let last = n.edge.last().map(|b| b.1);
            stack.extend(n.children.values().map(|c| (*c, last)));
        }
        out.sort_unstable();
        out
    }

    /// Number of lower-tier edges `(parent, local hash) → child`, summed over tiers and rank
    /// publishers (each publisher has its own lower-tier indexers).
    pub fn lower_tier_edges(&self) -> usize {
        self.edges.len()
    }

    /// Whether Dynamo's `zmq_wire::decode_event_batch` would reject the batch `events`
    /// belongs to: `BlockHashValue` (`zmq_wire/types.rs`) is `Signed(i64) | Unsigned(u64)`,
    /// so one bytes hash anywhere in the batch fails the whole decode, and
    /// `services/indexer/listener.rs` `apply_live_batch` drops every event of it.
    fn batch_undecodable(&mut self, events: &[KvEvent]) -> bool {
        let key = (events.as_ptr() as usize, events.len());
        if let Some((p, n, bad)) = self.batch_check {
            if (p, n) == key {
                return bad;
            }
        }
        let bad = events.iter().any(|ev| match ev {
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
        });
        self.batch_check = Some((key.0, key.1, bad));
        bad
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

    fn lookup_insert(&mut self, w: Worker, bid: u32, node: NodeId, lane: LaneKey) -> bool {
        let wid = self.worker_id(w);
        *slot(&mut self.lookup_workers, wid) = true;
        let prev = slot(&mut self.lookup, bid).set(wid, node, lane.tier);
        match prev {
            None => self.lane_delta(lane, 1),
            Some((_, t)) if t != lane.tier => {
                self.lane_delta(
                    LaneKey {
                        source: lane.source,
                        tier: t,
                    },
                    -1,
                );
                self.lane_delta(lane, 1);
            }
            _ => {}
        }
        prev.map(|p| p.0) != Some(node)
    }

    fn lookup_get(&self, w: Worker, bid: u32) -> Option<NodeId> {
        let wid = *self.workers.get(&worker_key(w))?;
        self.lookup
            .get(bid as usize)
            .and_then(|l| l.get(wid))
            .map(|e| e.0)
    }

    fn lookup_remove(&mut self, w: Worker, bid: u32) -> Option<NodeId> {
        let wid = *self.workers.get(&worker_key(w))?;
        let removed = self
            .lookup
            .get_mut(bid as usize)
            .and_then(|l| l.remove(wid));
        if let Some((_, t)) = removed {
            self.lane_delta(
                LaneKey {
                    source: w.0,
                    tier: t,
                },
                -1,
            );
        }
        removed.map(|p| p.0)
    }

    fn new_node(&mut self, blocks: &[Blk], parent: Option<NodeId>) -> NodeId {
        let id = self.nodes.len() as NodeId;
        let edge: Vec<Blk> = blocks.to_vec();
        let edge_index = edge_index(blocks);
        self.nodes.push(Node {
            cutoff: edge.len(),
            edge,
            edge_index,
            children: Map::default(),
            parent,
            internal: false,
        });
        id
    }

    fn update_lookup(&mut self, w: Worker, blocks: &[Blk], node: NodeId, lane: LaneKey) {
        for b in blocks {
            self.lookup_insert(w, b.2, node, lane);
        }
    }

    /// `split_node`: the node keeps `edge[..pos]`, a new suffix node takes the rest.
    fn split(&mut self, w: Worker, id: NodeId, pos: usize, lane: LaneKey) {
        let Some(node) = self.nodes.get_mut(id as usize) else {
            return;
        };
        if pos == 0 || pos >= node.edge.len() {
            return;
        }
        let mut node = std::mem::take(node);
        let suffix_edge = node.edge.split_off(pos);
        for (_, h, _) in suffix_edge.iter() {
            node.edge_index.remove(h);
        }
        let (node_cut, suffix_cut) = if node.cutoff >= pos {
            (pos, node.cutoff - pos)
        } else {
            (node.cutoff, 0)
        };
        node.cutoff = node_cut;
        let suffix_id = self.nodes.len() as NodeId;
        let first_local = suffix_edge.first().map(|b| b.0).unwrap_or_default();
        let suffix = Node {
            edge_index: edge_index(&suffix_edge),
            cutoff: suffix_cut,
            children: std::mem::take(&mut node.children),
            parent: Some(id),
            internal: node.internal,
            edge: suffix_edge,
        };
        for child in suffix.children.values() {
            if let Some(c) = self.nodes.get_mut(*child as usize) {
                c.parent = Some(suffix_id);
            }
        }
        node.children.insert(first_local, suffix_id);
        node.internal = true;
        let covered: Vec<Blk> = suffix
            .edge
            .get(..suffix_cut)
            .unwrap_or(&suffix.edge)
            .to_vec();
        if let Some(slot) = self.nodes.get_mut(id as usize) {
            *slot = node;
        }
        self.nodes.push(suffix);
        self.update_lookup(w, &covered, suffix_id, lane);
        self.prune_unreachable(w, suffix_id);
    }

    /// `RadixBlock::prune_unreachable`.
    fn prune_unreachable(&mut self, w: Worker, id: NodeId) {
        let Some(node) = self.nodes.get_mut(id as usize) else {
            return;
        };
        if !node.full() {
            node.children.clear();
        }
        if node.cutoff > 0 {
            return;
        }
        let first = node.edge.first().map(|b| b.0);
        let parent = node.parent;
        if let Some(key) = first {
            match parent {
                Some(p) => {
                    if let Some(pn) = self.nodes.get_mut(p as usize) {
                        if pn.children.get(&key) == Some(&id) {
                            pn.children.remove(&key);
                        }
                    }
                }
                None => {
                    let wid = self.workers.get(&worker_key(w)).copied();
                    if let Some(m) = wid.and_then(|wid| self.roots.get_mut(wid as usize)) {
                        if m.get(&key) == Some(&id) {
                            m.remove(&key);
                        }
                    }
                }
            }
        }
    }

    fn child_of(&self, w: Worker, parent: Option<NodeId>, local: u64) -> Option<NodeId> {
        match parent {
            None => self
                .workers
                .get(&worker_key(w))
                .and_then(|wid| self.roots.get(*wid as usize))
                .and_then(|m| m.get(&local).copied()),
            Some(p) => self
                .nodes
                .get(p as usize)
                .and_then(|n| n.children.get(&local).copied()),
        }
    }

    fn attach_child(&mut self, w: Worker, parent: Option<NodeId>, local: u64, child: NodeId) {
        match parent {
            None => {
                let wid = self.worker_id(w);
                slot(&mut self.roots, wid).insert(local, child);
            }
            Some(p) => {
                if let Some(pn) = self.nodes.get_mut(p as usize) {
                    pn.internal = true;
                    pn.children.insert(local, child);
                }
            }
        }
    }

    fn append_to_leaf(&mut self, id: NodeId, blocks: &[Blk]) {
        if let Some(n) = self.nodes.get_mut(id as usize) {
            let old = n.edge.len();
            for (i, b) in blocks.iter().enumerate() {
                n.edge.push(*b);
                n.edge_index.insert(b.1, (old + i) as u32);
            }
            n.cutoff = n.edge.len();
        }
    }

    fn cover_prefix(&mut self, id: NodeId, cutoff: usize) {
        if let Some(n) = self.nodes.get_mut(id as usize) {
            if cutoff > n.cutoff {
                n.cutoff = cutoff.min(n.edge.len());
            }
        }
    }

    /// `RadixTree::apply_stored`. `Err(status)` = ParentBlockNotFound.
    fn device_store(
        &mut self,
        w: Worker,
        parent_hash: Option<(u64, u32)>,
        blocks: &[Blk],
        lane: LaneKey,
    ) -> Result<(), &'static str> {
        if let Some((p, _)) = parent_hash {
            if blocks.iter().any(|b| b.1 == p) {
                return Err("invalid_block_sequence");
            }
        }
        let mut parent: Option<NodeId> = match parent_hash {
            None => None,
            Some((p, pid)) => {
                let Some(id) = self.lookup_get(w, pid) else {
                    return Err("parent_block_not_found");
                };
                let Some(node) = self.nodes.get(id as usize) else {
                    return Err("parent_block_not_found");
                };
                let Some(pos) = node.edge_index.get(&p).map(|x| *x as usize) else {
                    return Err("parent_block_not_found");
                };
                if !node.covers(pos) {
                    self.lookup_remove(w, pid);
                    return Err("parent_block_not_found");
                }
                // try_reuse_parent_edge
                let suffix_len = node.edge.len() - pos - 1;
                let suffix_matches = |n: &Node, k: usize| {
                    n.edge
                        .iter()
                        .skip(pos + 1)
                        .zip(blocks.iter())
                        .take(k)
                        .all(|(a, b)| a == b)
                };
                if blocks.len() <= suffix_len && suffix_matches(node, blocks.len()) {
                    self.cover_prefix(id, pos + 1 + blocks.len());
                    self.update_lookup(w, blocks, id, lane);
                    return Ok(());
                }
                if !node.internal && blocks.len() > suffix_len && suffix_matches(node, suffix_len) {
                    self.append_to_leaf(id, &blocks[suffix_len..]);
                    self.update_lookup(w, blocks, id, lane);
                    return Ok(());
                }
                if node.edge.last().map(|b| b.1) != Some(p) {
                    self.split(w, id, pos + 1, lane);
                }
                Some(id)
            }
        };
        let mut remaining = blocks;
        while let Some(first) = remaining.first() {
            let Some(child) = self.child_of(w, parent, first.0) else {
                let can_extend = parent
                    .and_then(|p| self.nodes.get(p as usize))
                    .is_some_and(|n| {
                        !n.edge.is_empty() && !n.internal && n.covers(n.edge.len() - 1)
                    });
                match (can_extend, parent) {
                    (true, Some(p)) => {
                        self.append_to_leaf(p, remaining);
                        self.update_lookup(w, remaining, p, lane);
                    }
                    _ => {
                        let c = self.new_node(remaining, parent);
                        self.attach_child(w, parent, first.0, c);
                        self.update_lookup(w, remaining, c, lane);
                    }
                }
                break;
            };
            let Some(cn) = self.nodes.get(child as usize) else {
                break;
            };
            let edge_len = cn.edge.len();
            let match_len = cn
                .edge
                .iter()
                .zip(remaining.iter())
                .take_while(|(a, b)| a.0 == b.0)
                .count();
            if match_len < edge_len {
                if match_len == remaining.len() {
                    self.cover_prefix(child, match_len);
                    self.update_lookup(w, remaining, child, lane);
                    break;
                }
                self.split(w, child, match_len, lane);
                if let Some(n) = self.nodes.get_mut(child as usize) {
                    n.cutoff = n.edge.len();
                }
                self.update_lookup(w, &remaining[..match_len], child, lane);
                let tail = &remaining[match_len..];
                let t = self.new_node(tail, Some(child));
                self.attach_child(w, Some(child), tail[0].0, t);
                self.update_lookup(w, tail, t, lane);
                break;
            }
            if let Some(n) = self.nodes.get_mut(child as usize) {
                n.cutoff = n.edge.len();
            }
            self.update_lookup(w, &remaining[..edge_len], child, lane);
            remaining = &remaining[edge_len..];
            parent = Some(child);
        }
        Ok(())
    }

    /// `RadixTree::apply_removed`: per-hash outcomes plus hashes dropped with their edge.
    fn device_remove(&mut self, w: Worker, hashes: &[u64], bids: &[u32], lane: LaneKey) -> Blocks {
        let mut out = Blocks::with_capacity(hashes.len());
        // A set (the value is unused): the models' one map type instead of a set type.
        let mut eagerly: Map<u64, u32> = Map::default();
        let mut i = 0;
        while let (Some(&h), Some(&bid)) = (hashes.get(i), bids.get(i)) {
            i += 1;
            let Some(id) = self.lookup_remove(w, bid) else {
                if eagerly.contains_key(&h) {
                    push_block(
                        &mut out,
                        h,
                        VerdictKind::Removed,
                        Some("already_dropped_with_chain"),
                    );
                } else {
                    push_block(
                        &mut out,
                        h,
                        VerdictKind::RemoveUnknown,
                        Some("block_not_found"),
                    );
                }
                continue;
            };
            let first_pos = match self.nodes.get(id as usize) {
                Some(n) => n.edge_index.get(&h).map(|x| *x as usize),
                None => continue,
            };
            let Some(first_pos) = first_pos else {
                self.lookup_insert(w, bid, id, lane);
                push_block(
                    &mut out,
                    h,
                    VerdictKind::RemoveUnknown,
                    Some("block_not_found"),
                );
                continue;
            };
            push_block(&mut out, h, VerdictKind::Removed, None);
            let Some(node) = self.nodes.get(id as usize) else {
                continue;
            };
            let mut min_pos = first_pos;
            let mut min_hash = (h, bid);
            if node.covers(first_pos) {
                while let (Some(&cand), Some(&cand_bid)) = (hashes.get(i), bids.get(i)) {
                    let same = self.lookup_get(w, cand_bid) == Some(id);
                    let Some(cpos) = node.edge_index.get(&cand).map(|x| *x as usize) else {
                        break;
                    };
                    if !same || !node.covers(cpos) {
                        break;
                    }
                    if cpos < min_pos {
                        min_pos = cpos;
                        min_hash = (cand, cand_bid);
                    }
                    push_block(&mut out, cand, VerdictKind::Removed, None);
                    i += 1;
                }
            }
            // remove_worker_at_pos
            let mut stale: Vec<(u64, u32)> = Vec::new();
            if min_pos >= node.cutoff {
                stale.push(min_hash);
            } else {
                for b in node
                    .edge
                    .get(min_pos..node.cutoff.min(node.edge.len()))
                    .unwrap_or(&[])
                {
                    stale.push((b.1, b.2));
                }
            }
            if min_pos < node.cutoff {
                if let Some(n) = self.nodes.get_mut(id as usize) {
                    n.cutoff = min_pos;
                }
            }
            self.prune_unreachable(w, id);
            for (s, sid) in stale {
                let was = self.lookup_remove(w, sid).is_some();
                if was && !hashes.contains(&s) {
                    push_block(
                        &mut out,
                        s,
                        VerdictKind::Removed,
                        Some("dropped_with_chain"),
                    );
                }
                eagerly.insert(s, 0);
            }
        }
        out
    }

    /// `RadixTree::remove_worker_dp_rank` (`indexer/radix_tree.rs` l. 741–759; with
    /// `clear_all_ranks`, `remove_or_clear_worker_blocks` l. 706–735, the same loop per rank):
    /// the rank's lookup map is removed, and only the nodes its entries point to (deduplicated
    /// by pointer) lose the worker (`drop_worker`) and are pruned (`prune_unreachable`: children
    /// dropped, node unlinked from its parent). A node the worker still covers but no lookup
    /// entry points to (its hashes were re-stored with other content, so
    /// `update_lookup_for_blocks` moved them to another node) is never visited: it keeps the
    /// worker's coverage and stays linked under an unvisited parent, and a later store walking
    /// into it re-inserts its hashes into the lookup (`split_node` l. 564–576, or a full-edge
    /// match). MISMATCHES.md class F.
    fn device_clear(&mut self, w: Worker) {
        let has_lookup = |wid: u32| self.lookup_workers.get(wid as usize) == Some(&true);
        // Plain loops into vectors (no iterator-adapter `collect` instances).
        let mut workers: Vec<u32> = Vec::new();
        if self.clear_all_ranks {
            for (wid, k) in self.worker_list.iter().enumerate() {
                if has_lookup(wid as u32) && k.0 == w.0 {
                    workers.push(wid as u32);
                }
            }
        } else if let Some(wid) = self.workers.get(&worker_key(w)) {
            workers.push(*wid);
        }
        let mut had: Vec<u32> = Vec::new();
        for &wid in &workers {
            if has_lookup(wid) && self.worker_list.get(wid as usize).is_some() {
                had.push(wid);
            }
        }
        // The nodes the removed lookup entries point to, per worker (each worker's tree is
        // its own, so a node belongs to exactly one worker).
        // `(worker key, node)`: sorted through the crate's shared pair sort.
        let mut visited: Vec<(u64, NodeId)> = Vec::new();
        if !had.is_empty() {
            // `lookup.remove(wk)` for each: drop their entries from every block.
            let worker_list = &self.worker_list;
            let lanes = &mut self.lanes;
            for l in &mut self.lookup {
                l.remove_workers(&had, |wid, node, tier| {
                    let Some(&wk) = worker_list.get(wid as usize) else {
                        return;
                    };
                    lanes.bump(LaneKey { source: wk.0, tier }, LaneCounts::indexed_by(-1));
                    visited.push((worker_key(wk), node));
                });
            }
        }
        // `seen.insert(Rc::as_ptr(&node))`, then `drop_worker` + `prune_unreachable` per node.
        // Only removals (children cleared, a node unlinked from its parent), so the order does
        // not matter: a node stays linked iff no node on its path from the root was visited.
        crate::sort::sort_keyed(&mut visited);
        visited.dedup();
        for (key, id) in visited {
            let wk: Worker = ((key >> 32) as u32, key as u32);
            if let Some(n) = self.nodes.get_mut(id as usize) {
                n.cutoff = 0;
            }
            self.prune_unreachable(wk, id);
        }
        for wid in workers {
            if let Some(has) = self.lookup_workers.get_mut(wid as usize) {
                *has = self.clear_all_ranks && *has;
            }
        }
    }

    fn lower_store(
        &mut self,
        tier: StorageTier,
        w: Worker,
        parent_hash: Option<u64>,
        blocks: &[Blk],
        lane: LaneKey,
    ) -> usize {
        let mut parent = parent_hash;
        let mut stored = 0;
        for b in blocks {
            let key = (parent, b.0);
            let mine = |e: &LowerBlock| e.tier == tier && e.worker == w;
            if self
                .worker_blocks
                .get(b.2 as usize)
                .and_then(|l| l.iter().find(|e| mine(e)))
                .is_some_and(|e| e.key != key)
            {
                break;
            }
            let ekey = (tier, w, parent, b.0);
            match self.edges.get(&ekey) {
                Some(child) if child != b.1 => break,
                Some(_) => {}
                None => {
                    self.edges.insert(ekey, b.1);
                }
            }
            let entry = LowerBlock {
                tier,
                worker: w,
                key,
                lane_tier: lane.tier,
            };
            let list = slot(&mut self.worker_blocks, b.2);
            match list.iter_mut().find(|e| mine(e)) {
                Some(e) => *e = entry,
                None => {
                    list.push(entry);
                    self.lane_delta(lane, 1);
                }
            }
            parent = Some(b.1);
            stored += 1;
        }
        stored
    }

    fn remove_edge_owner(&mut self, tier: StorageTier, key: (Option<u64>, u64), w: Worker) {
        self.edges.remove(&(tier, w, key.0, key.1));
    }

    fn lower_remove(
        &mut self,
        tier: StorageTier,
        w: Worker,
        hashes: &[u64],
        bids: &[u32],
        lane: LaneKey,
    ) -> Blocks {
        let mut out = Blocks::with_capacity(hashes.len());
        for (&h, &bid) in hashes.iter().zip(bids) {
            let removed = self.worker_blocks.get_mut(bid as usize).and_then(|l| {
                let p = l.iter().position(|e| e.tier == tier && e.worker == w)?;
                Some(l.remove(p))
            });
            match removed {
                Some(e) => {
                    self.remove_edge_owner(tier, e.key, w);
                    self.lane_delta(
                        LaneKey {
                            source: lane.source,
                            tier: e.lane_tier,
                        },
                        -1,
                    );
                    push_block(&mut out, h, VerdictKind::Removed, None);
                }
                None => push_block(&mut out, h, VerdictKind::RemoveUnknown, Some("skipped")),
            }
        }
        out
    }

    fn lower_clear(&mut self, w: Worker) {
        let clear_all = self.clear_all_ranks;
        let gone = |wk: &Worker| if clear_all { wk.0 == w.0 } else { *wk == w };
        let mut removed: Vec<LowerBlock> = Vec::new();
        for l in &mut self.worker_blocks {
            l.retain(|e| {
                if gone(&e.worker) {
                    removed.push(*e);
                    false
                } else {
                    true
                }
            });
        }
        for e in removed {
            self.remove_edge_owner(e.tier, e.key, e.worker);
            self.lane_delta(
                LaneKey {
                    source: e.worker.0,
                    tier: e.lane_tier,
                },
                -1,
            );
        }
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
        if self.batch_undecodable(ctx.batch) {
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
        let lane = LaneKey {
            source: ctx.source,
            tier: ctx.tier,
        };
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
        let lane = LaneKey {
            source: ctx.source,
            tier: ctx.tier,
        };
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

impl Dynamo {
    /// [`Consumer::apply`] with the event's block ids given.
    pub(crate) fn apply_ids(
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
                if self.batch_undecodable(ctx.batch) {
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
}

/// A node's `edge_index` for `edge`: engine hash → position (a loop, not a `collect` into
/// the map: one copy of the map's insertion code).
fn edge_index(edge: &[Blk]) -> Map<u64, u32> {
    let mut m = Map::default();
    m.reserve(edge.len());
    for (i, b) in edge.iter().enumerate() {
        m.insert(b.1, i as u32);
    }
    m
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
        resolved: &mut Vec<Resolution>,
    ) -> EventVerdict {
        let mut ids = EventIds::default();
        ids.fill(&mut self.own, ev);
        self.apply_ids(ctx, ev, &ids, resolved)
    }

    fn reset(&mut self) {
        *self = Dynamo::with_block_sizes(self.block_sizes.clone(), self.clear_all_ranks);
    }

    fn lanes(&self) -> &Lanes {
        self.lanes.lanes()
    }
}
