//! Component tests of the Compare dialog's comparison view (headless Chromium,
//! wasm-bindgen-test): it renders the simulator module's `Comparison` (the core's
//! `compare_traces`) as given: counts side by side with the worse side marked, one sentence
//! per differing count, the differing events A beside B with moved and re-judged events
//! marked; trace text only as text.
#![cfg(all(target_arch = "wasm32", feature = "compare"))]

use kvscope_web::compare_view::render;
use kvscope_web::sim_params::{Comparison, Row};
use wasm_bindgen::JsCast;
use wasm_bindgen_test::*;

wasm_bindgen_test_configure!(run_in_browser);

/// `c` rendered into the page (so `inner_text` lays it out).
fn container(c: &Comparison) -> web_sys::HtmlElement {
    let el = render(&Ok(c.clone())).unwrap();
    web_sys::window()
        .unwrap()
        .document()
        .unwrap()
        .body()
        .unwrap()
        .append_child(&el)
        .unwrap();
    el.unchecked_into()
}

fn all(root: &web_sys::HtmlElement, sel: &str) -> Vec<web_sys::HtmlElement> {
    // `querySelectorAll` through JS (the app's web-sys has no `NodeList`).
    let f: js_sys::Function = js_sys::Reflect::get(root, &"querySelectorAll".into())
        .unwrap()
        .unchecked_into();
    let list = f.call1(root, &sel.into()).unwrap();
    js_sys::Array::from(&list)
        .iter()
        .map(|n| n.unchecked_into())
        .collect()
}

fn comparison() -> Comparison {
    let row = |label: &str, a: &str, b: &str, a_worse: bool| Row {
        label: label.into(),
        rule: label.contains('-'),
        a: a.into(),
        b: b.into(),
        a_worse,
        b_worse: false,
    };
    let ev = |a: &str, b: &str, changes: &str, marks: &str| {
        vec![
            a.to_string(),
            b.to_string(),
            "BlockStored CPU 159301…791386 <b>x</b>".to_string(),
            changes.to_string(),
            marks.to_string(),
        ]
    };
    let events = [
        ev(
            "#0 · batch 0",
            "#2 · batch 0",
            "child-before-parent-in-job → none; llmd dropped_orphan → applied",
            "judged",
        ),
        ev("#3 · batch 0", "#0 · batch 0", "moved", "moved"),
        ev("", "#5 · batch 1", "only in B", ""),
    ];
    Comparison {
        left: String::new(),
        right: String::new(),
        rows: vec![
            row("", "A: demo", "B: fixed.msgpack", false),
            row("events", "12", "12", false),
            row("child-before-parent-in-job", "2", "0", true),
        ],
        why: vec![
            "child-before-parent-in-job: 2 on A and 0 on B: on A, batch 0 delivers 1 before its parent 2; on B the parent comes first".into(),
            "llmd lost 7 blocks on A and 0 on B: on A, batch 0 delivers 1 before its parent 2".into(),
        ],
        events: events.concat(),
        note: "12 events aligned by block, 1 moved; 3 differ".into(),
    }
}

#[wasm_bindgen_test]
fn renders_counts_explanations_and_differing_events_side_by_side() {
    let root = container(&comparison());
    // Counts: headings, then one row per count, the worse side marked.
    let rows = all(&root, "[data-testid=compare-table] tr");
    assert_eq!(rows.len(), 3);
    assert_eq!(rows[0].inner_text().trim(), "A: demo\tB: fixed.msgpack");
    assert_eq!(all(&rows[0], "th").len(), 3, "the headings row is headings");
    let bad = all(&root, "[data-testid=compare-table] td.bad");
    assert_eq!(bad.len(), 1);
    assert_eq!(bad[0].inner_text(), "2");
    // One sentence per count that differs.
    let why = all(&root, "[data-testid=compare-why] li");
    assert_eq!(why.len(), 2);
    assert!(why[1]
        .inner_text()
        .starts_with("llmd lost 7 blocks on A and 0 on B"));
    assert_eq!(
        all(&root, "[data-testid=compare-note]")[0].inner_text(),
        "12 events aligned by block, 1 moved; 3 differ"
    );
    // The differing events: A beside B, an absent side as a dash, marks by what differs.
    let events = all(&root, "[data-testid=compare-events] tr");
    assert_eq!(events.len(), 4, "a heading and three events");
    assert_eq!(
        events[0].inner_text().trim(),
        "A: demo\tB: fixed.msgpack\tevent\twhat differs"
    );
    let cells = |r: &web_sys::HtmlElement| -> Vec<String> {
        all(r, "td").iter().map(|c| c.inner_text()).collect()
    };
    assert_eq!(cells(&events[1])[0], "#0 · batch 0");
    assert_eq!(cells(&events[1])[1], "#2 · batch 0");
    assert!(events[1].class_list().contains("judged") && !events[1].class_list().contains("moved"));
    assert!(events[2].class_list().contains("moved"));
    assert_eq!(cells(&events[3])[0], "—");
    assert_eq!(cells(&events[3])[3], "only in B");
    // Trace text is text, never HTML.
    assert!(cells(&events[1])[2].ends_with("<b>x</b>"));
    assert!(all(&root, "[data-testid=compare-events] b").is_empty());
}

#[wasm_bindgen_test]
fn identical_traces_show_no_explanations_and_no_event_list() {
    let root = container(&Comparison {
        why: Vec::new(),
        events: Vec::new(),
        note: "12 events aligned by block, 0 moved; 0 differ".into(),
        ..comparison()
    });
    assert!(all(&root, "[data-testid=compare-why]").is_empty());
    assert!(all(&root, "[data-testid=compare-events]").is_empty());
    assert!(all(&root, "[data-testid=compare-note]")[0]
        .inner_text()
        .ends_with("0 differ"));
}

#[wasm_bindgen_test]
fn an_error_is_an_alert_with_its_text() {
    let el = render(&Err(
        "the trace to compare with (bad.jsonl): line 1, column 13: <oops>".into(),
    ))
    .unwrap();
    let alerts = all(&el.clone().unchecked_into(), "[role=alert]");
    assert_eq!(alerts.len(), 1);
    assert_eq!(
        alerts[0].text_content().unwrap(),
        "the trace to compare with (bad.jsonl): line 1, column 13: <oops>"
    );
    assert!(all(&el.unchecked_into(), "[data-testid=compare-table]").is_empty());
}
