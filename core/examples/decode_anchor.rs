//! The decode benchmark's anchor stream (issue 17), written and timed with kvscope's own code:
//! 1M map-form `BlockStored` events, 16 per batch, one block each, 16 tokens `0..16`, a
//! single parent chain through every event, media alternating GPU (even) / CPU (odd),
//! `group_idx` 0, `kv_cache_spec_kind` `"full_attention"`, `ts` 1.7e9 + batch number, rank 0.
//! The block hashes are Python's `random.Random(1).getrandbits(64)` sequence (MT19937 below),
//! so the bytes are the ones a Python generator with msgspec's encoder writes for the same
//! events.
//!
//!
//! `write DIR EVENTS bench` writes the wire benchmark's trace instead (`benches/wire.rs`:
//! a parent chain per 64-block request, every 4th event on CPU).
//!
//! ```text
//! decode_anchor write DIR [EVENTS [anchor|bench]]
//!                                    # DIR/stream.msgpack and DIR/stream.lp (u32-LE framed)
//! decode_anchor time FILE            # wall and CPU seconds of one `wire::read_trace`
//!                                    # (the whole trace kept; file read excluded)
//! decode_anchor stream FILE          # the same for the streaming decoder (`wire::stream`,
//!                                    # what `kvscope check` reads with), each batch dropped
//! ```
//!
//! `scripts/bench-decode.sh` runs these and msgspec alternately and prints the median ratios.

use std::hint::black_box;

use smallvec::smallvec;
use std::time::Instant;

use kvscope_core::event::{BlockStored, KvEvent, KvEventBatch};
use kvscope_core::hash::BlockHash;
use kvscope_core::trace::{Trace, TraceRecord};
use kvscope_core::wire::msgpack::encode_batch_into;
use kvscope_core::wire::stream::TraceReader;
use kvscope_core::wire::{read_trace, EventEncoding};

#[path = "../benches/common/mod.rs"]
mod common;

use common::wire_trace::{self, EVENTS_PER_BATCH};

/// CPython's Mersenne Twister (`Modules/_randommodule.c`): `random.Random(seed)` for a small
/// non-negative int seed, and `getrandbits(64)`.
struct Mt {
    state: [u32; 624],
    index: usize,
}

impl Mt {
    /// `random.Random(seed)`: `init_by_array` with the seed as one 32-bit key word.
    fn new(seed: u32) -> Mt {
        let mut mt = [0u32; 624];
        mt[0] = 19_650_218;
        for i in 1..624 {
            mt[i] = 1_812_433_253u32
                .wrapping_mul(mt[i - 1] ^ (mt[i - 1] >> 30))
                .wrapping_add(i as u32);
        }
        let key = [seed];
        let (mut i, mut j) = (1usize, 0usize);
        for _ in 0..624 {
            mt[i] = (mt[i] ^ (mt[i - 1] ^ (mt[i - 1] >> 30)).wrapping_mul(1_664_525))
                .wrapping_add(key[j])
                .wrapping_add(j as u32);
            i += 1;
            j += 1;
            if i >= 624 {
                mt[0] = mt[623];
                i = 1;
            }
            if j >= key.len() {
                j = 0;
            }
        }
        for _ in 0..623 {
            mt[i] = (mt[i] ^ (mt[i - 1] ^ (mt[i - 1] >> 30)).wrapping_mul(1_566_083_941))
                .wrapping_sub(i as u32);
            i += 1;
            if i >= 624 {
                mt[0] = mt[623];
                i = 1;
            }
        }
        mt[0] = 0x8000_0000;
        Mt {
            state: mt,
            index: 624,
        }
    }

    fn next_u32(&mut self) -> u32 {
        if self.index >= 624 {
            for k in 0..624 {
                let y = (self.state[k] & 0x8000_0000) | (self.state[(k + 1) % 624] & 0x7fff_ffff);
                let mag = if y & 1 == 1 { 0x9908_b0df } else { 0 };
                self.state[k] = self.state[(k + 397) % 624] ^ (y >> 1) ^ mag;
            }
            self.index = 0;
        }
        let mut y = self.state[self.index];
        self.index += 1;
        y ^= y >> 11;
        y ^= (y << 7) & 0x9d2c_5680;
        y ^= (y << 15) & 0xefc6_0000;
        y ^ (y >> 18)
    }

    /// `getrandbits(64)`: the first 32-bit output is the low word.
    fn bits64(&mut self) -> u64 {
        let lo = u64::from(self.next_u32());
        let hi = u64::from(self.next_u32());
        (hi << 32) | lo
    }
}

/// The anchor stream's batches (`events` rounded down to whole batches).
fn anchor_batches(events: usize) -> Vec<KvEventBatch> {
    let mut rng = Mt::new(1);
    let mut prev: Option<u64> = None;
    (0..events / EVENTS_PER_BATCH)
        .map(|b| KvEventBatch {
            ts: 1.7e9 + b as f64,
            events: (0..EVENTS_PER_BATCH)
                .map(|i| {
                    let h = rng.bits64();
                    let parent = prev.replace(h);
                    KvEvent::BlockStored(BlockStored {
                        block_hashes: smallvec![BlockHash::Int(h)],
                        parent_block_hash: parent.map(BlockHash::Int),
                        token_ids: (0..16).collect(),
                        block_size: 16,
                        medium: Some(if i % 2 == 1 { "CPU" } else { "GPU" }.into()),
                        group_idx: Some(0),
                        kv_cache_spec_kind: Some("full_attention".into()),
                        ..Default::default()
                    })
                })
                .collect(),
            data_parallel_rank: Some(0),
        })
        .collect()
}

fn write(dir: &str, events: usize, shape: &str) -> Result<(), String> {
    let batches = match shape {
        "anchor" => anchor_batches(events),
        "bench" => wire_trace::batches(events),
        _ => return Err(format!("unknown shape {shape} (anchor or bench)")),
    };
    let mut stream = Vec::new();
    let mut framed = Vec::new();
    let mut payload = Vec::new();
    for batch in batches {
        payload.clear();
        encode_batch_into(&mut payload, &batch, EventEncoding::Map);
        stream.extend_from_slice(&payload);
        framed.extend_from_slice(&(payload.len() as u32).to_le_bytes());
        framed.extend_from_slice(&payload);
    }
    let dir = std::path::Path::new(dir);
    let io = |e: std::io::Error| format!("{}: {e}", dir.display());
    std::fs::write(dir.join("stream.msgpack"), &stream).map_err(io)?;
    std::fs::write(dir.join("stream.lp"), &framed).map_err(io)?;
    println!(
        "wrote {events} {shape} events, {:.1} MB, to {}",
        stream.len() as f64 / 1e6,
        dir.display()
    );
    Ok(())
}

/// This thread's CPU time so far (user and system, nanoseconds: the first field of
/// `/proc/thread-self/schedstat`), or `None` where there is no such file. On a loaded machine
/// the wall time counts other processes' turns; the CPU time does not.
fn thread_cpu_ns() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    s.split_whitespace().next()?.parse().ok()
}

/// What a timed decode returns: the number of events, and what it kept (dropped once the clock
/// has stopped: msgspec's keeping run does not free its batches either).
type Decoded = Result<(usize, Option<Trace>), String>;

/// Time `decode` on FILE's bytes and print `kvscope WALL_SECONDS CPU_SECONDS (N events)`.
fn time(file: &str, decode: fn(&[u8]) -> Decoded) -> Result<(), String> {
    let bytes = std::fs::read(file).map_err(|e| format!("{file}: {e}"))?;
    if std::env::var_os("DECODE_ANCHOR_WARM").is_some() {
        // Diagnostic: decode and drop once first, so that the timed decode reuses memory the
        // allocator already holds (how much of the time is the kernel's fresh pages).
        drop(decode(&bytes)?);
    }
    let cpu = thread_cpu_ns();
    let t = Instant::now();
    let (events, kept) = decode(black_box(&bytes))?;
    let secs = t.elapsed().as_secs_f64();
    let cpu_secs = match (cpu, thread_cpu_ns()) {
        (Some(a), Some(b)) => b.saturating_sub(a) as f64 / 1e9,
        _ => secs,
    };
    drop(black_box(kept));
    println!("kvscope {secs:.3} {cpu_secs:.3} ({events} events)");
    Ok(())
}

/// `wire::read_trace`: the whole trace decoded and kept.
fn keep_all(bytes: &[u8]) -> Decoded {
    let trace = read_trace(bytes, "bench").map_err(|e| e.to_string())?;
    Ok((trace.batches().map(|b| b.events.len()).sum(), Some(trace)))
}

/// The streaming decoder, as `kvscope check` reads: one batch at a time, each dropped once
/// counted (msgspec's dropping run does the same).
fn stream_each(bytes: &[u8]) -> Decoded {
    let mut events = 0;
    for record in TraceReader::new(bytes, "bench") {
        if let TraceRecord::Batch(b) = record.map_err(|e| e.to_string())? {
            events += black_box(b).events.len();
        }
    }
    Ok((events, None))
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.iter().map(String::as_str).collect::<Vec<_>>()[..] {
        ["write", dir] => write(dir, 1_000_000, "anchor"),
        ["write", dir, n] | ["write", dir, n, _] => match n.parse() {
            Ok(n) => write(dir, n, args.get(3).map_or("anchor", String::as_str)),
            Err(e) => Err(format!("EVENTS: {e}")),
        },
        ["time", file] => time(file, keep_all),
        ["stream", file] => time(file, stream_each),
        _ => Err(
            "usage: decode_anchor write DIR [EVENTS [anchor|bench]] | time FILE | stream FILE"
                .into(),
        ),
    };
    if let Err(e) = result {
        eprintln!("decode_anchor: {e}");
        std::process::exit(2);
    }
}
