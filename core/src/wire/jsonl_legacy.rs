//! The JSON Lines reader as it was before [`super::json`] (serde_json's deserializer with typed
//! visitors, a fast path for batch lines and a general path), kept for tests only: the
//! differential tests in [`super::jsonl`] check that the new reader accepts exactly the lines
//! this one accepted and builds the same records. The `jsonl_ab` benchmark (feature
//! `legacy-jsonl`) times it against the new reader.

use std::fmt;
use std::marker::PhantomData;

use base64::Engine as _;
use serde::de::{self, DeserializeSeed, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::ser::SerializeMap;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Map, Value};

use crate::event::{BlockRemoved, BlockStored, ExtraValue, KvEvent, TokenId};
use crate::hash::BlockHash;
use crate::trace::{Provenance, SeqGap, Trace, TraceBatch, TraceHeader, TraceRecord};

use super::{Location, WireError};

/// Append one record as a `\n`-terminated line, the old way (serde_json's serializer).
pub fn write_record(out: &mut Vec<u8>, record: &TraceRecord) {
    let mut ser = serde_json::Serializer::with_formatter(&mut *out, super::jsonl::PySpaced);
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

/// Parse a JSON Lines trace the old way, splitting lines as [`super::jsonl::Reader`] does
/// (leading BOM skipped, `\n`-separated, a trailing `\r` dropped, blank lines skipped) and
/// reusing one set of scratch buffers for all lines.
pub fn read_trace(bytes: &[u8]) -> Result<Trace, WireError> {
    let bytes = bytes.strip_prefix(b"\xef\xbb\xbf").unwrap_or(bytes);
    let mut scratch = Scratch::default();
    let mut records = Vec::new();
    for (i, line) in bytes.split(|b| *b == b'\n').enumerate() {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        if !line.iter().all(u8::is_ascii_whitespace) {
            records.push(read_line_with(line, i as u64 + 1, &mut scratch)?);
        }
    }
    Ok(Trace { records })
}

/// Parse one non-blank line the old way.
pub fn read_line(line: &[u8], line_no: u64) -> Result<TraceRecord, WireError> {
    read_line_with(line, line_no, &mut Scratch::default())
}

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

/// serde_json adds " at line L column C" to messages; the location is reported separately.
fn strip_position(msg: &str) -> &str {
    match msg.rfind(" at line ") {
        Some(i) if msg[i + 9..].contains(" column ") => &msg[..i],
        _ => msg,
    }
}

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
