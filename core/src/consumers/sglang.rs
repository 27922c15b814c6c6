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
    push_block, slot, Blocks, Cell, Consumer, EventCtx, EventIds, EventVerdict, LaneBook,
    LaneCounts, LaneKey, Lanes, Map, Resolution, Spill, VerdictKind,
};
use crate::event::{BlockRemoved, BlockStored, KvEvent};

type Worker = (u32, u32);
/// Node ids count up from 1 (0 is the root, which has no node).
type NodeId = u32;
const ROOT: NodeId = 0;
/// An owner entry: dense worker id `wid` (see `Sglang::worker_id`), kvscope tier id `tier`.
fn owner(wid: u32, tier: u32) -> u64 {
    (wid as u64) << 32 | tier as u64
}

/// The dense worker id of an owner entry.
fn owner_worker(o: u64) -> u32 {
    (o >> 32) as u32
}

/// The owners of node `n`, from `many` when it has several.
fn owners_of<'a>(n: &'a SNode, many: &'a Spill) -> &'a [u64] {
    many.values(&n.owner)
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
    /// The `(worker, kvscope tier id)` owners, packed (the real node keeps a tier bitset per
    /// worker): a [`Spill`] cell of `Sglang::owners` (a node of one owner is 24 bytes instead
    /// of 40 with an inline list; worker ids count workers, far below `u32::MAX - 1`).
    owner: Cell,
    children: u32,
    /// Attached to the root although its chain had a parent (or under such a chain).
    unreachable: bool,
}

/// `by_hash`, in 4 bytes per block id: the only node of a hash inline, the nodes of a hash
/// with several (rare: the same hash stored under different parents) in a list aside. A row
/// per block id, parents that were never stored included: a 24-byte inline list per id cost 48
/// bytes an event on the orphans trace of `scripts/bench-memory.sh`.
#[derive(Clone, Debug, Default)]
struct ByHash {
    /// By block id: [`ROOT`] (no node; the root is never listed), the node, or [`MANY`] with
    /// the slot of its list in `many`.
    one: Vec<NodeId>,
    many: Vec<HashNodes>,
    free: Vec<u32>,
}

/// [`ByHash::one`]'s flag: the low bits are a slot of [`ByHash::many`] (node ids count nodes,
/// far below it).
const MANY: NodeId = 1 << 31;

impl ByHash {
    /// The nodes of block id `hid`, in the order they were added.
    fn get(&self, hid: u32) -> &[NodeId] {
        match self.one.get(hid as usize) {
            None | Some(&ROOT) => &[],
            Some(&n) if n & MANY != 0 => self
                .many
                .get((n & !MANY) as usize)
                .map_or(&[], |l| l.as_slice()),
            Some(n) => std::slice::from_ref(n),
        }
    }

    /// Add node `id` to block id `hid`'s list; the list's new length.
    fn push(&mut self, hid: u32, id: NodeId) -> usize {
        let one = slot(&mut self.one, hid);
        if *one == ROOT {
            *one = id;
            return 1;
        }
        if *one & MANY != 0 {
            let Some(list) = self.many.get_mut((*one & !MANY) as usize) else {
                return 0;
            };
            list.push(id);
            return list.len();
        }
        let mut list = HashNodes::new();
        list.push(*one);
        list.push(id);
        let k = match self.free.pop() {
            Some(k) => {
                if let Some(l) = self.many.get_mut(k as usize) {
                    *l = list;
                }
                k
            }
            None => {
                self.many.push(list);
                (self.many.len() - 1) as u32
            }
        };
        *one = MANY | k;
        2
    }

    /// Take node `id` out of block id `hid`'s list.
    fn remove(&mut self, hid: u32, id: NodeId) {
        let Some(one) = self.one.get_mut(hid as usize) else {
            return;
        };
        if *one & MANY == 0 {
            if *one == id {
                *one = ROOT;
            }
            return;
        }
        let k = *one & !MANY;
        if let Some(list) = self.many.get_mut(k as usize) {
            list.retain(|x| *x != id);
            // Back inline once at most one node is left.
            if list.len() <= 1 {
                *one = list.first().copied().unwrap_or(ROOT);
                *list = HashNodes::new();
                self.free.push(k);
            }
        }
    }
}

/// The SGLang model.
#[derive(Clone, Debug, Default)]
pub struct Sglang {
    /// By node id (`None`: pruned, or the root).
    nodes: Vec<Option<SNode>>,
    live: usize,
    /// Pruned node ids, taken again by new nodes (with LRU churn the tree's live size is
    /// bounded, so the node vector is too).
    free: Vec<NodeId>,
    /// `(parent node << 32 | block id) → node`, kept for hashes with more than [`SCAN`]
    /// nodes.
    children: Map<u64, NodeId>,
    /// By dense block id: the nodes with that hash.
    by_hash: ByHash,
    /// The owners of the nodes with several (see [`SNode::owner`]).
    owners: Spill,
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
    /// Room for `blocks` block ids and as many nodes (see
    /// [`AnyConsumer::reserve`](super::AnyConsumer::reserve)).
    pub(super) fn reserve(&mut self, blocks: usize) {
        self.by_hash.one.reserve_exact(blocks);
        self.nodes.reserve_exact(blocks + 1); // and the root
    }

    /// Whether the model refers to block `id` (a streaming analysis gives back the ids of
    /// blocks no model refers to).
    pub(crate) fn uses(&self, id: u32) -> bool {
        !self.by_hash.get(id).is_empty()
    }

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
        let list = self.by_hash.get(hid);
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
        match self.by_hash.push(hid, id) {
            n if n == SCAN + 1 => {
                // By position (no copy of the list).
                for k in 0..n {
                    let Some(&node) = self.by_hash.get(hid).get(k) else {
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

    /// Add owner `o` to node `id`: whether the node is unreachable, if `o` is new.
    fn add_owner(&mut self, id: NodeId, o: u64) -> Option<bool> {
        let n = self.nodes.get_mut(id as usize)?.as_mut()?;
        self.owners.insert(&mut n.owner, o).then_some(n.unreachable)
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
        let nodes = self.by_hash.get(parent);
        match nodes.len() {
            0 => None,
            1 => nodes.first().copied(),
            _ => nodes.iter().copied().find(|n| {
                self.node(*n).is_some_and(|x| {
                    owners_of(x, &self.owners)
                        .iter()
                        .any(|o| owner_worker(*o) == wid)
                })
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
                    if self.nodes.is_empty() {
                        self.nodes.push(None); // the root
                    }
                    let node = Some(SNode {
                        hid,
                        parent: cur,
                        owner: Cell::default(),
                        children: 0,
                        unreachable: misrooted,
                    });
                    let id = match self.free.pop() {
                        Some(id) => {
                            if let Some(n) = self.nodes.get_mut(id as usize) {
                                *n = node;
                            }
                            id
                        }
                        None => {
                            let id = NodeId::try_from(self.nodes.len()).unwrap_or(NodeId::MAX);
                            self.nodes.push(node);
                            id
                        }
                    };
                    self.live += 1;
                    self.link(cur, hid, id);
                    if let Some(pn) = self.node_mut(cur) {
                        pn.children += 1;
                    }
                    id
                }
            };
            if let Some(unreachable) = self.add_owner(id, owner(wid, ctx.tier)) {
                self.lanes.bump(
                    lane,
                    LaneCounts {
                        indexed: 1,
                        unreachable: unreachable as i64,
                        ..LaneCounts::default()
                    },
                );
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
        let Some(n) = self.nodes.get_mut(id as usize).and_then(Option::as_mut) else {
            return false;
        };
        let unreachable = n.unreachable;
        let gone = self.owners.remove(&mut n.owner, wid, tier);
        if gone.is_empty() {
            return false;
        }
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
            if !node.owner.is_empty() || node.children > 0 || cur == ROOT {
                break;
            }
            let (parent, hid) = (node.parent, node.hid);
            if let Some(n) = self.nodes.get_mut(cur as usize) {
                *n = None;
                self.live -= 1;
                self.free.push(cur);
            }
            if !self.children.is_empty() {
                self.children.remove(&child_key(parent, hid));
            }
            self.by_hash.remove(hid, cur);
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
            let target = self.by_hash.get(ids.block(i)).iter().copied().find(|n| {
                self.node(*n)
                    .is_some_and(|x| owners_of(x, &self.owners).contains(&owner(wid, tier)))
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
            if n.as_ref().is_some_and(|n| {
                owners_of(n, &self.owners)
                    .iter()
                    .any(|o| owner_worker(*o) == wid)
            }) {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_node_keeps_one_owner_inline_and_several_aside() {
        assert_eq!(std::mem::size_of::<Option<SNode>>(), 24);
        let mut m = Sglang {
            nodes: vec![
                None,
                Some(SNode {
                    hid: 0,
                    parent: ROOT,
                    owner: Cell::default(),
                    children: 0,
                    unreachable: true,
                }),
            ],
            ..Sglang::default()
        };
        let owners = |m: &Sglang| {
            let n = m.node(1).expect("node 1");
            owners_of(n, &m.owners).to_vec()
        };
        assert_eq!(m.add_owner(1, owner(0, 1)), Some(true));
        assert_eq!(m.add_owner(1, owner(0, 1)), None);
        assert_eq!((owners(&m), m.owners.len()), (vec![owner(0, 1)], 0));
        assert_eq!(m.add_owner(1, owner(2, 0)), Some(true));
        assert_eq!(m.add_owner(1, owner(3, 0)), Some(true));
        assert_eq!(m.add_owner(1, owner(2, 0)), None);
        assert_eq!(owners(&m), vec![owner(0, 1), owner(2, 0), owner(3, 0)]);
        // Worker 2 dropped, then worker 0: one owner left, inline again.
        assert!(m.drop_owner(1, (9, 9), 2, None));
        assert!(!m.drop_owner(1, (9, 9), 2, None));
        assert!(m.drop_owner(1, (9, 9), 0, Some(1)));
        assert_eq!((owners(&m), m.owners.len()), (vec![owner(3, 0)], 0));
    }

    #[test]
    fn by_hash_keeps_one_node_inline_and_several_in_order() {
        let mut b = ByHash::default();
        assert!(b.get(3).is_empty());
        assert_eq!(b.push(3, 7), 1);
        assert_eq!((b.get(3), b.one.len(), b.free.len()), (&[7][..], 4, 0));
        assert_eq!(b.push(3, 8), 2);
        assert_eq!(b.push(3, 9), 3);
        assert_eq!(b.get(3), &[7, 8, 9]);
        b.remove(3, 8);
        assert_eq!(b.get(3), &[7, 9]);
        b.remove(3, 7);
        assert_eq!((b.get(3), b.free.len()), (&[9][..], 1));
        b.remove(3, 5);
        b.remove(3, 9);
        assert!(b.get(3).is_empty() && b.get(100).is_empty());
    }
}
