//! Unit tests of the JSON Lines reader and writer.

use base64::Engine as _;

use super::*;
use crate::event::{BlockStored, ExtraValue, KvEvent};
use crate::hash::BlockHash;
use crate::trace::{Provenance, TraceBatch};
use smallvec::smallvec;

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
    use crate::event::KvEventBatch;
    use crate::wire::{msgpack, EventEncoding};
    let wire = KvEventBatch {
        ts: 1.0,
        events: vec![KvEvent::AllBlocksCleared],
        data_parallel_rank: None,
    };
    let raw = msgpack::encode_batch(&wire, EventEncoding::Map);
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
        "{\"source\": \"s\", \"dp_rank\": null, \"seq\": 0, \"ts\": 1.0, \"events\": [{\"type\": \"AllBlocksCleared\"}], \"provenance\": [{\"tier\": \"GPU\", \"kind\": \"reset\", \"step\": 4}], \"raw\": \"k8s/8AAAAAAAAJGBpHR5cGWwQWxsQmxvY2tzQ2xlYXJlZMA=\"}\n"
    );
    assert_eq!(read_trace(text.as_bytes()).unwrap(), t);
    let (no_raw, _) = text.split_once(", \"raw\"").unwrap();
    let mismatched = format!("{no_raw}}}").replace(
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
    let event = KvEvent::BlockStored(BlockStored {
        block_hashes: smallvec![BlockHash::Int(1)],
        parent_block_hash: None,
        token_ids: vec![1],
        block_size: 1,
        lora_id: None,
        medium: None,
        lora_name: None,
        extra_keys: Some(vec![Some(v), None]),
        group_idx: None,
        kv_cache_spec_kind: None,
        kv_cache_spec_sliding_window: None,
        locality: None,
        ownership: None,
    });
    let t = Trace {
        records: vec![TraceRecord::Batch(TraceBatch {
            source: "s".into(),
            dp_rank: None,
            seq: 0,
            ts: 1.0,
            events: vec![event],
            provenance: None,
            raw: None,
            origin: 1,
        })],
    };
    let text = write_trace(&t);
    assert!(
        text.contains(r#""extra_keys": [["lora", {"bytes": "00ff"}, -5, 18446744073709551615, 1.0, null, {"map": [[true, []]]}], null]"#),
        "{text}"
    );
    assert_eq!(read_trace(text.as_bytes()).unwrap(), t);
}

#[test]
fn nesting_is_limited_as_serde_json_limited_it_except_in_skipped_values() {
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
