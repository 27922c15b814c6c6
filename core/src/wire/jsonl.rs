//! The kvscope JSON Lines trace (`docs/trace-format.md`).
//!
//! One record per line, in delivery order:
//!
//! * batch line (has an `events` key), keys written in this order:
//!   `{"source": "...", "dp_rank": 0, "seq": 3, "ts": 1700000000.5, "events": [...]}`, then the
//!   optional `provenance` (array parallel to `events`) and `raw` (base64 of the exact msgpack
//!   payload). Events are vLLM's map form with vLLM's field names (`type` first, defaulted
//!   `None` fields omitted, non-defaulted `None` fields written as `null`); integer hashes are
//!   JSON integers (parsed as `u64`, never through `f64`), bytes hashes lowercase hex strings.
//! * raw-only batch line (has `raw`, no `events`, no `kind`): events, `ts` and `dp_rank` are
//!   decoded from the payload.
//! * `{"kind": "header", ...}` → [`TraceRecord::Header`], `{"kind": "gap", ...}` →
//!   [`TraceRecord::Gap`]; any other line without `events` → [`TraceRecord::Other`], kept as is.
//!
//! Blank lines are skipped. Lines are written with `", "` / `": "` separators (the layout of
//! Python's `json.dumps`). Unknown keys on a batch line are ignored by the reader.

use std::fmt;
use std::io;
use std::marker::PhantomData;

use base64::Engine as _;
use serde::de::{self, DeserializeSeed, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::ser::{SerializeMap, SerializeSeq};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Map, Value};

use crate::event::{BlockRemoved, BlockStored, ExtraValue, KvEvent, TokenId};
use crate::hash::BlockHash;
use crate::trace::{Provenance, SeqGap, Trace, TraceBatch, TraceHeader, TraceRecord};

use super::{Location, WireError};

/// Parse a JSON Lines trace. Line numbers in errors (and in [`TraceBatch::origin`]) are 1-based.
pub fn read_trace(bytes: &[u8]) -> Result<Trace, WireError> {
    read_trace_with_progress(bytes, &mut |_| {})
}

/// [`read_trace`], calling `progress(bytes_done)` after each line.
pub fn read_trace_with_progress(
    bytes: &[u8],
    progress: &mut dyn FnMut(usize),
) -> Result<Trace, WireError> {
    let mut reader = Reader::new(bytes);
    while !reader.step(0)? {
        progress(reader.position());
    }
    progress(reader.position());
    Ok(reader.finish_read())
}

/// A JSON Lines trace read a bounded number of bytes at a time, for callers that report
/// progress or yield between steps (the web debugger): records, line numbers (errors and
/// [`TraceBatch::origin`]) and errors are exactly those of [`read_trace`] on the whole input.
///
/// ```
/// # use kvscope_core::wire::jsonl::Reader;
/// let text = b"{\"kind\": \"header\", \"kvscope\": 1}\n{\"source\": \"a\", \"seq\": 0, \"ts\": 1.0, \"events\": []}\n";
/// let mut r = Reader::new(text);
/// while !r.step(4 << 20)? {
///     // show r.position() of text.len() bytes, r.events() events; yield to the UI
/// }
/// assert_eq!(r.finish()?.records.len(), 2);
/// # Ok::<(), kvscope_core::wire::WireError>(())
/// ```
pub struct Reader<'a> {
    /// The input after a leading BOM.
    bytes: &'a [u8],
    /// Length of the skipped BOM (0 or 3).
    bom: usize,
    /// Start of the next line in `bytes`; past the end once the last line was read.
    start: usize,
    /// Number of the last line read (1-based).
    line_no: u64,
    done: bool,
    events: usize,
    records: Vec<TraceRecord>,
    scratch: Scratch,
}

impl<'a> Reader<'a> {
    /// A reader over the whole input (a leading UTF-8 BOM is skipped).
    pub fn new(input: &'a [u8]) -> Self {
        let bytes = input.strip_prefix(b"\xef\xbb\xbf").unwrap_or(input);
        // The decoded trace takes 1.2-1.6x the bytes of its JSON Lines text (benchmark traces,
        // spaced and compact); unused room stays with the allocator.
        super::reserve_heap(bytes.len().saturating_mul(2));
        Reader {
            bytes,
            bom: input.len() - bytes.len(),
            start: 0,
            line_no: 0,
            done: false,
            events: 0,
            records: Vec::new(),
            scratch: Scratch::default(),
        }
    }

    /// Read at least one line, and further lines until `budget` bytes were consumed in this
    /// call. Returns whether the input is finished. After an error the reader is finished.
    pub fn step(&mut self, budget: usize) -> Result<bool, WireError> {
        let goal = self.start.saturating_add(budget);
        while !self.done {
            self.line()?;
            if self.start >= goal {
                break;
            }
        }
        Ok(self.done)
    }

    /// Bytes of the input consumed so far (BOM included), up to the input's length.
    pub fn position(&self) -> usize {
        self.bom + self.start.min(self.bytes.len())
    }

    /// Events in the batches read so far.
    pub fn events(&self) -> usize {
        self.events
    }

    /// Read what is left and return the trace.
    pub fn finish(mut self) -> Result<Trace, WireError> {
        while !self.step(usize::MAX)? {}
        Ok(self.finish_read())
    }

    fn finish_read(self) -> Trace {
        Trace {
            records: self.records,
        }
    }

    /// Read the next line: the lines are what `bytes.split(|b| *b == b'\n')` yields (a last,
    /// possibly empty, line after the final `\n` included), found with memchr.
    fn line(&mut self) -> Result<(), WireError> {
        let rest = self.bytes.get(self.start..).unwrap_or_default();
        let newline = memchr::memchr(b'\n', rest);
        let line = rest
            .get(..newline.unwrap_or(rest.len()))
            .unwrap_or_default();
        self.line_no += 1;
        self.start = self.start.saturating_add(line.len() + 1);
        // Finished after the last line, or on an error.
        self.done = true;
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        if !line.iter().all(u8::is_ascii_whitespace) {
            let record = read_line_with(line, self.line_no, &mut self.scratch)?;
            if let TraceRecord::Batch(b) = &record {
                self.events += b.events.len();
            }
            self.records.push(record);
        }
        self.done = newline.is_none();
        Ok(())
    }
}

/// Parse one non-blank line (`line_no` is used for errors and [`TraceBatch::origin`]).
pub fn read_line(line: &[u8], line_no: u64) -> Result<TraceRecord, WireError> {
    read_line_with(line, line_no, &mut Scratch::default())
}

/// [`read_line`] with reusable buffers.
///
/// A batch line is first parsed straight into its typed fields ([`FastLine`]); that path
/// accepts no input the general path rejects and builds the same record. Anything else — a
/// non-batch record, a raw-only line, or any error — is parsed again by the general path
/// ([`LineRepr`]), which classifies the line and words the error (so errors and non-batch
/// records are exactly what they always were).
fn read_line_with(
    line: &[u8],
    line_no: u64,
    scratch: &mut Scratch,
) -> Result<TraceRecord, WireError> {
    // One UTF-8 check per line; serde_json's `StrRead` then skips the check per string.
    let line = std::str::from_utf8(line).map_err(|e| WireError {
        location: Location::Line {
            line: line_no,
            column: Some(e.valid_up_to() as u64 + 1),
        },
        message: "invalid UTF-8".into(),
    })?;
    if let Some(batch) = fast_batch(line, line_no, scratch) {
        return Ok(TraceRecord::Batch(batch));
    }
    read_line_general(line, line_no, scratch)
}

/// The general path: the line as a map of [`Value`]s (plus typed `events`), then classified.
fn read_line_general(
    line: &str,
    line_no: u64,
    scratch: &mut Scratch,
) -> Result<TraceRecord, WireError> {
    let mut de = serde_json::Deserializer::from_str(line);
    let parsed = LineSeed(scratch)
        .deserialize(&mut de)
        .and_then(|l| de.end().map(|()| l))
        .map_err(|e| WireError {
            location: Location::Line {
                line: line_no,
                column: Some(e.column() as u64),
            },
            message: strip_position(&e.to_string()).to_owned(),
        })?;
    parsed.into_record(line_no).map_err(|message| WireError {
        location: Location::Line {
            line: line_no,
            column: None,
        },
        message,
    })
}

/// The typed parse of a batch line with `events`; `None` sends the line to the general path.
fn fast_batch(line: &str, line_no: u64, scratch: &mut Scratch) -> Option<TraceBatch> {
    let mut de = serde_json::Deserializer::from_str(line);
    let parsed = FastLineSeed(scratch).deserialize(&mut de).ok()?;
    de.end().ok()?;
    parsed.into_batch(line_no)
}

/// Serialize a trace as JSON Lines (one record per line, `\n`-terminated).
pub fn write_trace(trace: &Trace) -> String {
    let mut out = Vec::with_capacity(trace.event_count() * 200 + 64);
    write_trace_into(&mut out, trace);
    // serde_json only ever writes UTF-8.
    String::from_utf8(out).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
}

/// Append a trace as JSON Lines to `out`.
pub fn write_trace_into(out: &mut Vec<u8>, trace: &Trace) {
    for r in &trace.records {
        write_record(out, r);
    }
}

/// Append one record as a `\n`-terminated line.
pub fn write_record(out: &mut Vec<u8>, record: &TraceRecord) {
    let mut ser = serde_json::Serializer::with_formatter(&mut *out, PySpaced);
    // Writing to a Vec cannot fail; serialization of these types cannot fail either
    // (non-finite floats are written as null).
    let _ = match record {
        TraceRecord::Batch(b) => BatchLine(b).serialize(&mut ser),
        TraceRecord::Header(h) => tagged("header", h).serialize(&mut ser),
        TraceRecord::Gap(g) => tagged("gap", g).serialize(&mut ser),
        TraceRecord::Other(v) => v.serialize(&mut ser),
    };
    out.push(b'\n');
}

/// `{"kind": kind, ...fields of value}`.
fn tagged<T: Serialize>(kind: &str, value: &T) -> Value {
    let mut m = Map::new();
    m.insert("kind".into(), Value::String(kind.into()));
    if let Ok(Value::Object(fields)) = serde_json::to_value(value) {
        m.extend(fields);
    }
    Value::Object(m)
}

/// serde_json adds " at line L column C" to messages; the location is reported separately.
fn strip_position(msg: &str) -> &str {
    match msg.rfind(" at line ") {
        Some(i) if msg[i + 9..].contains(" column ") => &msg[..i],
        _ => msg,
    }
}

/// JSON layout of Python's `json.dumps` defaults: `", "` between items, `": "` after keys.
#[derive(Clone, Copy, Debug, Default)]
pub struct PySpaced;

impl serde_json::ser::Formatter for PySpaced {
    fn begin_array_value<W: ?Sized + io::Write>(
        &mut self,
        w: &mut W,
        first: bool,
    ) -> io::Result<()> {
        if first {
            Ok(())
        } else {
            w.write_all(b", ")
        }
    }

    fn begin_object_key<W: ?Sized + io::Write>(
        &mut self,
        w: &mut W,
        first: bool,
    ) -> io::Result<()> {
        if first {
            Ok(())
        } else {
            w.write_all(b", ")
        }
    }

    fn begin_object_value<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
        w.write_all(b": ")
    }
}

// ---------------------------------------------------------------------------------------------
// Writing.

struct BatchLine<'a>(&'a TraceBatch);

impl Serialize for BatchLine<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let b = self.0;
        let n = 5 + usize::from(b.provenance.is_some()) + usize::from(b.raw.is_some());
        let mut m = s.serialize_map(Some(n))?;
        m.serialize_entry("source", &b.source)?;
        m.serialize_entry("dp_rank", &b.dp_rank)?;
        m.serialize_entry("seq", &b.seq)?;
        m.serialize_entry("ts", &b.ts)?;
        m.serialize_entry("events", &b.events)?;
        if let Some(p) = &b.provenance {
            m.serialize_entry("provenance", p)?;
        }
        if let Some(raw) = &b.raw {
            m.serialize_entry(
                "raw",
                &base64::engine::general_purpose::STANDARD.encode(raw),
            )?;
        }
        m.end()
    }
}

/// vLLM's map form: `type` first, then declaration order; defaulted `None` fields omitted,
/// non-defaulted `None` fields written as `null` (msgspec `omit_defaults`).
impl Serialize for KvEvent {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            KvEvent::BlockStored(e) => {
                let n = 8
                    + usize::from(e.extra_keys.is_some())
                    + usize::from(e.group_idx.is_some())
                    + usize::from(e.kv_cache_spec_kind.is_some())
                    + usize::from(e.kv_cache_spec_sliding_window.is_some())
                    + usize::from(e.locality.is_some())
                    + usize::from(e.ownership.is_some());
                let mut m = s.serialize_map(Some(n))?;
                m.serialize_entry("type", "BlockStored")?;
                m.serialize_entry("block_hashes", &e.block_hashes)?;
                m.serialize_entry("parent_block_hash", &e.parent_block_hash)?;
                m.serialize_entry("token_ids", &e.token_ids)?;
                m.serialize_entry("block_size", &e.block_size)?;
                m.serialize_entry("lora_id", &e.lora_id)?;
                m.serialize_entry("medium", &e.medium)?;
                m.serialize_entry("lora_name", &e.lora_name)?;
                if let Some(k) = &e.extra_keys {
                    m.serialize_entry("extra_keys", k)?;
                }
                if let Some(g) = &e.group_idx {
                    m.serialize_entry("group_idx", g)?;
                }
                if let Some(k) = &e.kv_cache_spec_kind {
                    m.serialize_entry("kv_cache_spec_kind", k)?;
                }
                if let Some(w) = &e.kv_cache_spec_sliding_window {
                    m.serialize_entry("kv_cache_spec_sliding_window", w)?;
                }
                if let Some(l) = &e.locality {
                    m.serialize_entry("locality", l)?;
                }
                if let Some(o) = &e.ownership {
                    m.serialize_entry("ownership", o)?;
                }
                m.end()
            }
            KvEvent::BlockRemoved(e) => {
                let n = 3
                    + usize::from(e.group_idx.is_some())
                    + usize::from(e.locality.is_some())
                    + usize::from(e.ownership.is_some());
                let mut m = s.serialize_map(Some(n))?;
                m.serialize_entry("type", "BlockRemoved")?;
                m.serialize_entry("block_hashes", &e.block_hashes)?;
                m.serialize_entry("medium", &e.medium)?;
                if let Some(g) = &e.group_idx {
                    m.serialize_entry("group_idx", g)?;
                }
                if let Some(l) = &e.locality {
                    m.serialize_entry("locality", l)?;
                }
                if let Some(o) = &e.ownership {
                    m.serialize_entry("ownership", o)?;
                }
                m.end()
            }
            KvEvent::AllBlocksCleared => {
                let mut m = s.serialize_map(Some(1))?;
                m.serialize_entry("type", "AllBlocksCleared")?;
                m.end()
            }
        }
    }
}

/// JSON form of `extra_keys` values: nil → `null`, bool/int/float/str → themselves, arrays →
/// arrays, bytes → `{"bytes": "<lowercase hex>"}`, maps → `{"map": [[k, v], ...]}`.
impl Serialize for ExtraValue {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            ExtraValue::Nil => s.serialize_unit(),
            ExtraValue::Bool(b) => s.serialize_bool(*b),
            ExtraValue::UInt(u) => s.serialize_u64(*u),
            ExtraValue::Int(i) => s.serialize_i64(*i),
            ExtraValue::Float(f) => s.serialize_f64(*f),
            ExtraValue::Str(v) => s.serialize_str(v),
            ExtraValue::Bytes(b) => {
                let mut m = s.serialize_map(Some(1))?;
                m.serialize_entry("bytes", &hex::encode(b))?;
                m.end()
            }
            ExtraValue::Array(items) => {
                let mut seq = s.serialize_seq(Some(items.len()))?;
                for i in items {
                    seq.serialize_element(i)?;
                }
                seq.end()
            }
            ExtraValue::Map(pairs) => {
                struct Pairs<'a>(&'a [(ExtraValue, ExtraValue)]);
                impl Serialize for Pairs<'_> {
                    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                        let mut seq = s.serialize_seq(Some(self.0.len()))?;
                        for (k, v) in self.0 {
                            seq.serialize_element(&(k, v))?;
                        }
                        seq.end()
                    }
                }
                let mut m = s.serialize_map(Some(1))?;
                m.serialize_entry("map", &Pairs(pairs))?;
                m.end()
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Reading.

impl<'de> Deserialize<'de> for ExtraValue {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = ExtraValue;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an extra_keys value (null, bool, number, string, array, {\"bytes\": hex} or {\"map\": [[k, v], ...]})")
            }
            fn visit_unit<E: de::Error>(self) -> Result<ExtraValue, E> {
                Ok(ExtraValue::Nil)
            }
            fn visit_none<E: de::Error>(self) -> Result<ExtraValue, E> {
                Ok(ExtraValue::Nil)
            }
            fn visit_bool<E: de::Error>(self, v: bool) -> Result<ExtraValue, E> {
                Ok(ExtraValue::Bool(v))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<ExtraValue, E> {
                Ok(ExtraValue::UInt(v))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<ExtraValue, E> {
                Ok(if v < 0 {
                    ExtraValue::Int(v)
                } else {
                    ExtraValue::UInt(v as u64)
                })
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<ExtraValue, E> {
                Ok(ExtraValue::Float(v))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<ExtraValue, E> {
                Ok(ExtraValue::Str(v.to_owned()))
            }
            fn visit_string<E: de::Error>(self, v: String) -> Result<ExtraValue, E> {
                Ok(ExtraValue::Str(v))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut a: A) -> Result<ExtraValue, A::Error> {
                let mut v = Vec::with_capacity(a.size_hint().unwrap_or(0).min(64));
                while let Some(x) = a.next_element()? {
                    v.push(x);
                }
                Ok(ExtraValue::Array(v))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut a: A) -> Result<ExtraValue, A::Error> {
                let key: Option<String> = a.next_key()?;
                let value = match key.as_deref() {
                    Some("bytes") => {
                        let h: String = a.next_value()?;
                        let b = hex::decode(&h).map_err(|_| {
                            de::Error::custom(format!("\"bytes\" value is not hex: {h:?}"))
                        })?;
                        ExtraValue::Bytes(b)
                    }
                    Some("map") => {
                        let pairs: Vec<(ExtraValue, ExtraValue)> = a.next_value()?;
                        ExtraValue::Map(pairs)
                    }
                    _ => {
                        return Err(de::Error::custom(
                            "an object in extra_keys must be {\"bytes\": hex} or {\"map\": [[k, v], ...]}",
                        ))
                    }
                };
                if a.next_key::<IgnoredAny>()?.is_some() {
                    return Err(de::Error::custom(
                        "an object in extra_keys must have exactly one key (\"bytes\" or \"map\")",
                    ));
                }
                Ok(value)
            }
        }
        d.deserialize_any(V)
    }
}

#[derive(Deserialize)]
enum Tag {
    BlockStored,
    BlockRemoved,
    AllBlocksCleared,
}

#[derive(Deserialize)]
#[serde(field_identifier, rename_all = "snake_case")]
enum Field {
    Type,
    BlockHashes,
    ParentBlockHash,
    TokenIds,
    BlockSize,
    LoraId,
    Medium,
    LoraName,
    ExtraKeys,
    GroupIdx,
    KvCacheSpecKind,
    KvCacheSpecSlidingWindow,
    Locality,
    Ownership,
    #[serde(other)]
    Unknown,
}

/// Buffers reused from event to event (and line to line) while reading, so that every `Vec` in
/// an event is one allocation of exactly its length, and `events` starts at the size of the
/// previous line's.
#[derive(Default)]
struct Scratch {
    hashes: Vec<BlockHash>,
    tokens: Vec<TokenId>,
    events_len: usize,
}

/// Read a map value with `seed`, naming the field in the error.
fn field_seed<'de, A: MapAccess<'de>, S: DeserializeSeed<'de>>(
    a: &mut A,
    name: &str,
    seed: S,
) -> Result<S::Value, A::Error> {
    a.next_value_seed(seed).map_err(|e| {
        de::Error::custom(format_args!(
            "field {name}: {}",
            strip_position(&e.to_string())
        ))
    })
}

/// Read a map value, naming the field in the error.
fn field<'de, A: MapAccess<'de>, T: Deserialize<'de>>(
    a: &mut A,
    name: &str,
) -> Result<T, A::Error> {
    field_seed(a, name, PhantomData)
}

/// A JSON array read into a reused buffer, then moved into a `Vec` of exactly its length.
struct ExactVec<'s, T>(&'s mut Vec<T>);

impl<'de, T: Deserialize<'de>> DeserializeSeed<'de> for ExactVec<'_, T> {
    type Value = Vec<T>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Vec<T>, D::Error> {
        d.deserialize_seq(self)
    }
}

impl<'de, T: Deserialize<'de>> Visitor<'de> for ExactVec<'_, T> {
    type Value = Vec<T>;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The wording of serde's own `Vec<T>` (kept so messages do not change).
        f.write_str("a sequence")
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut a: A) -> Result<Vec<T>, A::Error> {
        self.0.clear();
        while let Some(x) = a.next_element()? {
            self.0.push(x);
        }
        Ok(self.0.drain(..).collect())
    }
}

impl<'de> Deserialize<'de> for KvEvent {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        EventSeed(&mut Scratch::default()).deserialize(d)
    }
}

/// One event in vLLM's map form (any key order, unknown keys skipped).
struct EventSeed<'s>(&'s mut Scratch);

impl<'de> DeserializeSeed<'de> for EventSeed<'_> {
    type Value = KvEvent;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<KvEvent, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for EventSeed<'_> {
    type Value = KvEvent;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a KV event object with a \"type\" key")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut a: A) -> Result<KvEvent, A::Error> {
        let scratch = self.0;
        let mut tag: Option<Tag> = None;
        let mut block_hashes: Option<Vec<BlockHash>> = None;
        let mut parent_block_hash: Option<BlockHash> = None;
        let mut token_ids: Option<Vec<TokenId>> = None;
        let mut block_size: Option<u32> = None;
        let mut lora_id: Option<i64> = None;
        let mut medium: Option<String> = None;
        let mut lora_name: Option<String> = None;
        let mut extra_keys: Option<Vec<Option<ExtraValue>>> = None;
        let mut group_idx: Option<u32> = None;
        let mut kv_cache_spec_kind: Option<String> = None;
        let mut kv_cache_spec_sliding_window: Option<u64> = None;
        let mut locality: Option<String> = None;
        let mut ownership: Option<String> = None;
        while let Some(k) = a.next_key::<Field>()? {
            match k {
                Field::Type => tag = Some(field(&mut a, "type")?),
                Field::BlockHashes => {
                    block_hashes = Some(field_seed(
                        &mut a,
                        "block_hashes",
                        ExactVec(&mut scratch.hashes),
                    )?)
                }
                Field::ParentBlockHash => parent_block_hash = field(&mut a, "parent_block_hash")?,
                Field::TokenIds => {
                    token_ids = Some(field_seed(
                        &mut a,
                        "token_ids",
                        ExactVec(&mut scratch.tokens),
                    )?)
                }
                Field::BlockSize => block_size = Some(field(&mut a, "block_size")?),
                Field::LoraId => lora_id = field(&mut a, "lora_id")?,
                Field::Medium => medium = field(&mut a, "medium")?,
                Field::LoraName => lora_name = field(&mut a, "lora_name")?,
                Field::ExtraKeys => extra_keys = field(&mut a, "extra_keys")?,
                Field::GroupIdx => group_idx = field(&mut a, "group_idx")?,
                Field::KvCacheSpecKind => kv_cache_spec_kind = field(&mut a, "kv_cache_spec_kind")?,
                Field::KvCacheSpecSlidingWindow => {
                    kv_cache_spec_sliding_window = field(&mut a, "kv_cache_spec_sliding_window")?
                }
                Field::Locality => locality = field(&mut a, "locality")?,
                Field::Ownership => ownership = field(&mut a, "ownership")?,
                Field::Unknown => {
                    a.next_value::<IgnoredAny>()?;
                }
            }
        }
        let missing =
            |t: &str, f: &str| de::Error::custom(format_args!("{t}: missing required field {f}"));
        match tag {
            None => Err(de::Error::custom("event has no \"type\" key")),
            Some(Tag::BlockStored) => Ok(KvEvent::BlockStored(BlockStored {
                block_hashes: block_hashes.ok_or_else(|| missing("BlockStored", "block_hashes"))?,
                parent_block_hash,
                token_ids: token_ids.ok_or_else(|| missing("BlockStored", "token_ids"))?,
                block_size: block_size.ok_or_else(|| missing("BlockStored", "block_size"))?,
                lora_id,
                medium,
                lora_name,
                extra_keys,
                group_idx,
                kv_cache_spec_kind,
                kv_cache_spec_sliding_window,
                locality,
                ownership,
            })),
            Some(Tag::BlockRemoved) => Ok(KvEvent::BlockRemoved(BlockRemoved {
                block_hashes: block_hashes
                    .ok_or_else(|| missing("BlockRemoved", "block_hashes"))?,
                medium,
                group_idx,
                locality,
                ownership,
            })),
            Some(Tag::AllBlocksCleared) => Ok(KvEvent::AllBlocksCleared),
        }
    }
}

/// `events`, naming the failing event's index.
struct Events<'s>(&'s mut Scratch);

impl<'de> DeserializeSeed<'de> for Events<'_> {
    type Value = Vec<KvEvent>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_seq(self)
    }
}

impl<'de> Visitor<'de> for Events<'_> {
    type Value = Vec<KvEvent>;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an array of events")
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut a: A) -> Result<Vec<KvEvent>, A::Error> {
        let scratch = self.0;
        // Batches in a trace tend to have similar sizes; capped so a short hostile line cannot
        // reserve much.
        let mut v = Vec::with_capacity(scratch.events_len.min(4096));
        loop {
            let i = v.len();
            match a.next_element_seed(EventSeed(&mut *scratch)) {
                Ok(Some(e)) => v.push(e),
                Ok(None) => {
                    scratch.events_len = v.len();
                    return Ok(v);
                }
                Err(e) => {
                    return Err(de::Error::custom(format_args!(
                        "event {i}: {}",
                        strip_position(&e.to_string())
                    )))
                }
            }
        }
    }
}

/// Keys of a batch line that [`FastLine`] reads.
#[derive(Deserialize)]
#[serde(field_identifier, rename_all = "snake_case")]
enum LineKey {
    Source,
    DpRank,
    Seq,
    Ts,
    Events,
    Provenance,
    Raw,
    Kind,
    #[serde(other)]
    Other,
}

/// A batch line's fields, typed while parsing. Repeated keys: the last one wins (as in
/// [`LineRepr`]'s map). Values of other keys are parsed as [`Value`] and dropped, so they are
/// checked exactly as the general path checks them.
struct FastLine {
    events: Option<Vec<KvEvent>>,
    source: Option<String>,
    dp_rank: Option<u32>,
    seq: Option<u64>,
    ts: Option<f64>,
    provenance: Option<Vec<Provenance>>,
    raw: Option<String>,
}

struct FastLineSeed<'s>(&'s mut Scratch);

impl<'de> DeserializeSeed<'de> for FastLineSeed<'_> {
    type Value = FastLine;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<FastLine, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for FastLineSeed<'_> {
    type Value = FastLine;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a batch line")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut a: A) -> Result<FastLine, A::Error> {
        let mut l = FastLine {
            events: None,
            source: None,
            dp_rank: None,
            seq: None,
            ts: None,
            provenance: None,
            raw: None,
        };
        while let Some(k) = a.next_key::<LineKey>()? {
            match k {
                LineKey::Events => l.events = Some(a.next_value_seed(Events(&mut *self.0))?),
                LineKey::Source => l.source = Some(a.next_value()?),
                LineKey::DpRank => l.dp_rank = a.next_value()?,
                LineKey::Seq => l.seq = Some(a.next_value()?),
                LineKey::Ts => l.ts = Some(a.next_value()?),
                LineKey::Provenance => {
                    l.provenance = a
                        .next_value::<Option<Vec<StrictProvenance>>>()?
                        .map(|v| v.into_iter().map(|p| p.0).collect())
                }
                LineKey::Raw => l.raw = a.next_value()?,
                LineKey::Kind | LineKey::Other => {
                    a.next_value::<Value>()?;
                }
            }
        }
        Ok(l)
    }
}

/// [`Provenance`] read as strictly as the general path reads it (there: a [`Value`] first):
/// values of unknown keys are parsed as [`Value`] too, not skipped unchecked, and a repeated
/// key's last value wins (as in a map). Only the object form; anything else is an error, which
/// sends the line to the general path.
struct StrictProvenance(Provenance);

#[derive(Deserialize)]
#[serde(field_identifier, rename_all = "snake_case")]
enum ProvenanceKey {
    Tier,
    Kind,
    JobId,
    ReqId,
    GroupIdx,
    ChunkIdx,
    Step,
    #[serde(other)]
    Other,
}

impl<'de> Deserialize<'de> for StrictProvenance {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = StrictProvenance;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a provenance object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut a: A) -> Result<StrictProvenance, A::Error> {
                let (mut tier, mut kind) = (None, None);
                let mut p = Provenance::default();
                while let Some(k) = a.next_key::<ProvenanceKey>()? {
                    match k {
                        ProvenanceKey::Tier => tier = Some(a.next_value()?),
                        ProvenanceKey::Kind => kind = Some(a.next_value()?),
                        ProvenanceKey::JobId => p.job_id = a.next_value()?,
                        ProvenanceKey::ReqId => p.req_id = a.next_value()?,
                        ProvenanceKey::GroupIdx => p.group_idx = a.next_value()?,
                        ProvenanceKey::ChunkIdx => p.chunk_idx = a.next_value()?,
                        ProvenanceKey::Step => p.step = a.next_value()?,
                        ProvenanceKey::Other => {
                            a.next_value::<Value>()?;
                        }
                    }
                }
                p.tier = tier.ok_or_else(|| de::Error::missing_field("tier"))?;
                p.kind = kind.ok_or_else(|| de::Error::missing_field("kind"))?;
                Ok(StrictProvenance(p))
            }
        }
        d.deserialize_map(V)
    }
}

impl FastLine {
    /// The batch, or `None` when the general path must decide (no `events`, a missing field,
    /// bad base64, provenance of the wrong length).
    fn into_batch(self, line_no: u64) -> Option<TraceBatch> {
        let events = self.events?;
        let raw = match self.raw {
            None => None,
            Some(s) => Some(
                base64::engine::general_purpose::STANDARD
                    .decode(s.as_bytes())
                    .ok()?,
            ),
        };
        if self
            .provenance
            .as_ref()
            .is_some_and(|p| p.len() != events.len())
        {
            return None;
        }
        Some(TraceBatch {
            source: self.source?,
            dp_rank: self.dp_rank,
            seq: self.seq?,
            ts: self.ts?,
            events,
            provenance: self.provenance,
            raw,
            origin: line_no,
        })
    }
}

/// A parsed line before it is classified (the general path).
struct LineRepr {
    events: Option<Vec<KvEvent>>,
    rest: Map<String, Value>,
}

struct LineSeed<'s>(&'s mut Scratch);

impl<'de> DeserializeSeed<'de> for LineSeed<'_> {
    type Value = LineRepr;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<LineRepr, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for LineSeed<'_> {
    type Value = LineRepr;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON object (one trace record per line)")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut a: A) -> Result<LineRepr, A::Error> {
        let mut events = None;
        let mut rest = Map::new();
        while let Some(k) = a.next_key::<String>()? {
            if k == "events" {
                events = Some(a.next_value_seed(Events(&mut *self.0))?);
            } else {
                let v: Value = a.next_value()?;
                rest.insert(k, v);
            }
        }
        Ok(LineRepr { events, rest })
    }
}

impl LineRepr {
    fn into_record(mut self, line_no: u64) -> Result<TraceRecord, String> {
        // A line with `raw` but no `events` (and no `kind`) is a raw-capture batch line: the
        // events, `ts` and `dp_rank` come from decoding the payload.
        let raw_only = self.events.is_none()
            && self.rest.contains_key("raw")
            && !self.rest.contains_key("kind");
        if self.events.is_none() && !raw_only {
            return Ok(self.other_record());
        }
        let rest = &mut self.rest;
        let source = match rest.remove("source") {
            Some(Value::String(s)) => s,
            Some(v) => {
                return Err(format!(
                    "batch line: field source: expected a string, found {v}"
                ))
            }
            None => return Err("batch line: missing field source".into()),
        };
        let dp_rank =
            match rest.remove("dp_rank") {
                None | Some(Value::Null) => None,
                Some(v) => Some(v.as_u64().and_then(|r| u32::try_from(r).ok()).ok_or_else(
                    || format!("batch line: field dp_rank: expected a u32 or null, found {v}"),
                )?),
            };
        let seq = match rest.remove("seq") {
            Some(v) => v.as_u64().ok_or_else(|| {
                format!("batch line: field seq: expected an unsigned integer, found {v}")
            })?,
            None => return Err("batch line: missing field seq".into()),
        };
        let ts = match rest.remove("ts") {
            Some(v) => Some(
                v.as_f64()
                    .ok_or_else(|| format!("batch line: field ts: expected a number, found {v}"))?,
            ),
            None if raw_only => None,
            None => return Err("batch line: missing field ts".into()),
        };
        let raw = match rest.remove("raw") {
            None | Some(Value::Null) => None,
            Some(Value::String(s)) => Some(
                base64::engine::general_purpose::STANDARD
                    .decode(s.as_bytes())
                    .map_err(|e| format!("batch line: field raw: invalid base64: {e}"))?,
            ),
            Some(v) => {
                return Err(format!(
                    "batch line: field raw: expected a base64 string, found {v}"
                ))
            }
        };
        let (events, ts, dp_rank) = match (self.events, &raw, ts) {
            (Some(events), _, Some(ts)) => (events, ts, dp_rank),
            (None, Some(payload), _) => {
                let b = super::msgpack::decode_batch(payload)
                    .map_err(|e| format!("batch line: field raw: payload {e}"))?;
                (b.events, b.ts, b.data_parallel_rank.or(dp_rank))
            }
            _ => return Err("batch line: missing field events".into()),
        };
        let provenance = match rest.remove("provenance") {
            None | Some(Value::Null) => None,
            Some(v) => {
                let p = Vec::<Provenance>::deserialize(v)
                    .map_err(|e| format!("batch line: field provenance: {e}"))?;
                if p.len() != events.len() {
                    return Err(format!(
                        "batch line: provenance has {} entries but events has {}",
                        p.len(),
                        events.len()
                    ));
                }
                Some(p)
            }
        };
        Ok(TraceRecord::Batch(TraceBatch {
            source,
            dp_rank,
            seq,
            ts,
            events,
            provenance,
            raw,
            origin: line_no,
        }))
    }

    fn other_record(self) -> TraceRecord {
        let kind = self
            .rest
            .get("kind")
            .and_then(Value::as_str)
            .map(str::to_owned);
        let strip_kind = |m: &Map<String, Value>| {
            let mut m = m.clone();
            m.remove("kind");
            Value::Object(m)
        };
        // Only when no key would be lost on re-export; otherwise keep the line as is.
        const HEADER_KEYS: [&str; 4] = ["kind", "kvscope", "scenario", "meta"];
        const GAP_KEYS: [&str; 6] = [
            "kind",
            "source",
            "dp_rank",
            "expected_seq",
            "received_seq",
            "recovered",
        ];
        match kind.as_deref() {
            Some("header") if only_keys(&self.rest, &HEADER_KEYS) => {
                if let Ok(h) = TraceHeader::deserialize(strip_kind(&self.rest)) {
                    return TraceRecord::Header(h);
                }
            }
            Some("gap") if only_keys(&self.rest, &GAP_KEYS) => {
                if let Ok(g) = SeqGap::deserialize(strip_kind(&self.rest)) {
                    return TraceRecord::Gap(g);
                }
            }
            _ => {}
        }
        TraceRecord::Other(Value::Object(self.rest))
    }
}

fn only_keys(m: &Map<String, Value>, allowed: &[&str]) -> bool {
    m.keys().all(|k| allowed.contains(&k.as_str()))
}

#[cfg(test)]
mod tests {
    use super::*;

    const LINE: &str = r#"{"source": "pod-a", "dp_rank": 0, "seq": 3, "ts": 1700000000.5, "events": [{"type": "BlockStored", "block_hashes": [18446744073709551615, 9007199254740993], "parent_block_hash": null, "token_ids": [1, 2, 3, 4], "block_size": 4, "lora_id": null, "medium": "CPU", "lora_name": null, "group_idx": 0}, {"type": "BlockRemoved", "block_hashes": ["00ff"], "medium": "CPU"}, {"type": "AllBlocksCleared"}]}"#;

    #[test]
    fn batch_line_round_trips_byte_identically_and_keeps_u64_exact() {
        let t = read_trace(LINE.as_bytes()).unwrap();
        let b = t.batches().next().unwrap();
        assert_eq!(b.source, "pod-a");
        assert_eq!(
            (b.dp_rank, b.seq, b.ts, b.origin),
            (Some(0), 3, 1700000000.5, 1)
        );
        assert_eq!(
            b.events[0].block_hashes(),
            &[BlockHash::Int(u64::MAX), BlockHash::Int(9007199254740993)]
        );
        assert_eq!(
            b.events[1].block_hashes(),
            &[BlockHash::Bytes(vec![0, 0xff].into())]
        );
        assert_eq!(write_trace(&t), format!("{LINE}\n"));
    }

    #[test]
    fn non_batch_lines_are_classified_and_blank_lines_skipped() {
        let text = concat!(
            "{\"kind\": \"header\", \"kvscope\": 1, \"scenario\": \"demo\"}\n",
            "\n   \r\n",
            "{\"kind\": \"gap\", \"source\": \"a\", \"expected_seq\": 3, \"received_seq\": 5}\r\n",
            "{\"kind\": \"note\", \"z\": 1, \"a\": [true]}\n",
            "{\"kind\": \"header\", \"kvscope\": 1, \"extra\": 2}\n",
        );
        let t = read_trace(text.as_bytes()).unwrap();
        assert_eq!(t.records.len(), 4);
        assert!(
            matches!(&t.records[0], TraceRecord::Header(h) if h.scenario.as_deref() == Some("demo"))
        );
        match &t.records[1] {
            TraceRecord::Gap(g) => {
                assert_eq!(
                    (g.expected_seq, g.received_seq, g.dp_rank, g.recovered),
                    (3, 5, None, false)
                )
            }
            other => panic!("{other:?}"),
        }
        // Unknown records (and headers with unknown keys) are kept verbatim, key order included.
        let out = write_trace(&t);
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines[2], "{\"kind\": \"note\", \"z\": 1, \"a\": [true]}");
        assert_eq!(
            lines[3],
            "{\"kind\": \"header\", \"kvscope\": 1, \"extra\": 2}"
        );
        assert_eq!(read_trace(out.as_bytes()).unwrap(), t);
    }

    #[test]
    fn errors_name_line_column_event_and_field() {
        let bad = LINE.replace("\"token_ids\": [1, 2, 3, 4]", "\"token_ids\": \"x\"");
        let text = format!("{LINE}\n\n{bad}\n");
        let err = read_trace(text.as_bytes()).unwrap_err();
        match err.location {
            Location::Line {
                line: 3,
                column: Some(c),
            } => assert!(c > 100, "{c}"),
            other => panic!("{other:?}"),
        }
        assert!(
            err.message
                .starts_with("event 0: field token_ids: invalid type: string \"x\""),
            "{}",
            err.message
        );
        let err = read_trace(b"{\"source\": \"a\", \"events\": []}").unwrap_err();
        assert_eq!(err.to_string(), "line 1: batch line: missing field seq");
        let err = read_trace(
            b"{\"source\": \"a\", \"seq\": 1, \"ts\": 1.0, \"events\": [{\"type\": \"Nope\"}]}",
        )
        .unwrap_err();
        assert!(
            err.message
                .contains("event 0: field type: unknown variant `Nope`"),
            "{err}"
        );
        let err = read_trace(b"[1]").unwrap_err();
        assert!(err.message.contains("a JSON object"), "{err}");
        let err = read_trace(b"{\"a\": 1} x").unwrap_err();
        assert_eq!(
            err.location,
            Location::Line {
                line: 1,
                column: Some(10)
            }
        );
    }

    #[test]
    fn provenance_and_raw_travel_on_the_batch_line() {
        let raw = vec![0x93, 0xcb, 0, 1, 2];
        let t = Trace {
            records: vec![TraceRecord::Batch(TraceBatch {
                source: "s".into(),
                dp_rank: None,
                seq: 0,
                ts: 1.0,
                events: vec![KvEvent::AllBlocksCleared],
                provenance: Some(vec![Provenance {
                    tier: "GPU".into(),
                    kind: crate::trace::ProvenanceKind::Reset,
                    step: Some(4),
                    ..Provenance::default()
                }]),
                raw: Some(raw),
                origin: 1,
            })],
        };
        let text = write_trace(&t);
        assert_eq!(
            text,
            "{\"source\": \"s\", \"dp_rank\": null, \"seq\": 0, \"ts\": 1.0, \"events\": [{\"type\": \"AllBlocksCleared\"}], \"provenance\": [{\"tier\": \"GPU\", \"kind\": \"reset\", \"step\": 4}], \"raw\": \"k8sAAQI=\"}\n"
        );
        assert_eq!(read_trace(text.as_bytes()).unwrap(), t);
        let mismatched = text.replace(
            "\"events\": [{\"type\": \"AllBlocksCleared\"}]",
            "\"events\": []",
        );
        let err = read_trace(mismatched.as_bytes()).unwrap_err();
        assert!(
            err.message
                .contains("provenance has 1 entries but events has 0"),
            "{err}"
        );
    }

    #[test]
    fn raw_only_lines_are_decoded_from_the_payload() {
        use crate::event::KvEventBatch;
        use crate::wire::{msgpack, EventEncoding};
        let batch = KvEventBatch {
            ts: 1700000000.25,
            events: vec![KvEvent::AllBlocksCleared],
            data_parallel_rank: Some(2),
        };
        let payload = msgpack::encode_batch(&batch, EventEncoding::Map);
        let b64 = base64::engine::general_purpose::STANDARD.encode(&payload);
        let line = format!("{{\"source\": \"cap\", \"seq\": 9, \"raw\": \"{b64}\"}}");
        let t = read_trace(line.as_bytes()).unwrap();
        let b = t.batches().next().unwrap();
        assert_eq!((b.seq, b.dp_rank, b.ts), (9, Some(2), 1700000000.25));
        assert_eq!(b.events, batch.events);
        assert_eq!(b.raw.as_deref(), Some(&payload[..]));
        // A bad payload is an error naming its byte offset, not a skipped line.
        let bad = base64::engine::general_purpose::STANDARD.encode(&payload[..payload.len() - 1]);
        let line = format!("{{\"source\": \"cap\", \"seq\": 9, \"raw\": \"{bad}\"}}");
        let err = read_trace(line.as_bytes()).unwrap_err();
        assert!(
            err.message
                .starts_with("batch line: field raw: payload byte offset"),
            "{err}"
        );
    }

    #[test]
    fn extra_values_have_a_lossless_json_form() {
        let v = ExtraValue::Array(vec![
            ExtraValue::Str("lora".into()),
            ExtraValue::Bytes(vec![0, 255]),
            ExtraValue::Int(-5),
            ExtraValue::UInt(u64::MAX),
            ExtraValue::Float(1.0),
            ExtraValue::Nil,
            ExtraValue::Map(vec![(ExtraValue::Bool(true), ExtraValue::Array(vec![]))]),
        ]);
        let s = serde_json::to_string(&v).unwrap();
        assert_eq!(
            s,
            r#"["lora",{"bytes":"00ff"},-5,18446744073709551615,1.0,null,{"map":[[true,[]]]}]"#
        );
        assert_eq!(serde_json::from_str::<ExtraValue>(&s).unwrap(), v);
    }

    /// Lines the fast path must agree on with the general path (or leave to it).
    const VARIANTS: [&str; 15] = [
        LINE,
        r#"{"events": [], "ts": 2, "seq": 0, "source": "s"}"#,
        r#"{"source": "s", "seq": 1, "ts": -1.5e3, "dp_rank": null, "events": [], "x": {"y": [1, 2.5, "z"]}}"#,
        r#"{"sou\u0072ce": "\u00e9\n", "seq": 1, "ts": 1, "events": [], "kind": "note"}"#,
        r#"{"source": "s", "seq": 1, "ts": 1, "events": [{"type": "AllBlocksCleared"}], "provenance": [{"tier": "GPU", "kind": "reset"}], "raw": "k8sAAQI="}"#,
        r#"{"source": "s", "seq": 1, "ts": 1, "events": [], "provenance": null, "raw": null}"#,
        r#"{"source": "a", "source": "b", "seq": 1, "seq": 2, "ts": 1, "events": [{"type": "AllBlocksCleared"}], "events": []}"#,
        r#"{"source": "s", "seq": 1, "ts": 1, "events": [], "provenance": [{"tier": "GPU", "kind": "reset"}]}"#,
        r#"{"source": "s", "seq": 1, "events": []}"#,
        r#"{"source": "s", "seq": 1, "ts": 1, "events": [], "x": 1e400}"#,
        r#"{"source": "s", "seq": 1, "ts": 1, "raw": "k8sAAQI="}"#,
        r#"{"kind": "header", "kvscope": 1}"#,
        r#"{"source": "s", "seq": 18446744073709551616, "ts": 1, "events": []}"#,
        r#"{"source": "s", "seq": 1, "ts": 1, "dp_rank": 4294967296, "events": []}"#,
        r#"{"source": "s", "seq": 1, "ts": 1, "events": [{"type": "AllBlocksCleared"}], "provenance": [{"tier": "GPU", "kind": "reset", "x": 1e400}]}"#,
    ];

    /// The fast path either defers or builds exactly what the general path builds.
    fn check_paths_agree(line: &str) {
        let mut scratch = Scratch::default();
        let general = read_line_general(line, 7, &mut scratch);
        if let Some(fast) = fast_batch(line, 7, &mut scratch) {
            assert_eq!(general, Ok(TraceRecord::Batch(fast)), "{line}");
        }
        assert_eq!(read_line(line.as_bytes(), 7), general, "{line}");
    }

    #[test]
    fn fast_and_general_paths_agree_on_edge_lines() {
        for line in VARIANTS {
            check_paths_agree(line);
        }
        // The fast path takes the plain batch lines.
        let mut scratch = Scratch::default();
        assert!(fast_batch(VARIANTS[0], 1, &mut scratch).is_some());
        assert!(fast_batch(VARIANTS[6], 1, &mut scratch).is_some());
        // ... and leaves non-batch, raw-only, incomplete and out-of-range lines alone.
        for i in [8, 9, 10, 11, 12, 13] {
            assert!(fast_batch(VARIANTS[i], 1, &mut scratch).is_none(), "{i}");
        }
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig { cases: 2000, ..Default::default() })]

        /// Mutated lines (bytes replaced, removed or inserted; pieces of other lines spliced
        /// in): whatever the fast path accepts, the general path accepts identically.
        #[test]
        fn fast_path_never_differs_from_the_general_path(
            which in 0..VARIANTS.len(),
            edits in proptest::collection::vec((0usize..2000, 0u8..4, proptest::prelude::any::<u8>(), 0..VARIANTS.len()), 1..4),
        ) {
            let mut line = VARIANTS[which].as_bytes().to_vec();
            for (at, op, byte, other) in edits {
                let i = at % (line.len() + 1);
                match op {
                    0 if i < line.len() => line[i] = byte,
                    1 if i < line.len() => { line.remove(i); }
                    2 => line.insert(i, byte),
                    _ => {
                        let o = VARIANTS[other].as_bytes();
                        let j = at % o.len();
                        line.splice(i..i, o[j..].iter().take(40).copied());
                    }
                }
            }
            match std::str::from_utf8(&line) {
                Ok(text) => check_paths_agree(text),
                Err(e) => {
                    let err = read_line(&line, 3).unwrap_err();
                    proptest::prop_assert_eq!(err.location, Location::Line { line: 3, column: Some(e.valid_up_to() as u64 + 1) });
                }
            }
        }
    }
}
