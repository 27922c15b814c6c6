//! Issue 17's analysis-to-decode ratio: on a msgpack stream, alternating rounds of
//!
//! * **decode**: the streaming decoder (`wire::stream::Decoder`) record by record, each record
//!   dropped once decoded (how `kvscope check` reads), and
//! * **decode + analysis**: the same, each record pushed into `analysis::Analyzer` with every
//!   model and rule (what `check` runs), then `Analyzer::finish` (no report rendering),
//!
//! in one process, the file read once before the rounds. Prints each round's wall and CPU
//! seconds (this thread's, `/proc/thread-self/schedstat`: on a loaded machine the wall time
//! also counts other processes' turns), then the medians and the median of the per-round
//! ratios (decode + analysis) / decode.
//!
//! ```text
//! analysis_ratio write DIR [EVENTS]   # DIR/bench-analysis.msgpack: --bench analysis's trace
//!                                     # DIR/bench-wire.msgpack: --bench wire's trace
//! analysis_ratio FILE [ROUNDS]        # ROUNDS (default 7) alternating rounds; MODELS=llmd,dynamo
//!                                     # runs only those models (MODELS= none: the rest alone)
//! ```
//!
//! `scripts/bench-analysis.sh` writes the anchor stream (`examples/decode_anchor.rs`) and the
//! bench traces, and runs this on each.

use std::hint::black_box;
use std::time::Instant;

use kvscope_core::analysis::{AnalysisConfig, Analyzer};
use kvscope_core::consumers::ConsumerKind;
use kvscope_core::event::KvEventBatch;
use kvscope_core::trace::TraceRecord;
use kvscope_core::wire::msgpack::encode_batch_into;
use kvscope_core::wire::stream::Decoder;
use kvscope_core::wire::EventEncoding;

#[path = "../benches/common/mod.rs"]
mod common;

// `wire_trace`: `--bench wire`'s trace, shared with the benchmark and `decode_anchor`.
use common::{build_trace, wire_trace};

/// This thread's CPU time so far (nanoseconds), or `None` where there is no such file.
fn thread_cpu_ns() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    s.split_whitespace().next()?.parse().ok()
}

fn encode(batches: impl Iterator<Item = KvEventBatch>) -> Vec<u8> {
    let mut out = Vec::new();
    for b in batches {
        encode_batch_into(&mut out, &b, EventEncoding::Map);
    }
    out
}

fn write(dir: &str, n: usize) -> std::io::Result<()> {
    let dir = std::path::Path::new(dir);
    let analysis = build_trace(n);
    let bytes = encode(analysis.batches().map(|b| KvEventBatch {
        ts: b.ts,
        events: b.events.clone(),
        data_parallel_rank: b.dp_rank,
    }));
    std::fs::write(dir.join("bench-analysis.msgpack"), &bytes)?;
    std::fs::write(
        dir.join("bench-wire.msgpack"),
        encode(wire_trace::batches(n).into_iter()),
    )?;
    println!("wrote {n} events each to {}", dir.display());
    Ok(())
}

/// One pass over `bytes`; with `analyze`, every record goes through an [`Analyzer`]. Returns
/// the events seen (and the findings, with `analyze`).
#[inline(never)]
fn pass(bytes: &[u8], config: Option<&AnalysisConfig>) -> Result<(usize, usize), String> {
    let mut d = Decoder::new("bench");
    d.push(bytes);
    d.finish();
    let mut analyzer = config.map(Analyzer::new);
    let mut events = 0;
    while let Some(rec) = d.next_record().map_err(|e| e.to_string())? {
        if let TraceRecord::Batch(b) = &rec {
            events += b.events.len();
        }
        match analyzer.as_mut() {
            Some(a) => a.push(&rec),
            None => drop(black_box(rec)),
        }
    }
    let findings = analyzer.map_or(0, |a| black_box(a.finish()).findings.len());
    Ok((events, findings))
}

/// Wall and CPU seconds of one pass.
fn timed(bytes: &[u8], config: Option<&AnalysisConfig>) -> Result<(f64, f64, usize), String> {
    let cpu = thread_cpu_ns();
    let t = Instant::now();
    let (_, findings) = pass(black_box(bytes), config)?;
    let wall = t.elapsed().as_secs_f64();
    let cpu = match (cpu, thread_cpu_ns()) {
        (Some(a), Some(b)) => b.saturating_sub(a) as f64 / 1e9,
        _ => wall,
    };
    Ok((wall, cpu, findings))
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

fn run(file: &str, rounds: usize) -> Result<(), String> {
    let bytes = std::fs::read(file).map_err(|e| format!("{file}: {e}"))?;
    let mut config = AnalysisConfig::default();
    // `MODELS=llmd,dynamo` (or `MODELS=` for none): only these models, to see what each costs.
    if let Ok(list) = std::env::var("MODELS") {
        config.consumers = list
            .split(',')
            .filter(|s| !s.is_empty())
            .map(|s| ConsumerKind::parse(s).ok_or(format!("MODELS: unknown model {s:?}")))
            .collect::<Result<_, _>>()?;
    }
    let (events, _) = pass(&bytes, None)?;
    println!(
        "{file}: {events} events, {:.1} MB",
        bytes.len() as f64 / 1e6
    );
    let mut rows = Vec::new();
    for i in 1..=rounds {
        let (dw, dc, _) = timed(&bytes, None)?;
        let (aw, ac, findings) = timed(&bytes, Some(&config))?;
        println!(
            "round {i}: decode {dw:.3} s (cpu {dc:.3}), decode + analysis {aw:.3} s (cpu {ac:.3}), \
             {findings} findings"
        );
        rows.push((dw, dc, aw, ac));
    }
    let col = |f: fn(&(f64, f64, f64, f64)) -> f64| median(rows.iter().map(f).collect());
    println!(
        "median wall: decode {:.3} s, decode + analysis {:.3} s",
        col(|r| r.0),
        col(|r| r.2)
    );
    println!(
        "median cpu:  decode {:.3} s, decode + analysis {:.3} s",
        col(|r| r.1),
        col(|r| r.3)
    );
    println!(
        "(decode + analysis) / decode, median of per-round ratios: wall {:.2}, cpu {:.2}",
        col(|r| r.2 / r.0),
        col(|r| r.3 / r.1)
    );
    Ok(())
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.iter().map(String::as_str).collect::<Vec<_>>()[..] {
        ["write", dir] => write(dir, 1_000_000).map_err(|e| e.to_string()),
        ["write", dir, n] => match n.parse() {
            Ok(n) => write(dir, n).map_err(|e| e.to_string()),
            Err(e) => Err(format!("EVENTS: {e}")),
        },
        [file] => run(file, 7),
        [file, rounds] => match rounds.parse() {
            Ok(r) if r > 0 => run(file, r),
            _ => Err(format!("ROUNDS: {rounds:?} is not a positive number")),
        },
        _ => Err("usage: analysis_ratio write DIR [EVENTS] | analysis_ratio FILE [ROUNDS]".into()),
    };
    if let Err(e) = result {
        eprintln!("analysis_ratio: {e}");
        std::process::exit(2);
    }
}
