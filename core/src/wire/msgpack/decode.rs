//! The msgpack decoder: a bounds-checked reader over one input slice.
//!
//! Hand-rolled over `rmp`'s markers rather than a serde deserializer, for the located errors
//! (byte offset, event, field) and for speed; what was measured is in `docs/performance.md`
//! ("msgpack decode against msgspec"). In short: map keys are compared as bytes against the
//! field expected next in vLLM's declaration order; each value is written straight into its
//! place in the event, and the event is decoded in its place at the end of its batch's list
//! (`EventFields`: the `BlockStored` pushed there and a mask of the fields read; no per-field
//! `Option` and no 272-byte event to move afterwards); vLLM's media and spec kinds become shared
//! `'static` [`Label`]s without a UTF-8 check or an allocation, and a one-block hash list
//! stays inline ([`BlockHashes`]). With these a decoded anchor-stream event makes one
//! allocation (its token ids) instead of four, and callgrind counts 3,345 instructions per
//! event (decode and drop) instead of 4,733.

use std::fmt;

use rmp::Marker;

use crate::event::{
    known_label, BlockHashes, BlockRemoved, BlockStored, EventFields, ExtraValue, FieldSlot,
    FieldSpec, KvEvent, KvEventBatch, Label, TokenId,
};
use crate::hash::BlockHash;
use crate::text::Quoted;

use super::super::{Location, WireError};
use super::MAX_DEPTH;

mod values;

// ---------------------------------------------------------------------------------------------
// Decoding.

/// An error before context (event index, field name) is added.
/// Boxed so that the hot path moves small `Result`s.
pub(super) type Res<T> = Result<T, Box<WireError>>;

pub(super) fn err(offset: usize, message: impl Into<String>) -> Box<WireError> {
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
pub(super) fn ctx(mut e: Box<WireError>, prefix: fmt::Arguments<'_>) -> Box<WireError> {
    e.message = format!("{prefix}: {}", e.message);
    e
}

/// What a marker denotes, for error messages.
pub(super) fn kind_name(m: Marker) -> &'static str {
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
pub(super) enum Int {
    U(u64),
    /// Always negative.
    N(i64),
}

pub(super) struct Reader<'a> {
    pub(super) buf: &'a [u8],
    pub(super) pos: usize,
    /// Whether an error came from running out of input (more bytes could make it decode).
    pub(super) truncated: bool,
}

impl<'a> Reader<'a> {
    /// A reader at the start of `buf`.
    pub(super) fn new(buf: &'a [u8]) -> Self {
        Reader {
            buf,
            pos: 0,
            truncated: false,
        }
    }

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
            None => Err(self.out_of_input(err(
                self.pos,
                format!(
                    "unexpected end of input: {what} needs {n} byte(s), {} left",
                    self.remaining()
                ),
            ))),
        }
    }

    /// `e`, noting that it came from running out of input.
    #[cold]
    fn out_of_input(&mut self, e: Box<WireError>) -> Box<WireError> {
        self.truncated = true;
        e
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
            None => Err(self.out_of_input(err(at, "unexpected end of input: expected a value"))),
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
        // Fast path: a positive fixint (`block_size`, `group_idx`, a data parallel rank).
        if let Some(&b) = self.buf.get(self.pos) {
            if b < 0x80 {
                self.pos += 1;
                return Ok(u32::from(b));
            }
        }
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

    /// A string field's [`Label`]: one of vLLM's known strings without a UTF-8 check (they
    /// are ASCII) or copy, any other string checked and owned.
    fn label(&mut self) -> Res<Label> {
        let at = self.pos;
        let bytes = self.str_bytes()?;
        if let Some(known) = known_label(bytes) {
            return Ok(Label::Borrowed(known));
        }
        std::str::from_utf8(bytes)
            .map(|s| Label::Owned(s.to_owned()))
            .map_err(|e| err(at, format!("invalid UTF-8 in string: {e}")))
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

    fn hashes(&mut self) -> Res<BlockHashes> {
        let (n, _) = self.array_len("array")?;
        let mut v = BlockHashes::with_capacity(n.min(self.remaining()));
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

    pub(super) fn batch(&mut self) -> Res<KvEventBatch> {
        let (n, at) = self
            .array_len("array [ts, events, data_parallel_rank]")
            .map_err(|e| ctx(e, format_args!("batch")))?;
        if n < 2 {
            return Err(err(
                at,
                format!("batch: expected [ts, events, data_parallel_rank], found an array of {n}"),
            ));
        }
        let ts_at = self.pos;
        let ts = self
            .float()
            .and_then(|ts| finite(ts, ts_at))
            .map_err(|e| ctx(e, format_args!("batch: field ts")))?;
        let (count, _) = self
            .array_len("array")
            .map_err(|e| ctx(e, format_args!("batch: field events")))?;
        let mut events = Vec::with_capacity(count.min(self.remaining()));
        for i in 0..count {
            self.event_into(&mut events)
                .map_err(|e| ctx(e, format_args!("event {i}")))?;
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

    /// Decode one event onto the end of `events`. The fields are read straight into the
    /// `BlockStored` pushed there (the event is not moved afterwards; see [`EventFields`]);
    /// another tag replaces it, an error removes it.
    fn event_into(&mut self, events: &mut Vec<KvEvent>) -> Res<()> {
        events.push(KvEvent::BlockStored(BlockStored::default()));
        let result = match events.last_mut() {
            Some(KvEvent::BlockStored(stored)) => self.event(stored),
            // Not reached: the event just pushed is a `BlockStored`.
            _ => Err(err(self.pos, "internal error: no place for the event")),
        };
        match result {
            Ok(None) => {}
            Ok(Some(other)) => {
                if let Some(last) = events.last_mut() {
                    *last = other;
                }
            }
            Err(e) => {
                events.pop();
                return Err(e);
            }
        }
        Ok(())
    }

    /// One event read into `stored`: `None` when it is a `BlockStored` (then `stored` is it),
    /// else the event of its tag.
    fn event(&mut self, stored: &mut BlockStored) -> Res<Option<KvEvent>> {
        let (m, at) = self.marker()?;
        let mut fields = EventFields::new(stored);
        let (tag, what) = match m {
            Marker::FixMap(_) | Marker::Map16 | Marker::Map32 => {
                let n = self.len_for(m)?.unwrap_or(0);
                (self.event_map(n, at, &mut fields)?, "key")
            }
            Marker::FixArray(_) | Marker::Array16 | Marker::Array32 => {
                let n = self.len_for(m)?.unwrap_or(0);
                (self.event_array(n, at, &mut fields)?, "positional field")
            }
            _ => return Err(Self::type_err(at, "map or array", m)),
        };
        build(fields, tag, at, what)
    }

    /// A string's raw bytes (no UTF-8 check: used for keys and tags compared to ASCII names).
    /// Inlined where speed is measured, not in the wasm builds, where bytes are.
    #[cfg_attr(not(target_arch = "wasm32"), inline)]
    fn str_bytes(&mut self) -> Res<&'a [u8]> {
        // Fast path, inlined: a whole fixstr (every key and tag vLLM writes).
        if let Some(&b) = self.buf.get(self.pos) {
            if b & 0xe0 == 0xa0 {
                let start = self.pos + 1;
                if let Some(s) = self.buf.get(start..start + usize::from(b & 0x1f)) {
                    self.pos = start + s.len();
                    return Ok(s);
                }
            }
        }
        self.str_bytes_slow()
    }

    /// [`Self::str_bytes`] past its fast path (any string marker, or an error).
    #[inline(never)]
    fn str_bytes_slow(&mut self) -> Res<&'a [u8]> {
        let (m, at) = self.marker()?;
        let len = match m {
            Marker::FixStr(n) => usize::from(n),
            Marker::Str8 | Marker::Str16 | Marker::Str32 => self.len_for(m)?.unwrap_or(0),
            _ => return Err(Self::type_err(at, "str", m)),
        };
        self.take(len, "string")
    }

    /// A map-form event's fields into `fields`; returns its tag.
    fn event_map(&mut self, n: usize, at: usize, fields: &mut EventFields<'_>) -> Res<&'a [u8]> {
        let mut tag: Option<&'a [u8]> = None;
        // Where the next key is expected in `BlockStored::FIELDS` (msgspec writes declaration
        // order), so that a key usually costs one comparison.
        let mut next = 0;
        for _ in 0..n {
            let key = self.str_bytes().map_err(|e| ctx(e, format_args!("key")))?;
            if key == b"type" {
                tag = Some(
                    self.str_bytes()
                        .map_err(|e| ctx(e, format_args!("field type")))?,
                );
                continue;
            }
            match field_named(key, &mut next).and_then(|i| fields.slot_at(i)) {
                Some((name, slot)) => self
                    .field(slot)
                    .map_err(|e| ctx(e, format_args!("field {name}")))?,
                None => self
                    .skip(0)
                    .map_err(|e| ctx(e, format_args!("field {}", String::from_utf8_lossy(key))))?,
            }
        }
        tag.ok_or_else(|| err(at, "event map has no \"type\" key"))
    }

    /// An array-form event's fields into `fields`; returns its tag.
    fn event_array(&mut self, n: usize, at: usize, fields: &mut EventFields<'_>) -> Res<&'a [u8]> {
        if n == 0 {
            return Err(err(at, "empty event array (expected [tag, fields...])"));
        }
        let tag = self.str_bytes().map_err(|e| ctx(e, format_args!("tag")))?;
        let specs: &[FieldSpec] = match tag {
            b"BlockStored" => BlockStored::FIELDS,
            b"BlockRemoved" => BlockRemoved::FIELDS,
            _ => &[],
        };
        for i in 0..n - 1 {
            match specs.get(i).and_then(|spec| fields.slot(spec.name)) {
                Some((name, slot)) => self
                    .field(slot)
                    .map_err(|e| ctx(e, format_args!("field {name} (position {})", i + 1)))?,
                None => self.skip(0)?,
            }
        }
        Ok(tag)
    }

    /// One field's value into its slot (the last value of a repeated key wins).
    fn field(&mut self, slot: FieldSlot<'_>) -> Res<()> {
        match slot {
            FieldSlot::Hashes(s) => *s = self.hashes()?,
            FieldSlot::Hash(s) => *s = self.opt(Reader::hash)?,
            FieldSlot::Tokens(s) => *s = self.tokens()?,
            FieldSlot::U32(s) => *s = self.u32_val("int (u32)")?,
            FieldSlot::OptU32(s) => *s = self.opt(|r| r.u32_val("int (u32) or nil"))?,
            FieldSlot::OptU64(s) => *s = self.opt(|r| r.u64_val("int or nil"))?,
            FieldSlot::OptI64(s) => {
                *s = self.opt(|r| match r.int("int or nil")? {
                    (Int::U(v), at) => i64::try_from(v)
                        .map_err(|_| err(at, format!("{v} is out of range for i64"))),
                    (Int::N(v), _) => Ok(v),
                })?
            }
            FieldSlot::OptStr(s) => *s = self.opt(Reader::label)?,
            FieldSlot::ExtraKeys(s) => *s = self.opt(Reader::extra_keys)?,
        }
        Ok(())
    }
}

/// The field whose wire name is `key` (raw bytes: the names are ASCII, so no UTF-8 check is
/// needed), searched from `next` on, then from the start; `next` moves past the field found.
/// `BlockStored`'s fields include `BlockRemoved`'s, so one table serves both.
fn field_named(key: &[u8], next: &mut usize) -> Option<usize> {
    let specs = BlockStored::FIELDS;
    let from = (*next).min(specs.len());
    let is = |s: &FieldSpec| s.name.as_bytes() == key;
    let found = specs[from..]
        .iter()
        .position(is)
        .map(|i| from + i)
        .or_else(|| specs[..from].iter().position(is))?;
    *next = found + 1;
    Some(found)
}

/// The event of `tag` from the fields read: `None` for a `BlockStored` (the fields' own
/// `stored`), else the other event (`what` names a field in errors: key or position).
fn build(fields: EventFields<'_>, tag: &[u8], at: usize, what: &str) -> Res<Option<KvEvent>> {
    // The tag as text only for messages (not validated on the success path).
    let name = || String::from_utf8_lossy(tag);
    let event = match tag {
        b"BlockStored" => fields.block_stored().map(|()| None),
        b"BlockRemoved" => fields
            .block_removed()
            .map(|e| Some(KvEvent::BlockRemoved(e))),
        b"AllBlocksCleared" => Ok(Some(KvEvent::AllBlocksCleared)),
        _ => {
            return Err(err(
                at,
                format!(
                "unknown event type {} (expected BlockStored, BlockRemoved or AllBlocksCleared)",
                Quoted(&name())
            ),
            ))
        }
    };
    event.map_err(|field| err(at, format!("{}: missing required {what} {field}", name())))
}

/// `v` if it is finite. NaN and the infinities are refused wherever a trace holds a float
/// (`ts`, values in `extra_keys`): JSON Lines cannot write them, so a trace holding one could not
/// be read back from the JSON Lines kvscope writes (`docs/trace-format.md` §1.5).
fn finite(v: f64, at: usize) -> Res<f64> {
    if v.is_finite() {
        return Ok(v);
    }
    // Named in words: the wasm builds carry no float formatting code.
    let name = if v.is_nan() {
        "NaN"
    } else if v > 0.0 {
        "infinity"
    } else {
        "-infinity"
    };
    Err(err(at, format!("expected a finite float, found {name}")))
}

pub(super) fn signed(v: i64) -> Int {
    if v < 0 {
        Int::N(v)
    } else {
        Int::U(v as u64)
    }
}
