//! The JSON Lines writer.

use crate::event::{BlockRemoved, BlockStored, ExtraValue, FieldRef, KvEvent};
use crate::hash::BlockHash;
use crate::trace::{Provenance, Trace, TraceBatch, TraceRecord};

use super::super::json_write::JsonOut;

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

// ---------------------------------------------------------------------------------------------
// Writing.

/// A batch line: `source`, `dp_rank`, `seq`, `ts`, `events`, then `provenance` and `raw` when
/// present.
pub(super) fn write_batch(w: &mut JsonOut<'_>, b: &TraceBatch) {
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
        w.base64(raw);
    }
    w.raw("}");
}

/// vLLM's map form: `type` first, then declaration order; defaulted `None` fields omitted,
/// non-defaulted `None` fields written as `null` (msgspec `omit_defaults`).
pub(super) fn write_event(w: &mut JsonOut<'_>, event: &KvEvent) {
    let (tag, specs, values): (_, _, &[FieldRef<'_>]) = match event {
        KvEvent::BlockStored(e) => (BlockStored::TAG, BlockStored::FIELDS, &e.fields()),
        KvEvent::BlockRemoved(e) => (BlockRemoved::TAG, BlockRemoved::FIELDS, &e.fields()),
        KvEvent::AllBlocksCleared => ("AllBlocksCleared", &[], &[]),
    };
    w.raw("{\"type\": ");
    w.str(tag);
    for (spec, value) in specs.iter().zip(values) {
        if spec.in_map(value) {
            w.key(false, spec.name);
            write_field(w, value);
        }
    }
    w.raw("}");
}

/// One field's value (`null` for `None`).
fn write_field(w: &mut JsonOut<'_>, value: &FieldRef<'_>) {
    match *value {
        FieldRef::Hashes(v) => write_hashes(w, v),
        FieldRef::Hash(v) => w.opt(v, write_hash),
        FieldRef::Tokens(v) => {
            w.raw("[");
            for (i, t) in v.iter().enumerate() {
                w.sep(i == 0);
                w.u64((*t).into());
            }
            w.raw("]");
        }
        FieldRef::U32(v) => w.u64(v.into()),
        FieldRef::OptU32(v) => w.opt(v, |w, v| w.u64(v.into())),
        FieldRef::OptU64(v) => w.opt(v, JsonOut::u64),
        FieldRef::OptI64(v) => w.opt(v, JsonOut::i64),
        FieldRef::OptStr(v) => w.opt(v, JsonOut::str),
        FieldRef::ExtraKeys(v) => w.opt(v, |w, keys| {
            w.raw("[");
            for (i, k) in keys.iter().enumerate() {
                w.sep(i == 0);
                w.opt(k.as_ref(), write_extra);
            }
            w.raw("]");
        }),
    }
}

pub(super) fn write_hashes(w: &mut JsonOut<'_>, hashes: &[BlockHash]) {
    w.raw("[");
    for (i, h) in hashes.iter().enumerate() {
        w.sep(i == 0);
        write_hash(w, h);
    }
    w.raw("]");
}

/// Integer hashes as JSON integers, bytes as lowercase hex strings.
pub(super) fn write_hash(w: &mut JsonOut<'_>, h: &BlockHash) {
    match h {
        BlockHash::Int(v) => w.u64(*v),
        BlockHash::Bytes(b) => w.str(&hex::encode(b)),
    }
}

/// [`ExtraValue`]'s JSON form: nil → `null`, bool/int/float/str → themselves, arrays →
/// arrays, bytes → `{"bytes": "<lowercase hex>"}`, maps → `{"map": [[k, v], ...]}`.
pub(super) fn write_extra(w: &mut JsonOut<'_>, v: &ExtraValue) {
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
pub(super) fn write_provenance(w: &mut JsonOut<'_>, p: &Provenance) {
    w.raw("{\"tier\": ");
    w.str(&p.tier);
    w.key(false, "kind");
    w.str(p.kind.name());
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
