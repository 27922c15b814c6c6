//! The reference consumer: what a better router could do (reference §8.1 `PendingReplay`; no
//! production consumer does this per block).
//!
//! Parents resolve against every block currently held (any source, any tier). An orphan is held pending, keyed by its missing parent, and applied
//! (`replayed`) as soon as that parent arrives; applying it may release further pending
//! descendants. The buffer holds at most `pending_limit` events; an orphan arriving when it is
//! full is dropped (`dropped_orphan`, reason `pending_buffer_full`).

use std::sync::Arc;

use super::{
    hashes_of, BlockVerdict, Blocks, Consumer, EventCtx, EventVerdict, Hashes, LaneBook, LaneKey,
    Lanes, Map, Resolution, Set, VerdictKind,
};
use crate::event::KvEvent;

#[derive(Clone, Debug)]
struct PendingEvent {
    event: usize,
    lane: LaneKey,
    hashes: Arc<[u64]>,
}

/// The ideal model.
#[derive(Clone, Debug)]
pub struct Ideal {
    pending_limit: usize,
    known: Map<u64, u32>,
    present: Set<(u64, LaneKey)>,
    pending: Map<u64, Arc<[PendingEvent]>>,
    pending_events: usize,
    pub(super) lanes: LaneBook,
}

impl Ideal {
    /// A model holding at most `pending_limit` orphan events.
    pub fn new(pending_limit: usize) -> Self {
        Ideal {
            pending_limit,
            known: Map::default(),
            present: Set::default(),
            pending: Map::default(),
            pending_events: 0,
            lanes: LaneBook::default(),
        }
    }

    /// Number of events currently held pending.
    pub fn pending_events(&self) -> usize {
        self.pending_events
    }

    fn hold(&mut self, h: u64, lane: LaneKey) {
        if self.present.insert((h, lane)) {
            self.lanes.bump(lane, |c| c.indexed += 1);
            let n = self.known.get(&h).copied().unwrap_or(0);
            self.known.insert(h, n + 1);
        }
    }

    fn release(&mut self, h: u64, lane: LaneKey) -> bool {
        if !self.present.remove(&(h, lane)) {
            return false;
        }
        self.lanes.bump(lane, |c| c.indexed -= 1);
        match self.known.get(&h).copied() {
            Some(n) if n > 1 => {
                self.known.insert(h, n - 1);
            }
            _ => {
                self.known.remove(&h);
            }
        }
        true
    }

    fn apply_blocks(&mut self, lane: LaneKey, hashes: &[u64], resolved: &mut Vec<Resolution>) {
        let mut work: Vec<u64> = Vec::new();
        for &h in hashes {
            self.hold(h, lane);
            work.push(h);
        }
        while let Some(h) = work.pop() {
            let Some(waiting) = self.pending.remove(&h) else {
                continue;
            };
            for p in waiting.iter() {
                self.pending_events = self.pending_events.saturating_sub(1);
                self.lanes
                    .bump(p.lane, |c| c.pending -= p.hashes.len() as i64);
                for &x in p.hashes.iter() {
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
        resolved: &mut Vec<Resolution>,
    ) -> EventVerdict {
        let lane = LaneKey {
            source: ctx.source,
            tier: ctx.tier,
        };
        match ev {
            KvEvent::BlockStored(e) => {
                let hashes: Hashes = hashes_of(&e.block_hashes);
                let parent = e.parent_block_hash.as_ref().map(|p| p.as_u64());
                match parent {
                    Some(p) if !self.known.contains_key(&p) => {
                        if self.pending_events >= self.pending_limit {
                            self.lanes.bump(lane, |c| c.dropped += hashes.len() as i64);
                            return EventVerdict::uniform(VerdictKind::DroppedOrphan, hashes)
                                .with_missing_parent(p)
                                .with_reason("pending_buffer_full");
                        }
                        let mut v = self.pending.get(&p).map(|x| x.to_vec()).unwrap_or_default();
                        v.push(PendingEvent {
                            event: ctx.index,
                            lane,
                            hashes: Arc::from(&hashes[..]),
                        });
                        self.pending.insert(p, v.into());
                        self.pending_events += 1;
                        self.lanes.bump(lane, |c| c.pending += hashes.len() as i64);
                        EventVerdict::uniform(VerdictKind::Pending, hashes).with_missing_parent(p)
                    }
                    _ => {
                        self.apply_blocks(lane, &hashes, resolved);
                        EventVerdict::uniform(VerdictKind::Applied, hashes)
                    }
                }
            }
            KvEvent::BlockRemoved(e) => {
                let mut blocks = Blocks::with_capacity(e.block_hashes.len());
                for h in e.block_hashes.iter().map(|h| h.as_u64()) {
                    let verdict = if self.release(h, lane) {
                        VerdictKind::Removed
                    } else {
                        VerdictKind::RemoveUnknown
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
            KvEvent::AllBlocksCleared => {
                let gone: Vec<(u64, LaneKey)> = self
                    .present
                    .iter()
                    .filter(|(_, l)| l.source == ctx.source)
                    .copied()
                    .collect();
                for (h, l) in gone {
                    self.release(h, l);
                }
                EventVerdict::uniform(VerdictKind::Cleared, [])
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
