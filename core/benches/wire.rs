//! Wire-format throughput on the bench trace: 1M single-block `BlockStored` events (16 tokens,
//! every 4th on CPU, a parent chain per 64-block request), 16 events per batch. The msgspec
//! comparison on issue 17's anchor stream (one chain, GPU/CPU alternating) is
//! `scripts/bench-decode.sh` (`examples/decode_anchor.rs`).
//!
//! * `KVSCOPE_BENCH_EVENTS=N` scales the trace (default 1,000,000).
//! * Unless `KVSCOPE_BENCH_MSGSPEC=0`, the stream is also written (length-prefixed payloads) to
//!   `$KVSCOPE_BENCH_DUMP` (default: the system temp dir) and decoded by msgspec, vLLM's own
//!   decoder (`tests/fixtures/wire/bench_msgspec.py`), in the same run; a side-by-side line
//!   with kvscope's best-of-5 decode time is printed.

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use kvscope_core::event::KvEventBatch;
use kvscope_core::trace::{Trace, TraceBatch, TraceRecord};
use kvscope_core::wire::msgpack::{decode_stream, encode_batch_into};
use kvscope_core::wire::{jsonl, EventEncoding};

mod common;

use common::wire_trace::batches;

fn event_count() -> usize {
    std::env::var("KVSCOPE_BENCH_EVENTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1_000_000)
}

fn encode_all(batches: &[KvEventBatch], out: &mut Vec<u8>, payload_ends: Option<&mut Vec<usize>>) {
    let mut ends = payload_ends;
    for b in batches {
        encode_batch_into(out, b, EventEncoding::Map);
        if let Some(e) = ends.as_deref_mut() {
            e.push(out.len());
        }
    }
}

fn msgspec_side_by_side(stream: &[u8], ends: &[usize], events: usize) {
    if std::env::var("KVSCOPE_BENCH_MSGSPEC").as_deref() == Ok("0") {
        return;
    }
    let dir = std::env::var("KVSCOPE_BENCH_DUMP")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|_| std::env::temp_dir());
    let path = dir.join(format!("kvscope-wire-bench-{events}.lp"));
    let mut framed = Vec::with_capacity(stream.len() + ends.len() * 4);
    let mut start = 0;
    for &end in ends {
        framed.extend_from_slice(&((end - start) as u32).to_le_bytes());
        framed.extend_from_slice(&stream[start..end]);
        start = end;
    }
    if let Err(e) = std::fs::write(&path, &framed) {
        eprintln!(
            "msgspec comparison skipped: cannot write {}: {e}",
            path.display()
        );
        return;
    }
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../tests/fixtures/wire/bench_msgspec.py"
    );
    let mut best = Duration::MAX;
    for _ in 0..5 {
        let t = Instant::now();
        black_box(
            decode_stream(black_box(stream), "bench")
                .map(|t| t.records.len())
                .ok(),
        );
        best = best.min(t.elapsed());
    }
    let secs = best.as_secs_f64();
    println!(
        "side-by-side: kvscope decode_stream best of 5: {:.3} s, {:.1} MB/s, {:.2} M events/s",
        secs,
        stream.len() as f64 / secs / 1e6,
        events as f64 / secs / 1e6
    );
    match std::process::Command::new("python3")
        .arg(script)
        .arg(&path)
        .output()
    {
        Ok(o) if o.status.success() => {
            print!("{}", String::from_utf8_lossy(&o.stdout));
        }
        Ok(o) => eprintln!(
            "msgspec comparison skipped: {}",
            String::from_utf8_lossy(&o.stderr)
                .lines()
                .last()
                .unwrap_or("")
        ),
        Err(e) => eprintln!("msgspec comparison skipped: python3: {e}"),
    }
    let _ = std::fs::remove_file(&path);
}

fn bench_wire(c: &mut Criterion) {
    let n = event_count();
    let batches = batches(n);
    let mut stream = Vec::new();
    let mut ends = Vec::new();
    encode_all(&batches, &mut stream, Some(&mut ends));
    let trace = decode_stream(&stream, "bench").expect("bench stream decodes");
    let mut records = trace.records;
    for r in &mut records {
        if let TraceRecord::Batch(TraceBatch { source, .. }) = r {
            source.clear();
            source.push_str("pod-0");
        }
    }
    let trace = Trace { records };
    let jsonl_text = jsonl::write_trace(&trace);
    println!(
        "bench trace: {n} events, {} batches, msgpack {:.1} MB ({:.1} B/event), JSONL {:.1} MB",
        batches.len(),
        stream.len() as f64 / 1e6,
        stream.len() as f64 / n as f64,
        jsonl_text.len() as f64 / 1e6
    );
    msgspec_side_by_side(&stream, &ends, n);

    let mut g = c.benchmark_group("wire");
    g.sample_size(10)
        .measurement_time(Duration::from_secs(8))
        .warm_up_time(Duration::from_secs(1));

    g.throughput(Throughput::Bytes(stream.len() as u64));
    g.bench_function("msgpack_decode_stream/bytes", |b| {
        b.iter(|| decode_stream(black_box(&stream), "bench").map(|t| t.records.len()))
    });
    g.throughput(Throughput::Elements(n as u64));
    g.bench_function("msgpack_decode_stream/events", |b| {
        b.iter(|| decode_stream(black_box(&stream), "bench").map(|t| t.records.len()))
    });
    g.throughput(Throughput::Bytes(stream.len() as u64));
    g.bench_function("msgpack_encode/bytes", |b| {
        let mut out = Vec::with_capacity(stream.len());
        b.iter(|| {
            out.clear();
            encode_all(black_box(&batches), &mut out, None);
            out.len()
        })
    });
    g.throughput(Throughput::Elements(n as u64));
    g.bench_function("msgpack_encode/events", |b| {
        let mut out = Vec::with_capacity(stream.len());
        b.iter(|| {
            out.clear();
            encode_all(black_box(&batches), &mut out, None);
            out.len()
        })
    });
    g.throughput(Throughput::Bytes(jsonl_text.len() as u64));
    g.bench_function("jsonl_read/bytes", |b| {
        b.iter(|| jsonl::read_trace(black_box(jsonl_text.as_bytes())).map(|t| t.records.len()))
    });
    g.throughput(Throughput::Elements(n as u64));
    g.bench_function("jsonl_read/events", |b| {
        b.iter(|| jsonl::read_trace(black_box(jsonl_text.as_bytes())).map(|t| t.records.len()))
    });
    g.throughput(Throughput::Bytes(jsonl_text.len() as u64));
    g.bench_function("jsonl_write/bytes", |b| {
        let mut out = Vec::with_capacity(jsonl_text.len());
        b.iter(|| {
            out.clear();
            jsonl::write_trace_into(&mut out, black_box(&trace));
            out.len()
        })
    });
    g.throughput(Throughput::Elements(n as u64));
    g.bench_function("jsonl_write/events", |b| {
        let mut out = Vec::with_capacity(jsonl_text.len());
        b.iter(|| {
            out.clear();
            jsonl::write_trace_into(&mut out, black_box(&trace));
            out.len()
        })
    });
    g.finish();
}

criterion_group!(benches, bench_wire);
criterion_main!(benches);
