//! The benchmark trace shapes, shared by the benches and examples: each request's GPU chain,
//! then its CPU job (`benches/analysis.rs`, `benches/jsonl_ab.rs`, `examples/seek_probe.rs`),
//! and the wire benchmark's trace ([`wire_trace`]).

// Not every bench or example uses every shared helper (`build_trace` is analysis.rs's).
#![allow(dead_code)]

pub mod wire_trace;

use kvscope_core::consumers::testkit::stored;
use kvscope_core::event::KvEvent;
use kvscope_core::trace::{Trace, TraceBatch, TraceRecord};

/// SplitMix64: the benchmarks' block hashes and random streams.
pub fn splitmix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// `n` events: per request 8 GPU blocks chained, then the same 8 offloaded to CPU (one job per
/// request, prefix order), 16 events per batch; requests continue a chain of 64 blocks.
pub fn build_trace(n: usize) -> Trace {
    let mut events: Vec<KvEvent> = Vec::with_capacity(n);
    let mut block = 0u64;
    while events.len() < n {
        let first = block;
        let ids: Vec<u64> = (0..8).map(|k| splitmix(first + k)).collect();
        for medium in ["GPU", "CPU"] {
            for (k, h) in ids.iter().enumerate() {
                let idx = first + k as u64;
                let parent = if idx.is_multiple_of(64) {
                    None
                } else {
                    Some(splitmix(idx - 1))
                };
                events.push(stored(&[*h], parent, Some(medium), 16));
            }
        }
        block += 8;
    }
    events.truncate(n);
    batched(&events, "pod")
}

/// `events` as a trace of one source's batches of 16 (`seq` from 0, `ts` 1_700_000_000 + seq,
/// dp_rank 0, origin = 1-based line).
pub fn batched(events: &[KvEvent], source: &str) -> Trace {
    let records = events
        .chunks(16)
        .enumerate()
        .map(|(i, chunk)| {
            TraceRecord::Batch(TraceBatch {
                source: source.into(),
                dp_rank: Some(0),
                seq: i as u64,
                ts: 1_700_000_000.0 + i as f64,
                events: chunk.to_vec(),
                provenance: None,
                raw: None,
                origin: i as u64 + 1,
            })
        })
        .collect();
    Trace { records }
}
