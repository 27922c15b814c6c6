//! Analysis and replay benchmarks.
//!
//! * `decode/msgpack` (when the msgpack codec is available) and `baseline/iterate` (touch every
//!   event's hashes): the baselines;
//! * `analysis/all` : all four consumer models + the violation index over the same trace;
//! * `replay/seek/{small,large}`: one random seek (plus a snapshot) on a 10k-event and an
//!   N-event trace (target: flat).
//!
//! The trace follows DECISIONS.md's benchmark shape: single-block `BlockStored` events with 16
//! tokens, mixed GPU/CPU media (each request's GPU chain then its CPU offload job in prefix
//! order), 16 events per batch. `KVSCOPE_BENCH_EVENTS` sets N (default 1 000 000); the
//! replay index size per event is printed once.

use std::hint::black_box;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion};
use kvscope_core::analysis::{analyze, AnalysisConfig};
use kvscope_core::consumers::testkit::stored;
use kvscope_core::event::KvEvent;
use kvscope_core::replay::Replay;
use kvscope_core::trace::{Trace, TraceBatch, TraceRecord};
use kvscope_core::wire::{msgpack, EventEncoding};

fn splitmix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// `n` events: per request 8 GPU blocks chained, then the same 8 offloaded to CPU (one job per
/// request, prefix order), 16 events per batch; requests continue a chain of 64 blocks.
fn build_trace(n: usize) -> Trace {
    let mut events: Vec<KvEvent> = Vec::with_capacity(n);
    let mut block = 0u64;
    while events.len() < n {
        let first = block;
        let ids: Vec<u64> = (0..8).map(|k| splitmix(first + k)).collect();
        for (k, h) in ids.iter().enumerate() {
            let idx = first + k as u64;
            let parent = if idx.is_multiple_of(64) {
                None
            } else {
                Some(splitmix(idx - 1))
            };
            events.push(stored(&[*h], parent, Some("GPU"), 16));
        }
        for (k, h) in ids.iter().enumerate() {
            let idx = first + k as u64;
            let parent = if idx.is_multiple_of(64) {
                None
            } else {
                Some(splitmix(idx - 1))
            };
            events.push(stored(&[*h], parent, Some("CPU"), 16));
        }
        block += 8;
    }
    events.truncate(n);
    let records = events
        .chunks(16)
        .enumerate()
        .map(|(i, chunk)| {
            TraceRecord::Batch(TraceBatch {
                source: "pod".into(),
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

fn events_from_env() -> usize {
    std::env::var("KVSCOPE_BENCH_EVENTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1_000_000)
}

fn bench(c: &mut Criterion) {
    let n = events_from_env();
    let trace = build_trace(n);
    let config = AnalysisConfig::default();

    let mut stream = Vec::new();
    for b in trace.batches() {
        stream.extend(msgpack::encode_batch(&b.to_wire(), EventEncoding::Map));
    }
    let decodable = !stream.is_empty() && msgpack::decode_stream(&stream, "pod").is_ok();

    let mut g = c.benchmark_group(format!("{n}_events"));
    g.sample_size(10)
        .measurement_time(Duration::from_secs(20))
        .warm_up_time(Duration::from_secs(1));
    if decodable {
        eprintln!("msgpack stream: {} bytes", stream.len());
        g.bench_function("decode/msgpack", |b| {
            b.iter(|| msgpack::decode_stream(black_box(&stream), "pod"))
        });
    } else {
        eprintln!("msgpack codec not available in this build: decode baseline skipped");
    }
    g.bench_function("baseline/iterate", |b| {
        b.iter(|| {
            let mut acc = 0u64;
            for batch in black_box(&trace).batches() {
                for e in &batch.events {
                    for h in e.block_hashes() {
                        acc = acc.wrapping_add(h.as_u64());
                    }
                }
            }
            acc
        })
    });
    g.bench_function("analysis/all", |b| {
        b.iter(|| analyze(black_box(&trace), &config))
    });
    g.finish();

    let small = Replay::new(build_trace(10_000.min(n)), &config);
    let large = Replay::new(trace, &config);
    eprintln!(
        "replay index: {} bytes for {} events = {:.0} bytes/event; {} bytes for 10k = {:.0} bytes/event",
        large.index_bytes(),
        large.len(),
        large.index_bytes() as f64 / large.len().max(1) as f64,
        small.index_bytes(),
        small.index_bytes() as f64 / small.len().max(1) as f64,
    );
    let mut g = c.benchmark_group("replay_seek");
    g.sample_size(50);
    for (name, mut r) in [("small_10k", small), ("large", large)] {
        let len = r.len();
        let mut x = 1u64;
        g.bench_function(name, |b| {
            b.iter(|| {
                x = splitmix(x);
                r.seek((x % (len as u64 + 1)) as usize);
                black_box(r.snapshot().blocks_seen)
            })
        });
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
