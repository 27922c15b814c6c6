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

impl ProvenanceKind {
    /// Every kind, in declaration order.
    pub const ALL: [ProvenanceKind; 7] = [
        ProvenanceKind::GpuStore,
        ProvenanceKind::GpuEvict,
        ProvenanceKind::OffloadStore,
        ProvenanceKind::Evict,
        ProvenanceKind::SecondaryStore,
        ProvenanceKind::Promotion,
        ProvenanceKind::Reset,
    ];

    /// The kind's name, as JSON Lines and the npm package spell it (serde's snake_case).
    pub fn name(self) -> &'static str {
        match self {
            ProvenanceKind::GpuStore => "gpu_store",
            ProvenanceKind::GpuEvict => "gpu_evict",
            ProvenanceKind::OffloadStore => "offload_store",
            ProvenanceKind::Evict => "evict",
            ProvenanceKind::SecondaryStore => "secondary_store",
            ProvenanceKind::Promotion => "promotion",
            ProvenanceKind::Reset => "reset",
        }
    }

    /// The kind called `name` (see [`ProvenanceKind::name`]).
    pub fn from_name(name: &str) -> Option<ProvenanceKind> {
        ProvenanceKind::ALL.into_iter().find(|k| k.name() == name)
    }
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

/// Where an event sits: its batch (by ordinal among the trace's batches, and by record index in
/// [`Trace::records`]) and its position in that batch (see [`EventMap`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EventAt {
    /// 0-based ordinal of its batch among the trace's batches.
    pub batch: u32,
    /// Index of its batch record in [`Trace::records`].
    pub record: u32,
    /// 0-based position in the batch.
    pub pos: u32,
}

/// The one map from a global event index (events numbered in delivery order across batches,
/// from 0: the replay cursor's numbering) to where the event sits ([`EventAt`]), shared by the
/// CLI, the npm package and the page. One entry per batch (not per event): a lookup is a binary
/// search over the batches.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct EventMap {
    /// Per batch, in order: its first event's global index (for an empty batch, the next
    /// event's) and its record index.
    starts: Vec<(usize, u32)>,
    /// Events in all.
    len: usize,
}

impl EventMap {
    /// The map of a trace's events.
    pub fn new(trace: &Trace) -> EventMap {
        let mut m = EventMap::default();
        for (ri, r) in trace.records.iter().enumerate() {
            if let TraceRecord::Batch(b) = r {
                m.push(ri, b.events.len());
            }
        }
        m
    }

    /// Add the next batch: record `record`, holding `events` events (for a map built while
    /// reading).
    pub fn push(&mut self, record: usize, events: usize) {
        let record = u32::try_from(record).unwrap_or(u32::MAX);
        self.starts.push((self.len, record));
        self.len += events;
    }

    /// Number of events.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether there are no events.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Number of batches.
    pub fn batch_count(&self) -> usize {
        self.starts.len()
    }

    /// Where event `i` sits (`None` past the end).
    pub fn get(&self, i: usize) -> Option<EventAt> {
        if i >= self.len {
            return None;
        }
        // The last batch starting at or before `i` holds it (an empty batch shares its start
        // with the batch after it).
        let k = self
            .starts
            .partition_point(|(s, _)| *s <= i)
            .checked_sub(1)?;
        let (start, record) = *self.starts.get(k)?;
        Some(EventAt {
            batch: u32::try_from(k).ok()?,
            record,
            pos: u32::try_from(i - start).ok()?,
        })
    }

    /// The batch with ordinal `batch`: its first event's global index (for an empty batch, the
    /// next event's) and its record index; `None` past the last batch.
    pub fn batch(&self, batch: usize) -> Option<(usize, u32)> {
        self.starts.get(batch).copied()
    }

    /// Every event's place, in delivery order.
    pub fn iter(&self) -> impl Iterator<Item = EventAt> + '_ {
        self.starts
            .iter()
            .enumerate()
            .flat_map(move |(k, &(start, record))| {
                let end = self.starts.get(k + 1).map_or(self.len, |(s, _)| *s);
                let batch = k as u32;
                (0..(end - start) as u32).map(move |pos| EventAt { batch, record, pos })
            })
    }

    /// Event `i` of `trace` (the trace this map was made from) with its batch.
    pub fn event<'t>(&self, trace: &'t Trace, i: usize) -> Option<(&'t TraceBatch, &'t KvEvent)> {
        let at = self.get(i)?;
        match trace.records.get(at.record as usize)? {
            TraceRecord::Batch(b) => b.events.get(at.pos as usize).map(|e| (b, e)),
            _ => None,
        }
    }
}

/// The source name the debugger gives a bare msgpack stream loaded from file `name`: the file
/// name without its folders and everything from its first dot (`runs/pod-a.trace.msgpack` is
/// `pod-a`); the whole name when that leaves nothing.
///
/// ```
/// use kvscope_core::trace::stream_source_name;
/// assert_eq!(stream_source_name("runs/pod-a.trace.msgpack"), "pod-a");
/// assert_eq!(stream_source_name(".msgpack"), ".msgpack");
/// ```
pub fn stream_source_name(name: &str) -> &str {
    let base = name.rsplit(['/', '\\']).next().unwrap_or(name);
    base.split('.')
        .next()
        .filter(|s| !s.is_empty())
        .unwrap_or(base)
}

#[cfg(test)]
mod provenance_kind_tests {
    use super::ProvenanceKind;

    /// Every kind's name is serde's spelling of it, and reads back as that kind.
    #[test]
    fn names_are_serde_spellings_and_read_back() {
        for k in ProvenanceKind::ALL {
            let serde = serde_json::to_string(&k).unwrap();
            assert_eq!(serde, format!("\"{}\"", k.name()));
            assert_eq!(ProvenanceKind::from_name(k.name()), Some(k));
        }
        assert_eq!(ProvenanceKind::from_name("GPU_STORE"), None);
        assert_eq!(ProvenanceKind::from_name(""), None);
    }
}

#[cfg(test)]
mod event_map_tests {
    use super::*;

    fn batch(n: usize) -> TraceRecord {
        TraceRecord::Batch(TraceBatch {
            source: "a".into(),
            dp_rank: None,
            seq: 0,
            ts: 0.0,
            events: vec![KvEvent::AllBlocksCleared; n],
            provenance: None,
            raw: None,
            origin: 0,
        })
    }

    #[test]
    fn locates_every_event_across_gaps_and_empty_batches() {
        let gap = TraceRecord::Gap(SeqGap {
            source: "a".into(),
            dp_rank: None,
            expected_seq: 1,
            received_seq: 2,
            recovered: false,
        });
        let t = Trace {
            records: vec![batch(2), gap.clone(), batch(0), batch(3), gap, batch(1)],
        };
        let m = EventMap::new(&t);
        assert_eq!(m.len(), 6);
        let at = |batch, record, pos| EventAt { batch, record, pos };
        let want = [
            at(0, 0, 0),
            at(0, 0, 1),
            at(2, 3, 0),
            at(2, 3, 1),
            at(2, 3, 2),
            at(3, 5, 0),
        ];
        assert_eq!(m.iter().collect::<Vec<_>>(), want);
        for (i, w) in want.iter().enumerate() {
            assert_eq!(m.get(i), Some(*w));
            assert!(m.event(&t, i).is_some());
        }
        assert_eq!(m.get(6), None);
        assert_eq!(m.event(&t, 6), None);
        assert_eq!(m.batch_count(), 4);
        let batches: Vec<_> = (0..5).map(|b| m.batch(b)).collect();
        assert_eq!(
            batches,
            [Some((0, 0)), Some((2, 2)), Some((2, 3)), Some((5, 5)), None]
        );
        assert!(EventMap::new(&Trace::default()).is_empty());
    }
}
