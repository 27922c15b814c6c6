//! The msgpack encoder: msgspec's smallest encodings, and events in the map or array form.

use crate::event::{
    BlockRemoved, BlockStored, Era, ExtraValue, FieldRef, FieldSpec, KvEvent, TokenId,
};
use crate::hash::BlockHash;

// ---------------------------------------------------------------------------------------------
// Encoding helpers: msgpack's smallest encodings written straight into the `Vec<u8>` (not
// through `rmp::encode`, whose generic writers and `Result`s cost about 1.8 KB of wasm).

/// `n` with the smallest header: `fix | n` when `n < fix_end`, else the first of `sized`
/// (markers of the 1-, 2-, 4- and 8-byte forms, 0 where a form does not exist) whose width
/// holds `n`, followed by `n` big-endian in that width.
pub(super) fn head(out: &mut Vec<u8>, n: u64, fix: u8, fix_end: u64, sized: [u8; 4]) {
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

pub(super) fn nil(out: &mut Vec<u8>) {
    out.push(0xc0);
}

pub(super) fn boolean(out: &mut Vec<u8>, b: bool) {
    out.push(if b { 0xc3 } else { 0xc2 });
}

/// positive fixint, uint8/16/32/64.
pub(super) fn uint(out: &mut Vec<u8>, v: u64) {
    head(out, v, 0x00, 0x80, [0xcc, 0xcd, 0xce, 0xcf]);
}

/// A non-negative value as [`uint`]; a negative one as negative fixint or the narrowest of
/// int8/16/32/64.
pub(super) fn sint(out: &mut Vec<u8>, v: i64) {
    if v >= 0 {
        uint(out, v as u64);
    } else if v >= -32 {
        out.push(v as u8);
    } else if v >= i64::from(i8::MIN) {
        out.push(0xd0);
        out.push(v as i8 as u8);
    } else if v >= i64::from(i16::MIN) {
        out.push(0xd1);
        out.extend_from_slice(&(v as i16).to_be_bytes());
    } else if v >= i64::from(i32::MIN) {
        out.push(0xd2);
        out.extend_from_slice(&(v as i32).to_be_bytes());
    } else {
        out.push(0xd3);
        out.extend_from_slice(&v.to_be_bytes());
    }
}

pub(super) fn float(out: &mut Vec<u8>, v: f64) {
    out.push(0xcb);
    out.extend_from_slice(&v.to_be_bytes());
}

/// Lengths over u32::MAX cannot be represented in msgpack; such data cannot come from a
/// decoded payload. Truncation is never silent: they are written as the longest prefix.
pub(super) fn capped(n: usize) -> usize {
    n.min(u32::MAX as usize)
}

pub(super) fn string(out: &mut Vec<u8>, s: &str) {
    let len = capped(s.len());
    head(out, len as u64, 0xa0, 32, [0xd9, 0xda, 0xdb, 0]);
    out.extend_from_slice(s.as_bytes().get(..len).unwrap_or_default());
}

pub(super) fn bin(out: &mut Vec<u8>, b: &[u8]) {
    let len = capped(b.len());
    head(out, len as u64, 0, 0, [0xc4, 0xc5, 0xc6, 0]);
    out.extend_from_slice(b.get(..len).unwrap_or_default());
}

pub(super) fn array_len(out: &mut Vec<u8>, n: usize) {
    head(out, capped(n) as u64, 0x90, 16, [0, 0xdc, 0xdd, 0]);
}

pub(super) fn map_len(out: &mut Vec<u8>, n: usize) {
    head(out, capped(n) as u64, 0x80, 16, [0, 0xde, 0xdf, 0]);
}

pub(super) fn opt_uint(out: &mut Vec<u8>, v: Option<u64>) {
    match v {
        Some(v) => uint(out, v),
        None => nil(out),
    }
}

pub(super) fn hash(out: &mut Vec<u8>, h: &BlockHash) {
    match h {
        BlockHash::Int(v) => uint(out, *v),
        BlockHash::Bytes(b) => bin(out, b),
    }
}

pub(super) fn opt_hash(out: &mut Vec<u8>, h: Option<&BlockHash>) {
    match h {
        Some(h) => hash(out, h),
        None => nil(out),
    }
}

pub(super) fn hashes(out: &mut Vec<u8>, hs: &[BlockHash]) {
    array_len(out, hs.len());
    for h in hs {
        hash(out, h);
    }
}

pub(super) fn tokens(out: &mut Vec<u8>, ts: &[TokenId]) {
    array_len(out, ts.len());
    for t in ts {
        uint(out, u64::from(*t));
    }
}

pub(super) fn extra_value(out: &mut Vec<u8>, v: &ExtraValue) {
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

pub(super) fn extra_keys(out: &mut Vec<u8>, keys: Option<&[Option<ExtraValue>]>) {
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

/// An event in the map form (`map`: current vLLM) or the legacy positional array form.
pub(super) fn encode_event(out: &mut Vec<u8>, ev: &KvEvent, map: bool) {
    let (tag, specs, values): (_, _, &[FieldRef<'_>]) = match ev {
        KvEvent::BlockStored(e) => (BlockStored::TAG, BlockStored::FIELDS, &e.fields()),
        KvEvent::BlockRemoved(e) => (BlockRemoved::TAG, BlockRemoved::FIELDS, &e.fields()),
        KvEvent::AllBlocksCleared => ("AllBlocksCleared", &[], &[]),
    };
    if map {
        map_event(out, tag, specs, values);
    } else {
        array_event(out, tag, specs, values);
    }
}

/// `{"type": tag, ...}`: the fields the map form writes ([`FieldSpec::in_map`]), keyed by name,
/// in declaration order.
fn map_event(out: &mut Vec<u8>, tag: &str, specs: &[FieldSpec], values: &[FieldRef<'_>]) {
    let written = || specs.iter().zip(values).filter(|(s, v)| s.in_map(v));
    map_len(out, 1 + written().count());
    string(out, "type");
    string(out, tag);
    for (spec, value) in written() {
        string(out, spec.name);
        field(out, value);
    }
}

/// `[tag, field, ...]`: every positional field; every field (the map-only ones appended) when
/// a map-only field is set.
fn array_event(out: &mut Vec<u8>, tag: &str, specs: &[FieldSpec], values: &[FieldRef<'_>]) {
    let extended = specs
        .iter()
        .zip(values)
        .any(|(s, v)| s.era == Era::map_only && !v.is_none());
    let written = || {
        specs
            .iter()
            .zip(values)
            .filter(move |(s, _)| extended || s.era == Era::positional)
    };
    array_len(out, 1 + written().count());
    string(out, tag);
    for (_, value) in written() {
        field(out, value);
    }
}

/// One field's value (nil for `None`).
fn field(out: &mut Vec<u8>, value: &FieldRef<'_>) {
    match *value {
        FieldRef::Hashes(v) => hashes(out, v),
        FieldRef::Hash(v) => opt_hash(out, v),
        FieldRef::Tokens(v) => tokens(out, v),
        FieldRef::U32(v) => uint(out, u64::from(v)),
        FieldRef::OptU32(v) => opt_uint(out, v.map(u64::from)),
        FieldRef::OptU64(v) => opt_uint(out, v),
        FieldRef::OptI64(Some(v)) => sint(out, v),
        FieldRef::OptStr(Some(v)) => string(out, v),
        FieldRef::ExtraKeys(v) => extra_keys(out, v),
        FieldRef::OptI64(None) | FieldRef::OptStr(None) => nil(out),
    }
}
