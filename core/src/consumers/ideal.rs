//! The reference consumer: what a better router could do (`docs/consumers.md` "`ideal`"; no
//! production consumer holds orphans per block).
//!
//! Parents resolve against every block currently held (any source, any tier). An orphan is held pending, keyed by its missing parent, and applied
//! (`replayed`) as soon as that parent arrives; applying it may release further pending
//! descendants. The buffer holds at most `pending_limit` events; an orphan arriving when it is
//! full is dropped (`dropped_orphan`, reason `pending_buffer_full`).

use smallvec::SmallVec;

use super::{
    push_block, slot, Blocks, Consumer, EventCtx, EventIds, EventVerdict, Hashes, LaneBook,
    LaneCounts, LaneKey, LaneList, Lanes, Resolution, SlabMap, VerdictKind,
};
use crate::event::KvEvent;

#[derive(Clone, Debug)]
struct PendingEvent {
    event: usize,
    lane: LaneKey,
    hashes: Hashes,
    ids: SmallVec<[u32; 4]>,
}

/// The ideal model.
#[derive(Clone, Debug)]
pub struct Ideal {
    pending_limit: usize,
    /// Per dense block id: the lanes holding it (a block is known while any lane holds it;
    /// two inline: a block usually sits in a GPU and a CPU lane).
    present: Vec<LaneList>,
    /// Orphans by the id of their missing parent, in arrival order.
    pending: SlabMap<Vec<PendingEvent>>,
    pending_events: usize,
    pub(super) lanes: LaneBook,
}

impl Ideal {
    /// A model holding at most `pending_limit` orphan events.
    pub fn new(pending_limit: usize) -> Self {
        Ideal {
            pending_limit,
            present: Vec::new(),
            pending: SlabMap::default(),
            pending_events: 0,
            lanes: LaneBook::default(),
        }
    }

    /// Number of events currently held pending.
    pub fn pending_events(&self) -> usize {
        self.pending_events
    }

    /// Room for `blocks` block ids (see [`AnyConsumer::reserve`](super::AnyConsumer::reserve)).
    pub(super) fn reserve(&mut self, blocks: usize) {
        self.present.reserve_exact(blocks);
    }

    /// Whether the model refers to block `id` (a streaming analysis gives back the ids of
    /// blocks no model refers to).
    pub(crate) fn uses(&self, id: u32) -> bool {
        // Pending orphans name their blocks' ids and their parent's.
        self.pending_events > 0 || !self.pending.is_empty() || self.known(id)
    }

    fn known(&self, id: u32) -> bool {
        self.present.get(id as usize).is_some_and(|l| !l.is_empty())
    }

    fn hold(&mut self, id: u32, lane: LaneKey) {
        if slot(&mut self.present, id).add(lane) {
            self.lanes.bump(lane, LaneCounts::indexed_by(1));
        }
    }

    fn release(&mut self, id: u32, lane: LaneKey) -> bool {
        let removed = self
            .present
            .get_mut(id as usize)
            .is_some_and(|l| l.remove(lane));
        if removed {
            self.lanes.bump(lane, LaneCounts::indexed_by(-1));
        }
        removed
    }

    fn apply_blocks(&mut self, lane: LaneKey, ids: &[u32], resolved: &mut Vec<Resolution>) {
        // The same SmallVec type as `PendingEvent::ids` (one instance of its code).
        let mut work: SmallVec<[u32; 4]> = SmallVec::new();
        for &id in ids {
            self.hold(id, lane);
            work.push(id);
        }
        while let Some(id) = work.pop() {
            if self.pending.is_empty() {
                break;
            }
            let Some(waiting) = self.pending.remove(id as u64) else {
                continue;
            };
            for p in waiting {
                self.pending_events = self.pending_events.saturating_sub(1);
                self.lanes
                    .bump(p.lane, LaneCounts::pending_by(-(p.hashes.len() as i64)));
                for &x in p.ids.iter() {
                    self.hold(x, p.lane);
                    work.push(x);
                }
                resolved.push(Resolution {
                    event: p.event,
                    verdict: VerdictKind::Replayed,
                    hashes: p.hashes.to_vec(),
                });
            }
        }
    }
}

impl Consumer for Ideal {
    fn name(&self) -> &'static str {
        "ideal"
    }

    fn apply(
        &mut self,
        ctx: &EventCtx<'_>,
        ev: &KvEvent,
        ids: &EventIds,
        resolved: &mut Vec<Resolution>,
    ) -> EventVerdict {
        let lane = ctx.lane();
        match ev {
            KvEvent::BlockStored(e) => {
                let hashes: &[u64] = &ids.hashes;
                let parent = e.parent_block_hash.as_ref().map(|p| p.as_u64());
                match (parent, ids.parent) {
                    (Some(p), Some(pid)) if !self.known(pid) => {
                        if self.pending_events >= self.pending_limit {
                            self.lanes
                                .bump(lane, LaneCounts::dropped_by(hashes.len() as i64));
                            let mut v = EventVerdict::because(
                                VerdictKind::DroppedOrphan,
                                hashes,
                                "pending_buffer_full",
                            );
                            v.missing_parent = Some(p);
                            return v;
                        }
                        self.pending.entry(pid as u64).push(PendingEvent {
                            event: ctx.index,
                            lane,
                            hashes: ids.hashes.clone(),
                            ids: ids.blocks.clone(),
                        });
                        self.pending_events += 1;
                        self.lanes
                            .bump(lane, LaneCounts::pending_by(hashes.len() as i64));
                        let mut v = EventVerdict::of(VerdictKind::Pending, hashes);
                        v.missing_parent = Some(p);
                        v
                    }
                    _ => {
                        self.apply_blocks(lane, &ids.blocks, resolved);
                        EventVerdict::of(VerdictKind::Applied, hashes)
                    }
                }
            }
            KvEvent::BlockRemoved(e) => {
                let mut blocks = Blocks::with_capacity(e.block_hashes.len());
                for (i, &h) in ids.hashes.iter().enumerate() {
                    let verdict = if self.release(ids.block(i), lane) {
                        VerdictKind::Removed
                    } else {
                        VerdictKind::RemoveUnknown
                    };
                    push_block(&mut blocks, h, verdict, None);
                }
                EventVerdict::removal(blocks)
            }
            KvEvent::AllBlocksCleared => {
                for lanes in &mut self.present {
                    lanes.drop_source(ctx.source, Some(&mut self.lanes));
                }
                EventVerdict::of(VerdictKind::Cleared, &[])
            }
        }
    }

    fn reset(&mut self) {
        *self = Ideal::new(self.pending_limit);
    }

    fn lanes(&self) -> &Lanes {
        self.lanes.lanes()
    }
}
