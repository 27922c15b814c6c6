//! llm-d's ZMQ subscriber sequence handling (`pkg/kvevents/zmq_subscriber.go` at
//! `ebab6879`), as far as a trace shows it: publisher restarts and repeated `seq`s.

use super::Llmd;
use crate::consumers::{EventCtx, Interner};

/// A publisher restart llm-d did not notice (replay off, llm-d-router #2853): the blocks
/// credited to the source when its `seq` went back.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Restart {
    /// Global index of the first event of the new incarnation.
    pub event: usize,
    /// Interned source id.
    pub source: u32,
    /// The publisher's DP rank.
    pub dp_rank: u32,
    /// `seq` before and after.
    pub seq: (u64, u64),
    /// Block ids credited to the source at the restart and not re-announced by it since.
    stale: Vec<u32>,
}

impl Llmd {
    /// The ZMQ subscriber's replay setting (`replaySocketPort > 0`, off by default). Off,
    /// `seq` is never inspected, so a publisher restart (its `seq` going back) is not
    /// noticed: the restarted engine's blocks stay credited ([`Llmd::stale_after_restart`]).
    /// On, the restart queues a pod reset (`Pool.resetForSource` → `clearPod`) before the new
    /// incarnation's first batch. The refill of a gap is not modelled: a capture does not
    /// have the batches it lost.
    pub fn with_replay(mut self, on: bool) -> Self {
        self.replay = on;
        self
    }

    /// Per unnoticed restart, the blocks (hashes, by the interner `ids` the model was driven
    /// with) still credited to the source that its new incarnation never re-announced.
    pub fn stale_after_restart(&self, ids: &Interner) -> Vec<(Restart, Vec<u64>)> {
        self.restarts
            .iter()
            .map(|r| {
                let hashes = r
                    .stale
                    .iter()
                    .filter(|id| {
                        self.blocks
                            .get(**id as usize)
                            .is_some_and(|s| s.held.has_source(r.source))
                    })
                    .filter_map(|id| ids.hash(*id))
                    .collect();
                (r.clone(), hashes)
            })
            .collect()
    }

    /// Watch the publisher's `seq` at each new batch: a restart is recorded (replay off) or
    /// clears the pod (replay on). With replay on, a batch repeating the last live `seq` is
    /// skipped (`zmq_subscriber.go`: `seq == lastLiveSeq`); true while in such a batch.
    pub(super) fn watch_seq(&mut self, ctx: &EventCtx<'_>) -> bool {
        let key = (ctx.source as u64) << 32 | ctx.dp_rank as u64;
        let batch = ctx.batch_start;
        let prev = self.last_seq.get(&key).copied();
        if let Some((_, _, skipped)) = prev.filter(|p| p.1 == batch) {
            return skipped;
        }
        let skip = self.replay && prev.is_some_and(|p| p.0 == ctx.seq);
        self.last_seq.insert(key, (ctx.seq, batch, skip));
        let Some(last) = prev.map(|p| p.0).filter(|l| ctx.seq < *l) else {
            return skip;
        };
        if self.replay {
            self.cleared(ctx);
            return false;
        }
        let mut stale = Vec::new();
        for (id, s) in self.blocks.iter().enumerate() {
            if s.held.has_source(ctx.source) {
                stale.push(id as u32);
            }
        }
        self.restarts.push(Restart {
            event: ctx.index,
            source: ctx.source,
            dp_rank: ctx.dp_rank,
            seq: (last, ctx.seq),
            stale,
        });
        false
    }

    /// A store by `source` re-announces blocks `ids` to its restarts.
    pub(super) fn reannounced(&mut self, source: u32, ids: &[u32]) {
        for r in self.restarts.iter_mut().filter(|r| r.source == source) {
            r.stale.retain(|id| !ids.contains(id));
        }
    }
}
