//! `Trace.analyze` and `ReplaySession`: options, results, navigation, memory.

use kvscope_wasm::alloc::live_bytes;
use kvscope_wasm::{ReplaySession, Trace};
use wasm_bindgen::{JsCast, JsValue};
use wasm_bindgen_test::wasm_bindgen_test;

use super::support::*;

fn trace() -> Trace {
    Trace::from_jsonl(&readme_jsonl()).unwrap()
}

#[wasm_bindgen_test]
fn analyze_reports_the_in_job_violation_and_llmd_loss() {
    let a = trace()
        .analyze(Some(json(r#"{"consumers": ["llmd", "dynamo", "ideal"]}"#)))
        .unwrap();
    assert_eq!(get(&a, "has_deny"), JsValue::TRUE);
    assert_eq!(len(&get(&a, "consumers")), 3);
    assert_eq!(number(&path(&a, "counts.child-before-parent-in-job")), 1.0);
    let v = path(&a, "violations.0");
    assert_eq!(string(&get(&v, "rule")), "child-before-parent-in-job");
    assert_eq!(number(&get(&v, "event")), 1.0);
    assert_eq!(string(&path(&v, "hashes.0")), "9007199254740993");
    assert_eq!(string(&get(&v, "parent")), "9007199254740992");
    assert_eq!(string(&path(&v, "verdicts.llmd")), "dropped_orphan");
    assert_eq!(string(&path(&v, "verdicts.ideal")), "replayed");
    assert_eq!(string(&path(&a, "losses.0.consumer")), "llmd");
    assert_eq!(number(&path(&a, "losses.0.blocks_lost")), 1.0);
    assert_eq!(
        string(&path(&a, "losses.0.unreachable_prefixes.0.missing_parent")),
        "9007199254740992"
    );
    assert_eq!(number(&path(&a, "losses.1.blocks_lost")), 0.0);
}

#[wasm_bindgen_test]
fn analyze_rules_and_levels_are_applied() {
    let t = trace();
    let a = t.analyze(Some(json(r#"{"rules": ["seq-gap"]}"#))).unwrap();
    assert_eq!(len(&get(&a, "findings")), 0);
    assert_eq!(get(&a, "has_deny"), JsValue::FALSE);
    // Violations are listed regardless of level.
    assert_eq!(len(&get(&a, "violations")), 1);
    let a = t
        .analyze(Some(json(
            r#"{"levels": {"child-before-parent-in-job": "warn"}}"#,
        )))
        .unwrap();
    assert_eq!(get(&a, "has_deny"), JsValue::FALSE);
    assert_eq!(string(&path(&a, "findings.0.level")), "warn");
    let (_, msg) = thrown(t.analyze(Some(json(r#"{"consumers": ["nginx"]}"#))));
    assert!(msg.contains("unknown consumer \"nginx\""), "{msg}");
    let (_, msg) = thrown(t.analyze(Some(json(r#"{"rule": []}"#))));
    assert!(msg.contains("unknown field `rule`"), "{msg}");
    // Nested option objects are checked too, and wrong types are named.
    let (_, msg) = thrown(t.analyze(Some(json(r#"{"consumer_config": {"llmd_block": 16}}"#))));
    assert!(msg.contains("unknown field `llmd_block`"), "{msg}");
    let (_, msg) = thrown(t.analyze(Some(json(
        r#"{"consumer_config": {"dynamo_kv_block_size": -1}}"#,
    ))));
    assert!(
        msg.starts_with("invalid analyze options: invalid value"),
        "{msg}"
    );
    assert!(!msg.contains(" at line "), "{msg}");
    // undefined and null mean defaults (every consumer model).
    let all = kvscope_core::consumers::ConsumerKind::ALL.len() as u32;
    assert_eq!(len(&get(&t.analyze(None).unwrap(), "consumers")), all);
    assert_eq!(
        len(&get(
            &t.analyze(Some(JsValue::NULL.unchecked_into())).unwrap(),
            "consumers"
        )),
        all
    );
}

#[wasm_bindgen_test]
fn replay_session_navigation() {
    let t = trace();
    let mut s = ReplaySession::new(&t, Some(json(r#"{"consumers": ["llmd", "ideal"]}"#))).unwrap();
    assert_eq!((s.length(), s.cursor()), (3, 0));
    assert!(s.last_step().is_null());
    assert!(s.step_back().is_null());

    // Next violation from the start: event 1, applied.
    let at = s
        .next_violation(Some(json(r#"{"rule": "child-before-parent-in-job"}"#)))
        .unwrap();
    assert_eq!(number(&at), 1.0);
    assert_eq!(s.cursor(), 2);
    let step = s.last_step();
    assert_eq!(number(&path(&step, "event.index")), 1.0);
    assert_eq!(string(&path(&step, "verdicts.0.consumer")), "llmd");
    assert_eq!(
        string(&path(&step, "verdicts.0.verdict.verdict")),
        "dropped_orphan"
    );
    assert_eq!(
        string(&path(&step, "verdicts.0.verdict.missing_parent")),
        "9007199254740992"
    );
    assert_eq!(string(&path(&step, "verdicts.1.final_verdict")), "replayed");
    assert_eq!(bigint(&path(&step, "event.seq")), 1);
    // State at the cursor.
    let st = s.state();
    assert_eq!(number(&get(&st, "cursor")), 2.0);
    assert_eq!(number(&path(&st, "consumers.0.total.dropped")), 1.0);
    assert_eq!(number(&path(&st, "consumers.1.total.pending")), 1.0);
    // No further violation; the cursor stays.
    assert!(s
        .next_violation(Some(json(r#"{"rule": "child-before-parent-in-job"}"#)))
        .unwrap()
        .is_null());
    assert_eq!(s.cursor(), 2);

    // Step forward applies the parent: the ideal consumer replays the orphan.
    let step = s.step_forward();
    assert_eq!(number(&path(&step, "event.index")), 2.0);
    assert_eq!(number(&path(&step, "verdicts.1.resolved.0.event")), 1.0);
    assert_eq!(
        string(&path(&step, "verdicts.1.resolved.0.hashes.0")),
        "9007199254740993"
    );
    assert!(s.step_forward().is_null());
    assert_eq!(s.cursor(), 3);
    // Step back undoes event 2.
    let back = s.step_back();
    assert_eq!(number(&path(&back, "event.index")), 2.0);
    assert_eq!(s.cursor(), 2);
    // Previous violation from past the end finds event 1 again.
    s.seek(3.0).unwrap();
    assert_eq!(number(&s.previous_violation(None).unwrap()), 1.0);
    assert_eq!(s.cursor(), 2);
    // Seek clamps; bad positions are RangeErrors.
    assert_eq!(s.seek(99.0).unwrap(), 3);
    assert_eq!(s.seek(0.0).unwrap(), 0);
    for bad in [-1.0, 0.5, f64::NAN] {
        let err = s.seek(bad).expect_err("bad cursor");
        assert!(err.is_instance_of::<js_sys::RangeError>());
    }
    // Blocks by string or bigint.
    s.seek(3.0).unwrap();
    let b = s.block(JsValue::from_str("9007199254740992")).unwrap();
    assert_eq!(string(&get(&b, "parent")), "18446744073709551615");
    assert_eq!(string(&path(&b, "children.0")), "9007199254740993");
    let b = s
        .block(JsValue::from(js_sys::BigInt::from(u64::MAX)))
        .unwrap();
    assert_eq!(string(&get(&b, "hash")), "18446744073709551615");
    let (_, msg) = thrown(s.block(JsValue::from_f64(1.0)));
    assert!(msg.contains("never a number"), "{msg}");
    let e = s.event(1.0).unwrap();
    assert_eq!(string(&path(&e, "hashes.0")), "9007199254740993");
    assert!(s.event(3.0).is_err());
    assert_eq!(number(&get(&s.analysis(), "event_count")), 3.0);
}

#[wasm_bindgen_test]
fn dropping_a_session_returns_its_heap() {
    let t = trace();
    // Warm up (one-time allocations), then every create/drop cycle must return to baseline.
    drop(ReplaySession::new(&t, None).unwrap());
    let baseline = live_bytes();
    for _ in 0..3 {
        let mut s = ReplaySession::new(&t, None).unwrap();
        s.seek(2.0).unwrap();
        assert!(live_bytes() > baseline, "a session holds heap memory");
        drop(s);
        assert_eq!(live_bytes(), baseline);
    }
}

#[wasm_bindgen_test]
fn options_are_read_from_the_object_with_serde_style_messages() {
    let t = trace();
    // Keys whose value is `undefined`, and `null` values, count as absent.
    let o = js_sys::Object::new();
    js_sys::Reflect::set(&o, &"consumers".into(), &JsValue::UNDEFINED).unwrap();
    js_sys::Reflect::set(&o, &"consumer_config".into(), &JsValue::NULL).unwrap();
    let a = t.analyze(Some(o.unchecked_into())).unwrap();
    assert_eq!(
        len(&get(&a, "consumers")),
        kvscope_core::consumers::ConsumerKind::ALL.len() as u32
    );
    let bad = |options: JsValue| thrown(t.analyze(Some(options.unchecked_into()))).1;
    assert_eq!(
        bad(json(
            r#"{"consumer_config": {"dynamo_kv_block_size": "16"}}"#
        )),
        "invalid analyze options: invalid type: string \"16\", expected u32"
    );
    assert_eq!(
        bad(json(r#"{"consumer_config": {"ideal_pending_limit": 1.5}}"#)),
        "invalid analyze options: invalid type: floating point `1.5`, expected u32"
    );
    assert_eq!(
        bad(json(
            r#"{"consumer_config": {"dynamo_clear_all_ranks": 1}}"#
        )),
        "invalid analyze options: invalid type: integer `1`, expected a boolean"
    );
    assert_eq!(
        bad(json(r#"{"consumer_config": 5}"#)),
        "invalid analyze options: invalid type: integer `5`, expected struct ConsumerConfigOptions"
    );
    assert_eq!(
        bad(json(r#"{"levels": ["deny"]}"#)),
        "invalid analyze options: invalid type: sequence, expected an object"
    );
    assert_eq!(
        bad(json(r#"{"consumers": "llmd"}"#)),
        "invalid analyze options: invalid type: string \"llmd\", expected a sequence"
    );
    assert_eq!(
        bad(json(r#"{"consumers": ["llmd", null]}"#)),
        "invalid analyze options: invalid type: null, expected a string"
    );
    let big = js_sys::Array::of1(&JsValue::from(5u64));
    let o = js_sys::Object::new();
    js_sys::Reflect::set(&o, &"consumers".into(), &big).unwrap();
    assert_eq!(
        bad(o.into()),
        "invalid analyze options: invalid type: bigint `5`, expected a string"
    );
    assert_eq!(
        bad(json("[]")),
        "invalid analyze options: expected an object"
    );
    let mut s = ReplaySession::new(&t, None).unwrap();
    let (_, msg) = thrown(s.next_violation(Some(json(r#"{"rules": []}"#))));
    assert_eq!(
        msg,
        "invalid violation filter: unknown field `rules`, expected `rule` or `consumer`"
    );
}
