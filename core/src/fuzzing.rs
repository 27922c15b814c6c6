//! The bodies of the fuzz targets in `fuzz/` (feature `fuzzing`; `docs/fuzzing.md`).
//!
//! Each function takes arbitrary bytes and panics only when kvscope breaks one of its
//! promises: a decoder panics, the streaming reader disagrees with the whole-input reader, an
//! error points outside the input, something kvscope wrote does not read back identically,
//! or the analysis, the replay or the simulator panics. The cargo-fuzz targets call them, and
//! so does `core/tests/fuzz_corpus.rs`, over every committed corpus file, in
//! `cargo test --workspace`.

use std::sync::Arc;

use crate::analysis::{analyze, AnalysisConfig};
use crate::replay::Replay;
use crate::scenario::Scenario;
use crate::trace::{Trace, TraceRecord};
use crate::wire::stream::Decoder;
use crate::wire::{jsonl, msgpack, read_trace, EventEncoding, Location, WireError};

/// A fuzz target's body.
pub type Target = fn(&[u8]);

/// The fuzz targets, by the name of their file in `fuzz/fuzz_targets/` and their corpus
/// folder `fuzz/corpus/<name>/`.
pub const TARGETS: &[(&str, Target)] = &[
    ("decode", decode),
    ("round_trip", round_trip),
    ("analysis_replay", analysis_replay),
    ("scenario_simulate", scenario_simulate),
];

/// Source name for bare msgpack streams.
const SOURCE: &str = "fuzz";

/// The simulator's step limit in [`scenario_simulate`].
const MAX_STEPS: u64 = 256;

/// Traces above this many events are decoded but not analysed (keeps one run short).
const MAX_ANALYSED_EVENTS: usize = 4096;

/// Decode `data` as a trace every way kvscope can: the whole-input reader (format detected),
/// the msgpack and JSON Lines readers forced, and the push decoder fed in small and large
/// chunks. No panic; every error points inside the input; the push decoder gives exactly the
/// whole-input reader's records or error.
pub fn decode(data: &[u8]) {
    let whole = read_trace(data, SOURCE);
    if let Err(e) = &whole {
        check_location(e, data);
    }
    if let Err(e) = msgpack::decode_stream(data, SOURCE) {
        check_location(&e, data);
    }
    if let Err(e) = jsonl::read_trace(data) {
        check_location(&e, data);
    }
    let whole = whole.map(|t| t.records);
    for chunk in [1, 61, 1 << 16] {
        assert_eq!(
            pushed(data, chunk),
            whole,
            "the push decoder fed {chunk}-byte chunks disagrees with read_trace"
        );
    }
}

/// Whatever `data` decodes to, kvscope writes back and reads back identically, in JSON Lines
/// and in msgpack (both event encodings).
pub fn round_trip(data: &[u8]) {
    if let Ok(trace) = read_trace(data, SOURCE) {
        check_round_trip(&trace);
    }
}

/// Analyse and replay what `data` decodes to: no panic, the replay's analysis is the
/// analysis', and a seek lands where stepping does.
pub fn analysis_replay(data: &[u8]) {
    let Ok(trace) = read_trace(data, SOURCE) else {
        return;
    };
    if trace.event_count() <= MAX_ANALYSED_EVENTS {
        check_analysis(trace);
    }
}

/// Parse `data` as a scenario file and, when it is valid and small, simulate it: no panic,
/// and the trace it gives reads back identically and analyses without panicking.
pub fn scenario_simulate(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(mut scenario) = Scenario::from_json(text) else {
        return;
    };
    // Few steps: a run that needs more ends in the step limit's clean error.
    scenario.max_steps = scenario.max_steps.min(MAX_STEPS);
    if scenario.validate().is_err() || !small(&scenario) {
        return;
    }
    if let Ok(trace) = crate::sim::simulate(&scenario) {
        check_round_trip(&trace);
        if trace.event_count() <= MAX_ANALYSED_EVENTS {
            check_analysis(trace);
        }
    }
}

/// A scenario a fuzzer can run many times a second: few tokens, engines, workers and tiers.
/// (The limits themselves are tested in `core/tests/scenario_limits.rs`.)
fn small(s: &Scenario) -> bool {
    let mut tokens: u64 = 0;
    let mut requests = s.requests.iter().collect::<Vec<_>>();
    requests.extend(s.engines.iter().flat_map(|e| e.requests.iter()));
    for r in requests {
        tokens += u64::from(r.prompt_len.unwrap_or(0))
            + r.token_ids.as_ref().map_or(0, |t| t.len() as u64)
            + u64::from(r.max_tokens)
            + r.output_token_ids.as_ref().map_or(0, |t| t.len() as u64);
    }
    let engines = s.engines.len().max(1) as u64;
    tokens * s.groups.len() as u64 <= 1 << 14
        && engines <= 8
        && s.completion.workers <= 16
        && s.secondary_tiers.len() <= 4
}

fn check_analysis(trace: Trace) {
    let trace = Arc::new(trace);
    for workers in [None, Some(2)] {
        let config = AnalysisConfig {
            workers,
            ..AnalysisConfig::default()
        };
        let analysis = analyze(&trace, &config);
        let mut replay = Replay::new(trace.clone(), &config);
        let (findings, violations) = replay.rendered_findings();
        assert_eq!(findings, analysis.findings);
        assert_eq!(violations, analysis.violations);
        assert_eq!(replay.analysis().verdict_kinds, analysis.verdict_kinds);
        let n = replay.len();
        let mid = n / 2;
        replay.seek(mid);
        let seeked = replay.snapshot();
        replay.seek(0);
        for _ in 0..mid {
            replay.step_forward();
        }
        assert_eq!(
            replay.snapshot(),
            seeked,
            "seek({mid}) and {mid} steps differ"
        );
        while replay.step_forward().is_some() {}
        assert_eq!(replay.cursor(), n);
        for i in 0..n {
            let _ = replay.event_info(i);
        }
        while replay.step_back().is_some() {}
        assert_eq!(replay.cursor(), 0);
    }
}

/// Write `trace` as JSON Lines and as msgpack, read each back, and compare.
fn check_round_trip(trace: &Trace) {
    let text = jsonl::write_trace(trace);
    let back = jsonl::read_trace(text.as_bytes())
        .unwrap_or_else(|e| panic!("kvscope cannot read its own JSON Lines: {e}\n{text}"));
    assert_eq!(jsonl::write_trace(&back), text, "JSON Lines round trip");

    let batches: Vec<_> = trace.batches().collect();
    for encoding in [EventEncoding::Map, EventEncoding::Array] {
        // What `kvscope convert --to msgpack` writes: a batch's `raw` bytes, else its events.
        let mut bytes = Vec::new();
        for b in &batches {
            match &b.raw {
                Some(raw) => bytes.extend_from_slice(raw),
                None => msgpack::encode_trace_batch_into(&mut bytes, b, encoding),
            }
        }
        let back = msgpack::decode_stream(&bytes, SOURCE)
            .unwrap_or_else(|e| panic!("kvscope cannot read its own msgpack: {e}"));
        let back: Vec<_> = back.batches().collect();
        assert_eq!(back.len(), batches.len(), "msgpack round trip: batch count");
        for (a, b) in batches.iter().zip(&back) {
            assert_eq!(a.to_wire(), b.to_wire(), "msgpack round trip");
            let (mut x, mut y) = (Vec::new(), Vec::new());
            msgpack::encode_trace_batch_into(&mut x, a, encoding);
            msgpack::encode_trace_batch_into(&mut y, b, encoding);
            assert_eq!(x, y, "msgpack re-encoding");
        }
    }
}

/// The push decoder fed `chunk` bytes at a time.
fn pushed(bytes: &[u8], chunk: usize) -> Result<Vec<TraceRecord>, WireError> {
    let mut d = Decoder::new(SOURCE);
    let mut out = Vec::new();
    for piece in bytes.chunks(chunk) {
        d.push(piece);
        while let Some(r) = d.next_record()? {
            out.push(r);
        }
    }
    d.finish();
    while let Some(r) = d.next_record()? {
        out.push(r);
    }
    Ok(out)
}

/// An error's location is inside the input (a byte offset at most its length; a line that
/// exists).
fn check_location(e: &WireError, data: &[u8]) {
    match e.location {
        Location::Byte(o) => assert!(o as usize <= data.len(), "offset {o} > {}", data.len()),
        Location::Line { line, .. } => {
            let lines = data.split(|&b| b == b'\n').count() as u64;
            assert!(line >= 1 && line <= lines.max(1), "line {line} of {lines}");
        }
    }
}
