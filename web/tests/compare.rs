//! Component tests of the Compare dialog's comparison view (headless Chromium,
//! wasm-bindgen-test): it renders the simulator module's `Comparison` (the core's
//! `compare_traces`) as given: counts side by side with the worse side marked, one sentence
//! per differing count, the differing events A beside B with moved and re-judged events
//! marked; trace text only as text. And the dialog's simulator worker ends when the
//! simulator cannot be loaded.
#![cfg(all(target_arch = "wasm32", feature = "compare"))]

use kvscope_web::compare_view::render;
use kvscope_web::sim_params::{Comparison, Row};
use leptos::prelude::*;
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

/// The test runner serves no simulator module: the dialog says it could not load it, and the
/// worker started for it ends (before, it stayed alive idle, one more for each try). Dialogs
/// opened while it loads share that one worker (before, each started its own).
#[wasm_bindgen_test]
async fn a_simulator_that_fails_to_load_ends_its_worker() {
    // Two dialogs open at once (both load the simulator): one worker for both, and it ends when
    // the simulator fails to load. Count the workers the page starts and which are terminated.
    let watch = js_sys::Function::new_no_args(
        "const W = globalThis.Worker, T = W.prototype.terminate, made = [];
         globalThis.Worker = class extends W {
           constructor(...a) { super(...a); this.ended = false; made.push(this); }
         };
         W.prototype.terminate = function () { this.ended = true; return T.call(this); };
         return [made, () => { globalThis.Worker = W; W.prototype.terminate = T; }];",
    );
    let pair = js_sys::Array::from(&watch.call0(&wasm_bindgen::JsValue::NULL).unwrap());
    let made: js_sys::Array = pair.get(0).unchecked_into(); // (not a copy: it fills later)
    let restore: js_sys::Function = pair.get(1).unchecked_into();
    let doc = web_sys::window().unwrap().document().unwrap();
    let root: web_sys::HtmlElement = doc.create_element("div").unwrap().unchecked_into();
    doc.body().unwrap().append_child(&root).unwrap();
    let st = kvscope_web::AppState::new();
    let open = RwSignal::new(true);
    let _h = leptos::mount::mount_to(root.clone(), move || {
        provide_context(st);
        view! {
            <kvscope_web::compare::CompareDialog open=open/>
            <kvscope_web::compare::CompareDialog open=open/>
        }
    });
    let mut alert = String::new();
    for _ in 0..500 {
        kvscope_web::load::yield_now().await;
        if let Some(a) = root.query_selector("[role=alert]").unwrap() {
            alert = a.text_content().unwrap_or_default();
            break;
        }
        kvscope_web::load::after_paint().await;
    }
    restore.call0(&wasm_bindgen::JsValue::NULL).unwrap();
    assert!(alert.contains("could not load the simulator"), "{alert:?}");
    assert_eq!(made.length(), 1, "one worker for both dialogs");
    for w in made.iter() {
        let ended = js_sys::Reflect::get(&w, &"ended".into()).unwrap();
        assert_eq!(
            ended.as_bool(),
            Some(true),
            "the failed simulator's worker ended"
        );
    }
}
