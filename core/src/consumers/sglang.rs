//! SGLang's experimental sgl-router KV-event index (`sgl-project/sglang`
//! `experimental/sgl-router/src/policies/kv_events/tree.rs` `HashTree`; reference
//! `kv-event-consumers.md` §6.1).
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
    hashes_of, BlockVerdict, Blocks, Consumer, EventCtx, EventVerdict, Hashes, LaneBook, LaneKey,
    Lanes, Map, Resolution, VerdictKind,
};
use crate::event::{BlockRemoved, BlockStored, KvEvent};

type Worker = (u32, u32);
type NodeId = u64;
const ROOT: NodeId = 0;
/// A node's owners (almost always one or two: inline, no allocation per node).
type Owners = SmallVec<[(Worker, u32); 2]>;
/// The nodes of one hash (almost always one: inline).
type HashNodes = SmallVec<[NodeId; 1]>;

#[derive(Clone, Debug)]
struct SNode {
    hash: u64,
    parent: NodeId,
    /// `(worker, kvscope tier id)` owners (the real node keeps a tier bitset per worker).
    owners: Owners,
    children: u32,
    /// Attached to the root although its chain had a parent (or under such a chain).
    unreachable: bool,
}

/// The SGLang model.
#[derive(Clone, Debug, Default)]
pub struct Sglang {
    next: NodeId,
    nodes: Map<NodeId, SNode>,
    children: Map<(NodeId, u64), NodeId>,
    by_hash: Map<u64, HashNodes>,
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
        self.nodes.len()
    }

    fn resolve_parent(&self, w: Worker, parent: u64) -> Option<NodeId> {
        let nodes = self.by_hash.get(&parent)?;
        match nodes.len() {
            0 => None,
            1 => nodes.first().copied(),
            _ => nodes.iter().copied().find(|n| {
                self.nodes
                    .get(n)
                    .is_some_and(|x| x.owners.iter().any(|o| o.0 == w))
            }),
        }
    }

    fn stored(&mut self, ctx: &EventCtx<'_>, e: &BlockStored) -> EventVerdict {
        let lane = LaneKey {
            source: ctx.source,
            tier: ctx.tier,
        };
        let w: Worker = (ctx.source, ctx.dp_rank);
        let hashes: Hashes = hashes_of(&e.block_hashes);
        if !known_medium(e.medium.as_deref()) {
            self.lanes.bump(lane, |c| c.dropped += hashes.len() as i64);
            return EventVerdict::uniform(VerdictKind::Ignored, hashes)
                .with_reason("unknown_medium");
        }
        let parent_hash = e.parent_block_hash.as_ref().map(|p| p.as_u64());
        let (start, misrooted, missing) = match parent_hash {
            None => (ROOT, false, None),
            Some(p) => match self.resolve_parent(w, p) {
                Some(n) => (n, self.nodes.get(&n).is_some_and(|x| x.unreachable), None),
                None => (ROOT, true, Some(p)),
            },
        };
        let mut cur = start;
        for &h in &hashes {
            let id = match self.children.get(&(cur, h)).copied() {
                Some(id) => id,
                None => {
                    self.next += 1;
                    let id = self.next;
                    self.nodes.insert(
                        id,
                        SNode {
                            hash: h,
                            parent: cur,
                            owners: Owners::new(),
                            children: 0,
                            unreachable: misrooted,
                        },
                    );
                    self.children.insert((cur, h), id);
                    if let Some(pn) = self.nodes.get_mut(&cur) {
                        pn.children += 1;
                    }
                    self.by_hash.entry(h).or_default().push(id);
                    id
                }
            };
            if let Some(n) = self.nodes.get_mut(&id) {
                if !n.owners.contains(&(w, ctx.tier)) {
                    n.owners.push((w, ctx.tier));
                    let unreachable = n.unreachable;
                    self.lanes.bump(lane, |c| {
                        c.indexed += 1;
                        if unreachable {
                            c.unreachable += 1;
                        }
                    });
                }
            }
            cur = id;
        }
        if misrooted {
            let mut v = EventVerdict::uniform(VerdictKind::Misrooted, hashes);
            v.missing_parent = missing;
            v.reason = Some(if missing.is_some() {
                "parent_hash not in tree; attaching new chain to root".into()
            } else {
                "under_misrooted_chain".into()
            });
            v
        } else {
            EventVerdict::uniform(VerdictKind::Applied, hashes)
        }
    }

    /// Drop `(w, tier)` from a node; prune empty childless nodes upward.
    fn drop_owner(&mut self, id: NodeId, keep: impl Fn(&(Worker, u32)) -> bool) -> bool {
        let Some(n) = self.nodes.get(&id).cloned() else {
            return false;
        };
        let left: Owners = n.owners.iter().copied().filter(|o| keep(o)).collect();
        if left.len() == n.owners.len() {
            return false;
        }
        for o in n.owners.iter().filter(|o| !keep(o)) {
            let unreachable = n.unreachable;
            self.lanes.bump(
                LaneKey {
                    source: o.0 .0,
                    tier: o.1,
                },
                |c| {
                    c.indexed -= 1;
                    if unreachable {
                        c.unreachable -= 1;
                    }
                },
            );
        }
        let mut cur = id;
        let mut owners = left;
        while let Some(mut node) = self.nodes.get(&cur).cloned() {
            node.owners = owners.clone();
            if !node.owners.is_empty() || node.children > 0 || cur == ROOT {
                self.nodes.insert(cur, node);
                break;
            }
            self.nodes.remove(&cur);
            self.children.remove(&(node.parent, node.hash));
            if let Some(v) = self.by_hash.get(&node.hash).cloned() {
                let rest: HashNodes = v.iter().copied().filter(|x| *x != cur).collect();
                if rest.is_empty() {
                    self.by_hash.remove(&node.hash);
                } else {
                    self.by_hash.insert(node.hash, rest);
                }
            }
            match self.nodes.get_mut(&node.parent) {
                Some(p) => {
                    p.children = p.children.saturating_sub(1);
                    owners = p.owners.clone();
                    cur = node.parent;
                }
                None => break,
            }
        }
        true
    }

    fn removed(&mut self, ctx: &EventCtx<'_>, e: &BlockRemoved) -> EventVerdict {
        let w: Worker = (ctx.source, ctx.dp_rank);
        let tier = ctx.tier;
        let mut blocks = Blocks::with_capacity(e.block_hashes.len());
        for h in e.block_hashes.iter().map(|h| h.as_u64()) {
            let target = self.by_hash.get(&h).and_then(|v| {
                v.iter().copied().find(|n| {
                    self.nodes
                        .get(n)
                        .is_some_and(|x| x.owners.contains(&(w, tier)))
                })
            });
            let verdict = match target {
                Some(id) if self.drop_owner(id, |o| *o != (w, tier)) => VerdictKind::Removed,
                _ => VerdictKind::RemoveUnknown,
            };
            blocks.push(BlockVerdict {
                hash: h,
                verdict,
                reason: None,
            });
        }
        let verdict = if blocks.iter().any(|b| b.verdict == VerdictKind::Removed) {
            VerdictKind::Removed
        } else if blocks.is_empty() {
            VerdictKind::Ignored
        } else {
            VerdictKind::RemoveUnknown
        };
        EventVerdict {
            verdict,
            missing_parent: None,
            reason: None,
            status: None,
            blocks,
        }
    }

    fn cleared(&mut self, ctx: &EventCtx<'_>) -> EventVerdict {
        let w: Worker = (ctx.source, ctx.dp_rank);
        let ids: Vec<NodeId> = self
            .nodes
            .iter()
            .filter(|(_, n)| n.owners.iter().any(|o| o.0 == w))
            .map(|(id, _)| *id)
            .collect();
        for id in ids {
            self.drop_owner(id, |o| o.0 != w);
        }
        EventVerdict::uniform(VerdictKind::Cleared, [])
    }
}

impl Consumer for Sglang {
    fn name(&self) -> &'static str {
        "sglang"
    }

    fn apply(&mut self, ctx: &EventCtx<'_>, ev: &KvEvent, _: &mut Vec<Resolution>) -> EventVerdict {
        match ev {
            KvEvent::BlockStored(e) => self.stored(ctx, e),
            KvEvent::BlockRemoved(e) => self.removed(ctx, e),
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
