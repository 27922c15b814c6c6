//! The msgpack encoder: msgspec's smallest encodings, and events in the map or array form.

use crate::event::{ExtraValue, KvEvent, TokenId};
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

/// A non-negative value as [`uint`]; a negative one as negative fixint or int8/16/32/64.
pub(super) fn sint(out: &mut Vec<u8>, v: i64) {
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

pub(super) fn opt_str(out: &mut Vec<u8>, s: &Option<String>) {
    match s {
        Some(s) => string(out, s),
        None => nil(out),
    }
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

/// An event as a map (`map`: current vLLM, keys named, optional trailing fields only when
/// set) or a positional array (legacy vLLM: every field, `locality` / `ownership` only when
/// either is set). One function for both forms: they share the field order.
pub(super) fn encode_event(out: &mut Vec<u8>, ev: &KvEvent, map: bool) {
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
