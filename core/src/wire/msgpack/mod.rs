//! vLLM's msgpack `KVEventBatch` codec, byte-compatible with msgspec 0.23.
//!
//! Upstream: `vllm/distributed/kv_events.py` (`EventBatch(array_like, omit_defaults)`,
//! `KVCacheEvent(omit_defaults, tag=True)`, map-encoded since vLLM #42892, positional arrays
//! before it), published by `ZmqEventPublisher` with `msgspec.msgpack.Encoder`.
//!
//! # Decoding
//! * Batch: an array `[ts, events, data_parallel_rank]`; a 2-element `[ts, events]` (no rank)
//!   is accepted, elements past the third are skipped. `ts` may be float64, float32 or an int.
//! * Events: a map with a `"type"` key (any key order, unknown keys skipped, missing defaulted
//!   keys → `None`, missing nullable non-defaulted keys (`parent_block_hash`, `lora_id`,
//!   `medium`, `lora_name`) → `None`; a missing `block_hashes`, `token_ids` or `block_size` is
//!   an error), or a legacy positional array `[tag, f1, f2, ...]` (vLLM before #42892), where
//!   trailing fields may be absent (→ `None`) and elements past the known fields are skipped.
//! * Hashes: any msgpack int (full u64 range; a negative int is bit-cast to u64, as producers
//!   that write hashes as i64 mean the same 64 bits) or `bin` (→ [`BlockHash::Bytes`]).
//! * Errors carry the byte offset of the offending item's first byte (absolute within the
//!   stream for [`decode_stream`]) and name the event (0-based index) and field. Declared
//!   lengths never allocate more than the remaining input can hold; nesting deeper than
//!   [`MAX_DEPTH`] is rejected. No input can make the decoder panic.
//!
//! # Encoding
//! [`encode_batch`] writes exactly what msgspec writes: the batch as a 3-array with a float64
//! `ts` and the rank (or nil); map events with `"type"` first, then fields in declaration
//! order, defaulted fields omitted when `None`, non-defaulted fields always present (nil when
//! `None`); ints, strings, arrays and maps in their smallest encoding (fixint/uint8..64,
//! negative fixint/int8..64, fixstr/str8/16/32, bin8/16/32, fixarray/array16/32). The array
//! form writes every legacy positional field (11 for `BlockStored`, 3 for `BlockRemoved`);
//! `locality` and `ownership` never existed in the array era, so they are appended
//! positionally (13 / 5 fields) only when one of them is set — a kvscope extension that keeps
//! the data instead of dropping it.

use crate::event::{KvEvent, KvEventBatch};
use crate::trace::{Trace, TraceBatch, TraceRecord};

use super::{EventEncoding, Location, WireError};

mod decode;
mod encode;
#[cfg(test)]
mod tests;

use decode::{ctx, Reader};
use encode::{array_len, encode_event, float, opt_uint};

/// Deepest nesting of arrays/maps accepted inside `extra_keys` or skipped unknown values.
pub const MAX_DEPTH: usize = 64;

/// Decode one `KVEventBatch` payload. The whole slice must be exactly one msgpack value.
pub fn decode_batch(payload: &[u8]) -> Result<KvEventBatch, WireError> {
    let mut r = Reader::new(payload);
    let batch = r.batch().map_err(|e| *e)?;
    if r.pos != payload.len() {
        return Err(WireError {
            location: Location::Byte(r.pos as u64),
            message: format!(
                "{} trailing byte(s) after the batch",
                payload.len().saturating_sub(r.pos)
            ),
        });
    }
    Ok(batch)
}

/// Decode a stream of concatenated payloads into a trace: one batch record per payload, with
/// `source` as given, `seq` = 0-based position in the stream, `dp_rank` from the batch and
/// `origin` = 1-based batch number. Errors carry absolute byte offsets.
pub fn decode_stream(bytes: &[u8], source: &str) -> Result<Trace, WireError> {
    decode_stream_with_progress(bytes, source, &mut |_| {})
}

/// [`decode_stream`], calling `progress(bytes_done)` after each payload.
pub fn decode_stream_with_progress(
    bytes: &[u8],
    source: &str,
    progress: &mut dyn FnMut(usize),
) -> Result<Trace, WireError> {
    // The decoded trace takes about twice the payload bytes (412 B/event in memory vs 212 B of
    // msgpack for the benchmark trace).
    super::reserve_heap(bytes.len().saturating_mul(2));
    let mut r = Reader::new(bytes);
    let mut records = Vec::new();
    let mut seq = 0u64;
    while r.pos < bytes.len() {
        let batch = r
            .batch()
            .map_err(|e| *ctx(e, format_args!("batch {}", seq + 1)))?;
        records.push(TraceRecord::Batch(TraceBatch {
            source: source.to_owned(),
            dp_rank: batch.data_parallel_rank,
            seq,
            ts: batch.ts,
            events: batch.events,
            provenance: None,
            raw: None,
            origin: seq + 1,
        }));
        if seq == 0 {
            // Batches of a stream are usually alike: reserve for as many as the first one's
            // size suggests, capped at one record per 256 input bytes so that a tiny first
            // batch cannot reserve much more than the input (wasm memory is never returned).
            let estimate = bytes.len() / r.pos.max(1);
            records.reserve(estimate.min(bytes.len() / 256));
        }
        seq += 1;
        progress(r.pos);
    }
    Ok(Trace { records })
}

/// What the start of an unfinished stream holds (see [`crate::wire::stream`]).
pub(crate) enum Prefix {
    /// A whole batch and its length in bytes.
    Batch(KvEventBatch, usize),
    /// The start of a batch: more input may complete it (the error if it never comes).
    Truncated(Box<WireError>),
    /// Not a batch, whatever follows.
    Invalid(Box<WireError>),
}

/// Decode the batch at the start of `bytes`, which may be followed by more payloads or cut
/// short. Error offsets are relative to `bytes`.
pub(crate) fn decode_prefix(bytes: &[u8]) -> Prefix {
    let mut r = Reader::new(bytes);
    match r.batch() {
        Ok(b) => Prefix::Batch(b, r.pos),
        Err(e) if r.truncated => Prefix::Truncated(e),
        Err(e) => Prefix::Invalid(e),
    }
}

/// Split a stream of concatenated payloads into the byte ranges of its payloads (validating
/// each), without keeping the decoded batches.
pub fn split_stream(bytes: &[u8]) -> Result<Vec<std::ops::Range<usize>>, WireError> {
    let mut r = Reader::new(bytes);
    let mut out = Vec::new();
    while r.pos < bytes.len() {
        let start = r.pos;
        r.batch()
            .map_err(|e| *ctx(e, format_args!("batch {}", out.len() + 1)))?;
        out.push(start..r.pos);
    }
    Ok(out)
}

/// Encode one batch byte-identically to vLLM's msgspec encoder.
pub fn encode_batch(batch: &KvEventBatch, encoding: EventEncoding) -> Vec<u8> {
    let mut out = Vec::with_capacity(16 + batch.events.len() * 160);
    encode_batch_into(&mut out, batch, encoding);
    out
}

/// Append one encoded batch to `out` (see [`encode_batch`]).
pub fn encode_batch_into(out: &mut Vec<u8>, batch: &KvEventBatch, encoding: EventEncoding) {
    encode_parts(
        out,
        batch.ts,
        &batch.events,
        batch.data_parallel_rank,
        encoding,
    );
}

/// Append a trace batch's wire batch to `out`, as [`encode_batch_into`] of
/// [`TraceBatch::to_wire`] writes it, without copying the events.
pub fn encode_trace_batch_into(out: &mut Vec<u8>, batch: &TraceBatch, encoding: EventEncoding) {
    encode_parts(out, batch.ts, &batch.events, batch.dp_rank, encoding);
}

/// The batch array `[ts, events, data_parallel_rank]`.
fn encode_parts(
    out: &mut Vec<u8>,
    ts: f64,
    events: &[KvEvent],
    rank: Option<u32>,
    encoding: EventEncoding,
) {
    array_len(out, 3);
    // msgspec writes every Python float as float64.
    float(out, ts);
    array_len(out, events.len());
    for ev in events {
        encode_event(out, ev, encoding == EventEncoding::Map);
    }
    opt_uint(out, rank.map(u64::from));
}
