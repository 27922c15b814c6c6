//! SMG's KV-event index at `smg-project/smg` `f8daa883` (`docs/consumers.md`): the
//! `KvEventMonitor` (`model_gateway/src/worker/kv_event_monitor.rs`) feeding a
//! `PositionalIndexer` (`crates/kv_index/src/event_tree.rs`), with vLLM's events arriving
//! through the gRPC bridge (`grpc_servicer/smg_grpc_servicer/kv_events.py` `convert_event`).
//!
//! * The bridge keeps only block hashes (bytes read big-endian, reduced to 64 bits), the
//!   parent hash, `token_ids` sliced per block by `block_size`, and `lora_id`: `medium`,
//!   `group_idx`, `lora_name`, `extra_keys` and the rest are dropped, so CPU and STORAGE
//!   events are indexed like GPU ones, in one map per worker (tier-blind).
//! * `apply_stored`: with a parent, an empty worker map is `WorkerNotTracked` and an unknown
//!   parent `ParentBlockNotFound`; on either the monitor retries with parent `None`, so the
//!   chain is **re-rooted** at position 0 (`misrooted`: indexed, but no request walking from
//!   the true prefix reaches it), and everything later stored under it is misrooted too.
//!   Re-storing a hash overwrites its entry.
//! * `apply_removed`: per hash, unknown hashes skipped, no cascade; a removal in any tier
//!   removes the worker's one entry. `apply_cleared` drains the worker.
//! * The monitor's worker is the stream's worker URL: kvscope's source; `dp_rank` is not read.
//!
//! Not modelled: the bridge's and the monitor's sequence handling (a gap reconnects for
//! replay), `prune`'s TTL and capacity eviction, and query-side scoring.

use smallvec::SmallVec;

use super::{
    push_block, slot, Blocks, Consumer, EventCtx, EventIds, EventVerdict, LaneBook, LaneCounts,
    LaneKey, Lanes, Resolution, VerdictKind,
};
use crate::event::KvEvent;

/// One worker's entry for one block (`WorkerBlockMap[seq_hash]`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Entry {
    /// Interned source id of the worker.
    worker: u32,
    /// Position in the worker's chain (`parent_pos + 1`, 0 at a root).
    position: u32,
    /// Stored by the re-root fallback, or under such a block.
    misrooted: bool,
    /// The kvscope lane of the store that wrote the entry (for the lane counters).
    lane_tier: u32,
}

/// The SMG model.
#[derive(Clone, Debug, Default)]
pub struct Smg {
    /// Per dense block id: the workers' entries (almost always one: inline).
    blocks: Vec<SmallVec<[Entry; 1]>>,
    /// Per source id: number of entries in its worker map.
    sizes: Vec<usize>,
    pub(super) lanes: LaneBook,
}

impl Smg {
    /// Room for `blocks` block ids (see [`AnyConsumer::reserve`](super::AnyConsumer::reserve)).
    pub(super) fn reserve(&mut self, blocks: usize) {
        self.blocks.reserve_exact(blocks);
    }

    /// Whether the model refers to block `id` (a streaming analysis gives back the ids of
    /// blocks no model refers to).
    pub(crate) fn uses(&self, id: u32) -> bool {
        self.blocks.get(id as usize).is_some_and(|l| !l.is_empty())
    }

    /// The worker's entry for block `id`.
    fn entry(&self, worker: u32, id: u32) -> Option<Entry> {
        self.blocks
            .get(id as usize)
            .and_then(|l| l.iter().find(|e| e.worker == worker).copied())
    }

    /// `worker_blocks.insert`: write the worker's entry for block `id`.
    fn insert(&mut self, id: u32, e: Entry) {
        let list = slot(&mut self.blocks, id);
        let old = match list.iter_mut().find(|x| x.worker == e.worker) {
            Some(x) => Some(std::mem::replace(x, e)),
            None => {
                list.push(e);
                None
            }
        };
        if let Some(old) = old {
            self.count(old, -1);
        } else {
            *slot(&mut self.sizes, e.worker) += 1;
        }
        self.count(e, 1);
    }

    /// `worker_blocks.remove`.
    fn remove(&mut self, worker: u32, id: u32) -> bool {
        let Some(list) = self.blocks.get_mut(id as usize) else {
            return false;
        };
        let Some(p) = list.iter().position(|x| x.worker == worker) else {
            return false;
        };
        let e = list.remove(p);
        if let Some(n) = self.sizes.get_mut(worker as usize) {
            *n = n.saturating_sub(1);
        }
        self.count(e, -1);
        true
    }

    fn count(&mut self, e: Entry, d: i64) {
        self.lanes.bump(
            LaneKey {
                source: e.worker,
                tier: e.lane_tier,
            },
            LaneCounts {
                indexed: d,
                unreachable: if e.misrooted { d } else { 0 },
                ..LaneCounts::default()
            },
        );
    }

    fn stored(&mut self, ctx: &EventCtx<'_>, parent: Option<u64>, ids: &EventIds) -> EventVerdict {
        let worker = ctx.source;
        let hashes: &[u64] = &ids.hashes;
        if hashes.is_empty() {
            return EventVerdict::of(VerdictKind::Applied, hashes);
        }
        // `PositionalIndexer::apply_stored`, then the monitor's fallback.
        let tracked = self.sizes.get(worker as usize).is_some_and(|n| *n > 0);
        let resolved = match parent {
            None => Ok(None),
            Some(_) if !tracked => Err("worker_not_tracked"),
            Some(_) => ids
                .parent
                .and_then(|pid| self.entry(worker, pid))
                .map(Some)
                .ok_or("parent_block_not_found"),
        };
        let (start, misrooted, fallback) = match resolved {
            Ok(None) => (0, false, None),
            Ok(Some(p)) => (p.position + 1, p.misrooted, None),
            Err(status) => (0, true, Some(status)),
        };
        for i in 0..hashes.len() {
            let e = Entry {
                worker,
                position: start + i as u32,
                misrooted,
                lane_tier: ctx.tier,
            };
            self.insert(ids.block(i), e);
        }
        match fallback {
            Some(status) => {
                let mut v = EventVerdict::because(
                    VerdictKind::Misrooted,
                    hashes,
                    "parent not found; re-rooted (retried with parent None)",
                );
                v.missing_parent = parent;
                v.status = Some(status.into());
                v
            }
            None if misrooted => {
                EventVerdict::because(VerdictKind::Misrooted, hashes, "under_misrooted_chain")
            }
            None => EventVerdict::of(VerdictKind::Applied, hashes),
        }
    }
}

impl Consumer for Smg {
    fn name(&self) -> &'static str {
        "smg"
    }

    fn apply(
        &mut self,
        ctx: &EventCtx<'_>,
        ev: &KvEvent,
        ids: &EventIds,
        _: &mut Vec<Resolution>,
    ) -> EventVerdict {
        match ev {
            KvEvent::BlockStored(e) => {
                let parent = e.parent_block_hash.as_ref().map(|p| p.as_u64());
                self.stored(ctx, parent, ids)
            }
            KvEvent::BlockRemoved(_) => {
                let mut blocks = Blocks::with_capacity(ids.hashes.len());
                for (i, &h) in ids.hashes.iter().enumerate() {
                    let verdict = if self.remove(ctx.source, ids.block(i)) {
                        VerdictKind::Removed
                    } else {
                        VerdictKind::RemoveUnknown
                    };
                    push_block(&mut blocks, h, verdict, None);
                }
                EventVerdict::removal(blocks)
            }
            KvEvent::AllBlocksCleared => {
                let worker = ctx.source;
                let mut gone = Vec::new();
                for list in &mut self.blocks {
                    list.retain(|e| {
                        let mine = e.worker == worker;
                        if mine {
                            gone.push(*e);
                        }
                        !mine
                    });
                }
                for e in gone {
                    self.count(e, -1);
                }
                if let Some(n) = self.sizes.get_mut(worker as usize) {
                    *n = 0;
                }
                EventVerdict::of(VerdictKind::Cleared, &[])
            }
        }
    }

    fn reset(&mut self) {
        *self = Smg::default();
    }

    fn lanes(&self) -> &Lanes {
        self.lanes.lanes()
    }
}

#[cfg(test)]
mod tests {
    //! Where SMG's code and Dynamo's disagree: one table per case, the verdicts of both per
    //! event (Dynamo's `kv_block_size` 4).

    use super::*;
    use crate::consumers::dynamo::Dynamo;
    use crate::consumers::testkit::{h, removed, stored};
    use crate::consumers::Standalone;
    use crate::hash::BlockHash;
    use smallvec::smallvec;
    use VerdictKind::*;

    const GPU: Option<&str> = Some("GPU");
    const CPU: Option<&str> = Some("CPU");

    /// `(source, dp_rank, events)` batches; per event `(smg, dynamo)` verdicts.
    fn check(
        name: &str,
        batches: &[(u32, u32, Vec<KvEvent>)],
        want: &[(VerdictKind, VerdictKind)],
    ) {
        let mut smg = Standalone::new(Smg::default());
        let mut dynamo = Standalone::new(Dynamo::new(4, false));
        let mut resolved = Vec::new();
        let mut got = Vec::new();
        for (source, dp_rank, events) in batches {
            let batch_start = got.len();
            for ev in events {
                let tier = match ev {
                    KvEvent::BlockStored(s) => s.medium.as_deref(),
                    KvEvent::BlockRemoved(r) => r.medium.as_deref(),
                    KvEvent::AllBlocksCleared => None,
                };
                let ctx = EventCtx {
                    index: got.len(),
                    source: *source,
                    dp_rank: *dp_rank,
                    seq: got.len() as u64,
                    tier: u32::from(tier.is_some_and(|t| t != "GPU")),
                    provenance: None,
                    batch: events,
                    batch_start,
                };
                let s = smg.apply(&ctx, ev, &mut resolved);
                let d = dynamo.apply(&ctx, ev, &mut resolved);
                got.push((s.verdict, d.verdict));
            }
        }
        assert_eq!(got, want, "{name}: (smg, dynamo) per event");
    }

    #[test]
    fn an_orphan_is_re_rooted_not_dropped() {
        check(
            "orphan first",
            &[
                (0, 0, vec![stored(&[2], Some(1), GPU, 4)]),
                (0, 0, vec![stored(&[3], Some(2), GPU, 4)]),
            ],
            &[(Misrooted, DroppedOrphan), (Misrooted, DroppedOrphan)],
        );
        let mut smg = Standalone::new(Smg::default());
        let a = [stored(&[2], Some(1), GPU, 4)];
        let v = smg.apply(&ctx(0, &a), &a[0], &mut Vec::new());
        assert_eq!(
            (v.status.as_deref(), v.missing_parent),
            (Some("worker_not_tracked"), Some(h(1)))
        );
        let b = [stored(&[5], Some(4), GPU, 4)];
        let v = smg.apply(&ctx(1, &b), &b[0], &mut Vec::new());
        assert_eq!(v.status.as_deref(), Some("parent_block_not_found"));
        let lanes = smg.model().lanes();
        let gpu = lanes
            .get(&LaneKey { source: 0, tier: 0 })
            .copied()
            .unwrap_or_default();
        assert_eq!((gpu.indexed, gpu.unreachable), (2, 2));
    }

    /// Source 0, rank 0, GPU lane.
    fn ctx(index: usize, batch: &[KvEvent]) -> EventCtx<'_> {
        EventCtx {
            index,
            source: 0,
            dp_rank: 0,
            seq: index as u64,
            tier: 0,
            provenance: None,
            batch,
            batch_start: index,
        }
    }

    #[test]
    fn tiers_are_one_map() {
        // A CPU removal removes the worker's only entry, so a later GPU child is re-rooted;
        // Dynamo keeps the device block.
        check(
            "tier-blind",
            &[
                (0, 0, vec![stored(&[1], None, GPU, 4)]),
                (0, 0, vec![stored(&[1], None, CPU, 4)]),
                (0, 0, vec![removed(&[1], CPU)]),
                (0, 0, vec![removed(&[1], CPU)]),
                (0, 0, vec![stored(&[2], Some(1), GPU, 4)]),
            ],
            &[
                (Applied, Applied),
                (Applied, Applied),
                (Removed, Removed),
                (RemoveUnknown, RemoveUnknown),
                (Misrooted, Applied),
            ],
        );
        // Media Dynamo does not know are indexed as GPU.
        check(
            "unknown medium",
            &[(0, 0, vec![stored(&[1], None, Some("FS"), 4)])],
            &[(Applied, Ignored)],
        );
    }

    #[test]
    fn what_the_bridge_decodes_dynamo_rejects() {
        let bytes = |ev: KvEvent| {
            let mut ev = ev;
            if let KvEvent::BlockStored(s) = &mut ev {
                s.block_hashes = smallvec![BlockHash::Bytes(vec![7; 32].into())];
            }
            ev
        };
        check(
            "bytes hash, other block size",
            &[
                (0, 0, vec![bytes(stored(&[1], None, GPU, 4))]),
                (0, 0, vec![stored(&[2], None, GPU, 8)]),
            ],
            &[(Applied, Ignored), (Applied, Truncated)],
        );
        // SMG's worker is the stream, not the rank: a parent on rank 0 serves rank 1.
        check(
            "ranks",
            &[
                (0, 0, vec![stored(&[1], None, GPU, 4)]),
                (0, 1, vec![stored(&[2], Some(1), GPU, 4)]),
            ],
            &[(Applied, Applied), (Applied, DroppedOrphan)],
        );
    }
}
