//! The JSON Lines reader against the msgpack decoder on the same trace in the same run: prints
//! best-of-N times and the ratio JSON Lines / msgpack (how many times longer reading the JSON
//! Lines text takes than decoding the same batches from msgpack). Before, the baseline was the
//! serde-based JSON Lines reader the current one replaced; that reader is gone (its outcomes
//! are frozen in `tests/fixtures/wire/jsonl-legacy/`).
//!
//! `cargo bench -p kvscope-core --bench jsonl_ab`
//!
//! * `KVSCOPE_BENCH_EVENTS=N` sets the trace size (default 200,000 events).
//! * `KVSCOPE_BENCH_RUNS=N` sets the number of interleaved runs of each reader (default 15).
//!
//! Two traces, each timed on its own:
//!
//! * `capture`, shaped like a vLLM capture: batches of 1-32 events; per request a chain of
//!   `BlockStored` events (one block hash each, the previous block as parent, 16 token ids of
//!   realistic size, GPU or CPU medium, `lora_id`/`lora_name` null), and now and then a
//!   `BlockRemoved` of several blocks; hashes are full-range `u64`s, one in 50 a hex string.
//! * `envelope`, the trace of `benches/wire.rs`:
//!   16 `BlockStored` events per batch, small token ids, `group_idx` and `kv_cache_spec_kind`
//!   set.

use std::hint::black_box;
use std::time::{Duration, Instant};

use kvscope_core::event::{BlockRemoved, BlockStored, KvEvent};
use kvscope_core::hash::BlockHash;
use kvscope_core::trace::{Trace, TraceBatch, TraceHeader, TraceRecord};
use kvscope_core::wire::{jsonl, msgpack, EventEncoding};
use smallvec::smallvec;

mod common;

use common::{batched, splitmix};

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// A block hash: a full-range `u64`, every 50th a 32-byte hash (written as hex).
fn hash(i: u64) -> BlockHash {
    let h = splitmix(i);
    if h.is_multiple_of(50) {
        let bytes: Vec<u8> = (0..4).flat_map(|k| splitmix(h + k).to_le_bytes()).collect();
        BlockHash::Bytes(bytes.into())
    } else {
        BlockHash::Int(h)
    }
}

/// The `capture` trace of `n` events (see the module docs).
fn capture_trace(n: usize) -> Trace {
    let mut events = Vec::with_capacity(n);
    let mut block = 0u64;
    let mut rng = 1u64;
    while events.len() < n {
        rng = splitmix(rng);
        let chain = 1 + rng % 24;
        let medium = if rng % 4 == 3 { "CPU" } else { "GPU" };
        for k in 0..chain {
            let id = block + k;
            events.push(KvEvent::BlockStored(BlockStored {
                block_hashes: smallvec![hash(id)],
                parent_block_hash: (k > 0).then(|| hash(id - 1)),
                token_ids: (0..16)
                    .map(|t| (splitmix(id * 16 + t) % 151_000) as u32)
                    .collect(),
                block_size: 16,
                lora_id: None,
                medium: Some(medium.into()),
                lora_name: None,
                extra_keys: None,
                group_idx: None,
                kv_cache_spec_kind: None,
                kv_cache_spec_sliding_window: None,
                locality: None,
                ownership: None,
            }));
        }
        if rng.is_multiple_of(3) && block > 64 {
            let old = block - 64;
            events.push(KvEvent::BlockRemoved(BlockRemoved {
                block_hashes: (old..old + 1 + rng % 8).map(hash).collect(),
                medium: Some("GPU".into()),
                group_idx: None,
                locality: None,
                ownership: None,
            }));
        }
        block += chain;
    }
    events.truncate(n);
    let mut records = vec![TraceRecord::Header(TraceHeader {
        kvscope: 1,
        scenario: Some("bench".into()),
        meta: Default::default(),
    })];
    let mut rest = &events[..];
    let mut seq = 0u64;
    while !rest.is_empty() {
        let take = (1 + splitmix(seq) % 32).min(rest.len() as u64) as usize;
        let (batch, tail) = rest.split_at(take);
        records.push(TraceRecord::Batch(TraceBatch {
            source: "pod-0".into(),
            dp_rank: Some(0),
            seq,
            ts: 1_700_000_000.0 + seq as f64 * 0.0137,
            events: batch.to_vec(),
            provenance: None,
            raw: None,
            origin: 0,
        }));
        rest = tail;
        seq += 1;
    }
    Trace { records }
}

/// The `envelope` trace of `n` events: `benches/wire.rs`'s.
fn envelope_trace(n: usize) -> Trace {
    let events: Vec<KvEvent> = (0..n as u64)
        .map(|i| {
            let base = (i % 64) as u32 * 16;
            KvEvent::BlockStored(BlockStored {
                block_hashes: smallvec![BlockHash::Int(splitmix(i))],
                parent_block_hash: (i % 64 != 0).then(|| BlockHash::Int(splitmix(i - 1))),
                token_ids: (base..base + 16).collect(),
                block_size: 16,
                lora_id: None,
                medium: Some(if i % 4 == 3 { "CPU" } else { "GPU" }.into()),
                lora_name: None,
                extra_keys: None,
                group_idx: Some(0),
                kv_cache_spec_kind: Some("full_attention".into()),
                kv_cache_spec_sliding_window: None,
                locality: None,
                ownership: None,
            })
        })
        .collect();
    batched(&events, "pod-0")
}

fn time(read: impl Fn() -> usize) -> Duration {
    let t = Instant::now();
    black_box(read());
    t.elapsed()
}

fn main() {
    // `cargo bench` passes `--bench`; nothing to filter here.
    let n = env_usize("KVSCOPE_BENCH_EVENTS", 200_000);
    let runs = env_usize("KVSCOPE_BENCH_RUNS", 15).max(1);
    compare("capture", &capture_trace(n), n, runs);
    compare("envelope", &envelope_trace(n), n, runs);
}

/// Time both readers on `trace` (its JSON Lines text, its msgpack stream), interleaved, and
/// print the ratio.
fn compare(name: &str, trace: &Trace, n: usize, runs: usize) {
    let text = jsonl::write_trace(trace);
    let bytes = text.as_bytes();
    let mut stream = Vec::new();
    for b in trace.batches() {
        msgpack::encode_trace_batch_into(&mut stream, b, EventEncoding::Map);
    }
    let from_jsonl = jsonl::read_trace(bytes).expect("the JSON Lines reader reads the bench trace");
    let from_msgpack =
        msgpack::decode_stream(&stream, "pod-0").expect("the decoder reads the bench stream");
    assert_eq!(
        from_jsonl.event_count(),
        from_msgpack.event_count(),
        "both formats hold the same events"
    );
    println!(
        "jsonl_ab {name}: {n} events, {} lines, {:.1} MB of JSON Lines, {:.1} MB of msgpack, {runs} interleaved runs each",
        from_jsonl.records.len(),
        bytes.len() as f64 / 1e6,
        stream.len() as f64 / 1e6
    );
    drop((from_jsonl, from_msgpack));
    let read_jsonl = || jsonl::read_trace(black_box(bytes)).map_or(0, |t| t.records.len());
    let read_msgpack =
        || msgpack::decode_stream(black_box(&stream), "pod-0").map_or(0, |t| t.records.len());
    let (mut best_jsonl, mut best_msgpack) = (Duration::MAX, Duration::MAX);
    let mut ratios = Vec::with_capacity(runs);
    for i in 0..runs {
        // Alternate which reader goes first, so neither always runs on a warmer cache.
        let (a, b) = if i % 2 == 0 {
            let a = time(read_jsonl);
            (a, time(read_msgpack))
        } else {
            let b = time(read_msgpack);
            (time(read_jsonl), b)
        };
        best_jsonl = best_jsonl.min(a);
        best_msgpack = best_msgpack.min(b);
        ratios.push(a.as_secs_f64() / b.as_secs_f64());
    }
    ratios.sort_by(f64::total_cmp);
    println!(
        "jsonl_ab {name}: jsonl   best {:8.2} ms  {:6.1} MB/s",
        best_jsonl.as_secs_f64() * 1e3,
        bytes.len() as f64 / best_jsonl.as_secs_f64() / 1e6
    );
    println!(
        "jsonl_ab {name}: msgpack best {:8.2} ms  {:6.1} MB/s",
        best_msgpack.as_secs_f64() * 1e3,
        stream.len() as f64 / best_msgpack.as_secs_f64() / 1e6
    );
    println!(
        "jsonl_ab {name}: ratio jsonl/msgpack: best-of-{runs} {:.3}, per-run median {:.3} (min {:.3}, max {:.3})",
        best_jsonl.as_secs_f64() / best_msgpack.as_secs_f64(),
        ratios[ratios.len() / 2],
        ratios[0],
        ratios[ratios.len() - 1]
    );
}
