//! Analysis and replay benchmarks.
//!
//! * `decode/msgpack` (when the msgpack codec is available) and `baseline/iterate` (touch every
//!   event's hashes): the baselines;
//! * `analysis/all` : all four consumer models + the violation index over the same trace;
//! * `replay_seek/{small_10k,large}`: one random seek (plus a snapshot) on a 10k-event and an
//!   N-event trace (target: flat); the lane entries a seek applies (mean, max over all
//!   cursors) are printed for both, as work independent of the machine.
//!
//! The trace has the project's analysis benchmark shape: single-block `BlockStored` events with 16
//! tokens, mixed GPU/CPU media (each request's GPU chain then its CPU offload job in prefix
//! order), 16 events per batch. `KVSCOPE_BENCH_EVENTS` sets N (default 1 000 000); the
//! replay index size per event is printed once.

use std::hint::black_box;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion};
use kvscope_core::analysis::{analyze, AnalysisConfig};
use kvscope_core::replay::Replay;
use kvscope_core::wire::{msgpack, EventEncoding};

mod common;

use common::{build_trace, splitmix};

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
    // Work per seek, independent of the machine: recorded lane entries (checkpoint entries
    // plus changes) a seek applies, over every cursor.
    for r in [&small, &large] {
        let (mut sum, mut max) = (0usize, 0usize);
        for cursor in 0..=r.len() {
            let w = r.seek_work(cursor);
            sum += w;
            max = max.max(w);
        }
        eprintln!(
            "replay seek work at {} events: {:.1} mean, {} max lane entries applied per seek",
            r.len(),
            sum as f64 / (r.len() + 1) as f64,
            max
        );
    }
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
