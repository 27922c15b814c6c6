//! Seek + snapshot probe: random seeks on the benchmark trace (`benches/common`), timed, and a
//! `#[inline(never)]` loop to count cache misses under callgrind:
//!
//! ```text
//! cargo build --release -p kvscope-core --example seek_probe
//! target/release/examples/seek_probe time 10000 1000000      # ns per seek+snapshot
//! valgrind --tool=callgrind --cache-sim=yes --collect-atstart=no \
//!   --toggle-collect='seek_probe::probe' target/release/examples/seek_probe probe 1000000 20000
//! ```

use std::hint::black_box;
use std::time::Instant;

use kvscope_core::analysis::AnalysisConfig;
use kvscope_core::replay::Replay;

#[path = "../benches/common/mod.rs"]
mod common;

use common::{build_trace, splitmix};

/// `seeks` random seeks, each followed by a snapshot.
#[inline(never)]
fn probe(r: &mut Replay, seeks: usize, mut x: u64) -> usize {
    let len = r.len() as u64;
    let mut acc = 0;
    for _ in 0..seeks {
        x = splitmix(x);
        r.seek((x % (len + 1)) as usize);
        acc += black_box(r.snapshot()).blocks_seen;
    }
    acc
}

/// `seeks` random seeks alone (`part = "seek"`), or `event_info` of random events.
#[inline(never)]
fn probe_part(r: &mut Replay, seeks: usize, mut x: u64, part: &str) -> usize {
    let len = r.len() as u64;
    let mut acc = 0;
    for _ in 0..seeks {
        x = splitmix(x);
        let c = (x % (len + 1)) as usize;
        match part {
            "seek" => r.seek(c),
            _ => acc += black_box(r.event_info(c.saturating_sub(1))).map_or(0, |e| e.pos),
        }
        acc += r.cursor();
    }
    acc
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let mode = args.get(1).map_or("time", |s| s.as_str());
    let sizes: Vec<usize> = args.iter().skip(2).filter_map(|s| s.parse().ok()).collect();
    let config = AnalysisConfig::default();
    match mode {
        "probe" => {
            let n = sizes.first().copied().unwrap_or(1_000_000);
            let seeks = sizes.get(1).copied().unwrap_or(20_000);
            let mut r = Replay::new(build_trace(n), &config);
            // Warm up (first touches), then the counted loop.
            probe(&mut r, seeks, 7);
            println!("{}", probe(&mut r, seeks, 1));
        }
        "seek" | "event_info" => {
            let mut replays: Vec<Replay> = sizes
                .iter()
                .map(|n| Replay::new(build_trace(*n), &config))
                .collect();
            let mut best = vec![f64::MAX; replays.len()];
            for round in 0..15 {
                for (k, r) in replays.iter_mut().enumerate() {
                    let t = Instant::now();
                    black_box(probe_part(r, 200_000, round as u64 * 31 + 1, mode));
                    best[k] = best[k].min(t.elapsed().as_nanos() as f64 / 200_000.0);
                }
            }
            for (n, b) in sizes.iter().zip(&best) {
                println!("{n} events: {b:.0} ns per {mode}");
            }
        }
        _ => {
            let sizes = if sizes.is_empty() {
                vec![10_000, 1_000_000]
            } else {
                sizes
            };
            let mut replays: Vec<Replay> = sizes
                .iter()
                .map(|n| Replay::new(build_trace(*n), &config))
                .collect();
            for r in &replays {
                let work: Vec<usize> = (0..=r.len()).map(|c| r.seek_work(c)).collect();
                println!(
                    "{} events: index {:.1} bytes/event; seek applies {:.1} mean, {} max lane entries",
                    r.len(),
                    r.index_bytes() as f64 / r.len().max(1) as f64,
                    work.iter().sum::<usize>() as f64 / work.len() as f64,
                    work.iter().max().copied().unwrap_or(0)
                );
            }
            // Alternate between the sizes so that machine noise hits both alike.
            let rounds = 15;
            let seeks = 200_000;
            let mut best = vec![f64::MAX; replays.len()];
            for round in 0..rounds {
                for (k, r) in replays.iter_mut().enumerate() {
                    let t = Instant::now();
                    black_box(probe(r, seeks, round as u64 * 31 + 1));
                    let ns = t.elapsed().as_nanos() as f64 / seeks as f64;
                    best[k] = best[k].min(ns);
                }
            }
            for (n, b) in sizes.iter().zip(&best) {
                println!("{n} events: {b:.0} ns per seek+snapshot (best of {rounds} x {seeks})");
            }
            if let (Some(a), Some(b)) = (best.first(), best.last()) {
                println!("ratio last/first: {:.2}", b / a);
            }
        }
    }
}
