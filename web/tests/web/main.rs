//! Component tests in headless Chromium (wasm-bindgen-test): mount the app, load traces, step,
//! and check the DOM. Run with `wasm-pack test --headless --chrome web` or
//! `cargo test -p kvscope-web --target wasm32-unknown-unknown` (runner in `.cargo/config.toml`).
#![cfg(target_arch = "wasm32")]

use kvscope_web::{load, permalink::TraceOrigin, AnalysisStatus, App, AppState};
use leptos::prelude::*;
use wasm_bindgen::JsCast;
use wasm_bindgen_futures::JsFuture;
use wasm_bindgen_test::*;

wasm_bindgen_test_configure!(run_in_browser);

mod agreement;
mod links;
mod loading;

async fn sleep(ms: i32) {
    let p = js_sys::Promise::new(&mut |resolve, _| {
        let _ = web_sys::window()
            .unwrap()
            .set_timeout_with_callback_and_timeout_and_arguments_0(&resolve, ms);
    });
    JsFuture::from(p).await.unwrap();
}

fn container() -> web_sys::HtmlElement {
    let doc = document();
    let div = doc.create_element("div").unwrap();
    doc.body().unwrap().append_child(&div).unwrap();
    div.unchecked_into()
}

fn el(root: &web_sys::HtmlElement, id: &str) -> Option<web_sys::HtmlElement> {
    root.query_selector(&format!("[data-testid={id}]"))
        .ok()
        .flatten()
        .map(|e| e.unchecked_into())
}

fn text(root: &web_sys::HtmlElement, id: &str) -> String {
    el(root, id).map(|e| e.inner_text()).unwrap_or_default()
}

/// Wait (up to ~3 s) until `id`'s text contains `needle`.
async fn until(root: &web_sys::HtmlElement, id: &str, needle: &str) -> String {
    for _ in 0..300 {
        let t = text(root, id);
        if t.contains(needle) {
            return t;
        }
        sleep(10).await;
    }
    panic!(
        "[data-testid={id}] never contained {needle:?}; it says {:?}",
        text(root, id)
    );
}

async fn click(root: &web_sys::HtmlElement, id: &str) {
    el(root, id)
        .unwrap_or_else(|| panic!("no [data-testid={id}]"))
        .click();
    sleep(10).await;
}

#[wasm_bindgen_test]
async fn mounts_with_the_demo_and_steps() {
    let root = container();
    let _h = leptos::mount::mount_to(root.clone(), App);
    sleep(10).await;
    until(&root, "stats", "12 events").await;
    // The analysis runs after the timeline's first paint.
    until(&root, "stats", "violations").await;
    // The demo opens at its first violation (issue 16, point 9); stepping back from there
    // reaches the start of the trace.
    let opened = until(&root, "counter", "1 / 12").await;
    assert_eq!(opened, "1 / 12");
    click(&root, "step-back").await;
    assert_eq!(until(&root, "counter", "0 / 12").await, "0 / 12");
    assert!(text(&root, "details-title").contains("Start of the trace"));

    click(&root, "step-forward").await;
    assert_eq!(until(&root, "counter", "1 / 12").await, "1 / 12");
    assert!(
        text(&root, "details-title").starts_with("#0 BlockStored"),
        "{}",
        text(&root, "details-title")
    );
    // Demo (legacy order): event 0 is a child delivered before its parent.
    assert!(text(&root, "violation-detail").contains("child-before-parent-in-job"));
    assert!(
        text(&root, "details").contains("dropped_orphan"),
        "llm-d's verdict is shown"
    );

    click(&root, "next-violation").await;
    until(&root, "counter", "10 / 12").await;
    assert!(text(&root, "details-title").starts_with("#9 "));
    click(&root, "step-back").await;
    until(&root, "counter", "9 / 12").await;
    click(&root, "prev-violation").await;
    until(&root, "counter", "1 / 12").await;
    assert!(text(&root, "consumer-llmd").contains("dropped_orphan"));
}

#[wasm_bindgen_test]
async fn loads_a_multi_tier_trace_and_reports_bad_input_with_its_line() {
    let root = container();
    let st = AppState::new();
    let _h = leptos::mount::mount_to(root.clone(), move || {
        provide_context(st);
        view! {
            <kvscope_web::panels::StatusBanner/>
            <kvscope_web::controls::StepBar/>
            <kvscope_web::panels::Details/>
            <kvscope_web::panels::Violations/>
        }
    });
    load::load_bytes(
        st,
        "tiers.jsonl".into(),
        include_bytes!("../../fixtures/tiers.jsonl").to_vec(),
        TraceOrigin::Local,
        None,
    );
    until(&root, "status", "Loaded tiers.jsonl: 12 events").await;
    let lanes: Vec<String> = st.model.with_untracked(|m| {
        m.as_ref()
            .unwrap()
            .lanes
            .iter()
            .map(|l| l.title())
            .collect()
    });
    assert_eq!(lanes, ["GPU", "CPU", "STORAGE:fs0"]);
    // Lanes per tier × job: one sub-lane per provenance job, GPU events and the job-less CPU
    // removal in their tier's "no job" lane.
    st.lane_mode.set(kvscope_web::model::LaneMode::TierJob);
    load::relayout(st);
    let lanes: Vec<String> = st.model.with_untracked(|m| {
        m.as_ref()
            .unwrap()
            .lanes
            .iter()
            .map(|l| l.title())
            .collect()
    });
    assert_eq!(
        lanes,
        [
            "GPU · no job",
            "CPU · no job",
            "CPU · job 1",
            "CPU · job 2",
            "STORAGE:fs0 · job 3"
        ]
    );
    st.lane_mode.set(kvscope_web::model::LaneMode::Tier);
    load::relayout(st);
    until(&root, "violations", "child-before-parent-in-job").await;

    // Bytes hashes and exact u64 decimals survive into the details panel.
    st.seek(0);
    sleep(10).await;
    let d = text(&root, "details");
    // Short hashes are shown whole; the hover text adds the hex form.
    let title = root
        .query_selector("[data-testid=details] .hash-text .hash[data-full='11001']")
        .ok()
        .flatten()
        .and_then(|e| e.get_attribute("title"));
    assert!(d.contains("11001"), "{d}");
    assert_eq!(title.as_deref(), Some("11001 (0x0000000000002af9)"), "{d}");

    load::load_bytes(
        st,
        "bad.jsonl".into(),
        b"{\"kvscope\": 1}\n{\"source\": \"x\", \"seq\": 0, \"ts\": 1.0, \"events\": 5}\n".to_vec(),
        TraceOrigin::Local,
        None,
    );
    let err = until(&root, "load-error", "line 2").await;
    assert!(err.contains("bad.jsonl"), "{err}");
    // The previous trace stays loaded.
    assert_eq!(st.len(), 12);
}

#[wasm_bindgen_test]
async fn search_and_rule_filter() {
    let root = container();
    let st = AppState::new();
    let _h = leptos::mount::mount_to(root.clone(), move || {
        provide_context(st);
        view! { <kvscope_web::controls::StepBar/><kvscope_web::panels::Details/> }
    });
    load::load_bytes(
        st,
        "tiers.jsonl".into(),
        include_bytes!("../../fixtures/tiers.jsonl").to_vec(),
        TraceOrigin::Local,
        None,
    );
    for _ in 0..300 {
        if !st.is_empty() {
            break;
        }
        sleep(10).await;
    }
    st.query.set("tier=STORAGE:fs0".into());
    assert!(st.search_next());
    sleep(10).await;
    assert!(
        text(&root, "details-title").contains("STORAGE:fs0"),
        "{}",
        text(&root, "details-title")
    );
    st.query.set("hash=999999".into());
    assert!(!st.search_next());
    sleep(10).await;
    assert_eq!(text(&root, "search-note"), "no match");
    st.rule.set(Some("seq-gap".into()));
    assert!(!st.next_violation(), "no seq-gap in this trace");
}

/// What the page shows in the frame painted right after the model is set (before the
/// analysis, which runs in a later task), captured from an animation-frame callback.
#[derive(Clone, Debug, Default)]
struct FirstFrame {
    analysed: bool,
    running: bool,
    timeline: bool,
    violations: String,
    analysing_note: bool,
    status: String,
    inspector: String,
}

#[wasm_bindgen_test]
async fn timeline_first_then_analysis() {
    use std::cell::RefCell;
    use std::rc::Rc;
    let root = container();
    let st = AppState::new();
    let _h = leptos::mount::mount_to(root.clone(), move || {
        provide_context(st);
        view! {
            <kvscope_web::panels::StatusBanner/>
            <kvscope_web::controls::StepBar/>
            <kvscope_web::timeline::Timeline/>
            <kvscope_web::inspect::Inspector/>
            <kvscope_web::panels::Violations/>
        }
    });
    sleep(10).await;
    let first: Rc<RefCell<Option<FirstFrame>>> = Rc::default();
    let seen = first.clone();
    let r = root.clone();
    Effect::new(move |_| {
        let Some(m) = st.model.get() else { return };
        if seen.borrow().is_some() {
            return;
        }
        let analysed = m.is_analysed();
        let running = matches!(st.analysis.get_untracked(), AnalysisStatus::Running { .. });
        *seen.borrow_mut() = Some(FirstFrame::default());
        let (seen, r) = (seen.clone(), r.clone());
        request_animation_frame(move || {
            *seen.borrow_mut() = Some(FirstFrame {
                analysed,
                running,
                timeline: el(&r, "timeline").is_some(),
                violations: text(&r, "violations"),
                analysing_note: el(&r, "violations-analysing").is_some(),
                status: text(&r, "status"),
                inspector: text(&r, "inspector"),
            });
        });
    });
    load::load_bytes(
        st,
        "tiers.jsonl".into(),
        include_bytes!("../../fixtures/tiers.jsonl").to_vec(),
        TraceOrigin::Local,
        None,
    );
    until(&root, "violations", "child-before-parent-in-job").await;
    let f = first.borrow().clone().expect("the model was set");
    assert!(!f.analysed && f.running, "{f:?}");
    assert!(f.timeline, "the timeline is mounted before the analysis");
    assert!(f.analysing_note, "{f:?}");
    // No opinion of the page's own while the analysis runs: nothing listed, only the note.
    assert!(!f.violations.contains("child-before-parent"), "{f:?}");
    assert!(f.status.contains("analysing 12 events"), "{f:?}");
    assert!(f.inspector.contains("Analysing 12 events"), "{f:?}");

    // After the analysis: the classified findings, no analysing note, consumer models shown.
    assert!(matches!(
        st.analysis.get_untracked(),
        AnalysisStatus::Done { .. }
    ));
    sleep(10).await;
    assert!(el(&root, "violations-analysing").is_none());
    until(&root, "status", "analysed in").await;
    // The per-phase timings, the analysis' included, are on the status line's hover.
    let phases = el(&root, "loaded")
        .and_then(|e| e.get_attribute("title"))
        .unwrap_or_default();
    assert!(phases.contains(" · analysis "), "{phases}");
    assert!(!text(&root, "inspector").contains("Analysing"));
    st.seek(0);
    sleep(10).await;
    assert!(
        el(&root, "consumer-llmd").is_some(),
        "{}",
        text(&root, "inspector")
    );
}

/// With many lanes (tier × job) the lanes scroll; the head (overview strip, axis) and the
/// lanes canvas stay put above and in the scrolled view.
#[wasm_bindgen_test]
async fn overview_stays_put_when_lanes_scroll() {
    let root = container();
    let st = AppState::new();
    let _h = leptos::mount::mount_to(root.clone(), move || {
        provide_context(st);
        view! { <kvscope_web::timeline::Timeline/> }
    });
    // 40 batches of CPU events: 40 inferred jobs, one lane each.
    let mut text_trace = String::new();
    for b in 0..40u64 {
        let evs: Vec<String> = (0..3u64)
            .map(|j| {
                let h = 5000 + b * 3 + j;
                format!(
                    r#"{{"type":"BlockStored","block_hashes":[{h}],"parent_block_hash":null,"token_ids":[1,2],"block_size":2,"lora_id":null,"medium":"CPU","lora_name":null}}"#
                )
            })
            .collect();
        text_trace.push_str(&format!(
            r#"{{"source":"p","dp_rank":0,"seq":{b},"ts":{b}.0,"events":[{}]}}"#,
            evs.join(",")
        ));
        text_trace.push('\n');
    }
    st.lane_mode.set(kvscope_web::model::LaneMode::TierJob);
    load::load_bytes(
        st,
        "jobs.jsonl".into(),
        text_trace.into_bytes(),
        TraceOrigin::Local,
        None,
    );
    for _ in 0..300 {
        if st
            .model
            .with_untracked(|m| m.as_ref().is_some_and(|m| m.lanes.len() >= 40))
        {
            break;
        }
        sleep(10).await;
    }
    sleep(50).await;
    let head = el(&root, "timeline-head").expect("head canvas");
    let lanes = el(&root, "timeline").expect("lanes canvas");
    let scroller = el(&root, "timeline-scroll").expect("scroll container");
    assert!(
        scroller.scroll_height() > scroller.client_height() + 200,
        "the lanes scroll: {} > {}",
        scroller.scroll_height(),
        scroller.client_height()
    );
    let (head_top, lanes_top) = (
        head.get_bounding_client_rect().top(),
        lanes.get_bounding_client_rect().top(),
    );
    scroller.set_scroll_top(400);
    sleep(30).await;
    assert!(scroller.scroll_top() > 300);
    assert_eq!(
        head.get_bounding_client_rect().top(),
        head_top,
        "the head did not move"
    );
    // The lanes are virtualised (issue 16, point 2): the canvas stays in view and draws the
    // lanes scrolled to, instead of scrolling away with them.
    assert!(
        (lanes.get_bounding_client_rect().top() - lanes_top).abs() <= 1.0,
        "the lanes canvas stayed in view"
    );
    // The head sits right above the visible lanes (not scrolled out of the container).
    let visible = scroller.get_bounding_client_rect();
    assert!(head.get_bounding_client_rect().bottom() <= visible.top() + 1.0);
}
