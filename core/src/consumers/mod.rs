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
mod id_table;
pub mod ideal;
mod kind;
mod lanes;
pub mod llmd;
mod maps;
#[cfg(test)]
mod props;
pub mod sglang;
pub mod smg;
mod spill;
mod verdict;

pub use kind::{BlockSizes, ConsumerConfig, ConsumerKind};
pub(crate) use lanes::{LaneBook, LaneList};
pub use lanes::{LaneCounts, LaneKey, Lanes};
pub(crate) use maps::{slot, str_hash, HashChain, Hashes, Map, SlabMap};
pub use maps::{EventIds, Interner};
pub(crate) use spill::{Cell, Spill};
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

    /// Room for `blocks` block ids in the tables with a row per id (see
    /// [`Interner::reserve`]).
    pub(crate) fn reserve(&mut self, blocks: usize) {
        match self {
            AnyConsumer::Llmd(c) => c.reserve(blocks),
            AnyConsumer::Dynamo(c) => c.reserve(blocks),
            AnyConsumer::Sglang(c) => c.reserve(blocks),
            AnyConsumer::Smg(c) => c.reserve(blocks),
            AnyConsumer::Ideal(c) => c.reserve(blocks),
        }
    }

    /// Whether the model refers to block `id` (see [`Interner::release`]).
    pub(crate) fn uses(&self, id: u32) -> bool {
        match self {
            AnyConsumer::Llmd(c) => c.uses(id),
            AnyConsumer::Dynamo(c) => c.uses(id),
            AnyConsumer::Sglang(c) => c.uses(id),
            AnyConsumer::Smg(c) => c.uses(id),
            AnyConsumer::Ideal(c) => c.uses(id),
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
/// matters: these hash spaces never need to match the real ones, and no output shows them.
///
/// Fx-style words (two tokens per 64-bit word, one rotate, xor and multiply each, every step a
/// bijection of the state for a fixed word and of the word for a fixed state), then one
/// folded multiply to spread the bits for the hash maps these keys go into. It was SipHash-1-3:
/// about 375 instructions per 16-token block, twice per stored block (llm-d and Dynamo), a
/// tenth of the analysis' instructions on the anchor stream (`docs/performance.md`).
pub(crate) fn content_hash(parent: u64, tokens: &[u32], salt: Option<&str>) -> u64 {
    /// rustc-hash 2's multiplier (as in [`str_hash`]).
    const K: u64 = 0xf135_7aea_2e62_a9c5;
    let step = |h: u64, w: u64| (h.rotate_left(26) ^ w).wrapping_mul(K);
    let mut h = step(step(0x6b76_7363_6f70_6501, parent), tokens.len() as u64);
    let mut pairs = tokens.chunks_exact(2);
    for p in &mut pairs {
        h = step(h, u64::from(p[0]) | u64::from(p[1]) << 32);
    }
    if let [t] = pairs.remainder() {
        h = step(h, u64::from(*t));
    }
    // No salt and an empty one hash the same (as before: SipHash wrote no bytes for either).
    if let Some(s) = salt.filter(|s| !s.is_empty()) {
        h = step(h, s.len() as u64 | 1 << 63);
        h = step(h, str_hash(s));
    }
    let m = u128::from(h) * u128::from(K ^ 0x0102_0304_0506_0708);
    (m as u64) ^ (m >> 64) as u64
}

#[cfg(any(test, feature = "testkit"))]
pub mod testkit;

#[cfg(test)]
mod content_hash_tests {
    use super::content_hash;

    #[test]
    fn equal_inputs_hash_equal_and_any_difference_changes_the_hash() {
        let tokens: Vec<u32> = (0..200u32)
            .map(|i| i.wrapping_mul(0x9e37_79b9) ^ 0xdead_beef)
            .collect();
        let mut seen = std::collections::HashMap::new();
        for n in [0usize, 1, 2, 3, 16, 17, 63, 64, 65, 200] {
            for parent in [0u64, 7, u64::MAX] {
                for salt in [None, Some("lora-a"), Some("lora-b"), Some("lora-a\0")] {
                    let h = content_hash(parent, &tokens[..n], salt);
                    assert_eq!(h, content_hash(parent, &tokens[..n], salt));
                    let key = (n, parent, salt);
                    if let Some(other) = seen.insert(h, key) {
                        panic!("{key:?} and {other:?} hash the same");
                    }
                }
            }
        }
        // One token more or less, a zero token, one token changed: all differ.
        assert_ne!(content_hash(0, &[1], None), content_hash(0, &[2], None));
        assert_ne!(content_hash(0, &[0], None), content_hash(0, &[], None));
        assert_ne!(content_hash(0, &[0, 0], None), content_hash(0, &[0], None));
        assert_ne!(
            content_hash(0, &[1, 2], None),
            content_hash(0, &[2, 1], None)
        );
        // No salt and an empty salt are the same (an empty `lora_name` is the base model).
        assert_eq!(content_hash(3, &[1], None), content_hash(3, &[1], Some("")));
    }
}
