//! `OffloadingEventsTracker` (`vllm/distributed/kv_transfer/kv_connector/v1/offloading/events.py`,
//! #43468, #48679): snapshots each chunk's `BlockStored` payload at `record_store` /
//! `record_lookup` time and translates raw manager events into KV events.
//!
//! * Stored raw event → one `BlockStored` per key **in `event.keys` order**; metadata is read,
//!   not popped. No metadata (opt-out, SWA/SSM groups, unseen promotions) → placeholder
//!   `block_hashes=[key hash]`, parent `None`, `token_ids=[]`, `block_size=0`, LoRA `None`,
//!   `group_idx` from the key, no spec kind.
//! * Removed raw event → one `BlockRemoved` per `group_idx`, first-seen group order, holding
//!   every constituent hash of each key (the key's own hash without metadata). The ~2026-08-03
//!   revision never pops metadata on removal (`event.medium == MEDIUM_CPU` compares an enum to
//!   a string); `pop_on_cpu_removal` models the later #52068 behaviour for CPU-only
//!   residency.

use rustc_hash::FxHashMap;
use smallvec::smallvec;

use crate::event::{BlockHashes, BlockRemoved, BlockStored, KvEvent, Label, TokenId};
use crate::hash::BlockHash;
use crate::hashing::Digest;
use crate::keys::OffloadKey;
use crate::scenario::HashFormat;

/// The payload snapshot of one chunk (`_OffloadEventMetadata`) plus provenance.
#[derive(Clone, Debug, PartialEq)]
pub struct ChunkMeta {
    /// Constituent per-block hashes; the last is the key's hash.
    pub block_hashes: Vec<Digest>,
    /// Hash of the block before the chunk, `None` for chunk 0.
    pub parent: Option<Digest>,
    /// The chunk's tokens.
    pub token_ids: Vec<TokenId>,
    /// `tokens_per_hash` (= GPU block size here).
    pub block_size: u32,
    /// `lora_request.adapter_id`.
    pub lora_id: Option<i64>,
    /// `lora_request.name`.
    pub lora_name: Option<String>,
    /// Group index.
    pub group_idx: u32,
    /// `kv_cache_spec_kind`.
    pub spec_kind: &'static str,
    /// Request that recorded the snapshot (provenance only).
    pub req_id: String,
    /// Chunk index within that request (provenance only).
    pub chunk_idx: u32,
}

/// A translated event with what the tracker knows about it.
#[derive(Clone, Debug, PartialEq)]
pub struct Translated {
    /// The KV event.
    pub event: KvEvent,
    /// Request id from the metadata (stores only).
    pub req_id: Option<String>,
    /// Group of the event.
    pub group_idx: u32,
    /// Chunk index from the metadata (stores only).
    pub chunk_idx: Option<u32>,
}

/// The tracker.
#[derive(Clone, Debug)]
pub struct EventsTracker {
    enabled: bool,
    pop_on_cpu_removal: bool,
    format: HashFormat,
    meta: FxHashMap<OffloadKey, ChunkMeta>,
}

/// Medium and tier attributes of a raw event.
#[derive(Clone, Debug, PartialEq)]
pub struct EventMedium {
    /// `"CPU"` or `"STORAGE"`.
    pub medium: &'static str,
    /// Locality string.
    pub locality: Option<String>,
    /// Ownership string.
    pub ownership: Option<String>,
}

impl EventsTracker {
    /// `enabled` = events on and `self_describing_kv_events`.
    pub fn new(enabled: bool, pop_on_cpu_removal: bool, format: HashFormat) -> Self {
        EventsTracker {
            enabled,
            pop_on_cpu_removal,
            format,
            meta: FxHashMap::default(),
        }
    }

    /// Convert a digest to the wire hash.
    pub fn wire(&self, d: &Digest) -> BlockHash {
        wire_hash(d, self.format)
    }

    /// `record_store`: overwrite the snapshot (no-op when disabled or for SWA/SSM groups,
    /// which the caller signals by not calling).
    pub fn record_store(&mut self, key: OffloadKey, meta: ChunkMeta) {
        if self.enabled {
            self.meta.insert(key, meta);
        }
    }

    /// `record_lookup`: insert only if absent (primary-tier HIT).
    pub fn record_lookup(&mut self, key: OffloadKey, meta: ChunkMeta) {
        if self.enabled {
            self.meta.entry(key).or_insert(meta);
        }
    }

    /// Whether `key` has a snapshot.
    pub fn has_meta(&self, key: &OffloadKey) -> bool {
        self.meta.contains_key(key)
    }

    /// `reset()`.
    pub fn reset(&mut self) {
        self.meta.clear();
    }

    /// Translate one stored raw event.
    pub fn stored(&self, keys: &[OffloadKey], m: &EventMedium) -> Vec<Translated> {
        keys.iter()
            .map(|key| match self.meta.get(key) {
                None => Translated {
                    event: KvEvent::BlockStored(BlockStored {
                        block_hashes: smallvec![self.wire(&key.digest)],
                        parent_block_hash: None,
                        token_ids: Vec::new(),
                        block_size: 0,
                        lora_id: None,
                        medium: Some(m.medium.into()),
                        lora_name: None,
                        extra_keys: None,
                        group_idx: Some(key.group_idx),
                        kv_cache_spec_kind: None,
                        locality: m.locality.clone().map(Label::from),
                        ownership: m.ownership.clone().map(Label::from),
                        ..BlockStored::default()
                    }),
                    req_id: None,
                    group_idx: key.group_idx,
                    chunk_idx: None,
                },
                Some(meta) => Translated {
                    event: KvEvent::BlockStored(BlockStored {
                        block_hashes: meta.block_hashes.iter().map(|d| self.wire(d)).collect(),
                        parent_block_hash: meta.parent.as_ref().map(|d| self.wire(d)),
                        token_ids: meta.token_ids.clone(),
                        block_size: meta.block_size,
                        lora_id: meta.lora_id,
                        medium: Some(m.medium.into()),
                        lora_name: meta.lora_name.clone().map(Label::from),
                        extra_keys: None,
                        group_idx: Some(meta.group_idx),
                        kv_cache_spec_kind: Some(meta.spec_kind.into()),
                        locality: m.locality.clone().map(Label::from),
                        ownership: m.ownership.clone().map(Label::from),
                        ..BlockStored::default()
                    }),
                    req_id: Some(meta.req_id.clone()),
                    group_idx: meta.group_idx,
                    chunk_idx: Some(meta.chunk_idx),
                },
            })
            .collect()
    }

    /// Translate one removed raw event: one `BlockRemoved` per group, first-seen order.
    pub fn removed(&mut self, keys: &[OffloadKey], m: &EventMedium) -> Vec<Translated> {
        let mut groups: Vec<(u32, BlockHashes)> = Vec::new();
        for key in keys {
            let (g, hashes) = match self.meta.get(key) {
                Some(meta) => (
                    meta.group_idx,
                    meta.block_hashes.iter().map(|d| self.wire(d)).collect(),
                ),
                None => (key.group_idx, smallvec![self.wire(&key.digest)]),
            };
            if self.pop_on_cpu_removal && m.medium == "CPU" {
                self.meta.remove(key);
            }
            match groups.iter_mut().find(|(gg, _)| *gg == g) {
                Some((_, v)) => v.extend(hashes),
                None => groups.push((g, hashes)),
            }
        }
        groups
            .into_iter()
            .map(|(g, hashes)| Translated {
                event: KvEvent::BlockRemoved(BlockRemoved {
                    block_hashes: hashes,
                    medium: Some(m.medium.into()),
                    group_idx: Some(g),
                    locality: m.locality.clone().map(Label::from),
                    ownership: m.ownership.clone().map(Label::from),
                }),
                req_id: None,
                group_idx: g,
                chunk_idx: None,
            })
            .collect()
    }
}

/// `maybe_convert_block_hash`: last 8 bytes big-endian, or the raw bytes.
pub fn wire_hash(d: &Digest, format: HashFormat) -> BlockHash {
    match format {
        HashFormat::Int => BlockHash::Int(d.wire_u64()),
        HashFormat::Bytes => BlockHash::Bytes(d.0.to_vec().into_boxed_slice()),
    }
}
