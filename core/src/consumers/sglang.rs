//! SGLang's experimental sgl-router KV-event index (`sgl-project/sglang`
//! `experimental/sgl-router/src/policies/kv_events/tree.rs` `HashTree` at
//! `0baeaf2b`; `docs/consumers.md`).
//!
//! An arena tree keyed by engine block hash, global across workers, with a reverse index
//! `by_hash: hash → nodes`. `insert(worker, parent_hash, hashes, tier)` resolves the parent
//! through `by_hash`: a unique node is used; with several, the one the worker owns, else the
//! root; with none, the root ("parent_hash not in tree; attaching new chain to root"). Such a
//! chain is indexed but unreachable for routing (`misrooted`), and so is everything later
//! stored under it. A remove clears only its tier for that worker; empty childless nodes are
//! pruned upward. Media other than GPU/CPU/STORAGE-like ones drop the store.

use smallvec::SmallVec;

use super::{
    push_block, slot, Blocks, Consumer, EventCtx, EventIds, EventVerdict, Hashes, LaneBook,
    LaneCounts, LaneKey, Lanes, Map, Resolution, VerdictKind,
};
use crate::event::{BlockRemoved, BlockStored, KvEvent};

type Worker = (u32, u32);
/// Node ids count up from 1 (0 is the root, which has no node).
type NodeId = u32;
const ROOT: NodeId = 0;
/// A node's owners `(worker, tier)`, packed as `worker id << 32 | kvscope tier id` (see
/// [`owner`]; almost always one or two: inline, no allocation per node). The crate's `Hashes`
/// vector type: no `SmallVec` type of its own (wasm size).
type Owners = Hashes;

/// An owner entry: dense worker id `wid` (see `Sglang::worker_id`), kvscope tier id `tier`.
fn owner(wid: u32, tier: u32) -> u64 {
    (wid as u64) << 32 | tier as u64
}

/// The dense worker id of an owner entry.
fn owner_worker(o: u64) -> u32 {
    (o >> 32) as u32
}
/// The nodes of one hash (almost always one: inline).
type HashNodes = SmallVec<[NodeId; 4]>;
/// Up to this many nodes per hash, a node's child with a given hash is found by scanning the
/// hash's nodes; beyond, through the `children` map (so hostile traces stay linear).
const SCAN: usize = 4;

/// The `children` key of a parent node and a block id.
fn child_key(parent: NodeId, hid: u32) -> u64 {
    (parent as u64) << 32 | hid as u64
}

#[derive(Clone, Debug)]
struct SNode {
    /// Dense block id of its hash.
    hid: u32,
    parent: NodeId,
    /// `(worker, kvscope tier id)` owners, packed (the real node keeps a tier bitset per
    /// worker).
    owners: Owners,
    children: u32,
    /// Attached to the root although its chain had a parent (or under such a chain).
    unreachable: bool,
}

/// The SGLang model.
#[derive(Clone, Debug, Default)]
pub struct Sglang {
    /// By node id (`None`: pruned, or the root).
    nodes: Vec<Option<SNode>>,
    live: usize,
    /// `(parent node << 32 | block id) → node`, kept for hashes with more than [`SCAN`]
    /// nodes.
    children: Map<u64, NodeId>,
    /// By dense block id: the nodes with that hash (`by_hash`).
    by_hash: Vec<HashNodes>,
    /// `(source << 32 | dp_rank)` → dense worker id (for the packed owner entries).
    workers: Map<u64, u32>,
    pub(super) lanes: LaneBook,
}

fn known_medium(m: Option<&str>) -> bool {
    matches!(
        m,
        None | Some(
            "GPU"
                | "DEVICE"
                | "CPU"
                | "CPU_PINNED"
                | "STORAGE"
                | "DISK"
                | "CPU_TIER1"
                | "CPU_TIER2"
        )
    )
}

impl Sglang {
    /// Number of tree nodes (all workers).
    pub fn node_count(&self) -> usize {
        self.live
    }

    fn node(&self, id: NodeId) -> Option<&SNode> {
        self.nodes.get(id as usize).and_then(Option::as_ref)
    }

    fn node_mut(&mut self, id: NodeId) -> Option<&mut SNode> {
        self.nodes.get_mut(id as usize).and_then(Option::as_mut)
    }

    /// The child of `cur` with block id `hid`.
    fn child(&self, cur: NodeId, hid: u32) -> Option<NodeId> {
        let list = self.by_hash.get(hid as usize)?;
        if list.len() <= SCAN {
            list.iter()
                .copied()
                .find(|n| self.node(*n).is_some_and(|x| x.parent == cur))
        } else {
            self.children.get(&child_key(cur, hid)).copied()
        }
    }

    /// Register node `id` (block id `hid`, under `parent`) in `by_hash` and `children`.
    fn link(&mut self, parent: NodeId, hid: u32, id: NodeId) {
        let list = slot(&mut self.by_hash, hid);
        list.push(id);
        match list.len() {
            n if n == SCAN + 1 => {
                // By position (no copy of the list).
                for k in 0..n {
                    let Some(&node) = self.by_hash.get(hid as usize).and_then(|l| l.get(k)) else {
                        break;
                    };
                    if let Some(p) = self.node(node).map(|x| x.parent) {
                        self.children.insert(child_key(p, hid), node);
                    }
                }
            }
            n if n > SCAN => {
                self.children.insert(child_key(parent, hid), id);
            }
            _ => {}
        }
    }

    /// The dense id of worker `w` (assigned if new; ids only name owners).
    fn worker_id(&mut self, w: Worker) -> u32 {
        let next = self.workers.len() as u32;
        *self
            .workers
            .entry((w.0 as u64) << 32 | w.1 as u64)
            .or_insert(next)
    }

    fn resolve_parent(&self, wid: u32, parent: u32) -> Option<NodeId> {
        let nodes = self.by_hash.get(parent as usize)?;
        match nodes.len() {
            0 => None,
            1 => nodes.first().copied(),
            _ => nodes.iter().copied().find(|n| {
                self.node(*n)
                    .is_some_and(|x| x.owners.iter().any(|o| owner_worker(*o) == wid))
            }),
        }
    }

    fn stored(&mut self, ctx: &EventCtx<'_>, e: &BlockStored, ids: &EventIds) -> EventVerdict {
        let lane = ctx.lane();
        let wid = self.worker_id((ctx.source, ctx.dp_rank));
        let hashes: &[u64] = &ids.hashes;
        if !known_medium(e.medium.as_deref()) {
            self.lanes
                .bump(lane, LaneCounts::dropped_by(hashes.len() as i64));
            return EventVerdict::because(VerdictKind::Ignored, hashes, "unknown_medium");
        }
        let parent_hash = e.parent_block_hash.as_ref().map(|p| p.as_u64());
        let (start, misrooted, missing) = match (parent_hash, ids.parent) {
            (Some(p), Some(pid)) => match self.resolve_parent(wid, pid) {
                Some(n) => (n, self.node(n).is_some_and(|x| x.unreachable), None),
                None => (ROOT, true, Some(p)),
            },
            _ => (ROOT, false, None),
        };
        let mut cur = start;
        for i in 0..hashes.len() {
            let hid = ids.block(i);
            let id = match self.child(cur, hid) {
                Some(id) => id,
                None => {
                    let id = NodeId::try_from(self.nodes.len().max(1)).unwrap_or(NodeId::MAX);
                    if self.nodes.is_empty() {
                        self.nodes.push(None); // the root
                    }
                    self.nodes.push(Some(SNode {
                        hid,
                        parent: cur,
                        owners: Owners::new(),
                        children: 0,
                        unreachable: misrooted,
                    }));
                    self.live += 1;
                    self.link(cur, hid, id);
                    if let Some(pn) = self.node_mut(cur) {
                        pn.children += 1;
                    }
                    id
                }
            };
            if let Some(n) = self.node_mut(id) {
                if !n.owners.contains(&owner(wid, ctx.tier)) {
                    n.owners.push(owner(wid, ctx.tier));
                    let unreachable = n.unreachable;
                    self.lanes.bump(
                        lane,
                        LaneCounts {
                            indexed: 1,
                            unreachable: unreachable as i64,
                            ..LaneCounts::default()
                        },
                    );
                }
            }
            cur = id;
        }
        if misrooted {
            let mut v = EventVerdict::of(VerdictKind::Misrooted, hashes);
            v.missing_parent = missing;
            v.reason = Some(if missing.is_some() {
                "parent_hash not in tree; attaching new chain to root".into()
            } else {
                "under_misrooted_chain".into()
            });
            v
        } else {
            EventVerdict::of(VerdictKind::Applied, hashes)
        }
    }

    /// Drop worker `w`'s owner entries (only tier `tier`'s, when given) from a node; prune
    /// empty childless nodes upward. Not generic over a filter: one copy of this code.
    fn drop_owner(&mut self, id: NodeId, w: Worker, wid: u32, tier: Option<u32>) -> bool {
        let keep = |o: &u64| owner_worker(*o) != wid || tier.is_some_and(|t| *o as u32 != t);
        let Some(n) = self.node_mut(id) else {
            return false;
        };
        if n.owners.iter().all(&keep) {
            return false;
        }
        let unreachable = n.unreachable;
        let mut gone: Owners = Owners::new();
        n.owners.retain(|o| {
            if keep(o) {
                true
            } else {
                gone.push(*o);
                false
            }
        });
        for o in gone {
            self.lanes.bump(
                LaneKey {
                    source: w.0,
                    tier: o as u32,
                },
                LaneCounts {
                    indexed: -1,
                    unreachable: -(unreachable as i64),
                    ..LaneCounts::default()
                },
            );
        }
        let mut cur = id;
        while let Some(node) = self.node(cur) {
            if !node.owners.is_empty() || node.children > 0 || cur == ROOT {
                break;
            }
            let (parent, hid) = (node.parent, node.hid);
            if let Some(n) = self.nodes.get_mut(cur as usize) {
                *n = None;
                self.live -= 1;
            }
            if !self.children.is_empty() {
                self.children.remove(&child_key(parent, hid));
            }
            if let Some(list) = self.by_hash.get_mut(hid as usize) {
                list.retain(|x| *x != cur);
            }
            match self.node_mut(parent) {
                Some(p) => {
                    p.children = p.children.saturating_sub(1);
                    cur = parent;
                }
                None => break,
            }
        }
        true
    }

    fn removed(&mut self, ctx: &EventCtx<'_>, e: &BlockRemoved, ids: &EventIds) -> EventVerdict {
        let w: Worker = (ctx.source, ctx.dp_rank);
        let wid = self.worker_id(w);
        let tier = ctx.tier;
        let mut blocks = Blocks::with_capacity(e.block_hashes.len());
        for (i, &h) in ids.hashes.iter().enumerate() {
            let target = self.by_hash.get(ids.block(i) as usize).and_then(|v| {
                v.iter().copied().find(|n| {
                    self.node(*n)
                        .is_some_and(|x| x.owners.contains(&owner(wid, tier)))
                })
            });
            let verdict = match target {
                Some(id) if self.drop_owner(id, w, wid, Some(tier)) => VerdictKind::Removed,
                _ => VerdictKind::RemoveUnknown,
            };
            push_block(&mut blocks, h, verdict, None);
        }
        EventVerdict::removal(blocks)
    }

    fn cleared(&mut self, ctx: &EventCtx<'_>) -> EventVerdict {
        let w: Worker = (ctx.source, ctx.dp_rank);
        let wid = self.worker_id(w);
        let mut ids: Vec<NodeId> = Vec::new();
        for (id, n) in self.nodes.iter().enumerate() {
            if n.as_ref()
                .is_some_and(|n| n.owners.iter().any(|o| owner_worker(*o) == wid))
            {
                ids.push(id as NodeId);
            }
        }
        for id in ids {
            self.drop_owner(id, w, wid, None);
        }
        EventVerdict::of(VerdictKind::Cleared, &[])
    }
}

impl Consumer for Sglang {
    fn name(&self) -> &'static str {
        "sglang"
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
        *self = Sglang::default();
    }

    fn lanes(&self) -> &Lanes {
        self.lanes.lanes()
    }
}
