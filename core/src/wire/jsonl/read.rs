//! Batch lines and events, read field by field.

use std::borrow::Cow;

use serde_json::Value;

use crate::event::{
    label, BlockRemoved, BlockStored, EventFields, ExtraValue, FieldSlot, KvEvent, TokenId,
};
use crate::hash::BlockHash;
use crate::trace::Provenance;

use super::super::json::{quoted, JsonResult, Num, Parser};
use super::super::FloatParser;
use super::records::parse_provenance;

// ---------------------------------------------------------------------------------------------
// Reading: a schema-driven reader over [`Parser`]. What it accepts and builds is what serde
// (`Deserialize` for the typed fields, `Value` for the rest) accepted and built before:
// `core/tests/wire_jsonl_golden.rs` checks it against cases frozen from that reader.

/// Buffers reused from event to event (and line to line) while reading, so that every `Vec` in
/// an event is one allocation of exactly its length, and `events` starts at the size of the
/// previous line's.
#[derive(Default)]
pub(crate) struct Scratch {
    pub(super) hashes: Vec<BlockHash>,
    pub(super) tokens: Vec<TokenId>,
    pub(super) events_len: usize,
}

/// A top-level value of a line other than `events`.
pub(super) enum Slot {
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
pub(super) struct LineParts<'a> {
    pub(super) events: Option<Vec<KvEvent>>,
    pub(super) rest: Vec<(Cow<'a, str>, Slot)>,
    /// The line's float parser, to read a [`Slot::Provenance`] again as a [`Value`].
    pub(super) floats: FloatParser,
}

/// The top-level object of a line.
pub(super) fn parse_line<'a>(
    p: &mut Parser<'a>,
    scratch: &mut Scratch,
) -> JsonResult<LineParts<'a>> {
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
pub(super) fn parse_events(p: &mut Parser<'_>, scratch: &mut Scratch) -> JsonResult<Vec<KvEvent>> {
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
pub(super) fn opt<'a, T>(
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
pub(super) fn u32_value(p: &mut Parser<'_>) -> JsonResult<u32> {
    p.unsigned(u32::MAX.into(), "u32").map(|v| v as u32)
}

#[inline]
pub(super) fn u64_value(p: &mut Parser<'_>) -> JsonResult<u64> {
    p.unsigned(u64::MAX, "u64")
}

pub(super) fn i64_value(p: &mut Parser<'_>) -> JsonResult<i64> {
    let start = p.ws_pos();
    match p.number("i64")? {
        Num::U64(v) => i64::try_from(v).map_err(|_| p.number_error("invalid value", start, "i64")),
        Num::I64(v) => Ok(v),
        Num::F64(_) => Err(p.number_error("invalid type", start, "i64")),
    }
}

/// A JSON array read into a reused buffer, then moved into a `Vec` of exactly its length.
#[inline]
pub(super) fn exact_vec<'a, T, C: FromIterator<T>>(
    p: &mut Parser<'a>,
    buf: &mut Vec<T>,
    mut read: impl FnMut(&mut Parser<'a>) -> JsonResult<T>,
) -> JsonResult<C> {
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
pub(super) fn token_vec(p: &mut Parser<'_>, buf: &mut Vec<TokenId>) -> JsonResult<Vec<TokenId>> {
    p.open(b'[', "a sequence")?;
    buf.clear();
    p.u32_elements(buf)?;
    Ok(buf.to_vec())
}

/// An integer (`u64`, or `i64` kept as its bit pattern) or a hex string.
#[inline]
pub(super) fn block_hash(p: &mut Parser<'_>) -> JsonResult<BlockHash> {
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
pub(super) enum Tag {
    BlockStored,
    BlockRemoved,
    AllBlocksCleared,
}

/// `"BlockStored"` (or serde's other unit-variant form, `{"BlockStored": null}`).
pub(super) fn tag(p: &mut Parser<'_>) -> JsonResult<Tag> {
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
pub(super) fn extra_value(p: &mut Parser<'_>) -> JsonResult<ExtraValue> {
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
pub(super) fn parse_event(p: &mut Parser<'_>, scratch: &mut Scratch) -> JsonResult<KvEvent> {
    p.open(b'{', "a KV event object with a \"type\" key")?;
    let mut tag_: Option<Tag> = None;
    let mut stored = BlockStored::default();
    let mut fields = EventFields::new(&mut stored);
    let mut first = true;
    while let Some(k) = p.next_key(first)? {
        first = false;
        // Errors in a known field's value name the field; a skipped value's errors do not.
        let read = if &*k == "type" {
            tag(p).map(|t| tag_ = Some(t))
        } else if let Some((_, slot)) = fields.slot(&k) {
            field(p, slot, scratch)
        } else {
            p.skip()?;
            Ok(())
        };
        read.map_err(|e| e.context(&format!("field {k}: ")))?;
    }
    let missing = |t: &str, f: &str| p.error(format!("{t}: missing required field {f}"));
    match tag_ {
        None => Err(p.error("event has no \"type\" key")),
        Some(Tag::BlockStored) => match fields.block_stored() {
            Ok(()) => Ok(KvEvent::BlockStored(stored)),
            Err(f) => Err(missing(BlockStored::TAG, f)),
        },
        Some(Tag::BlockRemoved) => fields
            .block_removed()
            .map(KvEvent::BlockRemoved)
            .map_err(|f| missing(BlockRemoved::TAG, f)),
        Some(Tag::AllBlocksCleared) => Ok(KvEvent::AllBlocksCleared),
    }
}

/// One field's value into its slot.
fn field(p: &mut Parser<'_>, slot: FieldSlot<'_>, scratch: &mut Scratch) -> JsonResult<()> {
    match slot {
        FieldSlot::Hashes(s) => *s = exact_vec(p, &mut scratch.hashes, block_hash)?,
        FieldSlot::Hash(s) => *s = opt(p, block_hash)?,
        FieldSlot::Tokens(s) => *s = token_vec(p, &mut scratch.tokens)?,
        FieldSlot::U32(s) => *s = u32_value(p)?,
        FieldSlot::OptU32(s) => *s = opt(p, u32_value)?,
        FieldSlot::OptU64(s) => *s = opt(p, u64_value)?,
        FieldSlot::OptI64(s) => *s = opt(p, i64_value)?,
        FieldSlot::OptStr(s) => *s = opt(p, |p| Ok(label(&p.string("a string")?)))?,
        FieldSlot::ExtraKeys(s) => {
            *s = opt(p, |p| {
                p.open(b'[', "a sequence")?;
                let mut v = Vec::new();
                while p.next_element(v.is_empty())? {
                    v.push(opt(p, extra_value)?);
                }
                Ok(v)
            })?
        }
    }
    Ok(())
}
