//! `Trace`: objects, hash precision, ranges, error objects.

use kvscope_core::event::{BlockRemoved, BlockStored, ExtraValue, KvEvent};
use kvscope_core::trace::{Trace as CoreTrace, TraceBatch, TraceRecord};
use kvscope_core::wire::{Location, WireError};
use kvscope_core::BlockHash;
use kvscope_wasm::dto::Event;
use kvscope_wasm::js::{wire_error, ToJs};
use kvscope_wasm::{load_trace, Trace};
use wasm_bindgen::{JsCast, JsValue};
use wasm_bindgen_test::wasm_bindgen_test;

use super::support::*;

const BIG: u64 = u64::MAX; // 18446744073709551615
const ODD: u64 = 9_007_199_254_740_993; // 2^53 + 1: the first integer a JS number cannot hold

fn stored(hashes: &[u64], parent: Option<u64>) -> KvEvent {
    KvEvent::BlockStored(BlockStored {
        block_hashes: hashes.iter().map(|&h| BlockHash::Int(h)).collect(),
        parent_block_hash: parent.map(BlockHash::Int),
        token_ids: (0..16 * hashes.len() as u32).collect(),
        block_size: 16,
        lora_id: None,
        medium: Some("CPU".into()),
        lora_name: None,
        extra_keys: None,
        group_idx: None,
        kv_cache_spec_kind: None,
        kv_cache_spec_sliding_window: None,
        locality: None,
        ownership: None,
    })
}

/// Two batches: [store(BIG, parent ODD), store(ODD)] and [remove(BIG)].
fn sample() -> Trace {
    let batch = |seq: u64, events: Vec<KvEvent>| {
        TraceRecord::Batch(TraceBatch {
            source: "pod-a".into(),
            dp_rank: Some(0),
            seq,
            ts: 1_700_000_000.0 + seq as f64,
            events,
            provenance: None,
            raw: None,
            origin: seq + 1,
        })
    };
    Trace::from_core(CoreTrace {
        records: vec![
            batch(0, vec![stored(&[BIG], Some(ODD)), stored(&[ODD], None)]),
            batch(
                ODD,
                vec![KvEvent::BlockRemoved(BlockRemoved {
                    block_hashes: vec![BlockHash::Int(BIG)].into(),
                    medium: Some("CPU".into()),
                    group_idx: None,
                    locality: None,
                    ownership: None,
                })],
            ),
        ],
    })
}

#[wasm_bindgen_test]
fn counts() {
    let t = sample();
    assert_eq!(t.batch_count(), 2);
    assert_eq!(t.event_count(), 3);
    assert_eq!(t.record_count(), 2);
}

#[wasm_bindgen_test]
fn hashes_above_2_pow_53_are_exact_strings_and_seqs_bigints() {
    let t = sample();
    let batches = t.batches();
    assert_eq!(len(&batches), 2);
    assert_eq!(
        string(&path(&batches, "0.events.0.block_hashes.0")),
        "18446744073709551615"
    );
    assert_eq!(
        string(&path(&batches, "0.events.0.parent_block_hash")),
        "9007199254740993"
    );
    assert_eq!(
        string(&path(&batches, "0.events.1.block_hashes.0")),
        "9007199254740993"
    );
    assert!(path(&batches, "0.events.1.parent_block_hash").is_null());
    assert_eq!(string(&path(&batches, "0.events.0.type")), "BlockStored");
    assert_eq!(string(&path(&batches, "1.events.0.type")), "BlockRemoved");
    assert_eq!(
        string(&path(&batches, "1.events.0.block_hashes.0")),
        "18446744073709551615"
    );
    // seq 2^53+1 survives as a bigint.
    assert_eq!(bigint(&path(&batches, "1.seq")), ODD);
    assert_eq!(number(&path(&batches, "1.first_event")), 2.0);
    assert_eq!(
        number(&path(&batches, "1.ts")),
        1_700_000_000.0 + ODD as f64
    );
    // BigInt(hash) in JS is exact.
    let h = path(&batches, "0.events.0.block_hashes.0");
    let as_big = js_sys::BigInt::new(&h).unwrap();
    assert_eq!(u64::try_from(JsValue::from(as_big)).unwrap(), BIG);
}

#[wasm_bindgen_test]
fn event_by_global_index_and_range_errors() {
    let t = sample();
    let e = t.event(2).unwrap();
    assert_eq!(number(&get(&e, "batch_index")), 1.0);
    assert_eq!(number(&get(&e, "position")), 0.0);
    assert_eq!(string(&get(&e, "source")), "pod-a");
    assert_eq!(
        string(&path(&e, "event.block_hashes.0")),
        "18446744073709551615"
    );
    let err = t.event(3).expect_err("past the end");
    assert!(err.is_instance_of::<js_sys::RangeError>());
    let (_, msg) = thrown(t.event(3));
    assert!(
        msg.contains("event 3 out of range (trace has 3 events)"),
        "{msg}"
    );
    let (_, msg) = thrown(t.batch(2));
    assert!(msg.contains("batch 2 out of range"), "{msg}");
}

#[wasm_bindgen_test]
fn load_rejects_other_input_types() {
    let (_, msg) = thrown(load_trace(&JsValue::from_f64(3.0), None));
    assert!(msg.contains("expects a string"), "{msg}");
    let (_, msg) = thrown(load_trace(&JsValue::NULL, None));
    assert!(msg.contains("Uint8Array"), "{msg}");
}

#[wasm_bindgen_test]
fn wire_errors_become_errors_with_location_properties() {
    let e = wire_error(&WireError {
        location: Location::Line {
            line: 7,
            column: Some(3),
        },
        message: "bad".into(),
    });
    let e: js_sys::Error = e.dyn_into().unwrap();
    assert_eq!(String::from(e.message()), "line 7, column 3: bad");
    assert_eq!(number(&get(&e, "line")), 7.0);
    assert_eq!(number(&get(&e, "column")), 3.0);
    let e = wire_error(&WireError {
        location: Location::Byte(42),
        message: "truncated".into(),
    });
    assert_eq!(
        String::from(e.clone().dyn_into::<js_sys::Error>().unwrap().message()),
        "byte offset 42: truncated"
    );
    assert_eq!(number(&get(&e, "byteOffset")), 42.0);
    assert!(get(&e, "line").is_undefined());
}

#[wasm_bindgen_test]
fn unknown_msgpack_encoding_throws() {
    let (_, msg) = thrown(sample().to_msgpack(Some(js_str("yaml"))));
    assert!(msg.contains("\"yaml\""), "{msg}");
}

#[wasm_bindgen_test]
fn events_mirror_vllm_fields_with_string_hashes() {
    let ev = KvEvent::BlockStored(BlockStored {
        block_hashes: vec![BlockHash::Int(BIG), BlockHash::Int(ODD)].into(),
        parent_block_hash: Some(BlockHash::Int(1)),
        token_ids: vec![1, 2, 3, 4],
        block_size: 2,
        lora_id: Some(-3),
        medium: Some("CPU".into()),
        lora_name: None,
        extra_keys: Some(vec![
            None,
            Some(ExtraValue::Bytes(vec![0xff])),
            Some(ExtraValue::Array(vec![
                ExtraValue::UInt(BIG),
                ExtraValue::Int(-2),
                ExtraValue::Float(2.5),
                ExtraValue::Nil,
            ])),
            Some(ExtraValue::Map(vec![(
                ExtraValue::Str("k".into()),
                ExtraValue::Bool(true),
            )])),
        ]),
        group_idx: Some(0),
        kv_cache_spec_kind: None,
        kv_cache_spec_sliding_window: Some(ODD),
        locality: None,
        ownership: None,
    });
    let v = Event::from(&ev).to_js();
    let keys: Vec<String> = js_sys::Object::keys(v.unchecked_ref::<js_sys::Object>())
        .iter()
        .map(|k| string(&k))
        .collect();
    assert_eq!(
        keys,
        [
            "type",
            "block_hashes",
            "parent_block_hash",
            "token_ids",
            "block_size",
            "lora_id",
            "medium",
            "lora_name",
            "extra_keys",
            "group_idx",
            "kv_cache_spec_kind",
            "kv_cache_spec_sliding_window",
            "locality",
            "ownership"
        ]
    );
    assert_eq!(string(&get(&v, "type")), "BlockStored");
    assert_eq!(string(&path(&v, "block_hashes.0")), "18446744073709551615");
    assert_eq!(string(&path(&v, "block_hashes.1")), "9007199254740993");
    assert_eq!(string(&get(&v, "parent_block_hash")), "1");
    assert_eq!(len(&get(&v, "token_ids")), 4);
    assert_eq!(number(&path(&v, "token_ids.3")), 4.0);
    assert_eq!(number(&get(&v, "block_size")), 2.0);
    assert_eq!(
        i64::try_from(get(&v, "lora_id")).expect("lora_id is a bigint"),
        -3
    );
    assert_eq!(string(&get(&v, "medium")), "CPU");
    assert!(get(&v, "lora_name").is_null());
    assert!(path(&v, "extra_keys.0").is_null());
    assert_eq!(string(&path(&v, "extra_keys.1.bytes")), "ff");
    assert_eq!(bigint(&path(&v, "extra_keys.2.0")), BIG);
    assert_eq!(
        i64::try_from(path(&v, "extra_keys.2.1")).expect("a bigint"),
        -2
    );
    assert_eq!(number(&path(&v, "extra_keys.2.2")), 2.5);
    assert!(path(&v, "extra_keys.2.3").is_null());
    assert_eq!(string(&path(&v, "extra_keys.3.map.0.0")), "k");
    assert_eq!(path(&v, "extra_keys.3.map.0.1"), JsValue::TRUE);
    assert_eq!(number(&get(&v, "group_idx")), 0.0);
    assert!(get(&v, "kv_cache_spec_kind").is_null());
    assert_eq!(bigint(&get(&v, "kv_cache_spec_sliding_window")), ODD);
    let cleared = Event::from(&KvEvent::AllBlocksCleared).to_js();
    assert_eq!(
        js_sys::JSON::stringify(&cleared).unwrap(),
        r#"{"type":"AllBlocksCleared"}"#
    );
}
