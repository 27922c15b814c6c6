//! Loading JSON Lines and msgpack, exporting, and located errors.

use kvscope_wasm::{load_trace, Trace};
use wasm_bindgen::JsValue;
use wasm_bindgen_test::wasm_bindgen_test;

use super::support::*;

#[wasm_bindgen_test]
fn jsonl_loads_with_exact_hashes() {
    let t = load_trace(&JsValue::from_str(&readme_jsonl()), None).unwrap();
    assert_eq!((t.batch_count(), t.event_count()), (2, 3));
    let b = t.batches();
    assert_eq!(
        string(&path(&b, "0.events.0.block_hashes.0")),
        "18446744073709551615"
    );
    assert_eq!(
        string(&path(&b, "1.events.0.block_hashes.0")),
        "9007199254740993"
    );
    assert_eq!(
        string(&path(&b, "1.events.0.parent_block_hash")),
        "9007199254740992"
    );
    assert_eq!(
        string(&path(&b, "1.events.1.parent_block_hash")),
        "18446744073709551615"
    );
    assert_eq!(number(&path(&b, "1.origin")), 2.0);
}

#[wasm_bindgen_test]
fn msgpack_export_round_trips_and_loads_from_uint8array() {
    let t = Trace::from_jsonl(&readme_jsonl()).unwrap();
    for enc in [None, Some("map"), Some("array")] {
        let bytes = t.to_msgpack(enc.map(js_str)).unwrap();
        assert!(!bytes.is_empty());
        let arr = js_sys::Uint8Array::from(bytes.as_slice());
        let back = load_trace(&arr.into(), Some("pod-a".into())).unwrap();
        assert_eq!(back.event_count(), 3);
        let b = back.batches();
        assert_eq!(
            string(&path(&b, "0.events.0.block_hashes.0")),
            "18446744073709551615"
        );
        assert_eq!(
            string(&path(&b, "1.events.0.block_hashes.0")),
            "9007199254740993"
        );
        assert_eq!(string(&path(&b, "1.source")), "pod-a");
        // Same wire batches: same msgpack again.
        assert_eq!(back.to_msgpack(enc.map(js_str)).unwrap(), bytes);
    }
    let default_source = Trace::from_msgpack(&t.to_msgpack(None).unwrap(), None).unwrap();
    assert_eq!(
        string(&path(&default_source.batches(), "0.source")),
        "trace"
    );
}

#[wasm_bindgen_test]
fn jsonl_export_round_trips() {
    let t = Trace::from_jsonl(&readme_jsonl()).unwrap();
    let text = t.to_jsonl();
    assert!(text.contains("18446744073709551615"), "{text}");
    assert!(text.contains("9007199254740993"), "{text}");
    let back = Trace::from_jsonl(&text).unwrap();
    assert_eq!(back.core(), t.core());
    // JSONL bytes in a Uint8Array are detected as JSONL.
    let bytes = js_sys::Uint8Array::from(text.as_bytes());
    assert_eq!(load_trace(&bytes.into(), None).unwrap().core(), t.core());
}

#[wasm_bindgen_test]
fn jsonl_errors_name_the_line() {
    let text = format!(
        "{}\n{{\"source\": \"pod-a\", \"seq\": 1, \"events\": [{{\"type\": \"BlockStored\"",
        batch(0, &[])
    );
    let (e, msg) = thrown(load_trace(&JsValue::from_str(&text), None));
    assert!(msg.starts_with("line 2"), "{msg}");
    assert_eq!(number(&get(&e, "line")), 2.0);
    let (_, msg) = thrown(Trace::from_jsonl("\n\n{\"events\": 5}\n"));
    assert!(msg.starts_with("line 3"), "{msg}");
}

#[wasm_bindgen_test]
fn msgpack_errors_name_the_byte_offset() {
    let good = Trace::from_jsonl(&readme_jsonl())
        .unwrap()
        .to_msgpack(None)
        .unwrap();
    // Truncate the second payload.
    let cut = &good[..good.len() - 3];
    let (e, msg) = thrown(Trace::from_msgpack(cut, None));
    assert!(msg.starts_with("byte offset "), "{msg}");
    let offset = number(&get(&e, "byteOffset"));
    assert!(offset > 0.0 && offset <= cut.len() as f64, "{offset}");
    // Hostile: an array header claiming 2^32-1 elements.
    let (_, msg) = thrown(Trace::from_msgpack(
        &[
            0x93, 0xcb, 0, 0, 0, 0, 0, 0, 0, 0, 0xdd, 0xff, 0xff, 0xff, 0xff,
        ],
        None,
    ));
    assert!(msg.starts_with("byte offset "), "{msg}");
    // Garbage.
    let garbage = js_sys::Uint8Array::from(&[0xc1u8, 0x00][..]);
    let (_, msg) = thrown(load_trace(&garbage.into(), None));
    assert!(msg.starts_with("byte offset 0"), "{msg}");
}
