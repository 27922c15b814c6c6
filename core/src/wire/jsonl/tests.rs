//! Unit tests of the JSON Lines reader and writer.

use base64::Engine as _;
use serde_json::Map;

use super::*;
use crate::event::{BlockRemoved, BlockStored, ExtraValue, KvEvent};
use crate::hash::BlockHash;
use crate::trace::{Provenance, ProvenanceKind, SeqGap, TraceBatch, TraceHeader};

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
            format!(r#"{{"kind": "note", "provenance": [["GPU", "reset", null, {open}{close}]]}}"#),
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
