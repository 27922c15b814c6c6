//! The JSON Lines reader and writer against golden fixtures frozen from the serde-based reader
//! and writer they replaced (`tests/fixtures/wire/jsonl-legacy/README.md`): the reader accepts
//! exactly the lines the serde reader accepted and builds the same records, rejects the same
//! lines at the same line (with a column where it gave one), and the writer writes what
//! serde_json's serializer wrote, byte for byte.

use std::path::PathBuf;

use kvscope_core::event::{BlockRemoved, BlockStored, ExtraValue, KvEvent};
use kvscope_core::hash::BlockHash;
use kvscope_core::trace::{
    Provenance, ProvenanceKind, SeqGap, TraceBatch, TraceHeader, TraceRecord,
};
use kvscope_core::wire::{jsonl, Location};
use serde_json::{Map, Value};

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/fixtures/wire/jsonl-legacy")
        .join(name)
}

/// A batch line with every event type.
const LINE: &str = r#"{"source": "pod-a", "dp_rank": 0, "seq": 3, "ts": 1700000000.5, "events": [{"type": "BlockStored", "block_hashes": [18446744073709551615, 9007199254740993], "parent_block_hash": null, "token_ids": [1, 2, 3, 4], "block_size": 4, "lora_id": null, "medium": "CPU", "lora_name": null, "group_idx": 0}, {"type": "BlockRemoved", "block_hashes": ["00ff"], "medium": "CPU"}, {"type": "AllBlocksCleared"}]}"#;

/// Lines read by the frozen cases, and seeds for the mutated ones.
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

/// Lines around serde_json's nesting limit (127 levels in all, the line's object included), in
/// a parsed value, in `extra_keys`, in `provenance`, and in a skipped event key (no limit).
fn nesting_lines() -> Vec<String> {
    let mut out = Vec::new();
    for n in [120, 125, 126, 127, 128, 200] {
        let (open, close) = ("[".repeat(n), "]".repeat(n));
        out.extend([
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
        ]);
    }
    out
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

fn written(record: &TraceRecord) -> String {
    let mut out = Vec::new();
    jsonl::write_record(&mut out, record);
    String::from_utf8(out).expect("the writer writes UTF-8")
}

/// A frozen read case's input: `input` (text) or `input_hex` (bytes that are not UTF-8).
fn input_of(case: &Map<String, Value>) -> Vec<u8> {
    match (case.get("input"), case.get("input_hex")) {
        (Some(Value::String(s)), _) => s.clone().into_bytes(),
        (_, Some(Value::String(h))) => hex::decode(h).expect("input_hex is hex"),
        _ => panic!("case without input: {case:?}"),
    }
}

/// Every frozen line reads as the serde reader read it: the same record (compared by its
/// `Debug` form) written back as serde_json wrote it, or an error at the same line with a
/// column exactly where the serde reader gave one.
#[test]
fn reads_match_the_frozen_serde_reader() {
    let text = std::fs::read_to_string(fixture("reads.jsonl")).expect("reads.jsonl");
    let mut counts = (0, 0);
    for (i, line) in text.lines().enumerate() {
        let case: Map<String, Value> = serde_json::from_str(line).expect("a JSON case");
        let input = input_of(&case);
        let what = format!("reads.jsonl line {}: {:?}", i + 1, case.get("case"));
        match (jsonl::read_line(&input, 7), case.get("error")) {
            (Ok(record), None) => {
                counts.0 += 1;
                assert_eq!(
                    Some(&Value::String(format!("{record:?}"))),
                    case.get("record"),
                    "{what}"
                );
                assert_eq!(
                    Some(&Value::String(written(&record))),
                    case.get("written"),
                    "{what}"
                );
            }
            (Err(e), Some(Value::Object(want))) => {
                counts.1 += 1;
                let Location::Line { line, column } = e.location else {
                    panic!("{what}: {e}")
                };
                assert_eq!(Some(&Value::from(line)), want.get("line"), "{what}: {e}");
                assert_eq!(
                    Some(&Value::Bool(column.is_some())),
                    want.get("column"),
                    "{what}: {e}"
                );
                // A line that is not UTF-8 is located at its first bad byte.
                if let Err(u) = std::str::from_utf8(&input) {
                    assert_eq!(column, Some(u.valid_up_to() as u64 + 1), "{what}");
                }
            }
            (got, want) => panic!("{what}: got {got:?}, frozen {want:?}"),
        }
    }
    // Both outcomes are well represented (a fixture of only errors would prove little).
    assert!(counts.0 > 100 && counts.1 > 100, "{counts:?}");
}

/// The writer's edge cases, written as serde_json's serializer wrote them.
#[test]
fn writes_match_the_frozen_serde_writer() {
    let text = std::fs::read_to_string(fixture("writes.jsonl")).expect("writes.jsonl");
    let records = edge_records();
    let want: Vec<&str> = text.split_inclusive('\n').collect();
    assert_eq!(want.len(), records.len());
    for (i, (record, want)) in records.iter().zip(want).enumerate() {
        assert_eq!(written(record), want, "writes.jsonl line {}", i + 1);
    }
}

/// Sampled floats (as `ts`) and strings (as `source`) are written as serde_json wrote them.
#[test]
fn floats_and_strings_match_the_frozen_serde_writer() {
    let floats = std::fs::read_to_string(fixture("floats.txt")).expect("floats.txt");
    let mut n = 0;
    for line in floats.lines() {
        let (bits, want) = line.split_once(' ').expect("bits text");
        let f = f64::from_bits(u64::from_str_radix(bits, 16).expect("hex bits"));
        let got = written(&batch_record(String::new(), f, vec![]));
        let want = format!(
            "{{\"source\": \"\", \"dp_rank\": null, \"seq\": 0, \"ts\": {want}, \"events\": []}}\n"
        );
        assert_eq!(got, want, "{line}");
        n += 1;
    }
    assert!(n > 1000);
    let strings = std::fs::read_to_string(fixture("strings.txt")).expect("strings.txt");
    n = 0;
    for line in strings.lines() {
        let (utf8, want) = line.split_once(' ').expect("hex text");
        let s = String::from_utf8(hex::decode(utf8).expect("hex")).expect("UTF-8");
        let got = written(&batch_record(s, 1.0, vec![]));
        let want = format!(
            "{{\"source\": {want}, \"dp_rank\": null, \"seq\": 0, \"ts\": 1.0, \"events\": []}}\n"
        );
        assert_eq!(got, want, "{line}");
        n += 1;
    }
    assert!(n > 500);
}

/// The records of the writer's edge cases, in fixture order.
fn edge_records() -> Vec<TraceRecord> {
    let mut out = Vec::new();
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
        out.push(batch_record("s".into(), f, vec![]));
        let extra = vec![
            Some(ExtraValue::Float(f)),
            None,
            Some(ExtraValue::Map(vec![(
                ExtraValue::Float(f),
                ExtraValue::Int(i64::MIN),
            )])),
        ];
        out.push(batch_record(
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
        out.push(batch_record(
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
        out.push(TraceRecord::Header(TraceHeader {
            kvscope: u32::MAX,
            scenario: Some(s.into()),
            meta,
        }));
        out.push(TraceRecord::Header(TraceHeader {
            kvscope: 0,
            scenario: None,
            meta: Map::new(),
        }));
        out.push(TraceRecord::Gap(SeqGap {
            source: s.into(),
            dp_rank: None,
            expected_seq: 0,
            received_seq: u64::MAX,
            recovered: true,
        }));
        out.push(TraceRecord::Gap(SeqGap {
            source: s.into(),
            dp_rank: Some(3),
            expected_seq: 1,
            received_seq: 2,
            recovered: false,
        }));
        out.push(TraceRecord::Other(
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
        out.push(TraceRecord::Batch(b));
    }
    out
}

/// Writes the fixtures from `wire::jsonl_legacy` (run once, before that module was deleted):
/// `cargo test -p kvscope-core --features legacy-jsonl --test wire_jsonl_golden -- --ignored`.
#[cfg(feature = "legacy-jsonl")]
#[test]
#[ignore]
fn freeze() {
    use kvscope_core::wire::jsonl_legacy;
    use rand::{Rng, SeedableRng};
    use std::fmt::Write as _;

    let mut inputs: Vec<(String, Vec<u8>)> = Vec::new();
    for i in 0..VARIANT_COUNT {
        inputs.push((format!("variant {i}"), variant(i).as_bytes().to_vec()));
    }
    for (i, l) in nesting_lines().into_iter().enumerate() {
        inputs.push((format!("nesting {i}"), l.into_bytes()));
    }
    // Mutated lines (bytes replaced, removed or inserted; pieces of other lines spliced in),
    // as the proptest over the two readers made them.
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(18);
    for k in 0..2000 {
        let which = rng.gen_range(0..VARIANT_COUNT);
        let mut line = variant(which).as_bytes().to_vec();
        for _ in 0..rng.gen_range(1..4) {
            let (at, op, byte, other) = (
                rng.gen_range(0usize..2000),
                rng.gen_range(0u8..4),
                rng.gen::<u8>(),
                rng.gen_range(0..VARIANT_COUNT),
            );
            let i = at % (line.len() + 1);
            match op {
                0 if i < line.len() => line[i] = byte,
                1 if i < line.len() => {
                    line.remove(i);
                }
                2 => line.insert(i, byte),
                _ => {
                    let o = variant(other).as_bytes();
                    let j = at % o.len();
                    line.splice(i..i, o[j..].iter().take(40).copied());
                }
            }
        }
        inputs.push((format!("mutation {k} of variant {which}"), line));
    }
    let mut reads = String::new();
    for (name, input) in &inputs {
        let mut case = Map::new();
        case.insert("case".into(), Value::String(name.clone()));
        match std::str::from_utf8(input) {
            Ok(s) => case.insert("input".into(), Value::String(s.into())),
            Err(_) => case.insert("input_hex".into(), Value::String(hex::encode(input))),
        };
        match jsonl_legacy::read_line(input, 7) {
            Ok(record) => {
                let mut out = Vec::new();
                jsonl_legacy::write_record(&mut out, &record);
                case.insert("record".into(), Value::String(format!("{record:?}")));
                case.insert(
                    "written".into(),
                    Value::String(String::from_utf8(out).unwrap()),
                );
            }
            Err(e) => {
                let Location::Line { line, column } = e.location else {
                    panic!()
                };
                let mut err = Map::new();
                err.insert("line".into(), line.into());
                err.insert("column".into(), column.is_some().into());
                err.insert("message".into(), Value::String(e.message));
                case.insert("error".into(), Value::Object(err));
            }
        }
        reads.push_str(&serde_json::to_string(&case).unwrap());
        reads.push('\n');
    }
    std::fs::write(fixture("reads.jsonl"), reads).unwrap();
    let mut writes = Vec::new();
    for r in edge_records() {
        jsonl_legacy::write_record(&mut writes, &r);
    }
    std::fs::write(fixture("writes.jsonl"), writes).unwrap();
    let mut floats = String::new();
    let mut specials: Vec<u64> = [
        0.0,
        -0.0,
        1.0,
        f64::NAN,
        f64::INFINITY,
        f64::NEG_INFINITY,
        f64::MAX,
        f64::MIN_POSITIVE,
        5e-324,
        1e16,
        1e21,
        1e22,
    ]
    .iter()
    .map(|f: &f64| f.to_bits())
    .collect();
    for _ in 0..1500 {
        specials.push(rng.gen::<u64>());
        // Decimal-looking values too (random bits are mostly huge or tiny).
        specials.push((rng.gen_range(-1e9..1e9f64) * 10f64.powi(rng.gen_range(-12..12))).to_bits());
    }
    for bits in specials {
        let mut out = Vec::new();
        jsonl_legacy::write_record(
            &mut out,
            &batch_record(String::new(), f64::from_bits(bits), vec![]),
        );
        let text = String::from_utf8(out).unwrap();
        let ts = text
            .split("\"ts\": ")
            .nth(1)
            .unwrap()
            .split(", \"events\"")
            .next()
            .unwrap();
        writeln!(floats, "{bits:016x} {ts}").unwrap();
    }
    std::fs::write(fixture("floats.txt"), floats).unwrap();
    let mut strings = String::new();
    for k in 0..800 {
        let len = rng.gen_range(0..12);
        let s: String = (0..len)
            .map(|_| match rng.gen_range(0..4) {
                0 => char::from(rng.gen_range(0u8..0x80)),
                1 => char::from_u32(rng.gen_range(0x80..0x800)).unwrap(),
                2 => char::from_u32(rng.gen_range(0..0x110000)).unwrap_or('\u{fffd}'),
                _ => ['"', '\\', '/', '\u{7f}', '\u{2028}', '\u{0}', '\n'][rng.gen_range(0..7)],
            })
            .collect();
        let s = if k == 0 { String::new() } else { s };
        let mut out = Vec::new();
        jsonl_legacy::write_record(&mut out, &batch_record(s.clone(), 1.0, vec![]));
        let text = String::from_utf8(out).unwrap();
        let src = text
            .strip_prefix("{\"source\": ")
            .unwrap()
            .split(", \"dp_rank\": null")
            .next()
            .unwrap();
        writeln!(strings, "{} {src}", hex::encode(s.as_bytes())).unwrap();
    }
    std::fs::write(fixture("strings.txt"), strings).unwrap();
}
