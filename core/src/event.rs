//! vLLM's KV-cache event model (`vllm/distributed/kv_events.py`).
//!
//! Field names, field order and defaults follow upstream exactly, because the msgpack encoder
//! (`crate::wire`) writes events in declaration order and omits defaulted fields that equal
//! their default (msgspec `omit_defaults`). Fields *without* a default upstream are plain
//! values or `Option`s that are always written (as nil when `None`); fields *with* a default
//! of `None` are `Option`s that are omitted when `None`.

use serde::{Deserialize, Serialize};

use crate::hash::BlockHash;

/// One token id. vLLM token ids are non-negative Python ints; kvscope keeps them as `u32`
/// (decoders report values outside that range as errors rather than truncating them).
pub type TokenId = u32;

/// A value inside `BlockStored.extra_keys` (an arbitrary msgpack value: LoRA names, cache
/// salts, `(mm_hash, offset)` tuples, prompt-embedding digests).
///
/// JSON form: nil → `null`, bool, int, float, str → themselves, arrays → arrays,
/// bytes → `{"bytes": "<lowercase hex>"}`, maps → `{"map": [[k, v], ...]}`.
#[derive(Clone, Debug, PartialEq)]
pub enum ExtraValue {
    /// msgpack nil / Python `None`.
    Nil,
    /// msgpack bool.
    Bool(bool),
    /// A non-negative integer.
    UInt(u64),
    /// A negative integer.
    Int(i64),
    /// A float (msgpack float64 or float32 widened).
    Float(f64),
    /// A UTF-8 string.
    Str(String),
    /// Raw bytes (msgpack bin).
    Bytes(Vec<u8>),
    /// An array / Python tuple or list.
    Array(Vec<ExtraValue>),
    /// A map, in wire order.
    Map(Vec<(ExtraValue, ExtraValue)>),
}

/// `BlockStored`: blocks became resident in some tier (`medium`).
#[derive(Clone, Debug, PartialEq)]
pub struct BlockStored {
    /// One hash per block, prefix order (no default: always written).
    pub block_hashes: Vec<BlockHash>,
    /// Hash of the block preceding `block_hashes[0]`, `None` for a root (always written).
    pub parent_block_hash: Option<BlockHash>,
    /// Concatenated token ids of all blocks (always written).
    pub token_ids: Vec<TokenId>,
    /// Tokens per block (always written; 0 for token-less placeholders).
    pub block_size: u32,
    /// Deprecated LoRA adapter id (always written, nil when absent).
    pub lora_id: Option<i64>,
    /// `"GPU"`, `"CPU"`, `"STORAGE"`, or another producer's string (always written).
    pub medium: Option<String>,
    /// LoRA adapter name (always written, nil when absent).
    pub lora_name: Option<String>,
    /// Per-block extra hash keys; default `None` (omitted when `None`).
    pub extra_keys: Option<Vec<Option<ExtraValue>>>,
    /// KV cache group index; default `None`.
    pub group_idx: Option<u32>,
    /// `KVCacheSpecKind` string, e.g. `"full_attention"`; default `None`.
    pub kv_cache_spec_kind: Option<String>,
    /// Sliding window (tokens) for SWA groups; default `None`.
    pub kv_cache_spec_sliding_window: Option<u64>,
    /// `"LOCAL"` / `"REMOTE"`; default `None` (unspecified).
    pub locality: Option<String>,
    /// Secondary-tier owner id; default `None` (primary / framework-owned).
    pub ownership: Option<String>,
}

/// `BlockRemoved`: blocks left a tier.
#[derive(Clone, Debug, PartialEq)]
pub struct BlockRemoved {
    /// Hashes of the removed blocks (always written).
    pub block_hashes: Vec<BlockHash>,
    /// Tier the blocks left (always written).
    pub medium: Option<String>,
    /// KV cache group index; default `None`.
    pub group_idx: Option<u32>,
    /// Locality; default `None`.
    pub locality: Option<String>,
    /// Secondary-tier owner id; default `None`.
    pub ownership: Option<String>,
}

/// One KV-cache event (`KVCacheEvent` tagged union; the msgpack tag key is `"type"`).
#[derive(Clone, Debug, PartialEq)]
pub enum KvEvent {
    /// `BlockStored`.
    BlockStored(BlockStored),
    /// `BlockRemoved`.
    BlockRemoved(BlockRemoved),
    /// `AllBlocksCleared` (no fields).
    AllBlocksCleared,
}

impl KvEvent {
    /// The upstream class name, which is also the wire tag.
    pub fn type_name(&self) -> &'static str {
        match self {
            KvEvent::BlockStored(_) => "BlockStored",
            KvEvent::BlockRemoved(_) => "BlockRemoved",
            KvEvent::AllBlocksCleared => "AllBlocksCleared",
        }
    }

    /// The event's medium string, if it has one.
    pub fn medium(&self) -> Option<&str> {
        match self {
            KvEvent::BlockStored(e) => e.medium.as_deref(),
            KvEvent::BlockRemoved(e) => e.medium.as_deref(),
            KvEvent::AllBlocksCleared => None,
        }
    }

    /// Block hashes named by the event (empty for `AllBlocksCleared`).
    pub fn block_hashes(&self) -> &[BlockHash] {
        match self {
            KvEvent::BlockStored(e) => &e.block_hashes,
            KvEvent::BlockRemoved(e) => &e.block_hashes,
            KvEvent::AllBlocksCleared => &[],
        }
    }
}

/// `KVEventBatch`: one engine step's events, `[ts, events, data_parallel_rank]` on the wire.
#[derive(Clone, Debug, PartialEq)]
pub struct KvEventBatch {
    /// Publish time, seconds since the epoch (`time.time()`), always a float64 on the wire.
    pub ts: f64,
    /// Events in publish order: GPU block-pool events first, then connector events.
    pub events: Vec<KvEvent>,
    /// Data-parallel rank of the publisher (nil only for batches never published).
    pub data_parallel_rank: Option<u32>,
}

/// The tier an event belongs to, derived from `medium` (and `ownership` for secondary tiers).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Tier {
    /// `medium` `"GPU"` or nil (nil means GPU for vLLM's block pool).
    Gpu,
    /// `"CPU"` (the offloading connector's primary tier).
    Cpu,
    /// `"STORAGE"` (or the older `"FS"` / `"OBJ"`), keyed by ownership or provenance tier name.
    Storage(Option<String>),
    /// Any other producer's medium string (`"DISK"`, `"CPU_PINNED"`, ...).
    Other(String),
}

impl Tier {
    /// Classify a `(medium, ownership)` pair.
    pub fn from_medium(medium: Option<&str>, ownership: Option<&str>) -> Tier {
        match medium {
            None | Some("GPU") => Tier::Gpu,
            Some("CPU") => Tier::Cpu,
            Some("STORAGE") | Some("FS") | Some("OBJ") => {
                Tier::Storage(ownership.map(str::to_owned))
            }
            Some(other) => Tier::Other(other.to_owned()),
        }
    }

    /// A short label for lanes and reports (`GPU`, `CPU`, `STORAGE`, `STORAGE:fs0`, ...).
    pub fn label(&self) -> String {
        match self {
            Tier::Gpu => "GPU".into(),
            Tier::Cpu => "CPU".into(),
            Tier::Storage(None) => "STORAGE".into(),
            Tier::Storage(Some(o)) => format!("STORAGE:{o}"),
            Tier::Other(m) => m.clone(),
        }
    }
}

impl KvEvent {
    /// The tier this event belongs to (`AllBlocksCleared` has none).
    pub fn tier(&self) -> Option<Tier> {
        match self {
            KvEvent::BlockStored(e) => Some(Tier::from_medium(
                e.medium.as_deref(),
                e.ownership.as_deref(),
            )),
            KvEvent::BlockRemoved(e) => Some(Tier::from_medium(
                e.medium.as_deref(),
                e.ownership.as_deref(),
            )),
            KvEvent::AllBlocksCleared => None,
        }
    }
}
