//! Wire formats: vLLM's msgpack `KVEventBatch` (map and legacy array event encodings) and the
//! kvscope JSON Lines trace. Pure functions over byte slices; no IO.
//!
//! Every decoder reports errors with a [`Location`] (1-based line for JSONL, byte offset for
//! msgpack) and never panics on hostile input.

pub(crate) mod base64;
mod json;
mod json_write;
pub mod jsonl;
pub mod msgpack;
pub mod stream;

use std::fmt;

use crate::trace::Trace;

/// Where in the input an error was found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Location {
    /// 1-based line of a JSON Lines file (and, optionally, a 1-based column).
    Line {
        /// Line number, from 1.
        line: u64,
        /// Column number, from 1, when known.
        column: Option<u64>,
    },
    /// Byte offset from the start of the input.
    Byte(u64),
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Location::Line {
                line,
                column: Some(c),
            } => write!(f, "line {line}, column {c}"),
            Location::Line { line, column: None } => write!(f, "line {line}"),
            Location::Byte(o) => write!(f, "byte offset {o}"),
        }
    }
}

/// A decoding error with its location.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{location}: {message}")]
pub struct WireError {
    /// Where it happened.
    pub location: Location,
    /// What is wrong, in words a user can act on.
    pub message: String,
}

/// How events are encoded inside a msgpack batch.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum EventEncoding {
    /// Current vLLM (since #42892): one map per event, `"type"` first.
    #[default]
    Map,
    /// Legacy positional arrays `[tag, field1, ...]` with every field present.
    Array,
}

/// A detected input format.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InputFormat {
    /// kvscope JSON Lines.
    Jsonl,
    /// Concatenated msgpack `KVEventBatch` payloads.
    MsgpackStream,
}

/// Guess the format from the first non-whitespace byte (`{` means JSON Lines).
pub fn detect_format(bytes: &[u8]) -> InputFormat {
    match bytes.iter().find(|b| !b.is_ascii_whitespace()) {
        Some(b'{') => InputFormat::Jsonl,
        _ => InputFormat::MsgpackStream,
    }
}

/// Make room on the heap for about `bytes` bytes of decoded trace before decoding starts.
///
/// Only on `wasm32`: there the allocators (std's dlmalloc, talc) grow linear memory by about
/// what one allocation needs, so decoding a large trace out of many small allocations means
/// thousands of `memory.grow` calls, and in Node each one costs a garbage collection pass
/// (the memory's `ArrayBuffer` is external memory). Measured with the npm package in Node 20,
/// first `loadTrace` of 1M events: msgpack 8-9 s without this, 1.8-2.0 s with it; JSONL 14-16 s
/// without, 4.1-4.3 s with. One allocation of the whole size, freed at once, grows memory in
/// one step; the allocator keeps the freed block (wasm memory never shrinks) and carves the
/// trace's allocations out of it. Best effort: if the reservation fails, nothing happens and
/// decoding grows memory as it goes.
pub(crate) fn reserve_heap(bytes: usize) {
    #[cfg(target_arch = "wasm32")]
    {
        let mut block: Vec<u8> = Vec::new();
        if block.try_reserve_exact(bytes).is_ok() {
            // Keep the allocation from being optimised away.
            std::hint::black_box(&mut block);
        }
    }
    #[cfg(not(target_arch = "wasm32"))]
    let _ = bytes;
}

/// Converts the text of a JSON number that has a fraction or an exponent (ASCII, already
/// checked against JSON's grammar, e.g. `-1.5e-7`) into the nearest `f64`, ties to even; `None`
/// or an infinite result makes the JSON Lines reader report "number out of range".
///
/// [`parse_float`] is the default. The npm package passes the JavaScript engine's `parseFloat`
/// instead, which keeps a float parser out of its wasm (`wasm/README.md`, "Size").
pub type FloatParser = fn(&str) -> Option<f64>;

/// The default [`FloatParser`]: Rust's own `str::parse::<f64>`, correctly rounded.
///
/// (`lexical-parse-float` built `compact` was used here for its smaller wasm, until a property
/// test found text it rounds one ulp off, e.g. `110629936874779293585.3e-62`; that text is now
/// in `tests/fixtures/floats/hard-cases.txt`.)
pub fn parse_float(text: &str) -> Option<f64> {
    text.parse().ok()
}

/// Read a trace in either format. `source` names the publisher of a bare msgpack stream (the
/// input file's stem: `docs/trace-format.md` §2); JSONL lines carry their own.
pub fn read_trace(bytes: &[u8], source: &str) -> Result<Trace, WireError> {
    read_trace_with_progress(bytes, source, &mut |_| {})
}

/// [`read_trace`], calling `progress(bytes_done)` as the input is consumed.
pub fn read_trace_with_progress(
    bytes: &[u8],
    source: &str,
    progress: &mut dyn FnMut(usize),
) -> Result<Trace, WireError> {
    read_trace_with(bytes, source, parse_float, progress)
}

/// [`read_trace_with_progress`], converting JSON Lines floats with `floats` instead of
/// [`parse_float`].
pub fn read_trace_with(
    bytes: &[u8],
    source: &str,
    floats: FloatParser,
    progress: &mut dyn FnMut(usize),
) -> Result<Trace, WireError> {
    match detect_format(bytes) {
        InputFormat::Jsonl => jsonl::read_trace_with(bytes, floats, progress),
        InputFormat::MsgpackStream => msgpack::decode_stream_with_progress(bytes, source, progress),
    }
}
