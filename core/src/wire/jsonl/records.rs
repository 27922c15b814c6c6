//! Provenance, and classifying a parsed line into its record.

use std::borrow::Cow;

use serde_json::{Map, Value};

use crate::event::{KvEvent, KvEventBatch};
use crate::trace::{Provenance, ProvenanceKind, SeqGap, TraceBatch, TraceHeader, TraceRecord};

use super::super::json::{quoted, JsonResult, Parser};
use super::super::json_write::Json;
use super::super::FloatParser;
use super::read::{LineParts, Slot};

/// Provenance fields in declaration order (also the order of its array form).
pub(super) const PROVENANCE_KEYS: [&str; 7] = [
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
pub(super) fn parse_provenance(
    p: &mut Parser<'_>,
) -> JsonResult<Result<Option<Vec<Provenance>>, String>> {
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
pub(super) fn provenance_from_value(v: Value) -> Result<Provenance, String> {
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
pub(super) fn provenance_from_slots(
    slots: [Option<Value>; 7],
    by_name: bool,
) -> Result<Provenance, String> {
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

pub(super) fn string_of(v: Value, name: &str) -> Result<String, String> {
    match v {
        Value::String(s) => Ok(s),
        v => Err(format!(
            "field {name}: expected a string, found {}",
            Json(&v)
        )),
    }
}

/// `None` for a missing or `null` value, else an integer in `0..=max`.
pub(super) fn opt_unsigned(v: Option<Value>, max: u64, name: &str) -> Result<Option<u64>, String> {
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
pub(super) fn provenance_kind(v: Value) -> Result<ProvenanceKind, String> {
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
    ProvenanceKind::from_name(&name)
        .ok_or_else(|| format!("field kind: unknown provenance kind {}", quoted(&name)))
}

impl LineParts<'_> {
    fn has(&self, key: &str) -> bool {
        self.rest.iter().any(|(k, _)| k == key)
    }

    pub(super) fn into_record(self, text: &str, line_no: u64) -> Result<TraceRecord, String> {
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
                crate::wire::base64::decode(s.as_bytes())
                    .map_err(|e| format!("batch line: field raw: invalid base64: {e}"))?,
            ),
            Some(v) => {
                return Err(format!(
                    "batch line: field raw: expected a base64 string, found {}",
                    Json(&v)
                ))
            }
        };
        // `raw` must be exactly one payload, and the batch it holds must be the line's: `convert
        // --to msgpack` writes it in place of the decoded batch.
        let decoded = match &raw {
            Some(payload) => Some(
                super::super::msgpack::decode_batch(payload)
                    .map_err(|e| format!("batch line: field raw: payload {e}"))?,
            ),
            None => None,
        };
        let (events, ts, dp_rank) = match (self.events, decoded, ts) {
            (Some(events), None, Some(ts)) => (events, ts, dp_rank),
            (Some(events), Some(b), Some(ts)) => {
                raw_agrees(&b, &events, ts, dp_rank)?;
                (events, ts, dp_rank)
            }
            (None, Some(b), _) => (b.events, b.ts, b.data_parallel_rank.or(dp_rank)),
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

/// Whether the batch decoded from a line's `raw` is the line's own: the same events and `ts`,
/// and the same rank unless the payload has none (capture then fills in the publisher's).
fn raw_agrees(
    payload: &KvEventBatch,
    events: &[KvEvent],
    ts: f64,
    dp_rank: Option<u32>,
) -> Result<(), String> {
    let differs = |what: String| Err(format!("batch line: field raw: the payload's {what}"));
    if payload.events.len() != events.len() {
        return Err(format!(
            "batch line: field raw: the payload holds {} event(s) but the line has {} (raw must be this batch's own payload)",
            payload.events.len(),
            events.len()
        ));
    }
    if let Some(i) = (0..events.len()).find(|&i| payload.events[i] != events[i]) {
        return differs(format!("event {i} differs from the line's event {i}"));
    }
    if payload.ts.to_bits() != ts.to_bits() {
        return differs("ts differs from the line's ts".into());
    }
    if payload.data_parallel_rank.is_some() && payload.data_parallel_rank != dp_rank {
        return differs("data_parallel_rank differs from the line's dp_rank".into());
    }
    Ok(())
}

/// A line without `events`: a header, a gap marker, or any other object kept as its [`Value`].
pub(super) fn other_record(
    rest: Vec<(Cow<'_, str>, Slot)>,
    text: &str,
    floats: FloatParser,
) -> TraceRecord {
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
pub(super) fn header(m: &mut Map<String, Value>) -> Option<TraceHeader> {
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
pub(super) fn gap(m: &Map<String, Value>) -> Option<SeqGap> {
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
