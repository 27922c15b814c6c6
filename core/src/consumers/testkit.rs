//! Trace builders for tests, benchmarks and examples (small hand-made traces).
//!
//! [`stored`] and [`removed`] take block **ids**: an id below 2^32 becomes the hash [`h`]`(id)`
//! = 2^32 + id, because vLLM writes a hash below 2^32 as a small msgpack integer, which
//! llm-d's decoder rejects along with the whole batch (`docs/consumers.md`, llm-d R1). Ids of
//! 2^32 and more are used as hashes. [`stored_raw`] and [`removed_raw`] take hashes as they
//! are (for tests about small hashes).

use crate::event::{label, BlockRemoved, BlockStored, KvEvent};
use crate::hash::BlockHash;
use crate::trace::{Provenance, ProvenanceKind, Trace, TraceBatch, TraceRecord};

/// The hash of test block id `id`: 2^32 + `id` for ids below 2^32, else `id` itself.
pub const fn h(id: u64) -> u64 {
    if id < 1 << 32 {
        (1 << 32) + id
    } else {
        id
    }
}

/// A `BlockStored` of blocks `ids` under `parent` (ids, see [`h`]) with `bs` tokens per block
/// (token values derived from the id, so equal ids carry equal tokens).
pub fn stored(ids: &[u64], parent: Option<u64>, medium: Option<&str>, bs: u32) -> KvEvent {
    let hashes: Vec<u64> = ids.iter().map(|i| h(*i)).collect();
    stored_raw(&hashes, parent.map(h), medium, bs)
}

/// A `BlockRemoved` of blocks `ids` (see [`h`]).
pub fn removed(ids: &[u64], medium: Option<&str>) -> KvEvent {
    let hashes: Vec<u64> = ids.iter().map(|i| h(*i)).collect();
    removed_raw(&hashes, medium)
}

/// A `BlockStored` of `hashes` (as they are) under `parent` with `bs` tokens per block (token
/// values derived from the hash, so equal hashes carry equal tokens).
pub fn stored_raw(hashes: &[u64], parent: Option<u64>, medium: Option<&str>, bs: u32) -> KvEvent {
    let token_ids = hashes
        .iter()
        .flat_map(|h| (0..bs).map(move |i| (*h as u32).wrapping_mul(31).wrapping_add(i)))
        .collect();
    KvEvent::BlockStored(BlockStored {
        block_hashes: hashes.iter().map(|h| BlockHash::Int(*h)).collect(),
        parent_block_hash: parent.map(BlockHash::Int),
        token_ids,
        block_size: bs,
        medium: medium.map(label),
        ..BlockStored::default()
    })
}

/// A `BlockRemoved` of `hashes` (as they are).
pub fn removed_raw(hashes: &[u64], medium: Option<&str>) -> KvEvent {
    KvEvent::BlockRemoved(BlockRemoved {
        block_hashes: hashes.iter().map(|h| BlockHash::Int(*h)).collect(),
        medium: medium.map(label),
        group_idx: None,
        locality: None,
        ownership: None,
    })
}

/// A batch record.
pub fn batch(source: &str, seq: u64, events: Vec<KvEvent>) -> TraceRecord {
    TraceRecord::Batch(TraceBatch {
        source: source.into(),
        dp_rank: Some(0),
        seq,
        ts: 1_700_000_000.0 + seq as f64,
        events,
        provenance: None,
        raw: None,
        origin: seq + 1,
    })
}

/// A batch record with one provenance entry per event (`(tier, kind, job_id)`).
pub fn batch_with_jobs(
    source: &str,
    seq: u64,
    events: Vec<KvEvent>,
    jobs: &[(&str, ProvenanceKind, Option<u64>)],
) -> TraceRecord {
    let mut r = batch(source, seq, events);
    if let TraceRecord::Batch(b) = &mut r {
        b.provenance = Some(
            jobs.iter()
                .map(|(tier, kind, job)| Provenance {
                    tier: (*tier).into(),
                    kind: *kind,
                    job_id: *job,
                    ..Provenance::default()
                })
                .collect(),
        );
    }
    r
}

/// A trace from records, with `origin` renumbered to the 1-based record number.
pub fn trace(records: Vec<TraceRecord>) -> Trace {
    let mut records = records;
    for (i, r) in records.iter_mut().enumerate() {
        if let TraceRecord::Batch(b) = r {
            b.origin = i as u64 + 1;
        }
    }
    Trace { records }
}

/// One batch of `pod-a`: GPU block 1, then CPU blocks 3 (child of 2) and 4 (child of 3)
/// before their parent 2 (child of 1). Strict routers drop 3 as a loss root and 4 in its
/// cascade; block 2 arrives last.
pub fn child_first_chain() -> Trace {
    trace(vec![batch(
        "pod-a",
        0,
        vec![
            stored(&[1], None, Some("GPU"), 16),
            stored(&[3], Some(2), Some("CPU"), 16),
            stored(&[4], Some(3), Some("CPU"), 16),
            stored(&[2], Some(1), Some("CPU"), 16),
        ],
    )])
}
