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

use std::fmt;

use rmp::Marker;

use crate::event::{BlockRemoved, BlockStored, ExtraValue, KvEvent, KvEventBatch, TokenId};
use crate::hash::BlockHash;
use crate::text::Quoted;
use crate::trace::{Trace, TraceBatch, TraceRecord};

use super::{EventEncoding, Location, WireError};

/// Deepest nesting of arrays/maps accepted inside `extra_keys` or skipped unknown values.
pub const MAX_DEPTH: usize = 64;

/// Decode one `KVEventBatch` payload. The whole slice must be exactly one msgpack value.
pub fn decode_batch(payload: &[u8]) -> Result<KvEventBatch, WireError> {
    let mut r = Reader {
        buf: payload,
        pos: 0,
    };
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
    let mut r = Reader { buf: bytes, pos: 0 };
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
        seq += 1;
        progress(r.pos);
    }
    Ok(Trace { records })
}

/// Split a stream of concatenated payloads into the byte ranges of its payloads (validating
/// each), without keeping the decoded batches.
pub fn split_stream(bytes: &[u8]) -> Result<Vec<std::ops::Range<usize>>, WireError> {
    let mut r = Reader { buf: bytes, pos: 0 };
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

// ---------------------------------------------------------------------------------------------
// Encoding helpers: msgpack's smallest encodings written straight into the `Vec<u8>` (not
// through `rmp::encode`, whose generic writers and `Result`s cost about 1.8 KB of wasm).

/// `n` with the smallest header: `fix | n` when `n < fix_end`, else the first of `sized`
/// (markers of the 1-, 2-, 4- and 8-byte forms, 0 where a form does not exist) whose width
/// holds `n`, followed by `n` big-endian in that width.
fn head(out: &mut Vec<u8>, n: u64, fix: u8, fix_end: u64, sized: [u8; 4]) {
    if n < fix_end {
        out.push(fix | n as u8);
        return;
    }
    for (i, marker) in sized.into_iter().enumerate() {
        let width = 1usize << i;
        if marker != 0 && (width == 8 || n >> (8 * width) == 0) {
            out.push(marker);
            out.extend_from_slice(&n.to_be_bytes()[8 - width..]);
            return;
        }
    }
}

fn nil(out: &mut Vec<u8>) {
    out.push(0xc0);
}

fn boolean(out: &mut Vec<u8>, b: bool) {
    out.push(if b { 0xc3 } else { 0xc2 });
}

/// positive fixint, uint8/16/32/64.
fn uint(out: &mut Vec<u8>, v: u64) {
    head(out, v, 0x00, 0x80, [0xcc, 0xcd, 0xce, 0xcf]);
}

/// A non-negative value as [`uint`]; a negative one as negative fixint or int8/16/32/64.
fn sint(out: &mut Vec<u8>, v: i64) {
    if v >= 0 {
        return uint(out, v as u64);
    }
    if v >= -32 {
        out.push(v as u8);
        return;
    }
    // int8/16/32/64 (markers 0xd0..=0xd3): the narrowest width holding `v`.
    let mut i = 0;
    while i < 3 && v < -(1i64 << (8 * (1 << i) - 1)) {
        i += 1;
    }
    out.push(0xd0 + i as u8);
    out.extend_from_slice(&v.to_be_bytes()[8 - (1 << i)..]);
}

fn float(out: &mut Vec<u8>, v: f64) {
    out.push(0xcb);
    out.extend_from_slice(&v.to_be_bytes());
}

/// Lengths over u32::MAX cannot be represented in msgpack; such data cannot come from a
/// decoded payload. Truncation is never silent: they are written as the longest prefix.
fn capped(n: usize) -> usize {
    n.min(u32::MAX as usize)
}

fn string(out: &mut Vec<u8>, s: &str) {
    let len = capped(s.len());
    head(out, len as u64, 0xa0, 32, [0xd9, 0xda, 0xdb, 0]);
    out.extend_from_slice(s.as_bytes().get(..len).unwrap_or_default());
}

fn bin(out: &mut Vec<u8>, b: &[u8]) {
    let len = capped(b.len());
    head(out, len as u64, 0, 0, [0xc4, 0xc5, 0xc6, 0]);
    out.extend_from_slice(b.get(..len).unwrap_or_default());
}

fn array_len(out: &mut Vec<u8>, n: usize) {
    head(out, capped(n) as u64, 0x90, 16, [0, 0xdc, 0xdd, 0]);
}

fn map_len(out: &mut Vec<u8>, n: usize) {
    head(out, capped(n) as u64, 0x80, 16, [0, 0xde, 0xdf, 0]);
}

fn opt_str(out: &mut Vec<u8>, s: &Option<String>) {
    match s {
        Some(s) => string(out, s),
        None => nil(out),
    }
}

fn opt_uint(out: &mut Vec<u8>, v: Option<u64>) {
    match v {
        Some(v) => uint(out, v),
        None => nil(out),
    }
}

fn hash(out: &mut Vec<u8>, h: &BlockHash) {
    match h {
        BlockHash::Int(v) => uint(out, *v),
        BlockHash::Bytes(b) => bin(out, b),
    }
}

fn opt_hash(out: &mut Vec<u8>, h: Option<&BlockHash>) {
    match h {
        Some(h) => hash(out, h),
        None => nil(out),
    }
}

fn hashes(out: &mut Vec<u8>, hs: &[BlockHash]) {
    array_len(out, hs.len());
    for h in hs {
        hash(out, h);
    }
}

fn tokens(out: &mut Vec<u8>, ts: &[TokenId]) {
    array_len(out, ts.len());
    for t in ts {
        uint(out, u64::from(*t));
    }
}

fn extra_value(out: &mut Vec<u8>, v: &ExtraValue) {
    match v {
        ExtraValue::Nil => nil(out),
        ExtraValue::Bool(b) => boolean(out, *b),
        ExtraValue::UInt(u) => uint(out, *u),
        ExtraValue::Int(i) => sint(out, *i),
        ExtraValue::Float(f) => float(out, *f),
        ExtraValue::Str(s) => string(out, s),
        ExtraValue::Bytes(b) => bin(out, b),
        ExtraValue::Array(items) => {
            array_len(out, items.len());
            for i in items {
                extra_value(out, i);
            }
        }
        ExtraValue::Map(pairs) => {
            map_len(out, pairs.len());
            for (k, v) in pairs {
                extra_value(out, k);
                extra_value(out, v);
            }
        }
    }
}

fn extra_keys(out: &mut Vec<u8>, keys: Option<&[Option<ExtraValue>]>) {
    match keys {
        None => nil(out),
        Some(keys) => {
            array_len(out, keys.len());
            for k in keys {
                match k {
                    Some(v) => extra_value(out, v),
                    None => nil(out),
                }
            }
        }
    }
}

/// An event as a map (`map`: current vLLM, keys named, optional trailing fields only when
/// set) or a positional array (legacy vLLM: every field, `locality` / `ownership` only when
/// either is set). One function for both forms: they share the field order.
fn encode_event(out: &mut Vec<u8>, ev: &KvEvent, map: bool) {
    // The key of a field both forms always write.
    let key = |out: &mut Vec<u8>, k: &str| {
        if map {
            string(out, k);
        }
    };
    // Whether to write an optional field (and its key, in a map): a map writes it when it
    // is set (`set`), an array when it has the position (`positional`).
    let field = |out: &mut Vec<u8>, k: &str, set: bool, positional: bool| {
        if map && set {
            string(out, k);
        }
        if map {
            set
        } else {
            positional
        }
    };
    // The head and the `type` tag.
    let head = |out: &mut Vec<u8>, map_fields: usize, array_fields: usize, tag: &str| {
        if map {
            map_len(out, map_fields);
            string(out, "type");
        } else {
            array_len(out, array_fields);
        }
        string(out, tag);
    };
    match ev {
        KvEvent::BlockStored(e) => {
            let extended = e.locality.is_some() || e.ownership.is_some();
            let n = 8
                + usize::from(e.extra_keys.is_some())
                + usize::from(e.group_idx.is_some())
                + usize::from(e.kv_cache_spec_kind.is_some())
                + usize::from(e.kv_cache_spec_sliding_window.is_some())
                + usize::from(e.locality.is_some())
                + usize::from(e.ownership.is_some());
            head(out, n, if extended { 14 } else { 12 }, "BlockStored");
            key(out, "block_hashes");
            hashes(out, &e.block_hashes);
            key(out, "parent_block_hash");
            opt_hash(out, e.parent_block_hash.as_ref());
            key(out, "token_ids");
            tokens(out, &e.token_ids);
            key(out, "block_size");
            uint(out, u64::from(e.block_size));
            key(out, "lora_id");
            match e.lora_id {
                Some(v) => sint(out, v),
                None => nil(out),
            }
            key(out, "medium");
            opt_str(out, &e.medium);
            key(out, "lora_name");
            opt_str(out, &e.lora_name);
            if field(out, "extra_keys", e.extra_keys.is_some(), true) {
                extra_keys(out, e.extra_keys.as_deref());
            }
            if field(out, "group_idx", e.group_idx.is_some(), true) {
                opt_uint(out, e.group_idx.map(u64::from));
            }
            if field(
                out,
                "kv_cache_spec_kind",
                e.kv_cache_spec_kind.is_some(),
                true,
            ) {
                opt_str(out, &e.kv_cache_spec_kind);
            }
            let window = e.kv_cache_spec_sliding_window;
            if field(out, "kv_cache_spec_sliding_window", window.is_some(), true) {
                opt_uint(out, window);
            }
            if field(out, "locality", e.locality.is_some(), extended) {
                opt_str(out, &e.locality);
            }
            if field(out, "ownership", e.ownership.is_some(), extended) {
                opt_str(out, &e.ownership);
            }
        }
        KvEvent::BlockRemoved(e) => {
            let extended = e.locality.is_some() || e.ownership.is_some();
            let n = 3
                + usize::from(e.group_idx.is_some())
                + usize::from(e.locality.is_some())
                + usize::from(e.ownership.is_some());
            head(out, n, if extended { 6 } else { 4 }, "BlockRemoved");
            key(out, "block_hashes");
            hashes(out, &e.block_hashes);
            key(out, "medium");
            opt_str(out, &e.medium);
            if field(out, "group_idx", e.group_idx.is_some(), true) {
                opt_uint(out, e.group_idx.map(u64::from));
            }
            if field(out, "locality", e.locality.is_some(), extended) {
                opt_str(out, &e.locality);
            }
            if field(out, "ownership", e.ownership.is_some(), extended) {
                opt_str(out, &e.ownership);
            }
        }
        KvEvent::AllBlocksCleared => head(out, 1, 1, "AllBlocksCleared"),
    }
}

// ---------------------------------------------------------------------------------------------
// Decoding.

/// An error before context (event index, field name) is added.
/// Boxed so that the hot path moves small `Result`s.
type Res<T> = Result<T, Box<WireError>>;

fn err(offset: usize, message: impl Into<String>) -> Box<WireError> {
    Box::new(WireError {
        location: Location::Byte(offset as u64),
        message: message.into(),
    })
}

/// Prefix an error's message with context: `{prefix}: {message}`. Out of line and cold, so
/// that a call site costs building `prefix`'s arguments and a call (formatting inlined at every
/// site was about 1.5 KB of wasm).
#[cold]
#[inline(never)]
fn ctx(mut e: Box<WireError>, prefix: fmt::Arguments<'_>) -> Box<WireError> {
    e.message = format!("{prefix}: {}", e.message);
    e
}

/// What a marker denotes, for error messages.
fn kind_name(m: Marker) -> &'static str {
    match m {
        Marker::FixPos(_) | Marker::U8 | Marker::U16 | Marker::U32 | Marker::U64 => "int",
        Marker::FixNeg(_) | Marker::I8 | Marker::I16 | Marker::I32 | Marker::I64 => "int",
        Marker::Null => "nil",
        Marker::True | Marker::False => "bool",
        Marker::F32 | Marker::F64 => "float",
        Marker::FixStr(_) | Marker::Str8 | Marker::Str16 | Marker::Str32 => "str",
        Marker::Bin8 | Marker::Bin16 | Marker::Bin32 => "bin",
        Marker::FixArray(_) | Marker::Array16 | Marker::Array32 => "array",
        Marker::FixMap(_) | Marker::Map16 | Marker::Map32 => "map",
        Marker::Reserved => "reserved byte 0xc1",
        _ => "ext",
    }
}

/// A decoded msgpack integer.
#[derive(Clone, Copy)]
enum Int {
    U(u64),
    /// Always negative.
    N(i64),
}

struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn remaining(&self) -> usize {
        self.buf.len().saturating_sub(self.pos)
    }

    fn take(&mut self, n: usize, what: &str) -> Res<&'a [u8]> {
        let end = self.pos.checked_add(n).filter(|&e| e <= self.buf.len());
        match end.and_then(|e| self.buf.get(self.pos..e).map(|s| (s, e))) {
            Some((s, e)) => {
                self.pos = e;
                Ok(s)
            }
            None => Err(err(
                self.pos,
                format!(
                    "unexpected end of input: {what} needs {n} byte(s), {} left",
                    self.remaining()
                ),
            )),
        }
    }

    fn be(&mut self, n: usize, what: &str) -> Res<u64> {
        let s = self.take(n, what)?;
        Ok(match *s {
            [a] => u64::from(a),
            [a, b] => u64::from(u16::from_be_bytes([a, b])),
            [a, b, c, d] => u64::from(u32::from_be_bytes([a, b, c, d])),
            [a, b, c, d, e, f, g, h] => u64::from_be_bytes([a, b, c, d, e, f, g, h]),
            _ => s.iter().fold(0u64, |acc, b| (acc << 8) | u64::from(*b)),
        })
    }

    /// Read a marker; returns it with its offset.
    fn marker(&mut self) -> Res<(Marker, usize)> {
        let at = self.pos;
        match self.buf.get(at) {
            Some(b) => {
                self.pos += 1;
                Ok((Marker::from_u8(*b), at))
            }
            None => Err(err(at, "unexpected end of input: expected a value")),
        }
    }

    fn peek_marker(&self) -> Option<Marker> {
        self.buf.get(self.pos).map(|b| Marker::from_u8(*b))
    }

    fn type_err(at: usize, expected: &str, m: Marker) -> Box<WireError> {
        err(at, format!("expected {expected}, found {}", kind_name(m)))
    }

    /// Integer payload for an int marker, or `None` for other markers.
    fn int_body(&mut self, m: Marker) -> Res<Option<Int>> {
        Ok(Some(match m {
            Marker::FixPos(v) => Int::U(u64::from(v)),
            Marker::FixNeg(v) => Int::N(i64::from(v)),
            Marker::U8 => Int::U(self.be(1, "uint8")?),
            Marker::U16 => Int::U(self.be(2, "uint16")?),
            Marker::U32 => Int::U(self.be(4, "uint32")?),
            Marker::U64 => Int::U(self.be(8, "uint64")?),
            Marker::I8 => signed(self.be(1, "int8")? as u8 as i8 as i64),
            Marker::I16 => signed(self.be(2, "int16")? as u16 as i16 as i64),
            Marker::I32 => signed(self.be(4, "int32")? as u32 as i32 as i64),
            Marker::I64 => signed(self.be(8, "int64")? as i64),
            _ => return Ok(None),
        }))
    }

    fn int(&mut self, expected: &str) -> Res<(Int, usize)> {
        let (m, at) = self.marker()?;
        match self.int_body(m)? {
            Some(i) => Ok((i, at)),
            None => Err(Self::type_err(at, expected, m)),
        }
    }

    fn u64_val(&mut self, expected: &str) -> Res<u64> {
        match self.int(expected)? {
            (Int::U(v), _) => Ok(v),
            (Int::N(v), at) => Err(err(at, format!("expected {expected}, found {v}"))),
        }
    }

    fn u32_val(&mut self, expected: &str) -> Res<u32> {
        let at = self.pos;
        let v = self.u64_val(expected)?;
        u32::try_from(v).map_err(|_| err(at, format!("{v} is out of range for {expected}")))
    }

    fn is_nil(&mut self) -> bool {
        if self.peek_marker() == Some(Marker::Null) {
            self.pos += 1;
            true
        } else {
            false
        }
    }

    fn opt<T>(&mut self, f: impl FnOnce(&mut Self) -> Res<T>) -> Res<Option<T>> {
        if self.is_nil() {
            Ok(None)
        } else {
            f(self).map(Some)
        }
    }

    /// Length of the value behind a container/str/bin marker, capped by what remains.
    fn len_for(&mut self, m: Marker) -> Res<Option<usize>> {
        Ok(Some(match m {
            Marker::FixArray(n) | Marker::FixMap(n) | Marker::FixStr(n) => usize::from(n),
            Marker::Array16 | Marker::Map16 | Marker::Str16 | Marker::Bin16 => {
                self.be(2, "length")? as usize
            }
            Marker::Array32 | Marker::Map32 | Marker::Str32 | Marker::Bin32 => {
                self.be(4, "length")? as usize
            }
            Marker::Str8 | Marker::Bin8 => self.be(1, "length")? as usize,
            _ => return Ok(None),
        }))
    }

    fn array_len(&mut self, expected: &str) -> Res<(usize, usize)> {
        let (m, at) = self.marker()?;
        match m {
            Marker::FixArray(_) | Marker::Array16 | Marker::Array32 => {
                Ok((self.len_for(m)?.unwrap_or(0), at))
            }
            _ => Err(Self::type_err(at, expected, m)),
        }
    }

    fn str_body(&mut self, len: usize, at: usize) -> Res<&'a str> {
        let bytes = self.take(len, "string")?;
        std::str::from_utf8(bytes).map_err(|e| err(at, format!("invalid UTF-8 in string: {e}")))
    }

    fn str_val(&mut self) -> Res<&'a str> {
        let (m, at) = self.marker()?;
        match m {
            Marker::FixStr(_) | Marker::Str8 | Marker::Str16 | Marker::Str32 => {
                let len = self.len_for(m)?.unwrap_or(0);
                self.str_body(len, at)
            }
            _ => Err(Self::type_err(at, "str", m)),
        }
    }

    fn string(&mut self) -> Res<String> {
        self.str_val().map(str::to_owned)
    }

    fn hash(&mut self) -> Res<BlockHash> {
        // Fast path: uint64, vLLM's usual wire hash.
        if let Some([0xcf, a, b, c, d, e, f, g, h, ..]) = self.buf.get(self.pos..) {
            self.pos += 9;
            return Ok(BlockHash::Int(u64::from_be_bytes([
                *a, *b, *c, *d, *e, *f, *g, *h,
            ])));
        }
        let (m, at) = self.marker()?;
        if let Some(i) = self.int_body(m)? {
            return Ok(BlockHash::Int(match i {
                Int::U(v) => v,
                Int::N(v) => v as u64,
            }));
        }
        match m {
            Marker::Bin8 | Marker::Bin16 | Marker::Bin32 => {
                let len = self.len_for(m)?.unwrap_or(0);
                Ok(BlockHash::Bytes(self.take(len, "bin")?.into()))
            }
            _ => Err(Self::type_err(at, "int or bytes", m)),
        }
    }

    fn hashes(&mut self) -> Res<Vec<BlockHash>> {
        let (n, _) = self.array_len("array")?;
        let mut v = Vec::with_capacity(n.min(self.remaining()));
        for i in 0..n {
            v.push(self.hash().map_err(|e| ctx(e, format_args!("item {i}")))?);
        }
        Ok(v)
    }

    fn tokens(&mut self) -> Res<Vec<TokenId>> {
        let (n, _) = self.array_len("array")?;
        let mut v = Vec::with_capacity(n.min(self.remaining()));
        for i in 0..n {
            // Fast paths: positive fixint, uint8, uint16 (token ids are almost always these).
            match self.buf.get(self.pos..) {
                Some([b, ..]) if *b < 0x80 => {
                    self.pos += 1;
                    v.push(TokenId::from(*b));
                    continue;
                }
                Some([0xcc, b, ..]) => {
                    self.pos += 2;
                    v.push(TokenId::from(*b));
                    continue;
                }
                Some([0xcd, hi, lo, ..]) => {
                    self.pos += 3;
                    v.push(TokenId::from(u16::from_be_bytes([*hi, *lo])));
                    continue;
                }
                _ => {}
            }
            v.push(
                self.u32_val("token id (u32)")
                    .map_err(|e| ctx(e, format_args!("item {i}")))?,
            );
        }
        Ok(v)
    }

    fn float(&mut self) -> Res<f64> {
        let (m, at) = self.marker()?;
        match m {
            Marker::F64 => Ok(f64::from_bits(self.be(8, "float64")?)),
            Marker::F32 => Ok(f64::from(f32::from_bits(self.be(4, "float32")? as u32))),
            _ => match self.int_body(m)? {
                Some(Int::U(v)) => Ok(v as f64),
                Some(Int::N(v)) => Ok(v as f64),
                None => Err(Self::type_err(at, "float", m)),
            },
        }
    }

    fn extra_value(&mut self, depth: usize) -> Res<ExtraValue> {
        let (m, at) = self.marker()?;
        if let Some(i) = self.int_body(m)? {
            return Ok(match i {
                Int::U(v) => ExtraValue::UInt(v),
                Int::N(v) => ExtraValue::Int(v),
            });
        }
        Ok(match m {
            Marker::Null => ExtraValue::Nil,
            Marker::True => ExtraValue::Bool(true),
            Marker::False => ExtraValue::Bool(false),
            Marker::F64 => ExtraValue::Float(f64::from_bits(self.be(8, "float64")?)),
            Marker::F32 => {
                ExtraValue::Float(f64::from(f32::from_bits(self.be(4, "float32")? as u32)))
            }
            Marker::FixStr(_) | Marker::Str8 | Marker::Str16 | Marker::Str32 => {
                let len = self.len_for(m)?.unwrap_or(0);
                ExtraValue::Str(self.str_body(len, at)?.to_owned())
            }
            Marker::Bin8 | Marker::Bin16 | Marker::Bin32 => {
                let len = self.len_for(m)?.unwrap_or(0);
                ExtraValue::Bytes(self.take(len, "bin")?.to_vec())
            }
            Marker::FixArray(_) | Marker::Array16 | Marker::Array32 => {
                if depth >= MAX_DEPTH {
                    return Err(err(at, format!("nesting deeper than {MAX_DEPTH}")));
                }
                let n = self.len_for(m)?.unwrap_or(0);
                let mut v = Vec::with_capacity(n.min(self.remaining()));
                for _ in 0..n {
                    v.push(self.extra_value(depth + 1)?);
                }
                ExtraValue::Array(v)
            }
            Marker::FixMap(_) | Marker::Map16 | Marker::Map32 => {
                if depth >= MAX_DEPTH {
                    return Err(err(at, format!("nesting deeper than {MAX_DEPTH}")));
                }
                let n = self.len_for(m)?.unwrap_or(0);
                let mut v = Vec::with_capacity(n.min(self.remaining() / 2));
                for _ in 0..n {
                    let k = self.extra_value(depth + 1)?;
                    let val = self.extra_value(depth + 1)?;
                    v.push((k, val));
                }
                ExtraValue::Map(v)
            }
            _ => return Err(err(at, format!("unsupported msgpack {}", kind_name(m)))),
        })
    }

    fn extra_keys(&mut self) -> Res<Vec<Option<ExtraValue>>> {
        let (n, _) = self.array_len("array or nil")?;
        let mut v = Vec::with_capacity(n.min(self.remaining()));
        for i in 0..n {
            let item = if self.is_nil() {
                None
            } else {
                Some(
                    self.extra_value(1)
                        .map_err(|e| ctx(e, format_args!("item {i}")))?,
                )
            };
            v.push(item);
        }
        Ok(v)
    }

    /// Skip one value of any type.
    fn skip(&mut self, depth: usize) -> Res<()> {
        let (m, at) = self.marker()?;
        if self.int_body(m)?.is_some() {
            return Ok(());
        }
        match m {
            Marker::Null | Marker::True | Marker::False => Ok(()),
            Marker::F32 => self.take(4, "float32").map(drop),
            Marker::F64 => self.take(8, "float64").map(drop),
            Marker::FixStr(_)
            | Marker::Str8
            | Marker::Str16
            | Marker::Str32
            | Marker::Bin8
            | Marker::Bin16
            | Marker::Bin32 => {
                let len = self.len_for(m)?.unwrap_or(0);
                self.take(len, kind_name(m)).map(drop)
            }
            Marker::FixArray(_) | Marker::Array16 | Marker::Array32 => {
                if depth >= MAX_DEPTH {
                    return Err(err(at, format!("nesting deeper than {MAX_DEPTH}")));
                }
                let n = self.len_for(m)?.unwrap_or(0);
                for _ in 0..n {
                    self.skip(depth + 1)?;
                }
                Ok(())
            }
            Marker::FixMap(_) | Marker::Map16 | Marker::Map32 => {
                if depth >= MAX_DEPTH {
                    return Err(err(at, format!("nesting deeper than {MAX_DEPTH}")));
                }
                let n = self.len_for(m)?.unwrap_or(0);
                for _ in 0..n {
                    self.skip(depth + 1)?;
                    self.skip(depth + 1)?;
                }
                Ok(())
            }
            Marker::FixExt1 => self.take(2, "ext").map(drop),
            Marker::FixExt2 => self.take(3, "ext").map(drop),
            Marker::FixExt4 => self.take(5, "ext").map(drop),
            Marker::FixExt8 => self.take(9, "ext").map(drop),
            Marker::FixExt16 => self.take(17, "ext").map(drop),
            Marker::Ext8 | Marker::Ext16 | Marker::Ext32 => {
                let w = match m {
                    Marker::Ext8 => 1,
                    Marker::Ext16 => 2,
                    _ => 4,
                };
                let len = self.be(w, "ext length")? as usize;
                self.take(len.saturating_add(1), "ext").map(drop)
            }
            _ => Err(Self::type_err(at, "a msgpack value", m)),
        }
    }

    fn batch(&mut self) -> Res<KvEventBatch> {
        let (n, at) = self
            .array_len("array [ts, events, data_parallel_rank]")
            .map_err(|e| ctx(e, format_args!("batch")))?;
        if n < 2 {
            return Err(err(
                at,
                format!("batch: expected [ts, events, data_parallel_rank], found an array of {n}"),
            ));
        }
        let ts = self
            .float()
            .map_err(|e| ctx(e, format_args!("batch: field ts")))?;
        let (count, _) = self
            .array_len("array")
            .map_err(|e| ctx(e, format_args!("batch: field events")))?;
        let mut events = Vec::with_capacity(count.min(self.remaining()));
        for i in 0..count {
            events.push(
                self.event()
                    .map_err(|e| ctx(e, format_args!("event {i}")))?,
            );
        }
        let mut data_parallel_rank = None;
        if n >= 3 {
            data_parallel_rank = self
                .opt(|r| r.u32_val("int"))
                .map_err(|e| ctx(e, format_args!("batch: field data_parallel_rank")))?;
        }
        for _ in 3..n {
            self.skip(0)?;
        }
        Ok(KvEventBatch {
            ts,
            events,
            data_parallel_rank,
        })
    }

    fn event(&mut self) -> Res<KvEvent> {
        let (m, at) = self.marker()?;
        match m {
            Marker::FixMap(_) | Marker::Map16 | Marker::Map32 => {
                let n = self.len_for(m)?.unwrap_or(0);
                self.event_map(n, at)
            }
            Marker::FixArray(_) | Marker::Array16 | Marker::Array32 => {
                let n = self.len_for(m)?.unwrap_or(0);
                self.event_array(n, at)
            }
            _ => Err(Self::type_err(at, "map or array", m)),
        }
    }

    /// A string's raw bytes (no UTF-8 check: used for keys and tags compared to ASCII names).
    fn str_bytes(&mut self) -> Res<&'a [u8]> {
        let (m, at) = self.marker()?;
        let len = match m {
            Marker::FixStr(n) => usize::from(n),
            Marker::Str8 | Marker::Str16 | Marker::Str32 => self.len_for(m)?.unwrap_or(0),
            _ => return Err(Self::type_err(at, "str", m)),
        };
        self.take(len, "string")
    }

    fn event_map(&mut self, n: usize, at: usize) -> Res<KvEvent> {
        let mut f = Fields::default();
        let mut tag: Option<&'a [u8]> = None;
        for _ in 0..n {
            let key = self.str_bytes().map_err(|e| ctx(e, format_args!("key")))?;
            if key == b"type" {
                tag = Some(
                    self.str_bytes()
                        .map_err(|e| ctx(e, format_args!("field type")))?,
                );
                continue;
            }
            match field_index(key) {
                Some(idx) => f.read(self, idx).map_err(|e| {
                    let name = FIELD_NAMES.get(idx).copied().unwrap_or("?");
                    ctx(e, format_args!("field {name}"))
                })?,
                None => self
                    .skip(0)
                    .map_err(|e| ctx(e, format_args!("field {}", String::from_utf8_lossy(key))))?,
            }
        }
        let tag = tag.ok_or_else(|| err(at, "event map has no \"type\" key"))?;
        f.build(tag, at, "key")
    }

    fn event_array(&mut self, n: usize, at: usize) -> Res<KvEvent> {
        if n == 0 {
            return Err(err(at, "empty event array (expected [tag, fields...])"));
        }
        let tag = self.str_bytes().map_err(|e| ctx(e, format_args!("tag")))?;
        let order: &[usize] = match tag {
            b"BlockStored" => &STORED_ORDER,
            b"BlockRemoved" => &REMOVED_ORDER,
            _ => &[],
        };
        let mut f = Fields::default();
        for i in 0..n - 1 {
            match order.get(i) {
                Some(&idx) => {
                    f.read(self, idx).map_err(|e| {
                        let name = FIELD_NAMES.get(idx).copied().unwrap_or("?");
                        ctx(e, format_args!("field {name} (position {})", i + 1))
                    })?;
                }
                None => self.skip(0)?,
            }
        }
        f.build(tag, at, "positional field")
    }
}

fn signed(v: i64) -> Int {
    if v < 0 {
        Int::N(v)
    } else {
        Int::U(v as u64)
    }
}

/// Index into [`FIELD_NAMES`] of a key.
fn field_index(key: &[u8]) -> Option<usize> {
    Some(match key {
        b"block_hashes" => 0,
        b"parent_block_hash" => 1,
        b"token_ids" => 2,
        b"block_size" => 3,
        b"lora_id" => 4,
        b"medium" => 5,
        b"lora_name" => 6,
        b"extra_keys" => 7,
        b"group_idx" => 8,
        b"kv_cache_spec_kind" => 9,
        b"kv_cache_spec_sliding_window" => 10,
        b"locality" => 11,
        b"ownership" => 12,
        _ => return None,
    })
}

/// Field names, indexed as in [`Fields::read`].
const FIELD_NAMES: [&str; 13] = [
    "block_hashes",
    "parent_block_hash",
    "token_ids",
    "block_size",
    "lora_id",
    "medium",
    "lora_name",
    "extra_keys",
    "group_idx",
    "kv_cache_spec_kind",
    "kv_cache_spec_sliding_window",
    "locality",
    "ownership",
];
/// Legacy positional order of `BlockStored` (declaration order, #16750 .. #40984, then the
/// map-only fields as a kvscope extension).
const STORED_ORDER: [usize; 13] = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12];
/// Legacy positional order of `BlockRemoved`.
const REMOVED_ORDER: [usize; 5] = [0, 5, 8, 11, 12];

/// Every field of every event type, as decoded (a field absent from the input stays `None`).
#[derive(Default)]
struct Fields {
    block_hashes: Option<Vec<BlockHash>>,
    parent_block_hash: Option<BlockHash>,
    token_ids: Option<Vec<TokenId>>,
    block_size: Option<u32>,
    lora_id: Option<i64>,
    medium: Option<String>,
    lora_name: Option<String>,
    extra_keys: Option<Vec<Option<ExtraValue>>>,
    group_idx: Option<u32>,
    kv_cache_spec_kind: Option<String>,
    kv_cache_spec_sliding_window: Option<u64>,
    locality: Option<String>,
    ownership: Option<String>,
}

impl Fields {
    fn read(&mut self, r: &mut Reader<'_>, idx: usize) -> Res<()> {
        match idx {
            0 => self.block_hashes = Some(r.hashes()?),
            1 => self.parent_block_hash = r.opt(Reader::hash)?,
            2 => self.token_ids = Some(r.tokens()?),
            3 => self.block_size = Some(r.u32_val("int (u32)")?),
            4 => {
                self.lora_id = r.opt(|r| match r.int("int or nil")? {
                    (Int::U(v), at) => i64::try_from(v)
                        .map_err(|_| err(at, format!("{v} is out of range for i64"))),
                    (Int::N(v), _) => Ok(v),
                })?
            }
            5 => self.medium = r.opt(Reader::string)?,
            6 => self.lora_name = r.opt(Reader::string)?,
            7 => self.extra_keys = r.opt(Reader::extra_keys)?,
            8 => self.group_idx = r.opt(|r| r.u32_val("int (u32) or nil"))?,
            9 => self.kv_cache_spec_kind = r.opt(Reader::string)?,
            10 => self.kv_cache_spec_sliding_window = r.opt(|r| r.u64_val("int or nil"))?,
            11 => self.locality = r.opt(Reader::string)?,
            _ => self.ownership = r.opt(Reader::string)?,
        }
        Ok(())
    }

    fn build(self, tag: &[u8], at: usize, what: &str) -> Res<KvEvent> {
        // The tag as text only for messages (not validated on the success path).
        let name = || String::from_utf8_lossy(tag);
        let missing = |field: &str| err(at, format!("{}: missing required {what} {field}", name()));
        match tag {
            // One match on the required fields (not a `?` per field, each of which dropped the
            // fields moved before it on its error path).
            b"BlockStored" => match (self.block_hashes, self.token_ids, self.block_size) {
                (Some(block_hashes), Some(token_ids), Some(block_size)) => {
                    Ok(KvEvent::BlockStored(BlockStored {
                        block_hashes,
                        parent_block_hash: self.parent_block_hash,
                        token_ids,
                        block_size,
                        lora_id: self.lora_id,
                        medium: self.medium,
                        lora_name: self.lora_name,
                        extra_keys: self.extra_keys,
                        group_idx: self.group_idx,
                        kv_cache_spec_kind: self.kv_cache_spec_kind,
                        kv_cache_spec_sliding_window: self.kv_cache_spec_sliding_window,
                        locality: self.locality,
                        ownership: self.ownership,
                    }))
                }
                (None, _, _) => Err(missing("block_hashes")),
                (_, None, _) => Err(missing("token_ids")),
                (_, _, None) => Err(missing("block_size")),
            },
            b"BlockRemoved" => match self.block_hashes {
                Some(block_hashes) => Ok(KvEvent::BlockRemoved(BlockRemoved {
                    block_hashes,
                    medium: self.medium,
                    group_idx: self.group_idx,
                    locality: self.locality,
                    ownership: self.ownership,
                })),
                None => Err(missing("block_hashes")),
            },
            b"AllBlocksCleared" => Ok(KvEvent::AllBlocksCleared),
            _ => Err(err(
                at,
                format!(
                    "unknown event type {} (expected BlockStored, BlockRemoved or AllBlocksCleared)",
                    Quoted(&name())
                ),
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stored(hash: u64, parent: Option<u64>, tokens: Vec<u32>) -> KvEvent {
        KvEvent::BlockStored(BlockStored {
            block_hashes: vec![BlockHash::Int(hash)],
            parent_block_hash: parent.map(BlockHash::Int),
            token_ids: tokens,
            block_size: 4,
            lora_id: None,
            medium: Some("CPU".into()),
            lora_name: None,
            extra_keys: None,
            group_idx: Some(0),
            kv_cache_spec_kind: Some("full_attention".into()),
            kv_cache_spec_sliding_window: None,
            locality: None,
            ownership: None,
        })
    }

    /// Reference §1.5.
    fn worked_example() -> KvEventBatch {
        let (h0, h1) = (9561501211280363793, 15292913576410714033);
        KvEventBatch {
            ts: 1700000000.5,
            events: vec![
                stored(h0, None, vec![1, 2, 3, 4]),
                stored(h1, Some(h0), vec![5, 6, 7, 8]),
                KvEvent::BlockRemoved(BlockRemoved {
                    block_hashes: vec![BlockHash::Int(h0)],
                    medium: Some("CPU".into()),
                    group_idx: Some(0),
                    locality: None,
                    ownership: None,
                }),
                KvEvent::AllBlocksCleared,
            ],
            data_parallel_rank: Some(0),
        }
    }

    fn hexs(b: &[u8]) -> String {
        hex::encode(b)
    }

    #[test]
    fn worked_example_first_bytes_match_the_reference() {
        let bytes = encode_batch(&worked_example(), EventEncoding::Map);
        // 93 cb41d954fc40200000 94 8a a474797065 ab426c6f636b53746f726564
        assert!(
            hexs(&bytes).starts_with("93cb41d954fc40200000948aa474797065ab426c6f636b53746f726564")
        );
        // The clear is the last event, then rank 0.
        assert!(hexs(&bytes).ends_with("81a474797065b0416c6c426c6f636b73436c656172656400"));
        assert_eq!(decode_batch(&bytes).unwrap(), worked_example());
    }

    #[test]
    fn trace_batches_encode_like_their_wire_batches() {
        let wire = worked_example();
        let batch = TraceBatch {
            source: "s".into(),
            dp_rank: wire.data_parallel_rank,
            seq: 0,
            ts: wire.ts,
            events: wire.events.clone(),
            provenance: None,
            raw: None,
            origin: 1,
        };
        for encoding in [EventEncoding::Map, EventEncoding::Array] {
            let mut out = vec![0xc0];
            encode_trace_batch_into(&mut out, &batch, encoding);
            assert_eq!(out[1..], encode_batch(&batch.to_wire(), encoding)[..]);
        }
    }

    #[test]
    fn array_form_is_positional_with_every_legacy_field() {
        let batch = KvEventBatch {
            ts: 1.0,
            events: vec![KvEvent::BlockStored(BlockStored {
                block_hashes: vec![BlockHash::Int(1)],
                parent_block_hash: None,
                token_ids: vec![1, 2],
                block_size: 2,
                lora_id: None,
                medium: Some("GPU".into()),
                lora_name: None,
                extra_keys: None,
                group_idx: None,
                kv_cache_spec_kind: None,
                kv_cache_spec_sliding_window: None,
                locality: None,
                ownership: None,
            })],
            data_parallel_rank: None,
        };
        let bytes = encode_batch(&batch, EventEncoding::Array);
        // ["BlockStored", [1], nil, [1,2], 2, nil, "GPU", nil, nil, nil, nil, nil]
        assert_eq!(
            hexs(&bytes),
            "93cb3ff0000000000000919cab426c6f636b53746f7265649101c092010202c0a3475055c0c0c0c0c0c0"
        );
        assert_eq!(decode_batch(&bytes).unwrap(), batch);
    }

    #[test]
    fn short_legacy_arrays_default_trailing_fields() {
        // Too short: [tag, hashes] lacks the required token_ids.
        let bytes = hex::decode("92cb3ff00000000000009192ab426c6f636b53746f7265649101").unwrap();
        let err = decode_batch(&bytes).unwrap_err();
        assert_eq!(
            err.message,
            "event 0: BlockStored: missing required positional field token_ids"
        );
        assert_eq!(err.location, Location::Byte(11));
        // vLLM before #19737: [tag, hashes, parent, tokens, block_size, lora_id]; 2-element batch.
        let bytes =
            hex::decode("92cb3ff00000000000009196ab426c6f636b53746f7265649101c0910101c0").unwrap();
        let b = decode_batch(&bytes).unwrap();
        assert_eq!(b.data_parallel_rank, None);
        match &b.events[0] {
            KvEvent::BlockStored(s) => {
                assert_eq!(s.token_ids, vec![1]);
                assert_eq!(s.block_size, 1);
                assert_eq!(s.medium, None);
                assert_eq!(s.group_idx, None);
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn map_events_accept_any_key_order_unknown_keys_and_negative_hashes() {
        // {"block_hashes": [-1], "zzz": {"a": [1, 2.5]}, "medium": "GPU", "type": "BlockRemoved"}
        let mut p = hex::decode("93cb3ff000000000000091").unwrap();
        p.extend(hex::decode("84").unwrap());
        p.extend(hex::decode("ac626c6f636b5f686173686573").unwrap());
        p.extend(hex::decode("91ff").unwrap());
        p.extend(hex::decode("a37a7a7a").unwrap());
        p.extend(hex::decode("81a1619201cb4004000000000000").unwrap());
        p.extend(hex::decode("a66d656469756da3475055").unwrap());
        p.extend(hex::decode("a474797065ac426c6f636b52656d6f766564").unwrap());
        p.push(0x03);
        let b = decode_batch(&p).unwrap();
        assert_eq!(b.data_parallel_rank, Some(3));
        assert_eq!(
            b.events,
            vec![KvEvent::BlockRemoved(BlockRemoved {
                block_hashes: vec![BlockHash::Int(u64::MAX)],
                medium: Some("GPU".into()),
                group_idx: None,
                locality: None,
                ownership: None,
            })]
        );
    }

    #[test]
    fn ts_may_be_float32_or_int() {
        let b = decode_batch(&hex::decode("93ca3fc0000090c0").unwrap()).unwrap();
        assert_eq!(b.ts, 1.5);
        let b = decode_batch(&hex::decode("93ce6553f1009000").unwrap()).unwrap();
        assert_eq!(b.ts, 1700000000.0);
        assert_eq!(b.data_parallel_rank, Some(0));
    }

    #[test]
    fn wrong_types_name_the_event_and_field_at_the_item_offset() {
        let mut batch = worked_example();
        batch.events.truncate(1);
        let mut bytes = encode_batch(&batch, EventEncoding::Map);
        // Replace the token_ids array (fixarray 94 01 02 03 04) by a 5-byte fixstr (a4 "abcd").
        let pos = bytes
            .windows(5)
            .position(|w| w == [0x94, 1, 2, 3, 4])
            .unwrap();
        bytes.splice(pos..pos + 5, [0xa4, b'a', b'b', b'c', b'd']);
        let err = decode_batch(&bytes).unwrap_err();
        assert_eq!(
            err.message,
            "event 0: field token_ids: expected array, found str"
        );
        assert_eq!(err.location, Location::Byte(pos as u64));
        assert_eq!(
            err.to_string(),
            format!("byte offset {pos}: event 0: field token_ids: expected array, found str")
        );
    }

    #[test]
    fn huge_declared_lengths_fail_without_allocating() {
        // array32 of 2^32-1 events, then nothing.
        let bytes = hex::decode("93cb3ff0000000000000ddffffffff").unwrap();
        let err = decode_batch(&bytes).unwrap_err();
        assert!(err.message.contains("unexpected end of input"), "{err}");
        // str32 key of 4 GiB.
        let bytes = hex::decode("93cb3ff000000000000091df00000001dbffffffff").unwrap();
        let err = decode_batch(&bytes).unwrap_err();
        assert!(
            err.message.contains("string needs 4294967295 byte(s)"),
            "{err}"
        );
    }

    #[test]
    fn deep_nesting_is_rejected_not_overflowing_the_stack() {
        let mut bytes = hex::decode("93cb3ff000000000000091").unwrap();
        bytes.extend(hex::decode("82a474797065ac426c6f636b52656d6f766564a178").unwrap());
        bytes.extend(std::iter::repeat_n(0x91, 100_000));
        bytes.push(0xc0);
        let err = decode_batch(&bytes).unwrap_err();
        assert!(err.message.contains("nesting deeper than"), "{err}");
    }

    #[test]
    fn every_truncation_of_a_valid_payload_is_an_error_in_range() {
        let bytes = encode_batch(&worked_example(), EventEncoding::Map);
        for n in 0..bytes.len() {
            let err = decode_batch(&bytes[..n]).unwrap_err();
            match err.location {
                Location::Byte(o) => assert!(o as usize <= n, "{n}: {err}"),
                other => panic!("{other:?}"),
            }
        }
        // decode_stream of an empty input is an empty trace.
        assert!(decode_stream(&[], "x").unwrap().records.is_empty());
    }

    #[test]
    fn stream_errors_carry_absolute_offsets_and_the_batch_number() {
        let one = encode_batch(&worked_example(), EventEncoding::Map);
        let mut stream = one.clone();
        stream.extend_from_slice(&one);
        stream.push(0xc1);
        let err = decode_stream(&stream, "s").unwrap_err();
        assert_eq!(err.location, Location::Byte(2 * one.len() as u64));
        assert!(
            err.message.starts_with("batch 3: batch: expected array"),
            "{err}"
        );
        let ranges = split_stream(&stream[..2 * one.len()]).unwrap();
        assert_eq!(ranges, vec![0..one.len(), one.len()..2 * one.len()]);
    }

    /// The hand-written headers against `rmp::encode` (what this codec used before) at every
    /// width boundary.
    #[test]
    fn headers_match_rmp_at_every_boundary() {
        let mut edges = vec![0u64, u64::MAX, i64::MAX as u64];
        for bits in [4u32, 5, 7, 8, 15, 16, 31, 32, 63] {
            let b = 1u64 << bits;
            edges.extend([b - 1, b, b + 1]);
        }
        for &n in &edges {
            let (mut ours, mut theirs) = (Vec::new(), Vec::new());
            uint(&mut ours, n);
            let _ = rmp::encode::write_uint(&mut theirs, n);
            for v in [n as i64, (n as i64).wrapping_neg(), !(n as i64)] {
                sint(&mut ours, v);
                let _ = rmp::encode::write_sint(&mut theirs, v);
            }
            if let Ok(len) = u32::try_from(n) {
                array_len(&mut ours, len as usize);
                let _ = rmp::encode::write_array_len(&mut theirs, len);
                map_len(&mut ours, len as usize);
                let _ = rmp::encode::write_map_len(&mut theirs, len);
            }
            assert_eq!(hexs(&ours), hexs(&theirs), "{n}");
        }
        for len in [0usize, 1, 31, 32, 255, 256, 65535, 65536] {
            let (mut ours, mut theirs) = (Vec::new(), Vec::new());
            let s = "x".repeat(len);
            string(&mut ours, &s);
            let _ = rmp::encode::write_str(&mut theirs, &s);
            bin(&mut ours, s.as_bytes());
            let _ = rmp::encode::write_bin(&mut theirs, s.as_bytes());
            for f in [0.0, -1.5, f64::INFINITY] {
                float(&mut ours, f);
                let _ = rmp::encode::write_f64(&mut theirs, f);
            }
            for b in [true, false] {
                boolean(&mut ours, b);
                let _ = rmp::encode::write_bool(&mut theirs, b);
            }
            nil(&mut ours);
            let _ = rmp::encode::write_nil(&mut theirs);
            assert_eq!(ours, theirs, "{len}");
        }
    }

    #[test]
    fn minimal_int_encodings_match_msgspec() {
        let mut out = Vec::new();
        for v in [
            0u64,
            127,
            128,
            255,
            256,
            65535,
            65536,
            u32::MAX as u64,
            u32::MAX as u64 + 1,
        ] {
            uint(&mut out, v);
        }
        assert_eq!(
            hexs(&out),
            "007fcc80ccffcd0100cdffffce00010000ceffffffffcf0000000100000000"
        );
        out.clear();
        for v in [-1i64, -32, -33, -128, -129, -32768, -32769, i64::MIN] {
            sint(&mut out, v);
        }
        assert_eq!(
            hexs(&out),
            "ffe0d0dfd080d1ff7fd18000d2ffff7fffd38000000000000000"
        );
    }
}
