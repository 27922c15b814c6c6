//! msgspec-generated fixtures (`tests/fixtures/wire/gen_msgspec.py`): decode == expected JSON,
//! and encode(decode(payload)) == payload byte for byte.

use std::path::PathBuf;

use kvscope_core::trace::{TraceBatch, TraceRecord};
use kvscope_core::wire::msgpack::{decode_batch, decode_stream, encode_batch};
use kvscope_core::wire::{jsonl, EventEncoding};

fn dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/wire")
}

fn fixtures() -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir())
        .expect("fixture dir")
        .filter_map(|e| e.ok())
        .filter_map(|e| e.file_name().into_string().ok())
        .filter_map(|n| n.strip_suffix(".json").map(str::to_owned))
        .collect();
    names.sort();
    names
}

#[test]
fn there_are_fixtures_for_both_encodings() {
    let names = fixtures();
    assert!(names.len() >= 18, "{names:?}");
    assert!(names.iter().any(|n| n == "worked_example"));
    assert!(names.iter().any(|n| n == "legacy_worked_example"));
}

#[test]
fn every_fixture_decodes_to_the_expected_batch_and_re_encodes_identically() {
    for name in fixtures() {
        let payload = std::fs::read(dir().join(format!("{name}.msgpack"))).unwrap();
        let expected: serde_json::Value =
            serde_json::from_slice(&std::fs::read(dir().join(format!("{name}.json"))).unwrap())
                .unwrap();
        let batch = decode_batch(&payload).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(batch.ts, expected["ts"].as_f64().unwrap(), "{name}: ts");
        assert_eq!(
            batch.data_parallel_rank.map(u64::from),
            expected["data_parallel_rank"].as_u64(),
            "{name}: rank"
        );
        // The events as the JSON Lines writer writes them (vLLM's map form).
        let line = TraceRecord::Batch(TraceBatch {
            source: "s".into(),
            dp_rank: batch.data_parallel_rank,
            seq: 0,
            ts: batch.ts,
            events: batch.events.clone(),
            provenance: None,
            raw: None,
            origin: 1,
        });
        let mut text = Vec::new();
        jsonl::write_record(&mut text, &line);
        let written: serde_json::Value = serde_json::from_slice(&text).unwrap();
        let events = &written["events"];
        assert_eq!(events, &expected["events"], "{name}: events");
        // Key order of every event object must be vLLM's (type first, declaration order).
        let got_text = serde_json::to_string(events).unwrap();
        let want_text = serde_json::to_string(&expected["events"]).unwrap();
        assert_eq!(got_text, want_text, "{name}: event key order");
        let encoding = match expected["encoding"].as_str().unwrap() {
            "map" => EventEncoding::Map,
            _ => EventEncoding::Array,
        };
        let again = encode_batch(&batch, encoding);
        assert_eq!(
            hex(&again),
            hex(&payload),
            "{name}: re-encoded bytes differ"
        );
    }
}

#[test]
fn the_stream_fixture_is_every_map_payload_in_order() {
    let bytes = std::fs::read(dir().join("stream.msgpack")).unwrap();
    let trace = decode_stream(&bytes, "stream").unwrap();
    let batches: Vec<_> = trace.batches().collect();
    let map_fixtures = fixtures()
        .into_iter()
        .filter(|n| !n.starts_with("legacy_"))
        .count();
    assert_eq!(batches.len(), map_fixtures);
    for (i, b) in batches.iter().enumerate() {
        assert_eq!(b.seq, i as u64);
        assert_eq!(b.origin, i as u64 + 1);
        assert_eq!(b.source, "stream");
    }
    // Truncating the stream reports an offset inside the last payload.
    let cut = &bytes[..bytes.len() - 1];
    let err = decode_stream(cut, "s").unwrap_err();
    match err.location {
        kvscope_core::wire::Location::Byte(o) => assert!(o as usize <= cut.len()),
        other => panic!("{other:?}"),
    }
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}
