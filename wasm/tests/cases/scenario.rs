//! `generate` / `listScenarios` (feature `sim`).

use kvscope_wasm::scenario::{builtin_scenario, generate, list_scenarios};
use wasm_bindgen::JsValue;
use wasm_bindgen_test::wasm_bindgen_test;

use super::support::*;

#[wasm_bindgen_test]
fn builtins_are_listed_and_generate() {
    let list = list_scenarios().unwrap();
    assert!(len(&list) >= 1);
    let names: Vec<String> = (0..len(&list))
        .map(|i| string(&path(&list, &format!("{i}.name"))))
        .collect();
    assert!(names.iter().any(|n| n == "legacy-vs-fixed"), "{names:?}");
    let t = generate(
        JsValue::from_str("legacy-vs-fixed"),
        Some(json(r#"{"order": "fixed"}"#)),
    )
    .unwrap();
    assert!(t.event_count() > 0);
    let a = t.analyze(None).unwrap();
    assert!(get(&a, "counts").is_object());
    assert!(
        path(&a, "counts.child-before-parent-in-job").is_undefined(),
        "the fix has no in-job reorders"
    );
}

#[wasm_bindgen_test]
fn cpython_order_reorders_and_seeds_are_deterministic() {
    let opts = r#"{"order": "cpython", "python_hash_seed": 0}"#;
    let a = generate(JsValue::from_str("legacy-vs-fixed"), Some(json(opts))).unwrap();
    let b = generate(JsValue::from_str("legacy-vs-fixed"), Some(json(opts))).unwrap();
    assert_eq!(a.to_jsonl(), b.to_jsonl());
    let fixed = generate(
        JsValue::from_str("legacy-vs-fixed"),
        Some(json(r#"{"order": "fixed"}"#)),
    )
    .unwrap();
    assert_ne!(a.to_jsonl(), fixed.to_jsonl());
    // A bigint seed works like a number.
    let legacy = |seed: JsValue| {
        let o: kvscope_wasm::scenario::GenerateOptionsArg = json(r#"{"order": "legacy"}"#);
        js_sys::Reflect::set(&o, &JsValue::from_str("seed"), &seed).unwrap();
        generate(JsValue::from_str("legacy-vs-fixed"), Some(o))
            .unwrap()
            .to_jsonl()
    };
    assert_eq!(
        legacy(JsValue::from_f64(7.0)),
        legacy(JsValue::from(js_sys::BigInt::from(7u64)))
    );
}

#[wasm_bindgen_test]
fn custom_scenarios_from_text_or_object_and_errors() {
    let text = builtin_scenario("single-request").unwrap();
    let from_text = generate(JsValue::from_str(&text), None).unwrap();
    let from_object = generate(json::<JsValue>(&text), None).unwrap();
    assert_eq!(from_text.to_jsonl(), from_object.to_jsonl());
    assert_eq!(from_text.scenario().as_deref(), Some("single-request"));
    let (_, msg) = thrown(generate(JsValue::from_str("no-such-scenario"), None));
    assert!(msg.contains("\"no-such-scenario\""), "{msg}");
    let (_, msg) = thrown(generate(JsValue::from_str("{\n  \"name\": 5\n}"), None));
    assert!(msg.contains("line 2"), "{msg}");
    let (_, msg) = thrown(generate(
        JsValue::from_str("chunked"),
        Some(json(r#"{"order": "random"}"#)),
    ));
    assert!(msg.contains("\"random\""), "{msg}");
    let (_, msg) = thrown(generate(
        JsValue::from_str("chunked"),
        Some(json(r#"{"sed": 1}"#)),
    ));
    assert!(msg.contains("unknown field `sed`"), "{msg}");
    // A bigint seed beyond 2^64 is an error, not a wrap-around.
    let opts: kvscope_wasm::scenario::GenerateOptionsArg = json("{}");
    let too_big = js_sys::BigInt::new(&JsValue::from_str("18446744073709551616")).unwrap();
    js_sys::Reflect::set(&opts, &JsValue::from_str("seed"), &too_big).unwrap();
    let (_, msg) = thrown(generate(JsValue::from_str("chunked"), Some(opts)));
    assert!(msg.contains("seed must be in 0..2^64"), "{msg}");
}
