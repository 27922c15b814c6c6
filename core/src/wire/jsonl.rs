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

use std::borrow::Cow;
use std::io;

use base64::Engine as _;
use serde::ser::{SerializeMap, SerializeSeq};
use serde::{Serialize, Serializer};
use serde_json::{Map, Value};

use crate::event::{BlockRemoved, BlockStored, ExtraValue, KvEvent, TokenId};
use crate::hash::BlockHash;
use crate::trace::{
    Provenance, ProvenanceKind, SeqGap, Trace, TraceBatch, TraceHeader, TraceRecord,
};

use super::json::{quoted, JsonResult, Num, Parser};
use super::json_write::{Json, JsonOut};
use super::{FloatParser, Location, WireError};

/// Parse a JSON Lines trace. Line numbers in errors (and in [`TraceBatch::origin`]) are 1-based.
pub fn read_trace(bytes: &[u8]) -> Result<Trace, WireError> {
    read_trace_with_progress(bytes, &mut |_| {})
}

/// [`read_trace`], calling `progress(bytes_done)` after each line.
pub fn read_trace_with_progress(
    bytes: &[u8],
    progress: &mut dyn FnMut(usize),
) -> Result<Trace, WireError> {
    read_trace_with(bytes, super::parse_float, progress)
}

/// [`read_trace_with_progress`], converting floats with `floats` instead of
/// [`super::parse_float`].
pub fn read_trace_with(
    bytes: &[u8],
    floats: FloatParser,
    progress: &mut dyn FnMut(usize),
) -> Result<Trace, WireError> {
    let mut reader = Reader::with_floats(bytes, floats);
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
    floats: FloatParser,
}

impl<'a> Reader<'a> {
    /// A reader over the whole input (a leading UTF-8 BOM is skipped).
    pub fn new(input: &'a [u8]) -> Self {
        Self::with_floats(input, super::parse_float)
    }

    /// [`Reader::new`], converting floats with `floats` instead of [`super::parse_float`].
    pub fn with_floats(input: &'a [u8], floats: FloatParser) -> Self {
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
            floats,
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
            let record = read_line_with(line, self.line_no, &mut self.scratch, self.floats)?;
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
    read_line_with(line, line_no, &mut Scratch::default(), super::parse_float)
}

/// [`read_line`] with reusable buffers: one pass of [`Parser`] over the line, typed fields
/// read straight into the record, other values built as [`Value`]s.
fn read_line_with(
    line: &[u8],
    line_no: u64,
    scratch: &mut Scratch,
    floats: FloatParser,
) -> Result<TraceRecord, WireError> {
    let line = std::str::from_utf8(line).map_err(|e| WireError {
        location: Location::Line {
            line: line_no,
            column: Some(e.valid_up_to() as u64 + 1),
        },
        message: "invalid UTF-8".into(),
    })?;
    let mut p = Parser::new(line, floats);
    let parsed = parse_line(&mut p, scratch)
        .and_then(|l| p.end().map(|()| l))
        .map_err(|e| WireError {
            location: Location::Line {
                line: line_no,
                column: Some(e.column as u64),
            },
            message: e.message,
        })?;
    parsed
        .into_record(line, line_no)
        .map_err(|message| WireError {
            location: Location::Line {
                line: line_no,
                column: None,
            },
            message,
        })
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
    let mut w = JsonOut { out };
    match record {
        TraceRecord::Batch(b) => write_batch(&mut w, b),
        TraceRecord::Header(h) => {
            w.raw("{\"kind\": \"header\", \"kvscope\": ");
            w.u64(h.kvscope.into());
            if let Some(s) = &h.scenario {
                w.key(false, "scenario");
                w.str(s);
            }
            if !h.meta.is_empty() {
                w.key(false, "meta");
                w.value_map(&h.meta);
            }
            w.raw("}");
        }
        TraceRecord::Gap(g) => {
            w.raw("{\"kind\": \"gap\", \"source\": ");
            w.str(&g.source);
            w.key(false, "dp_rank");
            w.opt(g.dp_rank, |w, r| w.u64(r.into()));
            w.key(false, "expected_seq");
            w.u64(g.expected_seq);
            w.key(false, "received_seq");
            w.u64(g.received_seq);
            w.key(false, "recovered");
            w.raw(if g.recovered { "true" } else { "false" });
            w.raw("}");
        }
        TraceRecord::Other(v) => w.value(v),
    }
    w.out.push(b'\n');
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

/// A batch line: `source`, `dp_rank`, `seq`, `ts`, `events`, then `provenance` and `raw` when
/// present.
fn write_batch(w: &mut JsonOut<'_>, b: &TraceBatch) {
    w.raw("{\"source\": ");
    w.str(&b.source);
    w.key(false, "dp_rank");
    w.opt(b.dp_rank, |w, r| w.u64(r.into()));
    w.key(false, "seq");
    w.u64(b.seq);
    w.key(false, "ts");
    w.f64(b.ts);
    w.raw(", \"events\": [");
    for (i, e) in b.events.iter().enumerate() {
        w.sep(i == 0);
        write_event(w, e);
    }
    w.raw("]");
    if let Some(p) = &b.provenance {
        w.raw(", \"provenance\": [");
        for (i, p) in p.iter().enumerate() {
            w.sep(i == 0);
            write_provenance(w, p);
        }
        w.raw("]");
    }
    if let Some(raw) = &b.raw {
        w.key(false, "raw");
        w.str(&base64::engine::general_purpose::STANDARD.encode(raw));
    }
    w.raw("}");
}

/// vLLM's map form: `type` first, then declaration order; defaulted `None` fields omitted,
/// non-defaulted `None` fields written as `null` (msgspec `omit_defaults`).
fn write_event(w: &mut JsonOut<'_>, event: &KvEvent) {
    fn opt_str(w: &mut JsonOut<'_>, name: &str, v: &Option<String>) {
        if let Some(s) = v {
            w.key(false, name);
            w.str(s);
        }
    }
    match event {
        KvEvent::BlockStored(e) => {
            w.raw("{\"type\": \"BlockStored\", \"block_hashes\": ");
            write_hashes(w, &e.block_hashes);
            w.key(false, "parent_block_hash");
            w.opt(e.parent_block_hash.as_ref(), write_hash);
            w.raw(", \"token_ids\": [");
            for (i, t) in e.token_ids.iter().enumerate() {
                w.sep(i == 0);
                w.u64((*t).into());
            }
            w.raw("], \"block_size\": ");
            w.u64(e.block_size.into());
            w.key(false, "lora_id");
            w.opt(e.lora_id, JsonOut::i64);
            w.key(false, "medium");
            w.opt(e.medium.as_deref(), JsonOut::str);
            w.key(false, "lora_name");
            w.opt(e.lora_name.as_deref(), JsonOut::str);
            if let Some(k) = &e.extra_keys {
                w.raw(", \"extra_keys\": [");
                for (i, v) in k.iter().enumerate() {
                    w.sep(i == 0);
                    w.opt(v.as_ref(), write_extra);
                }
                w.raw("]");
            }
            if let Some(g) = e.group_idx {
                w.key(false, "group_idx");
                w.u64(g.into());
            }
            opt_str(w, "kv_cache_spec_kind", &e.kv_cache_spec_kind);
            if let Some(s) = e.kv_cache_spec_sliding_window {
                w.key(false, "kv_cache_spec_sliding_window");
                w.u64(s);
            }
            opt_str(w, "locality", &e.locality);
            opt_str(w, "ownership", &e.ownership);
        }
        KvEvent::BlockRemoved(e) => {
            w.raw("{\"type\": \"BlockRemoved\", \"block_hashes\": ");
            write_hashes(w, &e.block_hashes);
            w.key(false, "medium");
            w.opt(e.medium.as_deref(), JsonOut::str);
            if let Some(g) = e.group_idx {
                w.key(false, "group_idx");
                w.u64(g.into());
            }
            opt_str(w, "locality", &e.locality);
            opt_str(w, "ownership", &e.ownership);
        }
        KvEvent::AllBlocksCleared => w.raw("{\"type\": \"AllBlocksCleared\""),
    }
    w.raw("}");
}

fn write_hashes(w: &mut JsonOut<'_>, hashes: &[BlockHash]) {
    w.raw("[");
    for (i, h) in hashes.iter().enumerate() {
        w.sep(i == 0);
        write_hash(w, h);
    }
    w.raw("]");
}

/// Integer hashes as JSON integers, bytes as lowercase hex strings.
fn write_hash(w: &mut JsonOut<'_>, h: &BlockHash) {
    match h {
        BlockHash::Int(v) => w.u64(*v),
        BlockHash::Bytes(b) => w.str(&hex::encode(b)),
    }
}

/// [`ExtraValue`]'s JSON form (as its `Serialize`).
fn write_extra(w: &mut JsonOut<'_>, v: &ExtraValue) {
    match v {
        ExtraValue::Nil => w.raw("null"),
        ExtraValue::Bool(b) => w.raw(if *b { "true" } else { "false" }),
        ExtraValue::UInt(u) => w.u64(*u),
        ExtraValue::Int(i) => w.i64(*i),
        ExtraValue::Float(f) => w.f64(*f),
        ExtraValue::Str(s) => w.str(s),
        ExtraValue::Bytes(b) => {
            w.raw("{\"bytes\": ");
            w.str(&hex::encode(b));
            w.raw("}");
        }
        ExtraValue::Array(items) => {
            w.raw("[");
            for (i, item) in items.iter().enumerate() {
                w.sep(i == 0);
                write_extra(w, item);
            }
            w.raw("]");
        }
        ExtraValue::Map(pairs) => {
            w.raw("{\"map\": [");
            for (i, (k, v)) in pairs.iter().enumerate() {
                w.sep(i == 0);
                w.raw("[");
                write_extra(w, k);
                w.raw(", ");
                write_extra(w, v);
                w.raw("]");
            }
            w.raw("]}");
        }
    }
}

/// `tier`, `kind`, then the optional fields that are set.
fn write_provenance(w: &mut JsonOut<'_>, p: &Provenance) {
    w.raw("{\"tier\": ");
    w.str(&p.tier);
    w.key(false, "kind");
    w.str(match p.kind {
        ProvenanceKind::GpuStore => "gpu_store",
        ProvenanceKind::GpuEvict => "gpu_evict",
        ProvenanceKind::OffloadStore => "offload_store",
        ProvenanceKind::Evict => "evict",
        ProvenanceKind::SecondaryStore => "secondary_store",
        ProvenanceKind::Promotion => "promotion",
        ProvenanceKind::Reset => "reset",
    });
    let ints = [
        ("job_id", p.job_id),
        ("group_idx", p.group_idx.map(u64::from)),
        ("chunk_idx", p.chunk_idx.map(u64::from)),
        ("step", p.step),
    ];
    for (i, (name, v)) in ints.into_iter().enumerate() {
        if let Some(v) = v {
            w.key(false, name);
            w.u64(v);
        }
        if i == 0 {
            if let Some(r) = &p.req_id {
                w.key(false, "req_id");
                w.str(r);
            }
        }
    }
    w.raw("}");
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
// Reading: a schema-driven reader over [`Parser`]. What it accepts and builds is what serde
// (`Deserialize` for the typed fields, `Value` for the rest) accepted and built before; the
// test-only `jsonl_legacy` module keeps that reader to check it.

/// Buffers reused from event to event (and line to line) while reading, so that every `Vec` in
/// an event is one allocation of exactly its length, and `events` starts at the size of the
/// previous line's.
#[derive(Default)]
struct Scratch {
    hashes: Vec<BlockHash>,
    tokens: Vec<TokenId>,
    events_len: usize,
}

/// A top-level value of a line other than `events`.
enum Slot {
    /// Any key but `provenance`.
    Value(Value),
    /// `provenance`, read as the typed array, or why it is not one (an error only if this is
    /// the batch line's last `provenance`). `at` is where the value starts, to build its
    /// [`Value`] if the line turns out to be a non-batch record.
    Provenance {
        at: usize,
        typed: Result<Option<Vec<Provenance>>, String>,
    },
}

/// A parsed line before it is classified: its `events` (the last, if repeated) and every other
/// key in order.
struct LineParts<'a> {
    events: Option<Vec<KvEvent>>,
    rest: Vec<(Cow<'a, str>, Slot)>,
    /// The line's float parser, to read a [`Slot::Provenance`] again as a [`Value`].
    floats: FloatParser,
}

/// The top-level object of a line.
fn parse_line<'a>(p: &mut Parser<'a>, scratch: &mut Scratch) -> JsonResult<LineParts<'a>> {
    p.open(b'{', "a JSON object (one trace record per line)")?;
    let mut line = LineParts {
        events: None,
        rest: Vec::with_capacity(8),
        floats: p.floats(),
    };
    let mut first = true;
    while let Some(key) = p.next_key(first)? {
        first = false;
        match &*key {
            "events" => line.events = Some(parse_events(p, scratch)?),
            "provenance" => {
                let at = p.ws_pos();
                let typed = parse_provenance(p)?;
                line.rest.push((key, Slot::Provenance { at, typed }));
            }
            _ => {
                let v = p.value()?;
                line.rest.push((key, Slot::Value(v)));
            }
        }
    }
    Ok(line)
}

/// `events`, naming the failing event's index.
fn parse_events(p: &mut Parser<'_>, scratch: &mut Scratch) -> JsonResult<Vec<KvEvent>> {
    p.open(b'[', "an array of events")?;
    // Batches in a trace tend to have similar sizes; capped so a short hostile line cannot
    // reserve much.
    let mut events = Vec::with_capacity(scratch.events_len.min(4096));
    loop {
        let i = events.len();
        let event = p
            .next_element(i == 0)
            .and_then(|more| more.then(|| parse_event(p, scratch)).transpose());
        match event {
            Ok(Some(e)) => events.push(e),
            Ok(None) => break,
            Err(e) => return Err(e.context(&format!("event {i}: "))),
        }
    }
    scratch.events_len = events.len();
    Ok(events)
}

/// `None` for `null`, else `read`.
#[inline]
fn opt<'a, T>(
    p: &mut Parser<'a>,
    read: impl FnOnce(&mut Parser<'a>) -> JsonResult<T>,
) -> JsonResult<Option<T>> {
    if p.null()? {
        Ok(None)
    } else {
        read(p).map(Some)
    }
}

#[inline]
fn u32_value(p: &mut Parser<'_>) -> JsonResult<u32> {
    p.unsigned(u32::MAX.into(), "u32").map(|v| v as u32)
}

#[inline]
fn u64_value(p: &mut Parser<'_>) -> JsonResult<u64> {
    p.unsigned(u64::MAX, "u64")
}

fn i64_value(p: &mut Parser<'_>) -> JsonResult<i64> {
    let start = p.ws_pos();
    match p.number("i64")? {
        Num::U64(v) => i64::try_from(v).map_err(|_| p.number_error("invalid value", start, "i64")),
        Num::I64(v) => Ok(v),
        Num::F64(_) => Err(p.number_error("invalid type", start, "i64")),
    }
}

/// `null` or a string, into `slot`.
fn opt_string(p: &mut Parser<'_>, slot: &mut Option<String>) -> JsonResult<()> {
    *slot = if p.null()? {
        None
    } else {
        Some(p.string("a string")?.into_owned())
    };
    Ok(())
}

/// A JSON array read into a reused buffer, then moved into a `Vec` of exactly its length.
#[inline]
fn exact_vec<'a, T>(
    p: &mut Parser<'a>,
    buf: &mut Vec<T>,
    mut read: impl FnMut(&mut Parser<'a>) -> JsonResult<T>,
) -> JsonResult<Vec<T>> {
    p.open(b'[', "a sequence")?;
    buf.clear();
    while p.next_element(buf.is_empty())? {
        buf.push(read(p)?);
    }
    // Not `mem::take`: the result gets exactly its length, the buffer keeps its capacity.
    #[allow(clippy::drain_collect)]
    Ok(buf.drain(..).collect())
}

/// `token_ids`, read into a reused buffer, then copied into a `Vec` of exactly its length.
fn token_vec(p: &mut Parser<'_>, buf: &mut Vec<TokenId>) -> JsonResult<Vec<TokenId>> {
    p.open(b'[', "a sequence")?;
    buf.clear();
    p.u32_elements(buf)?;
    Ok(buf.to_vec())
}

/// An integer (`u64`, or `i64` kept as its bit pattern) or a hex string.
#[inline]
fn block_hash(p: &mut Parser<'_>) -> JsonResult<BlockHash> {
    const EXPECTED: &str = "a block hash: an unsigned 64-bit integer or a lowercase hex string";
    let next = p.ws();
    if let Some(v) = p.plain_unsigned(u64::MAX) {
        return Ok(BlockHash::Int(v));
    }
    if next == Some(b'"') {
        let s = p.string(EXPECTED)?;
        return hex::decode(&*s)
            .map(|b| BlockHash::Bytes(b.into_boxed_slice()))
            .map_err(|_| p.error(format!("block hash string is not hex: {}", quoted(&s))));
    }
    let start = p.ws_pos();
    match p.number(EXPECTED)? {
        Num::U64(v) => Ok(BlockHash::Int(v)),
        // Dynamo and some producers write hashes as i64: keep the bit pattern.
        Num::I64(v) => Ok(BlockHash::Int(v as u64)),
        Num::F64(_) => Err(p.number_error("invalid type", start, EXPECTED)),
    }
}

/// The three event types.
enum Tag {
    BlockStored,
    BlockRemoved,
    AllBlocksCleared,
}

/// `"BlockStored"` (or serde's other unit-variant form, `{"BlockStored": null}`).
fn tag(p: &mut Parser<'_>) -> JsonResult<Tag> {
    let variant = |p: &Parser<'_>, name: &str| {
        match name {
        "BlockStored" => Ok(Tag::BlockStored),
        "BlockRemoved" => Ok(Tag::BlockRemoved),
        "AllBlocksCleared" => Ok(Tag::AllBlocksCleared),
        _ => Err(p.error(format!(
            "unknown variant `{name}`, expected one of `BlockStored`, `BlockRemoved`, `AllBlocksCleared`"
        ))),
    }
    };
    if p.ws() != Some(b'{') {
        let name = p.string("an event type")?;
        return variant(p, &name);
    }
    p.open(b'{', "")?;
    let Some(name) = p.next_key(true)? else {
        return Err(p.error("expected an event type"));
    };
    let t = variant(p, &name)?;
    if !p.null()? {
        return Err(p.invalid_type("unit"));
    }
    if p.next_key(false)?.is_some() {
        return Err(p.error("expected value"));
    }
    Ok(t)
}

/// One `extra_keys` value: nil → `null`, bool/int/float/str → themselves, arrays → arrays,
/// bytes → `{"bytes": "<hex>"}`, maps → `{"map": [[k, v], ...]}`.
fn extra_value(p: &mut Parser<'_>) -> JsonResult<ExtraValue> {
    const SHAPE: &str =
        "an object in extra_keys must be {\"bytes\": hex} or {\"map\": [[k, v], ...]}";
    match p.ws() {
        Some(b'[') => {
            p.open(b'[', "")?;
            let mut items = Vec::new();
            while p.next_element(items.is_empty())? {
                items.push(extra_value(p)?);
            }
            Ok(ExtraValue::Array(items))
        }
        Some(b'{') => {
            p.open(b'{', "")?;
            let value = match p.next_key(true)?.as_deref() {
                Some("bytes") => {
                    let h = p.string("a string")?;
                    let b = hex::decode(&*h).map_err(|_| {
                        p.error(format!("\"bytes\" value is not hex: {}", quoted(&h)))
                    })?;
                    ExtraValue::Bytes(b)
                }
                Some("map") => {
                    p.open(b'[', "a sequence")?;
                    let mut pairs = Vec::new();
                    while p.next_element(pairs.is_empty())? {
                        p.open(b'[', "a tuple of size 2")?;
                        let mut pair = [ExtraValue::Nil, ExtraValue::Nil];
                        for (i, slot) in pair.iter_mut().enumerate() {
                            if !p.next_element(i == 0)? {
                                return Err(p.error(format!(
                                    "invalid length {i}, expected a tuple of size 2"
                                )));
                            }
                            *slot = extra_value(p)?;
                        }
                        if p.next_element(false)? {
                            return Err(p.peek_error("trailing characters"));
                        }
                        let [k, v] = pair;
                        pairs.push((k, v));
                    }
                    ExtraValue::Map(pairs)
                }
                _ => return Err(p.error(SHAPE)),
            };
            if p.next_key(false)?.is_some() {
                return Err(p.error(
                    "an object in extra_keys must have exactly one key (\"bytes\" or \"map\")",
                ));
            }
            Ok(value)
        }
        _ => Ok(match p.value()? {
            Value::Null => ExtraValue::Nil,
            Value::Bool(b) => ExtraValue::Bool(b),
            Value::String(s) => ExtraValue::Str(s),
            Value::Number(n) => match (n.as_u64(), n.as_i64()) {
                (Some(u), _) => ExtraValue::UInt(u),
                (None, Some(i)) => ExtraValue::Int(i),
                _ => ExtraValue::Float(n.as_f64().unwrap_or_default()),
            },
            // Containers were handled above.
            _ => ExtraValue::Nil,
        }),
    }
}

/// One event in vLLM's map form (any key order, unknown keys skipped, a repeated key's last
/// value wins).
fn parse_event(p: &mut Parser<'_>, scratch: &mut Scratch) -> JsonResult<KvEvent> {
    p.open(b'{', "a KV event object with a \"type\" key")?;
    let mut tag_: Option<Tag> = None;
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
    let mut first = true;
    while let Some(k) = p.next_key(first)? {
        first = false;
        // Errors in a known field's value name the field; a skipped value's errors do not.
        let read = match &*k {
            "type" => tag(p).map(|t| tag_ = Some(t)),
            "block_hashes" => {
                exact_vec(p, &mut scratch.hashes, block_hash).map(|v| block_hashes = Some(v))
            }
            "parent_block_hash" => opt(p, block_hash).map(|v| parent_block_hash = v),
            "token_ids" => token_vec(p, &mut scratch.tokens).map(|v| token_ids = Some(v)),
            "block_size" => u32_value(p).map(|v| block_size = Some(v)),
            "lora_id" => opt(p, i64_value).map(|v| lora_id = v),
            "medium" => opt_string(p, &mut medium),
            "lora_name" => opt_string(p, &mut lora_name),
            "extra_keys" => opt(p, |p| {
                p.open(b'[', "a sequence")?;
                let mut v = Vec::new();
                while p.next_element(v.is_empty())? {
                    v.push(opt(p, extra_value)?);
                }
                Ok(v)
            })
            .map(|v| extra_keys = v),
            "group_idx" => opt(p, u32_value).map(|v| group_idx = v),
            "kv_cache_spec_kind" => opt_string(p, &mut kv_cache_spec_kind),
            "kv_cache_spec_sliding_window" => {
                opt(p, u64_value).map(|v| kv_cache_spec_sliding_window = v)
            }
            "locality" => opt_string(p, &mut locality),
            "ownership" => opt_string(p, &mut ownership),
            _ => {
                p.skip()?;
                Ok(())
            }
        };
        read.map_err(|e| e.context(&format!("field {k}: ")))?;
    }
    let missing = |t: &str, f: &str| p.error(format!("{t}: missing required field {f}"));
    match tag_ {
        None => Err(p.error("event has no \"type\" key")),
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
            block_hashes: block_hashes.ok_or_else(|| missing("BlockRemoved", "block_hashes"))?,
            medium,
            group_idx,
            locality,
            ownership,
        })),
        Some(Tag::AllBlocksCleared) => Ok(KvEvent::AllBlocksCleared),
    }
}

/// Provenance fields in declaration order (also the order of its array form).
const PROVENANCE_KEYS: [&str; 7] = [
    "tier",
    "kind",
    "job_id",
    "req_id",
    "group_idx",
    "chunk_idx",
    "step",
];

/// A batch line's `provenance`: syntax errors are errors now; a value of the wrong shape is
/// returned as `Ok(Err(..))` (a repeated key's earlier value may be anything).
fn parse_provenance(p: &mut Parser<'_>) -> JsonResult<Result<Option<Vec<Provenance>>, String>> {
    if p.ws() != Some(b'[') {
        return Ok(match p.value()? {
            Value::Null => Ok(None),
            v => Err(format!("expected an array, found {}", Json(&v))),
        });
    }
    p.open(b'[', "")?;
    let mut out = Ok(Vec::new());
    let mut first = true;
    while p.next_element(first)? {
        first = false;
        let item = if p.ws() == Some(b'{') {
            // The object form without building a map: slots by key, the last value wins.
            p.open(b'{', "")?;
            let mut slots: [Option<Value>; 7] = Default::default();
            let mut first = true;
            while let Some(k) = p.next_key(first)? {
                first = false;
                let v = p.value()?;
                if let Some(i) = PROVENANCE_KEYS.iter().position(|n| *n == k) {
                    slots[i] = Some(v);
                }
            }
            provenance_from_slots(slots, true)
        } else {
            provenance_from_value(p.value()?)
        };
        match (&mut out, item) {
            (Ok(v), Ok(x)) => v.push(x),
            (Ok(_), Err(e)) => out = Err(e),
            (Err(_), _) => {}
        }
    }
    Ok(out.map(Some))
}

/// A [`Provenance`] from a [`Value`] that is not an object (as serde's derive read it: the
/// array form `[tier, kind, job_id?, ...]`).
fn provenance_from_value(v: Value) -> Result<Provenance, String> {
    match v {
        Value::Object(m) => {
            let mut slots: [Option<Value>; 7] = Default::default();
            for (k, v) in m {
                if let Some(i) = PROVENANCE_KEYS.iter().position(|n| *n == k) {
                    slots[i] = Some(v);
                }
            }
            provenance_from_slots(slots, true)
        }
        Value::Array(items) if (2..=7).contains(&items.len()) => {
            let mut slots: [Option<Value>; 7] = Default::default();
            for (slot, v) in slots.iter_mut().zip(items) {
                *slot = Some(v);
            }
            provenance_from_slots(slots, false)
        }
        Value::Array(items) => Err(format!(
            "invalid length {}, expected struct Provenance with 2 to 7 elements",
            items.len()
        )),
        v => Err(format!("expected a provenance object, found {}", Json(&v))),
    }
}

/// The fields of a provenance entry (`slots` in [`PROVENANCE_KEYS`] order); `by_name` for the
/// object form (missing fields are named by key).
fn provenance_from_slots(slots: [Option<Value>; 7], by_name: bool) -> Result<Provenance, String> {
    let [tier, kind, job_id, req_id, group_idx, chunk_idx, step] = slots;
    let missing = |f: &str| {
        if by_name {
            format!("missing field `{f}`")
        } else {
            format!("missing element {f}")
        }
    };
    Ok(Provenance {
        tier: match tier {
            Some(v) => string_of(v, "tier")?,
            None => return Err(missing("tier")),
        },
        kind: match kind {
            Some(v) => provenance_kind(v)?,
            None => return Err(missing("kind")),
        },
        job_id: opt_unsigned(job_id, u64::MAX, "job_id")?,
        req_id: match req_id {
            None | Some(Value::Null) => None,
            Some(v) => Some(string_of(v, "req_id")?),
        },
        group_idx: opt_unsigned(group_idx, u32::MAX.into(), "group_idx")?.map(|v| v as u32),
        chunk_idx: opt_unsigned(chunk_idx, u32::MAX.into(), "chunk_idx")?.map(|v| v as u32),
        step: opt_unsigned(step, u64::MAX, "step")?,
    })
}

fn string_of(v: Value, name: &str) -> Result<String, String> {
    match v {
        Value::String(s) => Ok(s),
        v => Err(format!(
            "field {name}: expected a string, found {}",
            Json(&v)
        )),
    }
}

/// `None` for a missing or `null` value, else an integer in `0..=max`.
fn opt_unsigned(v: Option<Value>, max: u64, name: &str) -> Result<Option<u64>, String> {
    match v {
        None | Some(Value::Null) => Ok(None),
        Some(v) => match v.as_u64() {
            Some(u) if u <= max => Ok(Some(u)),
            _ => Err(format!(
                "field {name}: expected an integer in 0..={max}, found {}",
                Json(&v)
            )),
        },
    }
}

/// A [`ProvenanceKind`] by its snake_case name (or serde's `{"name": null}` unit-variant form).
fn provenance_kind(v: Value) -> Result<ProvenanceKind, String> {
    let name = match v {
        Value::String(s) => s,
        Value::Object(m) if m.len() == 1 => match m.into_iter().next() {
            Some((k, Value::Null)) => k,
            _ => return Err("field kind: expected a provenance kind".into()),
        },
        v => {
            return Err(format!(
                "field kind: expected a provenance kind, found {}",
                Json(&v)
            ))
        }
    };
    Ok(match name.as_str() {
        "gpu_store" => ProvenanceKind::GpuStore,
        "gpu_evict" => ProvenanceKind::GpuEvict,
        "offload_store" => ProvenanceKind::OffloadStore,
        "evict" => ProvenanceKind::Evict,
        "secondary_store" => ProvenanceKind::SecondaryStore,
        "promotion" => ProvenanceKind::Promotion,
        "reset" => ProvenanceKind::Reset,
        _ => {
            return Err(format!(
                "field kind: unknown provenance kind {}",
                quoted(&name)
            ))
        }
    })
}

impl LineParts<'_> {
    fn has(&self, key: &str) -> bool {
        self.rest.iter().any(|(k, _)| k == key)
    }

    fn into_record(self, text: &str, line_no: u64) -> Result<TraceRecord, String> {
        // A line with `raw` but no `events` (and no `kind`) is a raw-capture batch line: the
        // events, `ts` and `dp_rank` come from decoding the payload.
        let raw_only = self.events.is_none() && self.has("raw") && !self.has("kind");
        if self.events.is_none() && !raw_only {
            return Ok(other_record(self.rest, text, self.floats));
        }
        // The last value of each key.
        let (mut source, mut dp_rank, mut seq, mut ts, mut raw, mut provenance) =
            (None, None, None, None, None, None);
        for (k, slot) in self.rest {
            match slot {
                Slot::Provenance { typed, .. } => provenance = Some(typed),
                Slot::Value(v) => match &*k {
                    "source" => source = Some(v),
                    "dp_rank" => dp_rank = Some(v),
                    "seq" => seq = Some(v),
                    "ts" => ts = Some(v),
                    "raw" => raw = Some(v),
                    _ => {}
                },
            }
        }
        let source = match source {
            Some(Value::String(s)) => s,
            Some(v) => {
                return Err(format!(
                    "batch line: field source: expected a string, found {}",
                    Json(&v)
                ))
            }
            None => return Err("batch line: missing field source".into()),
        };
        let dp_rank =
            match dp_rank {
                None | Some(Value::Null) => None,
                Some(v) => Some(v.as_u64().and_then(|r| u32::try_from(r).ok()).ok_or_else(
                    || {
                        format!(
                            "batch line: field dp_rank: expected a u32 or null, found {}",
                            Json(&v)
                        )
                    },
                )?),
            };
        let seq = match seq {
            Some(v) => v.as_u64().ok_or_else(|| {
                format!(
                    "batch line: field seq: expected an unsigned integer, found {}",
                    Json(&v)
                )
            })?,
            None => return Err("batch line: missing field seq".into()),
        };
        let ts = match ts {
            Some(v) => Some(v.as_f64().ok_or_else(|| {
                format!(
                    "batch line: field ts: expected a number, found {}",
                    Json(&v)
                )
            })?),
            None if raw_only => None,
            None => return Err("batch line: missing field ts".into()),
        };
        let raw = match raw {
            None | Some(Value::Null) => None,
            Some(Value::String(s)) => Some(
                base64::engine::general_purpose::STANDARD
                    .decode(s.as_bytes())
                    .map_err(|e| format!("batch line: field raw: invalid base64: {e}"))?,
            ),
            Some(v) => {
                return Err(format!(
                    "batch line: field raw: expected a base64 string, found {}",
                    Json(&v)
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
        let provenance = match provenance {
            None => None,
            Some(typed) => {
                match typed.map_err(|e| format!("batch line: field provenance: {e}"))? {
                    Some(p) if p.len() != events.len() => {
                        return Err(format!(
                            "batch line: provenance has {} entries but events has {}",
                            p.len(),
                            events.len()
                        ))
                    }
                    p => p,
                }
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
}

/// A line without `events`: a header, a gap marker, or any other object kept as its [`Value`].
fn other_record(rest: Vec<(Cow<'_, str>, Slot)>, text: &str, floats: FloatParser) -> TraceRecord {
    let mut m = Map::new();
    for (k, slot) in rest {
        let v = match slot {
            Slot::Value(v) => v,
            // Parsed once already (same checks, one level down), so this cannot fail.
            Slot::Provenance { at, .. } => {
                Parser::at(text, at, 1, floats).value().unwrap_or_default()
            }
        };
        m.insert(k.into_owned(), v);
    }
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
    let only = |allowed: &[&str]| m.keys().all(|k| allowed.contains(&k.as_str()));
    let typed = match m.get("kind").and_then(Value::as_str) {
        Some("header") if only(&HEADER_KEYS) => header(&mut m).map(TraceRecord::Header),
        Some("gap") if only(&GAP_KEYS) => gap(&m).map(TraceRecord::Gap),
        _ => None,
    };
    typed.unwrap_or(TraceRecord::Other(Value::Object(m)))
}

/// `{"kind": "header", "kvscope": 1, "scenario"?: "...", "meta"?: {...}}` (`meta` is moved
/// out of `m` only when the header is complete).
fn header(m: &mut Map<String, Value>) -> Option<TraceHeader> {
    let kvscope = u32::try_from(m.get("kvscope")?.as_u64()?).ok()?;
    let scenario = match m.get("scenario") {
        None | Some(Value::Null) => None,
        Some(v) => Some(v.as_str()?.to_owned()),
    };
    let meta = match m.get_mut("meta") {
        None => Map::new(),
        Some(Value::Object(meta)) => std::mem::take(meta),
        Some(_) => return None,
    };
    Some(TraceHeader {
        kvscope,
        scenario,
        meta,
    })
}

/// `{"kind": "gap", "source": "...", "dp_rank"?: n, "expected_seq": n, "received_seq": n,
/// "recovered"?: bool}`.
fn gap(m: &Map<String, Value>) -> Option<SeqGap> {
    Some(SeqGap {
        source: m.get("source")?.as_str()?.to_owned(),
        dp_rank: match m.get("dp_rank") {
            None | Some(Value::Null) => None,
            Some(v) => Some(u32::try_from(v.as_u64()?).ok()?),
        },
        expected_seq: m.get("expected_seq")?.as_u64()?,
        received_seq: m.get("received_seq")?.as_u64()?,
        recovered: match m.get("recovered") {
            None => false,
            Some(v) => v.as_bool()?,
        },
    })
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

    /// Lines the reader must read exactly as the serde reader did (`jsonl_legacy`), and seeds
    /// for the mutations below.
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

    const VARIANT_COUNT: usize = 15 + EXTRA_VARIANTS.len();

    /// Edge cases of the grammar and of serde's typed reading the old tests did not seed.
    const EXTRA_VARIANTS: [&str; 24] = [
        r#"{"source": "s", "seq": 1, "ts": 1, "events": [{"type": {"BlockRemoved": null}, "block_hashes": [0, 1], "medium": null}]}"#,
        r#"{"source": "s", "seq": 1, "ts": 1, "events": [{"type": "BlockRemoved", "block_hashes": [-9223372036854775808, "00FFab", ""], "medium": "GPU", "x": [1e400, "\udc00", -0.0e-999, {"a": [[[]]]}]}]}"#,
        r#"{"source": "s", "seq": 1, "ts": 1, "events": [{"type": "AllBlocksCleared"}, {"type": "AllBlocksCleared"}], "provenance": [["GPU", "reset"], {"tier": 5, "tier": "CPU", "kind": {"evict": null}, "job_id": 3, "req_id": null, "step": 2, "chunk_idx": 4294967295}]}"#,
        r#"{"source": "s", "seq": 1, "ts": 1, "events": [{"type": "AllBlocksCleared"}], "provenance": 5, "provenance": [["GPU", "reset", 1, "r", 2, 3, 4]]}"#,
        r#"{"source": "s", "seq": 1, "ts": 1, "events": [{"type": "AllBlocksCleared"}], "provenance": [["GPU", "reset", 1, "r", 2, 3, 4, 5]]}"#,
        r#"{"source": "s", "seq": 1, "ts": 1, "events": [{"type": "AllBlocksCleared"}], "provenance": [{"tier": "GPU", "kind": "reset", "group_idx": -1}]}"#,
        r#"{"source": "s", "seq": 1, "ts": 1, "events": [{"type": "BlockStored", "block_hashes": [1], "parent_block_hash": "0a", "token_ids": [], "block_size": 0, "lora_id": -9223372036854775808, "extra_keys": [null, [null, true, false, -1, 18446744073709551615, 1.5e-7, "\ud83d\ude00", {"bytes": "0aFF"}, {"map": [[1, {"map": []}], ["k", null]]}]], "kv_cache_spec_sliding_window": 18446744073709551615, "locality": "l", "ownership": null, "lora_name": "\"\\\/\b\f\n\r\t"}]}"#,
        r#"{"source": "s", "seq": 1, "ts": 1, "events": [{"type": "BlockStored", "block_hashes": [1], "token_ids": [1], "block_size": 1, "extra_keys": [{"bytes": "0a", "map": []}]}]}"#,
        r#"{"source": "s", "seq": 1, "ts": 1, "events": [{"type": "BlockStored", "block_hashes": [1], "token_ids": [1], "block_size": 1, "extra_keys": [{"map": [[1, 2, 3]]}]}]}"#,
        r#"{"source": "s", "seq": 1, "ts": 1, "events": [{"type": "BlockStored", "block_hashes": [1], "token_ids": [1], "block_size": 1, "extra_keys": [{"map": [[1]]}, {}]}]}"#,
        r#"{"source": "s", "seq": 1, "ts": 1, "events": [{"type": "BlockStored", "block_hashes": [1], "token_ids": [1], "block_size": 1, "extra_keys": null, "group_idx": null}]}"#,
        r#"{"kind": "gap", "source": "a", "dp_rank": null, "expected_seq": 3, "received_seq": 5, "recovered": true}"#,
        r#"{"kind": "gap", "source": "a", "expected_seq": 3, "received_seq": 5, "recovered": null}"#,
        r#"{"kind": "header", "kvscope": 4294967296, "meta": {"b": 1, "a": {"c": [1.0, -0]}}}"#,
        r#"{"kind": "header", "kvscope": 1, "scenario": null, "meta": null}"#,
        r#"{"kind": "header", "kvscope": 1.0, "scenario": "x\u0000y"}"#,
        r#"{"kind": "note", "provenance": [{"tier": "GPU"}], "n": [0, -1, 1.25, 1E+2, 123456789012345678901234567890, -9223372036854775809]}"#,
        r#"{"kind": "note", "kind": "header", "kvscope": 2, "kvscope": 1}"#,
        r#"{"raw": null, "source": "s", "seq": 1}"#,
        r#"{"source": "s", "seq": 1, "ts": 1, "events": [{"type": "BlockStored", "block_hashes": [1], "token_ids": [01], "block_size": 1}]}"#,
        r#" { "source" : "s" , "seq" : 1 , "ts" : 1 , "events" : [ ] } "#,
        r#"{"source": "s", "seq": 1, "ts": 1e-400, "dp_rank": 0, "events": [{"type": "BlockStored", "block_hashes": [1], "token_ids": [1], "block_size": 1, "medium": "\ud800\udbff"}]}"#,
        r#"{"source": "s", "seq": 1, "ts": 1, "events": [{"type": "BlockStored", "block_hashes": [1], "token_ids": [1], "block_size": 1, "lora_id": 9223372036854775807, "unknown": "\ud800", "medium": "\u00e9"}]}"#,
        r#"{"source": "s", "seq": 1, "ts": 1, "events": [{"type": "BlockStored", "block_hashes": [1], "token_ids": [1], "block_size": 1, "lora_id": 1.0}]}"#,
    ];

    fn variant(i: usize) -> &'static str {
        VARIANTS
            .get(i)
            .copied()
            .unwrap_or_else(|| EXTRA_VARIANTS[i - VARIANTS.len()])
    }

    /// The new reader accepts what the serde reader accepted, builds the same record, and
    /// rejects the same lines at the same line (with a column where it gave one).
    fn check_same_as_legacy(line: &[u8]) {
        let old = crate::wire::jsonl_legacy::read_line(line, 7);
        let new = read_line(line, 7);
        let text = String::from_utf8_lossy(line);
        match (&old, &new) {
            (Ok(a), Ok(b)) => {
                assert_eq!(a, b, "{text}");
                same_output_as_legacy(b);
            }
            (Err(a), Err(b)) => {
                let (
                    Location::Line {
                        line: la,
                        column: ca,
                    },
                    Location::Line {
                        line: lb,
                        column: cb,
                    },
                ) = (a.location, b.location)
                else {
                    panic!("{a:?} {b:?}")
                };
                assert_eq!(
                    (la, ca.is_some()),
                    (lb, cb.is_some()),
                    "{text}\nold: {a}\nnew: {b}"
                );
            }
            _ => panic!("{text}\nold: {old:?}\nnew: {new:?}"),
        }
    }

    /// The writer writes what serde_json's serializer wrote, byte for byte.
    fn same_output_as_legacy(record: &TraceRecord) {
        let (mut old, mut new) = (Vec::new(), Vec::new());
        crate::wire::jsonl_legacy::write_record(&mut old, record);
        write_record(&mut new, record);
        assert_eq!(
            String::from_utf8_lossy(&new),
            String::from_utf8_lossy(&old),
            "{record:?}"
        );
    }

    fn batch_record(source: String, ts: f64, events: Vec<KvEvent>) -> TraceRecord {
        TraceRecord::Batch(TraceBatch {
            source,
            dp_rank: None,
            seq: 0,
            ts,
            events,
            provenance: None,
            raw: None,
            origin: 1,
        })
    }

    #[test]
    fn writer_matches_serde_json_on_edge_values() {
        let floats = [
            0.0,
            -0.0,
            1.0,
            0.1,
            1e15,
            1e16,
            1e17,
            1e21,
            1e22,
            1.5e300,
            5e-324,
            -2.5e-7,
            f64::MAX,
            f64::MIN_POSITIVE,
            f64::NAN,
            f64::INFINITY,
            f64::NEG_INFINITY,
            1700000000.25,
            123456789012345680.0,
        ];
        let strings = [
            "",
            "a\"b\\c/",
            "\u{0}\u{1f}\u{7f}\u{8}\t\n\u{c}\r\u{b}",
            "é✓\u{10ffff}",
        ];
        for f in floats {
            same_output_as_legacy(&batch_record("s".into(), f, vec![]));
            let extra = vec![
                Some(ExtraValue::Float(f)),
                None,
                Some(ExtraValue::Map(vec![(
                    ExtraValue::Float(f),
                    ExtraValue::Int(i64::MIN),
                )])),
            ];
            same_output_as_legacy(&batch_record(
                "s".into(),
                1.0,
                vec![KvEvent::BlockStored(BlockStored {
                    block_hashes: vec![
                        BlockHash::Int(u64::MAX),
                        BlockHash::Bytes(vec![0, 0xab].into()),
                    ],
                    parent_block_hash: Some(BlockHash::Bytes(vec![].into())),
                    token_ids: vec![0, u32::MAX],
                    block_size: u32::MAX,
                    lora_id: Some(i64::MIN),
                    medium: None,
                    lora_name: Some("x".into()),
                    extra_keys: Some(extra),
                    group_idx: Some(0),
                    kv_cache_spec_kind: Some("full".into()),
                    kv_cache_spec_sliding_window: Some(u64::MAX),
                    locality: Some("l".into()),
                    ownership: Some("o".into()),
                })],
            ));
        }
        for s in strings {
            same_output_as_legacy(&batch_record(
                s.into(),
                1.0,
                vec![KvEvent::BlockRemoved(BlockRemoved {
                    block_hashes: vec![],
                    medium: Some(s.into()),
                    group_idx: None,
                    locality: None,
                    ownership: Some(s.into()),
                })],
            ));
            let mut meta = Map::new();
            meta.insert(
                s.into(),
                serde_json::json!([s, 1.5, -1, u64::MAX, null, {"k": false}]),
            );
            same_output_as_legacy(&TraceRecord::Header(TraceHeader {
                kvscope: u32::MAX,
                scenario: Some(s.into()),
                meta,
            }));
            same_output_as_legacy(&TraceRecord::Header(TraceHeader {
                kvscope: 0,
                scenario: None,
                meta: Map::new(),
            }));
            same_output_as_legacy(&TraceRecord::Gap(SeqGap {
                source: s.into(),
                dp_rank: None,
                expected_seq: 0,
                received_seq: u64::MAX,
                recovered: true,
            }));
            same_output_as_legacy(&TraceRecord::Gap(SeqGap {
                source: s.into(),
                dp_rank: Some(3),
                expected_seq: 1,
                received_seq: 2,
                recovered: false,
            }));
            same_output_as_legacy(&TraceRecord::Other(
                serde_json::json!({s: {s: [s]}, "e": {}, "a": []}),
            ));
        }
        let kinds = [
            ProvenanceKind::GpuStore,
            ProvenanceKind::GpuEvict,
            ProvenanceKind::OffloadStore,
            ProvenanceKind::Evict,
            ProvenanceKind::SecondaryStore,
            ProvenanceKind::Promotion,
            ProvenanceKind::Reset,
        ];
        for (i, kind) in kinds.into_iter().enumerate() {
            let full = i % 2 == 0;
            let p = Provenance {
                tier: "STORAGE:fs0".into(),
                kind,
                job_id: full.then_some(u64::MAX),
                req_id: full.then(|| "r\"1".into()),
                group_idx: full.then_some(1),
                chunk_idx: (i > 2).then_some(2),
                step: (i != 3).then_some(3),
            };
            let TraceRecord::Batch(mut b) =
                batch_record("s".into(), 2.0, vec![KvEvent::AllBlocksCleared])
            else {
                unreachable!()
            };
            b.provenance = Some(vec![p]);
            b.raw = Some(vec![i as u8; i]);
            b.dp_rank = Some(u32::MAX);
            same_output_as_legacy(&TraceRecord::Batch(b));
        }
    }

    proptest::proptest! {
        /// Any float and any string are written as serde_json wrote them.
        #[test]
        fn writer_matches_serde_json_on_any_float_and_string(f in proptest::num::f64::ANY, s in ".*", bits in proptest::prelude::any::<u64>()) {
            same_output_as_legacy(&batch_record(s, f, vec![]));
            same_output_as_legacy(&batch_record(String::new(), f64::from_bits(bits), vec![]));
        }
    }

    #[test]
    fn edge_lines_read_as_the_serde_reader_read_them() {
        for i in 0..VARIANT_COUNT {
            check_same_as_legacy(variant(i).as_bytes());
        }
    }

    #[test]
    fn nesting_depth_is_limited_as_serde_json_limited_it() {
        // Around serde_json's limit (127 levels in all, the line's object included), in a
        // parsed value, in `extra_keys`, in `provenance`, and in a skipped event key (no limit).
        for n in [120, 125, 126, 127, 128, 200] {
            let (open, close) = ("[".repeat(n), "]".repeat(n));
            for line in [
                format!(r#"{{"kind": "note", "x": {open}{close}}}"#),
                format!(
                    r#"{{"source": "s", "seq": 1, "ts": 1, "events": [{{"type": "BlockStored", "block_hashes": [1], "token_ids": [1], "block_size": 1, "extra_keys": [{open}{close}]}}]}}"#
                ),
                format!(
                    r#"{{"source": "s", "seq": 1, "ts": 1, "events": [{{"type": "AllBlocksCleared"}}], "provenance": [["GPU", "reset", null, {open}{close}]]}}"#
                ),
                format!(
                    r#"{{"kind": "note", "provenance": [["GPU", "reset", null, {open}{close}]]}}"#
                ),
                format!(
                    r#"{{"source": "s", "seq": 1, "ts": 1, "events": [{{"type": "AllBlocksCleared", "x": {open}{close}}}]}}"#
                ),
                format!(
                    r#"{{"source": "s", "seq": 1, "ts": 1, "events": [{{"type": "AllBlocksCleared", "x": {}}}]}}"#,
                    "{\"a\": ".repeat(n) + &"}".repeat(n)
                ),
            ] {
                check_same_as_legacy(line.as_bytes());
            }
        }
        let deep = format!(
            r#"{{"kind": "note", "x": {}{}}}"#,
            "[".repeat(126),
            "]".repeat(126)
        );
        assert!(read_line(deep.as_bytes(), 1).is_ok());
        let deeper = format!(
            r#"{{"kind": "note", "x": {}{}}}"#,
            "[".repeat(127),
            "]".repeat(127)
        );
        let err = read_line(deeper.as_bytes(), 1).unwrap_err();
        assert_eq!(err.message, "recursion limit exceeded");
        let skipped = format!(
            r#"{{"source": "s", "seq": 1, "ts": 1, "events": [{{"type": "AllBlocksCleared", "x": {}{}}}]}}"#,
            "[".repeat(100_000),
            "]".repeat(100_000)
        );
        assert!(read_line(skipped.as_bytes(), 1).is_ok());
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig { cases: 4000, ..Default::default() })]

        /// Mutated lines (bytes replaced, removed or inserted; pieces of other lines spliced
        /// in): accepted and read identically, or rejected, by both readers.
        #[test]
        fn mutated_lines_read_as_the_serde_reader_read_them(
            which in 0..VARIANT_COUNT,
            edits in proptest::collection::vec((0usize..2000, 0u8..4, proptest::prelude::any::<u8>(), 0..VARIANT_COUNT), 1..4),
        ) {
            let mut line = variant(which).as_bytes().to_vec();
            for (at, op, byte, other) in edits {
                let i = at % (line.len() + 1);
                match op {
                    0 if i < line.len() => line[i] = byte,
                    1 if i < line.len() => { line.remove(i); }
                    2 => line.insert(i, byte),
                    _ => {
                        let o = variant(other).as_bytes();
                        let j = at % o.len();
                        line.splice(i..i, o[j..].iter().take(40).copied());
                    }
                }
            }
            check_same_as_legacy(&line);
            if let Err(e) = std::str::from_utf8(&line) {
                let err = read_line(&line, 3).unwrap_err();
                proptest::prop_assert_eq!(err.location, Location::Line { line: 3, column: Some(e.valid_up_to() as u64 + 1) });
            }
        }
    }
}
