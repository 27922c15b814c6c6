//! The kvscope trace: what every tool reads and writes.
//!
//! A trace is a sequence of records in delivery order. Batch records carry one published
//! `KVEventBatch` plus where it came from (`source`, `dp_rank`, `seq`) and, optionally,
//! per-event provenance. Other records (header, sequence gaps, notes) carry metadata that
//! readers which do not know them skip. The JSON Lines form is documented in
//! `docs/trace-format.md`; `crate::wire` reads and writes it.

use serde::{Deserialize, Serialize};

use crate::event::{KvEvent, KvEventBatch};

/// Where a generated event came from. Travels in the trace (the `provenance` array of a batch
/// line, parallel to `events`), never on the wire.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Provenance {
    /// Tier label: `"GPU"`, `"CPU"`, or the secondary tier's name (e.g. `"STORAGE:fs0"`).
    pub tier: String,
    /// What produced the event.
    pub kind: ProvenanceKind,
    /// Transfer job id (offload store, secondary store, promotion); `None` for GPU events.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub job_id: Option<u64>,
    /// Request id the event's blocks belong to, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub req_id: Option<String>,
    /// KV cache group index.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group_idx: Option<u32>,
    /// Chunk index within the request (offload events: one chunk per `BlockStored`; GPU
    /// events: the first block index).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chunk_idx: Option<u32>,
    /// Engine step that published the batch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step: Option<u64>,
}

/// What produced an event.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ProvenanceKind {
    /// GPU block pool (`BlockPool.cache_full_blocks`).
    GpuStore,
    /// GPU block pool eviction.
    GpuEvict,
    /// Offload store job completion (`complete_store`), primary tier.
    #[default]
    OffloadStore,
    /// Primary-tier eviction made room (`prepare_store` / promotion).
    Evict,
    /// Secondary-tier (FS/OBJ) store job completion.
    SecondaryStore,
    /// Promotion from a secondary tier into the primary tier.
    Promotion,
    /// Cache reset (`AllBlocksCleared`).
    Reset,
}

/// One published batch and where it was delivered from.
#[derive(Clone, Debug, PartialEq)]
pub struct TraceBatch {
    /// The engine (pod / worker) that published the batch.
    pub source: String,
    /// Data-parallel rank of the publisher (the batch's `data_parallel_rank`).
    pub dp_rank: Option<u32>,
    /// Per-(source, dp_rank) publisher sequence number, from 0.
    pub seq: u64,
    /// The batch's `ts`.
    pub ts: f64,
    /// The events, exactly vLLM's.
    pub events: Vec<KvEvent>,
    /// Optional per-event provenance, parallel to `events`.
    pub provenance: Option<Vec<Provenance>>,
    /// The exact payload bytes, when the trace was captured raw.
    pub raw: Option<Vec<u8>>,
    /// 1-based JSONL line, or 1-based batch number in a msgpack stream (not serialized).
    pub origin: u64,
}

impl TraceBatch {
    /// The wire batch (`[ts, events, data_parallel_rank]`).
    pub fn to_wire(&self) -> KvEventBatch {
        KvEventBatch {
            ts: self.ts,
            events: self.events.clone(),
            data_parallel_rank: self.dp_rank,
        }
    }
}

/// A detected hole in a publisher's sequence numbers.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SeqGap {
    /// The publisher.
    pub source: String,
    /// Its DP rank.
    #[serde(default)]
    pub dp_rank: Option<u32>,
    /// The sequence number that was expected next.
    pub expected_seq: u64,
    /// The sequence number that arrived instead (lower than expected means a restart).
    pub received_seq: u64,
    /// Whether the missing batches were recovered (e.g. over vLLM's replay socket).
    #[serde(default)]
    pub recovered: bool,
}

/// Trace-level metadata (first line of a generated trace).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct TraceHeader {
    /// Format version (currently 1).
    pub kvscope: u32,
    /// Free-form description, e.g. the scenario name and order mode.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scenario: Option<String>,
    /// Any other metadata.
    #[serde(default, skip_serializing_if = "serde_json::Map::is_empty")]
    pub meta: serde_json::Map<String, serde_json::Value>,
}

/// One record of a trace, in delivery order.
#[derive(Clone, Debug, PartialEq)]
pub enum TraceRecord {
    /// A published batch.
    Batch(TraceBatch),
    /// The header.
    Header(TraceHeader),
    /// A sequence gap marker.
    Gap(SeqGap),
    /// A non-batch line kvscope does not interpret, kept verbatim.
    Other(serde_json::Value),
}

/// A whole trace in delivery order.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Trace {
    /// Records in delivery order.
    pub records: Vec<TraceRecord>,
}

impl Trace {
    /// The batches, in delivery order.
    pub fn batches(&self) -> impl Iterator<Item = &TraceBatch> + '_ {
        self.records.iter().filter_map(|r| match r {
            TraceRecord::Batch(b) => Some(b),
            _ => None,
        })
    }

    /// Total number of events over all batches.
    pub fn event_count(&self) -> usize {
        self.batches().map(|b| b.events.len()).sum()
    }

    /// The gap markers.
    pub fn gaps(&self) -> impl Iterator<Item = &SeqGap> + '_ {
        self.records.iter().filter_map(|r| match r {
            TraceRecord::Gap(g) => Some(g),
            _ => None,
        })
    }
}
