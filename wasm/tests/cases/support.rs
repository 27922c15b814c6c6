//! Helpers to read JS values in tests.

use wasm_bindgen::{JsCast, JsValue};

/// `obj[key]`, panicking (test failure) when `obj` is not an object.
pub fn get(obj: &JsValue, key: &str) -> JsValue {
    js_sys::Reflect::get(obj, &JsValue::from_str(key)).expect("property read")
}

/// `obj[i]`.
pub fn at(obj: &JsValue, i: u32) -> JsValue {
    js_sys::Reflect::get_u32(obj, i).expect("index read")
}

/// Follow a path of keys / indices written as `"a.b.0.c"`.
pub fn path(obj: &JsValue, p: &str) -> JsValue {
    p.split('.')
        .fold(obj.clone(), |v, k| match k.parse::<u32>() {
            Ok(i) => at(&v, i),
            Err(_) => get(&v, k),
        })
}

/// A string value, failing the test (with the JS type) if it is not a string.
pub fn string(v: &JsValue) -> String {
    v.as_string().unwrap_or_else(|| {
        panic!(
            "expected a string, got {:?} ({})",
            v,
            v.js_typeof().as_string().unwrap_or_default()
        )
    })
}

/// A bigint value as u64, failing the test if it is not a bigint (e.g. a lossy number).
pub fn bigint(v: &JsValue) -> u64 {
    assert_eq!(
        v.js_typeof().as_string().as_deref(),
        Some("bigint"),
        "expected a bigint, got {v:?}"
    );
    u64::try_from(v.clone()).expect("bigint fits in u64")
}

/// A number value.
pub fn number(v: &JsValue) -> f64 {
    v.as_f64()
        .unwrap_or_else(|| panic!("expected a number, got {v:?}"))
}

/// `Array.isArray(v) ? v.length : panic`.
pub fn len(v: &JsValue) -> u32 {
    assert!(js_sys::Array::is_array(v), "expected an array, got {v:?}");
    js_sys::Array::from(v).length()
}

/// The thrown value of a `Result<_, JsValue>` as a JS `Error`, with its message.
pub fn thrown<T: std::fmt::Debug>(r: Result<T, JsValue>) -> (js_sys::Error, String) {
    let err = r.expect_err("expected a thrown Error");
    let e: js_sys::Error = err.dyn_into().expect("thrown value is an Error");
    let msg = String::from(e.message());
    (e, msg)
}

/// `JSON.parse(text)`: build option objects the way JS callers write them.
pub fn json<T: JsCast>(text: &str) -> T {
    js_sys::JSON::parse(text)
        .expect("valid JSON")
        .unchecked_into()
}

/// A JS string as an imported JS type (e.g. the msgpack encoding argument).
pub fn js_str<T: JsCast>(text: &str) -> T {
    JsValue::from_str(text).unchecked_into()
}

fn t16(k: u32) -> String {
    let v: Vec<String> = (16 * k..16 * k + 16).map(|t| t.to_string()).collect();
    format!("[{}]", v.join(", "))
}

/// A `BlockStored` JSON object (CPU, 16 tokens) with hashes written as raw JSON integers.
pub fn stored(hash: &str, parent: &str, k: u32) -> String {
    format!(
        r#"{{"type": "BlockStored", "block_hashes": [{hash}], "parent_block_hash": {parent}, "token_ids": {}, "block_size": 16, "lora_id": null, "medium": "CPU", "lora_name": null}}"#,
        t16(k)
    )
}

/// A batch line.
pub fn batch(seq: u64, events: &[String]) -> String {
    format!(
        r#"{{"source": "pod-a", "dp_rank": 0, "seq": {seq}, "ts": {}.0, "events": [{}]}}"#,
        1_700_000_000 + seq,
        events.join(", ")
    )
}

/// The README example trace: a root (hash 2^64-1), then one CPU job announcing the child
/// (2^53+1) before its parent (2^53).
pub fn readme_jsonl() -> String {
    [
        batch(0, &[stored("18446744073709551615", "null", 0)]),
        batch(
            1,
            &[
                stored("9007199254740993", "9007199254740992", 2),
                stored("9007199254740992", "18446744073709551615", 1),
            ],
        ),
    ]
    .join("\n")
        + "\n"
}
