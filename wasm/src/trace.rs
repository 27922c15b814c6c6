//! The `Trace` class: load a trace from JSON Lines or msgpack, inspect its batches and events
//! as plain objects, export it again.

use kvscope_core::text::Quoted;
use kvscope_core::trace::{EventMap, SeqGap, TraceBatch, TraceRecord};
use kvscope_core::wire::{self, EventEncoding, WireError};
use std::sync::Arc;
use tsify::Tsify;
use wasm_bindgen::prelude::*;

use crate::dto::{saturating_u32, Batch, Event, Provenance};
use crate::js::{js_error, wire_error, Arr, Obj, ToJs};
use crate::options::EncodingArg;

/// Source name given to a bare msgpack stream when the caller names none.
pub const DEFAULT_SOURCE: &str = "trace";

/// A loaded trace (records in delivery order). Owns wasm memory: call `.free()` when done.
#[wasm_bindgen]
#[derive(Clone, Debug)]
pub struct Trace {
    /// Shared with the replay sessions made from it (never copied).
    inner: Arc<kvscope_core::Trace>,
    /// Where each global event index sits (the core's one map).
    events: EventMap,
}

/// One event addressed by its global index (the replay cursor's numbering).
#[derive(Debug, Tsify)]
#[tsify(large_number_types_as_bigints, missing_as_null)]
pub struct EventRef {
    /// Global 0-based event index.
    pub index: u32,
    /// 0-based batch index.
    pub batch_index: u32,
    /// 0-based position inside the batch.
    pub position: u32,
    /// The publishing engine.
    pub source: String,
    /// Its DP rank.
    pub dp_rank: Option<u32>,
    /// The batch's sequence number.
    pub seq: u64,
    /// The batch's `ts`.
    pub ts: f64,
    /// The event.
    pub event: Event,
    /// Its provenance, when the trace has it.
    pub provenance: Option<Provenance>,
}

impl ToJs for EventRef {
    fn to_js(&self) -> JsValue {
        let EventRef {
            index,
            batch_index,
            position,
            source,
            dp_rank,
            seq,
            ts,
            event,
            provenance,
        } = self;
        let o = Obj::new();
        o.num("index", f64::from(*index))
            .num("batch_index", f64::from(*batch_index))
            .num("position", f64::from(*position))
            .str("source", source)
            .opt_num("dp_rank", dp_rank.map(f64::from))
            .big("seq", *seq)
            .num("ts", *ts)
            .to("event", event)
            .to("provenance", provenance);
        o.done()
    }
}

/// A hole in a publisher's sequence numbers (a trace's gap marker).
#[derive(Debug, Tsify)]
#[tsify(large_number_types_as_bigints, missing_as_null)]
pub struct Gap {
    /// The publisher.
    pub source: String,
    /// Its DP rank.
    pub dp_rank: Option<u32>,
    /// The sequence number expected next.
    pub expected_seq: u64,
    /// The sequence number that arrived instead.
    pub received_seq: u64,
    /// Whether the missing batches were recovered.
    pub recovered: bool,
}

impl ToJs for Gap {
    fn to_js(&self) -> JsValue {
        let Gap {
            source,
            dp_rank,
            expected_seq,
            received_seq,
            recovered,
        } = self;
        let o = Obj::new();
        o.str("source", source)
            .opt_num("dp_rank", dp_rank.map(f64::from))
            .big("expected_seq", *expected_seq)
            .big("received_seq", *received_seq)
            .flag("recovered", *recovered);
        o.done()
    }
}

impl From<&SeqGap> for Gap {
    fn from(g: &SeqGap) -> Self {
        Gap {
            source: g.source.clone(),
            dp_rank: g.dp_rank,
            expected_seq: g.expected_seq,
            received_seq: g.received_seq,
            recovered: g.recovered,
        }
    }
}

/// Parse an event encoding name (`"map"`, the default, or `"array"`).
pub fn parse_encoding(name: Option<&str>) -> Result<EventEncoding, String> {
    match name {
        None | Some("map") => Ok(EventEncoding::Map),
        Some("array") => Ok(EventEncoding::Array),
        Some(other) => Err(format!(
            "unknown msgpack event encoding {} (expected \"map\" or \"array\")",
            Quoted(other)
        )),
    }
}

/// Pure-Rust side of [`Trace`], usable (and tested) without a JS host.
impl Trace {
    /// Wrap a core trace.
    pub fn from_core(inner: kvscope_core::Trace) -> Self {
        Trace {
            events: EventMap::new(&inner),
            inner: Arc::new(inner),
        }
    }

    /// The core trace.
    pub fn core(&self) -> &kvscope_core::Trace {
        &self.inner
    }

    /// The core trace, shared (a replay session keeps it alive after this `Trace` is freed).
    pub fn shared(&self) -> Arc<kvscope_core::Trace> {
        Arc::clone(&self.inner)
    }

    /// Read JSON Lines or msgpack, detected from the first non-blank byte (floats in JSON Lines
    /// through [`crate::js::parse_float`]).
    pub fn parse(bytes: &[u8], source: &str) -> Result<Self, WireError> {
        wire::read_trace_with(bytes, source, crate::js::parse_float, &mut |_| {})
            .map(Trace::from_core)
    }

    /// The trace as concatenated msgpack `KVEventBatch` payloads. A batch captured raw is
    /// written as its exact captured bytes.
    pub fn msgpack_bytes(&self, encoding: EventEncoding) -> Vec<u8> {
        let mut out = Vec::new();
        for b in self.inner.batches() {
            match &b.raw {
                Some(raw) => out.extend_from_slice(raw),
                None => wire::msgpack::encode_trace_batch_into(&mut out, b, encoding),
            }
        }
        out
    }

    /// The `index`-th batch with its first global event index.
    fn batch_at(&self, index: usize) -> Option<(&TraceBatch, usize)> {
        let (start, record) = self.events.batch(index)?;
        match self.inner.records.get(record as usize)? {
            TraceRecord::Batch(b) => Some((b, start)),
            _ => None,
        }
    }

    /// Locate global event `index`: (batch index, batch, position in batch).
    pub fn locate(&self, index: usize) -> Option<(usize, &TraceBatch, usize)> {
        let at = self.events.get(index)?;
        let (batch, _) = self.events.event(&self.inner, index)?;
        Some((at.batch as usize, batch, at.pos as usize))
    }

    /// The event at global `index` as its JS shape.
    pub fn event_ref(&self, index: usize) -> Option<EventRef> {
        let (batch_index, batch, position) = self.locate(index)?;
        Some(EventRef {
            index: saturating_u32(index),
            batch_index: saturating_u32(batch_index),
            position: saturating_u32(position),
            source: batch.source.clone(),
            dp_rank: batch.dp_rank,
            seq: batch.seq,
            ts: batch.ts,
            event: Event::from(batch.events.get(position)?),
            provenance: batch
                .provenance
                .as_ref()
                .and_then(|ps| ps.get(position))
                .map(Provenance::from),
        })
    }
}

/// Load a trace from JSON Lines text (a `string`) or bytes (a `Uint8Array` holding JSON Lines
/// or a msgpack stream, detected from the first non-blank byte). `source` names the publisher
/// of a bare msgpack stream (default `"trace"`). Throws an `Error` naming the line or byte
/// offset of the first problem.
#[wasm_bindgen(js_name = loadTrace)]
pub fn load_trace(
    #[wasm_bindgen(unchecked_param_type = "string | Uint8Array")] input: &JsValue,
    source: Option<String>,
) -> Result<Trace, JsValue> {
    if let Some(text) = input.as_string() {
        return Trace::from_jsonl(&text);
    }
    if input.is_instance_of::<js_sys::Uint8Array>() {
        let bytes = crate::js::bytes(input.unchecked_ref());
        let source = source.as_deref().unwrap_or(DEFAULT_SOURCE);
        return Trace::parse(&bytes, source).map_err(|e| wire_error(&e));
    }
    Err(js_error(
        "loadTrace expects a string (JSON Lines) or a Uint8Array (JSON Lines or msgpack)",
    ))
}

#[wasm_bindgen]
impl Trace {
    /// Parse JSON Lines text. Throws an `Error` naming the line of the first problem.
    #[wasm_bindgen(js_name = fromJsonl)]
    pub fn from_jsonl(text: &str) -> Result<Trace, JsValue> {
        wire::jsonl::read_trace_with(text.as_bytes(), crate::js::parse_float, &mut |_| {})
            .map(Trace::from_core)
            .map_err(|e| wire_error(&e))
    }

    /// Decode a stream of concatenated msgpack `KVEventBatch` payloads; batches get
    /// `source` (default `"trace"`) and `seq` = their position. Throws an `Error` naming the
    /// byte offset of the first problem.
    #[wasm_bindgen(js_name = fromMsgpack)]
    pub fn from_msgpack(bytes: &[u8], source: Option<String>) -> Result<Trace, JsValue> {
        wire::msgpack::decode_stream(bytes, source.as_deref().unwrap_or(DEFAULT_SOURCE))
            .map(Trace::from_core)
            .map_err(|e| wire_error(&e))
    }

    /// Number of batches.
    #[wasm_bindgen(getter, js_name = batchCount)]
    pub fn batch_count(&self) -> usize {
        self.events.batch_count()
    }

    /// Number of events over all batches.
    #[wasm_bindgen(getter, js_name = eventCount)]
    pub fn event_count(&self) -> usize {
        self.events.len()
    }

    /// Number of records (batches, header, gap markers, other lines).
    #[wasm_bindgen(getter, js_name = recordCount)]
    pub fn record_count(&self) -> usize {
        self.inner.records.len()
    }

    /// The `index`-th batch (0-based). Throws a `RangeError` past the end.
    #[wasm_bindgen(unchecked_return_type = "Batch")]
    pub fn batch(&self, index: usize) -> Result<JsValue, JsValue> {
        let (batch, start) = self
            .batch_at(index)
            .ok_or_else(|| out_of_range("batch", "batches", index, self.batch_count()))?;
        Ok(Batch::new(batch, index, start).to_js())
    }

    /// All batches, in delivery order.
    #[wasm_bindgen(unchecked_return_type = "Batch[]")]
    pub fn batches(&self) -> JsValue {
        let a = Arr::new();
        for (i, b) in self.inner.batches().enumerate() {
            let start = self.events.batch(i).map_or(0, |(s, _)| s);
            a.push(&Batch::new(b, i, start).to_js());
        }
        a.done()
    }

    /// The event at global index `index` (events numbered across batches, from 0) with its
    /// batch's source, seq and ts. Throws a `RangeError` past the end.
    #[wasm_bindgen(unchecked_return_type = "EventRef")]
    pub fn event(&self, index: usize) -> Result<JsValue, JsValue> {
        let ev = self
            .event_ref(index)
            .ok_or_else(|| out_of_range("event", "events", index, self.event_count()))?;
        Ok(ev.to_js())
    }

    /// The trace's sequence-gap markers.
    #[wasm_bindgen(unchecked_return_type = "Gap[]")]
    pub fn gaps(&self) -> JsValue {
        let a = Arr::new();
        for g in self.inner.gaps() {
            a.push(&Gap::from(g).to_js());
        }
        a.done()
    }

    /// The header's scenario description, if the trace has a header naming one.
    #[wasm_bindgen(getter)]
    pub fn scenario(&self) -> Option<String> {
        self.inner.records.iter().find_map(|r| match r {
            TraceRecord::Header(h) => h.scenario.clone(),
            _ => None,
        })
    }

    /// The trace as kvscope JSON Lines (one record per line, `\n`-terminated).
    #[wasm_bindgen(js_name = toJsonl)]
    pub fn to_jsonl(&self) -> String {
        wire::jsonl::write_trace(&self.inner)
    }

    /// The trace as concatenated msgpack `KVEventBatch` payloads, events encoded as maps
    /// (`"map"`, current vLLM, default) or positional arrays (`"array"`, legacy vLLM).
    /// Only the wire batches travel: source, seq and provenance are trace-only.
    #[wasm_bindgen(js_name = toMsgpack)]
    pub fn to_msgpack(&self, encoding: Option<EncodingArg>) -> Result<Vec<u8>, JsValue> {
        let name = encoding
            .map(JsValue::from)
            .filter(|v| !v.is_undefined() && !v.is_null());
        let name = match name {
            None => None,
            Some(v) => Some(
                v.as_string()
                    .ok_or_else(|| js_error("encoding must be \"map\" or \"array\""))?,
            ),
        };
        let encoding = parse_encoding(name.as_deref()).map_err(|m| js_error(&m))?;
        Ok(self.msgpack_bytes(encoding))
    }
}

/// The `RangeError` for `{noun} {index} out of range (trace has {len} {nouns})` (one copy of
/// the formatting for every indexed getter).
#[inline(never)]
pub(crate) fn out_of_range(noun: &str, nouns: &str, index: usize, len: usize) -> JsValue {
    range_error(&format!(
        "{noun} {index} out of range (trace has {len} {nouns})"
    ))
}

/// A JS `RangeError`.
pub(crate) fn range_error(message: &str) -> JsValue {
    js_sys::RangeError::new(message).into()
}
