//! Models of the routers that consume vLLM KV events, each shaped like the real code and named
//! after it (see `docs/consumers.md`, which names the upstream revision each follows):
//!
//! * [`llmd::Llmd`]: llm-d's indexer (`pkg/kvevents/pool.go`, 2026-01 →): global
//!   engine-hash → request-key map, unknown parent drops the whole `BlockStored`.
//! * [`dynamo::Dynamo`]: Dynamo 1.6 (`dynamo-kv-router` 1.6.1): device `RadixTree` per
//!   `(worker, dp_rank)` plus the order-insensitive `LowerTierIndexer` for CPU/STORAGE/DISK.
//! * [`smg::Smg`]: SMG's `PositionalIndexer` behind its gRPC bridge: tier-blind, an unknown
//!   parent re-roots the chain (misrooted).
//! * [`sglang::Sglang`]: SGLang's sgl-router `HashTree` (`experimental/sgl-router/.../tree.rs`):
//!   global `by_hash`, unknown parent attaches the chain to the root (misrooted).
//! * [`ideal::Ideal`]: the reference consumer that holds orphans until their parent arrives.
//!
//! Every model consumes events in delivery order through the [`Consumer`] trait and returns an
//! [`EventVerdict`] per event, with per-block outcomes where the real consumer works per
//! block. Per-block state lives in vectors indexed by dense block ids (an interner: one
//! `rustc-hash` Fx map from hash to id, shared with the analysis), other state in Fx hash maps
//! with packed `u64` keys where possible: `Map<u64, u32>` itself or `SlabMap` (values in a
//! vector behind one), so that few distinct map types keep the wasm small; the replay engine
//! records what it needs as it goes instead of copying states.

pub mod dynamo;
pub mod ideal;
mod kind;
mod lanes;
pub mod llmd;
mod maps;
#[cfg(test)]
mod props;
pub mod sglang;
pub mod smg;
mod verdict;

pub use kind::{BlockSizes, ConsumerConfig, ConsumerKind};
pub(crate) use lanes::{LaneBook, LaneList};
pub use lanes::{LaneCounts, LaneKey, Lanes};
pub(crate) use maps::{slot, str_hash, HashChain, Hashes, Map, SlabMap};
pub use maps::{EventIds, Interner};
pub(crate) use verdict::push_block;
pub use verdict::{BlockVerdict, Blocks, EventVerdict, Resolution, VerdictKind};

use crate::event::KvEvent;
use crate::trace::Provenance;

/// Where an event was delivered from, as the consumers see it.
#[derive(Clone, Copy, Debug)]
pub struct EventCtx<'a> {
    /// Global 0-based index of the event over all batches' events, in delivery order.
    pub index: usize,
    /// Interned source id (index into the analysis' source table).
    pub source: u32,
    /// The batch's DP rank (0 when absent).
    pub dp_rank: u32,
    /// The batch's sequence number (per source and DP rank; going back means the publisher
    /// restarted).
    pub seq: u64,
    /// Interned tier id (index into the analysis' tier table; see [`crate::event::Tier`]).
    pub tier: u32,
    /// Provenance of the event, when the trace has it.
    pub provenance: Option<&'a Provenance>,
    /// Every event of the batch that delivered this one (in batch order): a consumer that
    /// decodes whole batches (Dynamo's `decode_event_batch`) loses all of them together.
    pub batch: &'a [KvEvent],
    /// Global index of the first event of `batch`: identifies the delivering batch (two
    /// batches with events never share it, whereas a streaming reader may decode a batch into
    /// the memory of an earlier, freed one).
    pub batch_start: usize,
}

impl EventCtx<'_> {
    /// The event's lane: its source and tier.
    pub fn lane(&self) -> LaneKey {
        LaneKey {
            source: self.source,
            tier: self.tier,
        }
    }
}

/// A model's verdict on a whole delivered batch (whether it decodes), kept for the last batch
/// it was computed for: the model sees that batch's events one by one.
#[derive(Clone, Debug, Default)]
pub(crate) struct BatchCheck<T> {
    /// `(batch start, length, verdict)` of the last batch checked (see
    /// [`EventCtx::batch_start`]).
    last: Option<(usize, usize, T)>,
}

impl<T: Copy> BatchCheck<T> {
    /// The verdict on the batch of `ctx`, computed by `check` unless it is the last one's.
    pub(crate) fn of(&mut self, ctx: &EventCtx<'_>, check: impl FnOnce(&[KvEvent]) -> T) -> T {
        let key = (ctx.batch_start, ctx.batch.len());
        if let Some((start, len, v)) = self.last {
            if (start, len) == key {
                return v;
            }
        }
        let v = check(ctx.batch);
        self.last = Some((key.0, key.1, v));
        v
    }
}

/// The common interface of the consumer models: the one path through which the analysis, the
/// replay engine and [`Standalone`] drive a model.
pub trait Consumer {
    /// The model's name (`llmd`, `dynamo`, `smg`, `sglang`, `ideal`).
    fn name(&self) -> &'static str;
    /// Apply one delivered event whose blocks (and parent) have the dense ids `ids`, filled
    /// from the caller's [`Interner`] ([`EventIds::fill`]). Later outcomes for earlier events
    /// (e.g. replayed orphans) are pushed to `resolved`.
    fn apply(
        &mut self,
        ctx: &EventCtx<'_>,
        ev: &KvEvent,
        ids: &EventIds,
        resolved: &mut Vec<Resolution>,
    ) -> EventVerdict;
    /// Forget everything (router restart).
    fn reset(&mut self);
    /// Per-lane counters of the current state.
    fn lanes(&self) -> &Lanes;
}

/// A model driven on its own, with its own block ids (tests and differential checks; the
/// analysis shares one [`Interner`] between all models instead).
#[derive(Clone, Debug)]
pub struct Standalone<C> {
    model: C,
    interner: Interner,
    ids: EventIds,
}

impl<C: Consumer> Standalone<C> {
    /// Drive `model`.
    pub fn new(model: C) -> Self {
        Standalone {
            model,
            interner: Interner::default(),
            ids: EventIds::default(),
        }
    }

    /// Apply one delivered event ([`Consumer::apply`] with this driver's block ids).
    pub fn apply(
        &mut self,
        ctx: &EventCtx<'_>,
        ev: &KvEvent,
        resolved: &mut Vec<Resolution>,
    ) -> EventVerdict {
        self.ids.fill(&mut self.interner, ev);
        self.model.apply(ctx, ev, &self.ids, resolved)
    }

    /// The model.
    pub fn model(&self) -> &C {
        &self.model
    }

    /// The block ids assigned so far (what the model's id-based queries take).
    pub fn interner(&self) -> &Interner {
        &self.interner
    }
}

/// One model, any kind (what the analysis and the replay engine hold).
#[derive(Clone, Debug)]
pub enum AnyConsumer {
    /// llm-d.
    Llmd(llmd::Llmd),
    /// Dynamo.
    Dynamo(dynamo::Dynamo),
    /// SGLang.
    Sglang(sglang::Sglang),
    /// SMG.
    Smg(smg::Smg),
    /// Ideal.
    Ideal(ideal::Ideal),
}

impl AnyConsumer {
    /// Build a model of `kind` with `config`, without a trace (`auto` block sizes fall back
    /// to [`BlockSizes::FALLBACK`]).
    pub fn new(kind: ConsumerKind, config: &ConsumerConfig) -> Self {
        Self::for_engines(kind, config, &[])
    }

    /// Build a model of `kind` with `config` for a trace whose sources (by interned id) use
    /// engine block sizes `engine` (`EventIndex::engine_block_sizes`); `auto` settings resolve
    /// against them.
    pub fn for_engines(
        kind: ConsumerKind,
        config: &ConsumerConfig,
        engine: &[Option<u32>],
    ) -> Self {
        match kind {
            ConsumerKind::Llmd => AnyConsumer::Llmd(
                llmd::Llmd::with_block_sizes(BlockSizes::resolve(
                    config.llmd_canonical_block_size,
                    engine,
                ))
                .with_replay(config.llmd_replay),
            ),
            ConsumerKind::Dynamo => AnyConsumer::Dynamo(dynamo::Dynamo::with_block_sizes(
                BlockSizes::resolve(config.dynamo_kv_block_size, engine),
                config.dynamo_clear_all_ranks,
            )),
            ConsumerKind::Sglang => AnyConsumer::Sglang(sglang::Sglang::default()),
            ConsumerKind::Smg => AnyConsumer::Smg(smg::Smg::default()),
            ConsumerKind::Ideal => {
                AnyConsumer::Ideal(ideal::Ideal::new(config.ideal_pending_limit))
            }
        }
    }

    /// Its kind.
    pub fn kind(&self) -> ConsumerKind {
        match self {
            AnyConsumer::Llmd(_) => ConsumerKind::Llmd,
            AnyConsumer::Dynamo(_) => ConsumerKind::Dynamo,
            AnyConsumer::Sglang(_) => ConsumerKind::Sglang,
            AnyConsumer::Smg(_) => ConsumerKind::Smg,
            AnyConsumer::Ideal(_) => ConsumerKind::Ideal,
        }
    }

    fn inner(&self) -> &dyn Consumer {
        match self {
            AnyConsumer::Llmd(c) => c,
            AnyConsumer::Dynamo(c) => c,
            AnyConsumer::Sglang(c) => c,
            AnyConsumer::Smg(c) => c,
            AnyConsumer::Ideal(c) => c,
        }
    }

    fn book(&mut self) -> &mut LaneBook {
        match self {
            AnyConsumer::Llmd(c) => &mut c.lanes,
            AnyConsumer::Dynamo(c) => &mut c.lanes,
            AnyConsumer::Sglang(c) => &mut c.lanes,
            AnyConsumer::Smg(c) => &mut c.lanes,
            AnyConsumer::Ideal(c) => &mut c.lanes,
        }
    }

    /// Log lane changes per event (for [`AnyConsumer::take_lane_changes`]) or not.
    pub(crate) fn set_lane_log(&mut self, on: bool) {
        if self.book().logging != on {
            self.book().set_logging(on);
        }
    }

    /// Append the lanes the last event changed (sorted, with their new counters) to `out`;
    /// nothing unless logging is on.
    pub(crate) fn take_lane_changes(&mut self, out: &mut Vec<(LaneKey, LaneCounts)>) {
        self.book().take_changes(out);
    }

    fn inner_mut(&mut self) -> &mut dyn Consumer {
        match self {
            AnyConsumer::Llmd(c) => c,
            AnyConsumer::Dynamo(c) => c,
            AnyConsumer::Sglang(c) => c,
            AnyConsumer::Smg(c) => c,
            AnyConsumer::Ideal(c) => c,
        }
    }
}

impl Consumer for AnyConsumer {
    fn name(&self) -> &'static str {
        self.inner().name()
    }
    fn apply(
        &mut self,
        ctx: &EventCtx<'_>,
        ev: &KvEvent,
        ids: &EventIds,
        resolved: &mut Vec<Resolution>,
    ) -> EventVerdict {
        self.inner_mut().apply(ctx, ev, ids, resolved)
    }
    fn reset(&mut self) {
        self.inner_mut().reset()
    }
    fn lanes(&self) -> &Lanes {
        self.inner().lanes()
    }
}

/// A stand-in content hash of a block's tokens (and salt), used where a consumer recomputes
/// its own hash from `token_ids` (llm-d request keys, Dynamo `LocalBlockHash`). Only equality
/// matters: these hash spaces never need to match the real ones.
pub(crate) fn content_hash(parent: u64, tokens: &[u32], salt: Option<&str>) -> u64 {
    use std::hash::Hasher;
    let mut h =
        siphasher::sip::SipHasher13::new_with_keys(0x6b76_7363_6f70_6501, 0x0102_0304_0506_0708);
    h.write_u64(parent);
    h.write_usize(tokens.len());
    // The tokens' little-endian bytes, written 64 tokens at a time: the same byte stream (so
    // the same hash) as one `write_u32` per token, at about a third of the instructions.
    let mut buf = [0u8; 256];
    for chunk in tokens.chunks(64) {
        for (b, t) in buf.chunks_exact_mut(4).zip(chunk) {
            b.copy_from_slice(&t.to_le_bytes());
        }
        h.write(&buf[..chunk.len() * 4]);
    }
    if let Some(s) = salt {
        h.write(s.as_bytes());
    }
    h.finish()
}

#[cfg(any(test, feature = "testkit"))]
pub mod testkit;

#[cfg(test)]
mod content_hash_tests {
    use std::hash::Hasher;

    /// The hash as first written: one `write_u32` per token.
    fn per_token(parent: u64, tokens: &[u32], salt: Option<&str>) -> u64 {
        let mut h = siphasher::sip::SipHasher13::new_with_keys(
            0x6b76_7363_6f70_6501,
            0x0102_0304_0506_0708,
        );
        h.write_u64(parent);
        h.write_usize(tokens.len());
        for t in tokens {
            h.write_u32(*t);
        }
        if let Some(s) = salt {
            h.write(s.as_bytes());
        }
        h.finish()
    }

    #[test]
    fn bulk_write_hashes_the_same_bytes_as_one_write_per_token() {
        for n in [0usize, 1, 3, 16, 63, 64, 65, 200] {
            let tokens: Vec<u32> = (0..n as u32)
                .map(|i| i.wrapping_mul(0x9e37_79b9) ^ 0xdead_beef)
                .collect();
            for salt in [None, Some("lora-a")] {
                assert_eq!(
                    super::content_hash(7, &tokens, salt),
                    per_token(7, &tokens, salt),
                    "{n} tokens, salt {salt:?}"
                );
            }
        }
        assert_ne!(
            super::content_hash(0, &[1], None),
            super::content_hash(0, &[2], None)
        );
    }
}
