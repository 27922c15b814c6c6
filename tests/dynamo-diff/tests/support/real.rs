//! The real `dynamo-kv-router` 1.6.1, driven the way its own vLLM ingest path does it.
//!
//! Per batch (`src/services/indexer/listener.rs` `apply_live_batch`): the vLLM msgpack payload
//! (encoded by kvscope's `wire::msgpack::encode_batch`) goes through
//! `zmq_wire::decode_event_batch` (a decode error drops the whole batch); per raw event:
//! `ZmqEventNormalizer::preprocess_with_reason` then `normalize_preprocessed` (=
//! `ZmqEventNormalizer::normalize`, which calls `zmq_wire::convert_event`), then
//! `PlacementEvent::into_router_event`. The `RouterEvent` is routed like
//! `LocalKvIndexer::apply_event_by_tier` (`src/indexer/local.rs`): `Cleared` to the primary and
//! to every lower tier created so far; a device-tier event to the primary `RadixTree`
//! (`src/indexer/radix_tree.rs`, `RadixTree::apply_event`, the call `KvIndexer`'s thread makes);
//! anything else to a lazily created `ThreadPoolIndexer<LowerTierIndexer>` with one thread
//! (`LocalKvIndexer::get_or_create_lower_tier_indexer`), applied with `apply_event_and_wait`.
//!
//! Not modelled (not in this crate): `lib/llm`'s event processor (batch merging, per-rank dedup
//! filter, `event_id` renumbering) and the router-side recovery layer.
//!
//! Outcomes: the device tree returns `Result<(), KvCacheEventError>` (the
//! `kv_cache_events_applied{status}` label). The lower tier returns `Ok` for every store and
//! remove, so its per-block outcome is read from state: `dump_events` before and after the event.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use dynamo_kv_router::indexer::{
    KvIndexerInterface, LowerTierIndexer, RadixTree, ThreadPoolIndexer,
};
use dynamo_kv_router::protocols::{
    KvCacheEventData, KvCacheEventError, RouterEvent, StorageTier, WorkerWithDpRank,
};
use dynamo_kv_router::zmq_wire::{decode_event_batch, RawKvEvent, ZmqEventNormalizer};

/// `(worker_id, dp_rank)`.
pub type Worker = (u64, u32);

/// How the real structures are instantiated.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// One `LocalKvIndexer`-shaped instance (primary tree + lower-tier registry) per
    /// `(worker, dp_rank)`: what each worker's rank publisher holds (`local.rs`: "One
    /// LocalKvIndexer belongs to one rank publisher").
    WorkerSide,
    /// One tree and one lower-tier registry shared by every worker and rank (the router-side
    /// global index, `lower_tier_indexers.rs` `LowerTierIndexers`).
    Shared,
}

/// A lower-tier worker's state: block hash -> (parent hash, local hash).
pub type LowerMap = BTreeMap<u64, (Option<u64>, u64)>;

/// What the real pipeline did with one vLLM event.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Real {
    /// `decode_event_batch` rejected the batch payload: the listener drops every event of it.
    BatchUndecodable(String),
    /// `ZmqEventNormalizer::preprocess_with_reason` filtered the event (label from
    /// `ZmqEventFilterReason::as_label`).
    Filtered(&'static str),
    /// `convert_event` returned `None`.
    ConvertDropped,
    /// `convert_event` turned a store with a duplicate / self-referencing hash into an empty
    /// `Removed` (`convert.rs`: "Self-referencing block detected"); `status` is what applying
    /// that empty remove returned.
    SelfRefNoop { status: &'static str },
    /// A store that reached an index.
    Store {
        /// Device or lower tier.
        tier: StorageTier,
        /// The index's result label.
        status: &'static str,
        /// Blocks in the vLLM event.
        total: usize,
        /// Blocks `create_stored_blocks` kept.
        converted: usize,
        /// Why conversion stopped early (`block_size_mismatch` / `token_ids_too_short`).
        convert_stop: Option<&'static str>,
        /// Blocks the index holds for this worker afterwards, as a prefix of the event
        /// (device: `converted` on `Ok`, 0 on error; lower tier: read from `dump_events`).
        stored: usize,
        /// The store's parent hash.
        parent: Option<u64>,
    },
    /// A remove that reached an index.
    Remove {
        /// Device or lower tier.
        tier: StorageTier,
        /// The index's result label.
        status: &'static str,
        /// Device: lookup entries dropped (`current_size` before - after).
        device_dropped: usize,
        /// Lower tier: per hash of the event, whether the worker owned it at that point.
        lower_known: Vec<bool>,
    },
    /// `AllBlocksCleared` applied to the primary and the lower tiers.
    Cleared { status: &'static str },
}

/// `KvCacheEventError` → `kv_cache_events_applied{status}` label (`indexer/metrics.rs`).
pub fn status_label(r: &Result<(), KvCacheEventError>) -> &'static str {
    match r {
        Ok(()) => "ok",
        Err(KvCacheEventError::ParentBlockNotFound) => "parent_block_not_found",
        Err(KvCacheEventError::BlockNotFound) => "block_not_found",
        Err(KvCacheEventError::InvalidBlockSequence) => "invalid_block_sequence",
        Err(_) => "other_error",
    }
}

struct Instance {
    tree: RadixTree,
    lower: Vec<(StorageTier, Arc<ThreadPoolIndexer<LowerTierIndexer>>)>,
}

impl Instance {
    fn new() -> Self {
        Instance {
            tree: RadixTree::new(),
            lower: Vec::new(),
        }
    }

    fn lower_tier(
        &mut self,
        tier: StorageTier,
        kv_block_size: u32,
    ) -> Arc<ThreadPoolIndexer<LowerTierIndexer>> {
        if let Some((_, t)) = self.lower.iter().find(|(t, _)| *t == tier) {
            return t.clone();
        }
        let t = Arc::new(ThreadPoolIndexer::new_with_metrics(
            LowerTierIndexer::new(),
            1,
            kv_block_size,
            None,
        ));
        self.lower.push((tier, t.clone()));
        t
    }
}

/// The real crate, instantiated per [`Mode`].
pub struct RealDynamo {
    mode: Mode,
    kv_block_size: u32,
    rt: tokio::runtime::Runtime,
    instances: BTreeMap<Option<Worker>, Instance>,
    /// One normalizer per worker (the listener keeps one per engine endpoint).
    normalizers: BTreeMap<u64, ZmqEventNormalizer>,
    next_event_id: BTreeMap<Worker, u64>,
    /// The `LocalBlockHash`es (`tokens_hash`) of the blocks the last applied event stored
    /// (empty for anything else), in block order.
    pub last_store_locals: Vec<u64>,
}

impl RealDynamo {
    /// A fresh real index.
    pub fn new(mode: Mode, kv_block_size: u32) -> Self {
        RealDynamo {
            mode,
            kv_block_size,
            rt: tokio::runtime::Builder::new_current_thread()
                .build()
                .expect("tokio runtime"),
            instances: BTreeMap::new(),
            normalizers: BTreeMap::new(),
            next_event_id: BTreeMap::new(),
            last_store_locals: Vec::new(),
        }
    }

    fn key(&self, w: Worker) -> Option<Worker> {
        match self.mode {
            Mode::WorkerSide => Some(w),
            Mode::Shared => None,
        }
    }

    /// Decode one vLLM batch payload (msgpack bytes) published by `worker_id`, like the
    /// listener: `Err` (the whole batch is dropped) or the publisher `(worker, dp_rank)`, the
    /// batch's event id and its raw events, to be applied in order with [`Self::apply_raw`].
    pub fn decode(
        &mut self,
        worker_id: u64,
        payload: &[u8],
    ) -> Result<(Worker, u64, Vec<RawKvEvent>), String> {
        let batch = decode_event_batch(payload).map_err(|e| e.to_string())?;
        let dp_rank = batch
            .data_parallel_rank
            .map_or(0, |r: i32| r.cast_unsigned());
        let w: Worker = (worker_id, dp_rank);
        let id = self.next_event_id.entry(w).or_insert(0);
        *id += 1;
        Ok((w, *id, batch.events))
    }

    /// Apply one decoded event of publisher `w`.
    pub fn apply_raw(&mut self, w: Worker, event_id: u64, raw: RawKvEvent) -> Real {
        let kv_block_size = self.kv_block_size;
        self.last_store_locals.clear();
        let worker = WorkerWithDpRank::new(w.0, w.1);
        let normalizer = self
            .normalizers
            .entry(w.0)
            .or_insert_with(|| ZmqEventNormalizer::new(kv_block_size));
        let raw = match normalizer.preprocess_with_reason(raw, worker) {
            Ok(raw) => raw,
            Err(reason) => return Real::Filtered(reason.as_label()),
        };
        // Conversion facts of the vLLM store (for `convert_stop`; `create_stored_blocks`
        // breaks at the first block whose size differs, then at the first short block).
        let store_facts = match &raw {
            RawKvEvent::BlockStored {
                block_hashes,
                token_ids,
                block_size,
                ..
            } => Some((block_hashes.len(), token_ids.len(), *block_size)),
            _ => None,
        };
        let was_store = store_facts.is_some();
        let Some(placement) = normalizer.normalize_preprocessed(raw, event_id, worker) else {
            return Real::ConvertDropped;
        };
        let ev: RouterEvent = placement
            .into_router_event()
            .expect("local worker placement must convert to router event");
        let key = self.key(w);
        let inst = self.instances.entry(key).or_insert_with(Instance::new);
        match &ev.event.data {
            KvCacheEventData::Cleared => {
                let targets_primary = ev.targets_primary().expect("worker-domain clear");
                let mut status = "ok";
                if targets_primary {
                    status = status_label(&inst.tree.apply_event(ev.clone()));
                }
                let tiers: Vec<_> = inst.lower.iter().map(|(_, t)| t.clone()).collect();
                for t in tiers {
                    if self
                        .rt
                        .block_on(t.apply_event_and_wait(ev.clone()))
                        .is_err()
                    {
                        status = "lower_tier_not_applied";
                    }
                }
                Real::Cleared { status }
            }
            KvCacheEventData::Removed(rm) if was_store => {
                assert!(rm.block_hashes.is_empty(), "harness: store became a remove");
                let status = if ev.storage_tier.is_gpu() {
                    status_label(&inst.tree.apply_event(ev.clone()))
                } else {
                    let t = inst.lower_tier(ev.storage_tier, kv_block_size);
                    match self.rt.block_on(t.apply_event_and_wait(ev.clone())) {
                        Ok(()) => "ok",
                        Err(_) => "lower_tier_not_applied",
                    }
                };
                Real::SelfRefNoop { status }
            }
            KvCacheEventData::Stored(store) => {
                let (total, n_tokens, block_size) = store_facts.expect("store facts");
                let converted = store.blocks.len();
                let convert_stop = if converted == total {
                    None
                } else if block_size != kv_block_size as usize {
                    Some("block_size_mismatch")
                } else {
                    assert!(
                        n_tokens < total * block_size,
                        "harness: unexplained truncation"
                    );
                    Some("token_ids_too_short")
                };
                self.last_store_locals = store.blocks.iter().map(|b| b.tokens_hash.0).collect();
                let parent = store.parent_hash.map(|p| p.0);
                let chain: Vec<(u64, (Option<u64>, u64))> = {
                    let mut p = parent;
                    store
                        .blocks
                        .iter()
                        .map(|b| {
                            let item = (b.block_hash.0, (p, b.tokens_hash.0));
                            p = Some(b.block_hash.0);
                            item
                        })
                        .collect()
                };
                let tier = ev.storage_tier;
                if tier.is_gpu() {
                    let status = status_label(&inst.tree.apply_event(ev.clone()));
                    Real::Store {
                        tier,
                        status,
                        total,
                        converted,
                        convert_stop,
                        stored: if status == "ok" { converted } else { 0 },
                        parent,
                    }
                } else {
                    let t = inst.lower_tier(tier, kv_block_size);
                    let status = match self.rt.block_on(t.apply_event_and_wait(ev.clone())) {
                        Ok(()) => "ok",
                        Err(_) => "lower_tier_not_applied",
                    };
                    let after = dump_lower(&self.rt, &t);
                    let mine = after.get(&w).cloned().unwrap_or_default();
                    let stored = chain
                        .iter()
                        .take_while(|(h, k)| mine.get(h) == Some(k))
                        .count();
                    Real::Store {
                        tier,
                        status,
                        total,
                        converted,
                        convert_stop,
                        stored,
                        parent,
                    }
                }
            }
            KvCacheEventData::Removed(rm) => {
                let tier = ev.storage_tier;
                if tier.is_gpu() {
                    let before = inst.tree.current_size();
                    let status = status_label(&inst.tree.apply_event(ev.clone()));
                    let after = inst.tree.current_size();
                    Real::Remove {
                        tier,
                        status,
                        device_dropped: before.saturating_sub(after),
                        lower_known: Vec::new(),
                    }
                } else {
                    let t = inst.lower_tier(tier, kv_block_size);
                    let mut owned: BTreeSet<u64> = dump_lower(&self.rt, &t)
                        .get(&w)
                        .map(|m| m.keys().copied().collect())
                        .unwrap_or_default();
                    let lower_known = rm.block_hashes.iter().map(|h| owned.remove(&h.0)).collect();
                    let status = match self.rt.block_on(t.apply_event_and_wait(ev.clone())) {
                        Ok(()) => "ok",
                        Err(_) => "lower_tier_not_applied",
                    };
                    Real::Remove {
                        tier,
                        status,
                        device_dropped: 0,
                        lower_known,
                    }
                }
            }
        }
    }

    /// Device lookup sizes (`RadixTree::current_size`) per instance key.
    pub fn device_sizes(&self) -> BTreeMap<Option<Worker>, usize> {
        self.instances
            .iter()
            .map(|(k, i)| (*k, i.tree.current_size()))
            .collect()
    }

    /// Device trees (`RadixTree::dump_tree_as_events`) per `(worker, rank)`: one entry per
    /// dumped block, `(parent engine hash, engine hash, tokens hash)`, sorted.
    pub fn device_trees(&self) -> BTreeMap<Worker, Vec<(Option<u64>, u64, u64)>> {
        let mut out: BTreeMap<Worker, Vec<(Option<u64>, u64, u64)>> = BTreeMap::new();
        for inst in self.instances.values() {
            for e in inst.tree.dump_tree_as_events() {
                if let KvCacheEventData::Stored(s) = e.event.data {
                    let v = out.entry((e.worker_id, e.event.dp_rank)).or_default();
                    let mut prev = s.parent_hash.map(|p| p.0);
                    for b in s.blocks {
                        v.push((prev, b.block_hash.0, b.tokens_hash.0));
                        prev = Some(b.block_hash.0);
                    }
                }
            }
        }
        for v in out.values_mut() {
            v.sort_unstable();
        }
        out
    }

    /// Lower-tier state: per tier, per worker, the owned blocks.
    pub fn lower_state(&self) -> BTreeMap<u8, BTreeMap<Worker, LowerMap>> {
        let mut out: BTreeMap<u8, BTreeMap<Worker, LowerMap>> = BTreeMap::new();
        for inst in self.instances.values() {
            for (tier, t) in &inst.lower {
                let e = out.entry(tier_code(*tier)).or_default();
                for (w, m) in dump_lower(&self.rt, t) {
                    e.entry(w).or_default().extend(m);
                }
            }
        }
        out
    }
}

/// A stable small code for a `StorageTier`.
pub fn tier_code(t: StorageTier) -> u8 {
    match t {
        StorageTier::Device => 0,
        StorageTier::HostPinned => 1,
        StorageTier::Disk => 2,
        StorageTier::External => 3,
    }
}

fn dump_lower(
    rt: &tokio::runtime::Runtime,
    t: &ThreadPoolIndexer<LowerTierIndexer>,
) -> BTreeMap<Worker, LowerMap> {
    let events = rt
        .block_on(KvIndexerInterface::dump_events(t))
        .expect("lower-tier dump");
    let mut out: BTreeMap<Worker, LowerMap> = BTreeMap::new();
    for e in events {
        if let KvCacheEventData::Stored(s) = e.event.data {
            for b in s.blocks {
                out.entry((e.worker_id, e.event.dp_rank))
                    .or_default()
                    .insert(
                        b.block_hash.0,
                        (s.parent_hash.map(|p| p.0), b.tokens_hash.0),
                    );
            }
        }
    }
    out
}
