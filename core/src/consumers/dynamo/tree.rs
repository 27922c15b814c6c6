//! The device tier: Dynamo's compressed `RadixTree` (`src/indexer/radix_tree.rs` with
//! `src/indexer/compressed_radix.rs` `NodeState`), one tree and lookup per `(worker, dp_rank)`.

use super::{worker_key, Blk, Dynamo, NodeId, Worker};
use crate::consumers::{push_block, slot, Blocks, LaneCounts, LaneKey, Map, VerdictKind};
use crate::room::{make_room, room_wanted};

/// One compressed edge of a worker's device tree (`RadixBlock` + `NodeState`).
#[derive(Clone, Debug, Default)]
pub(super) struct Node {
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

impl Dynamo {
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

    pub(super) fn lookup_insert(
        &mut self,
        w: Worker,
        bid: u32,
        node: NodeId,
        lane: LaneKey,
    ) -> bool {
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

    pub(super) fn lookup_get(&self, w: Worker, bid: u32) -> Option<NodeId> {
        let wid = *self.workers.get(&worker_key(w))?;
        self.lookup
            .get(bid as usize)
            .and_then(|l| l.get(wid))
            .map(|e| e.0)
    }

    pub(super) fn lookup_remove(&mut self, w: Worker, bid: u32) -> Option<NodeId> {
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

    pub(super) fn new_node(&mut self, blocks: &[Blk], parent: Option<NodeId>) -> NodeId {
        self.mark_in_tree(blocks);
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

    pub(super) fn update_lookup(&mut self, w: Worker, blocks: &[Blk], node: NodeId, lane: LaneKey) {
        for b in blocks {
            self.lookup_insert(w, b.2, node, lane);
        }
    }

    /// `split_node`: the node keeps `edge[..pos]`, a new suffix node takes the rest.
    pub(super) fn split(&mut self, w: Worker, id: NodeId, pos: usize, lane: LaneKey) {
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
    pub(super) fn prune_unreachable(&mut self, w: Worker, id: NodeId) {
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

    pub(super) fn child_of(&self, w: Worker, parent: Option<NodeId>, local: u64) -> Option<NodeId> {
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

    pub(super) fn attach_child(
        &mut self,
        w: Worker,
        parent: Option<NodeId>,
        local: u64,
        child: NodeId,
    ) {
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

    pub(super) fn append_to_leaf(&mut self, id: NodeId, blocks: &[Blk]) {
        self.mark_in_tree(blocks);
        let (seen, expected) = self.blocks;
        if let Some(n) = self.nodes.get_mut(id as usize) {
            // A leaf that keeps growing (a pod's one long chain) gets room from its rate.
            make_room(&mut n.edge, blocks.len(), seen, expected);
            let (len, cap) = (n.edge_index.len(), n.edge_index.capacity());
            if let Some(k) = room_wanted(len, blocks.len(), cap, seen, expected) {
                n.edge_index.reserve(k);
            }
            let old = n.edge.len();
            for (i, b) in blocks.iter().enumerate() {
                n.edge.push(*b);
                n.edge_index.insert(b.1, (old + i) as u32);
            }
            n.cutoff = n.edge.len();
        }
    }

    pub(super) fn cover_prefix(&mut self, id: NodeId, cutoff: usize) {
        if let Some(n) = self.nodes.get_mut(id as usize) {
            if cutoff > n.cutoff {
                n.cutoff = cutoff.min(n.edge.len());
            }
        }
    }

    /// `RadixTree::apply_stored`. `Err(status)` = ParentBlockNotFound.
    pub(super) fn device_store(
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
    pub(super) fn device_remove(
        &mut self,
        w: Worker,
        hashes: &[u64],
        bids: &[u32],
        lane: LaneKey,
    ) -> Blocks {
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
    pub(super) fn device_clear(&mut self, w: Worker) {
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
}

/// A node's `edge_index` for `edge`: engine hash → position (a loop, not a `collect` into
/// the map: one copy of the map's insertion code).
pub(super) fn edge_index(edge: &[Blk]) -> Map<u64, u32> {
    let mut m = Map::default();
    m.reserve(edge.len());
    for (i, b) in edge.iter().enumerate() {
        m.insert(b.1, i as u32);
    }
    m
}
