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
        include_bytes!("../fixtures/tiers.jsonl").to_vec(),
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
        include_bytes!("../fixtures/tiers.jsonl").to_vec(),
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
        include_bytes!("../fixtures/tiers.jsonl").to_vec(),
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

/// A msgpack stream of `batches` batches of `per_batch` single-block `BlockStored` events
/// (a parent chain per medium, 256 five-byte token ids each: about 1.3 KB per event).
fn big_msgpack(batches: u64, per_batch: u64) -> Vec<u8> {
    use kvscope_core::event::{BlockStored, KvEvent, KvEventBatch};
    use kvscope_core::hash::BlockHash;
    use kvscope_core::wire::{msgpack::encode_batch, EventEncoding};
    let mut out = Vec::new();
    let mut last = [None, None];
    for b in 0..batches {
        let events = (0..per_batch)
            .map(|j| {
                let i = b * per_batch + j;
                let m = usize::from(i.is_multiple_of(3));
                let h = 1_000_000 + i;
                let parent = last[m].replace(h).map(BlockHash::Int);
                KvEvent::BlockStored(BlockStored {
                    block_hashes: vec![BlockHash::Int(h)].into(),
                    parent_block_hash: parent,
                    token_ids: (0..256)
                        .map(|k| 70_000 + (i as u32 * 256 + k) % 50_000)
                        .collect(),
                    block_size: 256,
                    lora_id: None,
                    medium: Some(["GPU", "CPU"][m].into()),
                    lora_name: None,
                    extra_keys: None,
                    group_idx: None,
                    kv_cache_spec_kind: None,
                    kv_cache_spec_sliding_window: None,
                    locality: None,
                    ownership: None,
                })
            })
            .collect();
        out.extend(encode_batch(
            &KvEventBatch {
                ts: 1_700_000_000.0 + b as f64,
                events,
                data_parallel_rank: Some(0),
            },
            EventEncoding::Array,
        ));
    }
    out
}

/// What the page went through while loading a large trace.
#[derive(Clone, Debug, Default)]
struct Seen {
    /// A loading status part-way through the bytes, with events counted and a rate.
    partial_load: bool,
    /// The load progress bar in the DOM.
    load_bar: bool,
    /// An analysis status part-way (0 < fraction < 1).
    partial_analysis: bool,
    /// The analysis progress bar in the DOM.
    analysis_bar: bool,
    /// Analysis fractions seen, in order.
    fractions: Vec<f64>,
    /// A timeline of part of the trace shown while it was read.
    partial_timeline: bool,
}

/// A large msgpack stream (above the loader's chunk size) shows byte/event progress while it is
/// parsed, then the timeline, then the analysis' progress bar while the analysis runs in slices:
/// meanwhile the page steps (the cursor moves) and timers fire; then the app is ready.
#[wasm_bindgen_test]
async fn large_trace_shows_progress_and_stays_interactive() {
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
        }
    });
    sleep(10).await;
    let bytes = big_msgpack(1_000, 6);
    assert!(
        bytes.len() > 6 << 20,
        "{} bytes: more than one chunk",
        bytes.len()
    );
    let seen: Rc<RefCell<Seen>> = Rc::default();
    let s = seen.clone();
    Effect::new(move |_| {
        if let kvscope_web::LoadStatus::Loading {
            done,
            total,
            events,
            events_per_s,
            ..
        } = st.status.get()
        {
            if done > 0 && done < total && events > 0 && events_per_s > 0.0 {
                s.borrow_mut().partial_load = true;
            }
            // The timeline does not wait for the end of the file: the events read so far.
            let shown = st.model.with(|m| m.as_ref().map_or(0, |m| m.len()));
            if shown > 0 && shown < 6000 {
                s.borrow_mut().partial_timeline = true;
            }
        }
        if let AnalysisStatus::Running { fraction, .. } = st.analysis.get() {
            let mut s = s.borrow_mut();
            s.fractions.push(fraction);
            if fraction > 0.0 && fraction < 1.0 {
                s.partial_analysis = true;
            }
        }
    });
    // Hold the analysis after its first slice so the step below lands while it runs, however
    // fast the machine is.
    st.analysis_hold.set(true);
    load::load_bytes(st, "big.msgpack".into(), bytes, TraceOrigin::Local, None);
    let mut stepped = false;
    for _ in 0..6000 {
        {
            let mut s = seen.borrow_mut();
            s.load_bar |= el(&root, "load-progress").is_some();
            s.analysis_bar |= el(&root, "analysis-progress").is_some();
        }
        let running = matches!(st.analysis.get_untracked(), AnalysisStatus::Running { .. });
        if running && !stepped && seen.borrow().partial_analysis {
            // Step while the analysis runs: the counter follows at once.
            click(&root, "step-forward").await;
            assert_eq!(text(&root, "counter"), "1 / 6000");
            assert!(
                matches!(st.analysis.get_untracked(), AnalysisStatus::Running { .. }),
                "still analysing while the step was handled"
            );
            stepped = true;
            st.analysis_hold.set(false);
        }
        if matches!(st.analysis.get_untracked(), AnalysisStatus::Done { .. }) {
            break;
        }
        sleep(5).await;
    }
    let s = seen.borrow().clone();
    assert!(s.partial_load, "{s:?}");
    assert!(s.partial_timeline, "{s:?}");
    assert!(s.load_bar, "{s:?}");
    assert!(s.partial_analysis && s.analysis_bar, "{s:?}");
    assert!(stepped, "stepped during the analysis: {s:?}");
    assert!(
        s.fractions.windows(2).all(|w| w[0] <= w[1]),
        "progress only grows: {:?}",
        s.fractions
    );
    until(&root, "status", "analysed in").await;
    assert!(text(&root, "status").contains("Loaded big.msgpack: 6000 events"));
    assert!(el(&root, "analysis-progress").is_none());
    // Ready: the consumer models answer at the cursor.
    sleep(20).await;
    assert!(
        el(&root, "consumer-llmd").is_some(),
        "{}",
        text(&root, "inspector")
    );
    // Batch numbers continue across chunks (seq = position in the stream).
    st.seek(5_999);
    let seq = st.model.with_untracked(|m| {
        m.as_ref()
            .and_then(|m| m.with_event(5_999, |b, _, _| (b.seq, b.origin)))
    });
    assert_eq!(seq, Some((999, 1000)));
}

/// The state of a page reading a file: a third of it read, a partial model shown, the analysis
/// queued.
fn reading_a_file(st: AppState) {
    st.status.set(kvscope_web::LoadStatus::Loading {
        name: "big.msgpack".into(),
        done: 2 << 20,
        total: 6 << 20,
        events: 2000,
        events_per_s: 1e6,
    });
    st.analysis.set(AnalysisStatus::queued(0));
    let partial = kvscope_web::model::Model::empty("big.msgpack");
    st.model.set(Some(std::sync::Arc::new(partial)));
}

/// While a file is read the timeline shows the events so far, and the consumer views say the
/// models run once the whole trace is read (not "analysing N events: 0%" of a part); then they
/// show the analysis' own progress.
#[wasm_bindgen_test]
async fn the_consumer_views_wait_for_the_whole_trace_while_it_is_read() {
    let root = container();
    let st = AppState::new();
    let _h = leptos::mount::mount_to(root.clone(), move || {
        provide_context(st);
        view! { <kvscope_web::inspect::Inspector/> }
    });
    reading_a_file(st);
    let reading = until(&root, "analysing", "Reading the trace").await;
    assert!(!reading.contains('%'), "{reading}");
    st.status.set(kvscope_web::LoadStatus::Idle);
    let analysing = until(&root, "analysing", "with the consumer models: 0%").await;
    assert!(analysing.starts_with("Analysing 0 events"), "{analysing}");
}

/// While a file is read the Violations panel says the violations come once all of it is read
/// (it said "Analysing…" before the analysis had started) and its title has no count; then
/// that the analysis runs, and the count so far.
#[wasm_bindgen_test]
async fn the_violations_panel_waits_for_the_whole_trace_while_it_is_read() {
    let root = container();
    let st = AppState::new();
    let _h = leptos::mount::mount_to(root.clone(), move || {
        provide_context(st);
        view! { <kvscope_web::panels::Violations/> }
    });
    reading_a_file(st);
    let reading = until(&root, "violations-analysing", "Reading the trace").await;
    assert!(!reading.contains("Analysing"), "{reading}");
    // No count yet ("(0 so far)" read as if the analysis ran).
    let title = until(&root, "violations-title", "Violations").await;
    assert!(!title.contains("so far"), "{title}");
    st.status.set(kvscope_web::LoadStatus::Idle);
    until(&root, "violations-analysing", "Analysing…").await;
    until(&root, "violations-title", "(0 so far)").await;
}

/// The header's counts say "reading…" while the file is read, then "analysing…".
#[wasm_bindgen_test]
async fn the_header_says_reading_while_the_file_is_read() {
    let root = container();
    let st = AppState::new();
    let _h = leptos::mount::mount_to(root.clone(), move || {
        provide_context(st);
        view! { <kvscope_web::controls::Header/> }
    });
    reading_a_file(st);
    let reading = until(&root, "stats", "reading…").await;
    assert!(!reading.contains("analysing"), "{reading}");
    st.status.set(kvscope_web::LoadStatus::Idle);
    until(&root, "stats", "analysing…").await;
}

/// A new trace loaded while the analysis of the previous one runs cancels it: the new one is
/// analysed, the old one never lands.
#[wasm_bindgen_test]
async fn a_new_load_cancels_the_running_analysis() {
    let root = container();
    let st = AppState::new();
    let _h = leptos::mount::mount_to(root.clone(), move || {
        provide_context(st);
        view! { <kvscope_web::panels::StatusBanner/><kvscope_web::controls::StepBar/> }
    });
    load::load_bytes(
        st,
        "big.msgpack".into(),
        big_msgpack(300, 6),
        TraceOrigin::Local,
        None,
    );
    for _ in 0..3000 {
        if matches!(st.analysis.get_untracked(), AnalysisStatus::Running { fraction, .. } if fraction > 0.0)
        {
            break;
        }
        sleep(5).await;
    }
    assert!(
        matches!(st.analysis.get_untracked(), AnalysisStatus::Running { .. }),
        "{:?}",
        st.analysis.get_untracked()
    );
    let old = st.model.get_untracked().unwrap();
    load::load_bytes(
        st,
        "tiers.jsonl".into(),
        include_bytes!("../fixtures/tiers.jsonl").to_vec(),
        TraceOrigin::Local,
        None,
    );
    until(&root, "status", "analysed in").await;
    assert!(text(&root, "status").contains("Loaded tiers.jsonl: 12 events"));
    assert_eq!(st.len(), 12);
    sleep(50).await;
    assert!(!old.is_analysed(), "the old analysis stopped");
}

/// A load cancelled part-way by a newer one (file A, then file B while A is read) goes at
/// once: its partial timeline is cleared and the status says B is read; from then on the page
/// never shows A again (not its status, not its events), and B loads whole.
#[wasm_bindgen_test]
async fn a_newer_load_replaces_a_partial_one_at_once() {
    let root = container();
    let st = AppState::new();
    let _h = leptos::mount::mount_to(root.clone(), move || {
        provide_context(st);
        view! { <kvscope_web::panels::StatusBanner/><kvscope_web::timeline::Timeline/> }
    });
    let shown = move || {
        st.model
            .with_untracked(|m| m.as_ref().map(|m| (m.name.clone(), m.len())))
    };
    load::load_bytes(
        st,
        "a.msgpack".into(),
        big_msgpack(2_000, 6),
        TraceOrigin::Local,
        None,
    );
    // A's partial timeline, while A is still read.
    for _ in 0..6000 {
        if shown().is_some_and(|(n, len)| n == "a.msgpack" && len > 0) {
            break;
        }
        load::yield_now().await;
    }
    let (_, partial) = shown().expect("A's partial timeline");
    assert!(partial < 12_000, "A still read: {partial} events shown");
    assert!(matches!(
        st.status.get_untracked(),
        kvscope_web::LoadStatus::Loading { .. }
    ));
    load::load_bytes(
        st,
        "b.msgpack".into(),
        big_msgpack(500, 6),
        TraceOrigin::Local,
        None,
    );
    assert_eq!(shown(), None, "A's partial timeline is gone at once");
    for _ in 0..6000 {
        let status = st.status.get_untracked();
        assert!(!format!("{status:?}").contains("a.msgpack"), "{status:?}");
        assert!(
            shown().is_none_or(|(n, _)| n == "b.msgpack"),
            "{:?}",
            shown()
        );
        if matches!(status, kvscope_web::LoadStatus::Loaded { .. }) {
            break;
        }
        load::yield_now().await;
    }
    assert_eq!(shown(), Some(("b.msgpack".into(), 3_000)));
    until(&root, "status", "Loaded b.msgpack: 3000 events").await;
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

/// Inline permalinks use the browser's raw-deflate streams: a trace round-trips; a stream made
/// by another deflate implementation (zlib, level 9: what links made with miniz_oxide were)
/// inflates to the same bytes; large traces are not inlined; garbage is a readable error.
#[wasm_bindgen_test]
async fn inline_permalinks_round_trip_in_the_browser() {
    use kvscope_web::permalink::{inline_trace, uninline_trace, INFLATE_LIMIT, INLINE_LIMIT};
    let inline = |b: &[u8]| {
        let blob = kvscope_web::read::blob_of(b);
        async move { inline_trace(&blob).await }
    };
    let demo = kvscope_web::DEMO_TRACE.as_bytes();
    let text = inline(demo).await.expect("the demo is small");
    assert!(
        text.len() < demo.len() / 2,
        "{} of {}",
        text.len(),
        demo.len()
    );
    assert_eq!(uninline_trace(&text).await.unwrap(), demo);
    let zlib = include_str!("fixtures/demo-link.txt").trim();
    assert_eq!(uninline_trace(zlib).await.unwrap(), demo);
    // Pseudo-random bytes barely compress: over the limit, not inlined (and the compressor
    // stops early instead of deflating 8 MB).
    let mut x = 1u64;
    let noise: Vec<u8> = (0..8 << 20)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect();
    assert!(inline(&noise).await.is_none());
    assert!(inline(&noise[..INLINE_LIMIT / 2]).await.is_some());
    let err = uninline_trace("AAAAAAAA").await.unwrap_err();
    assert!(err.contains("does not inflate"), "{err}");
    // A link is not a zip bomb: 64 MiB + 1 zero bytes, raw deflate, base64url (Node's
    // `zlib.deflateRawSync(Buffer.alloc((64 << 20) + 1), { level: 9 }).toString('base64url')`).
    let bomb = include_str!("fixtures/bomb-link.txt").trim();
    let err = uninline_trace(bomb).await.unwrap_err();
    assert_eq!(INFLATE_LIMIT, 64 << 20);
    assert!(
        err.contains(&format!("inflates to more than {INFLATE_LIMIT} bytes")),
        "{err}"
    );
    let err = uninline_trace("!!").await.unwrap_err();
    assert!(err.contains("base64url"), "{err}");
}

/// `permalink::parse_f64` (JavaScript's parseFloat behind a strict grammar) accepts exactly
/// what `str::parse::<f64>` accepts and gives the same values.
#[wasm_bindgen_test]
fn parse_f64_matches_rust_float_parsing() {
    use kvscope_web::permalink::parse_f64;
    for s in [
        "0",
        "-0",
        "+1",
        "1.5",
        "-2.25",
        "5.",
        ".5",
        "+.5",
        "5.e3",
        "1e5",
        "1E-5",
        "2.5e+10",
        "1e400",
        "-1e400",
        "1e-400",
        "0.1",
        "4",
        "240",
        "123456.789",
        "1.7976931348623157e308",
        "5e-324",
        "inf",
        "-inf",
        "+Infinity",
        "INF",
        "nan",
        "NaN",
        "-nan",
        "",
        ".",
        "e5",
        "1e",
        "1e+",
        "--1",
        "+-1",
        "1.2.3",
        " 1",
        "1 ",
        "0x10",
        "1_0",
        "abc",
        "1.5abc",
        "Infinityx",
        "١",
    ] {
        let want = s.parse::<f64>().ok();
        let got = parse_f64(s);
        match (want, got) {
            (Some(w), Some(g)) if w.is_nan() => assert!(g.is_nan(), "{s:?}: {g}"),
            (Some(w), Some(g)) => {
                assert_eq!(w.to_bits(), g.to_bits(), "{s:?}: want {w}, got {g}")
            }
            (None, None) => {}
            _ => panic!("{s:?}: want {want:?}, got {got:?}"),
        }
    }
}

/// A fixture of `tests/fixtures/agreement/` by name.
fn agreement_trace(file: &str) -> Vec<u8> {
    macro_rules! fixtures {
        ($($f:literal),*) => {
            match file {
                $($f => include_bytes!(concat!("../../tests/fixtures/agreement/", $f)).to_vec(),)*
                other => panic!("no agreement fixture {other}"),
            }
        };
    }
    fixtures!(
        "two-groups-fixed.msgpack",
        "two-groups-cpython.msgpack",
        "one-job-cpython.msgpack",
        "two-jobs-fixed.msgpack",
        "two-jobs-cpython.msgpack",
        "two-jobs-gpu-fixed.msgpack",
        "two-jobs-gpu-cpython.msgpack",
        "two-jobs-fixed-provenance.jsonl",
        "routing-preconditions.jsonl",
        "cascade-one-job-cpython.msgpack",
        "cascade-two-jobs-fixed.msgpack",
        "cascade-two-jobs-cpython.msgpack"
    )
}

/// The page and `kvscope check --json` agree: every case of
/// `tests/fixtures/agreement/expected.txt` (written from `check --json` and checked against it
/// by `cli/tests/agreement.rs`) loaded in the page with the same worker count lists the same
/// findings (rule, event, related event, class, level, message). A case that repeats the previous trace
/// with another worker count changes it through the page's workers setting (the analysis runs
/// again), as a user would.
#[wasm_bindgen_test]
async fn page_agrees_with_check() {
    use std::sync::Arc;
    let expected = include_str!("../../tests/fixtures/agreement/expected.txt");
    let root = container();
    let st = AppState::new();
    let _h = leptos::mount::mount_to(root.clone(), move || {
        provide_context(st);
        view! {
            <kvscope_web::controls::StepBar/>
            <kvscope_web::panels::Violations/>
        }
    });
    sleep(10).await;
    let mut last_file = String::new();
    let mut cases = 0;
    for block in expected.split("== ").filter(|b| !b.is_empty()) {
        let (head, rows) = block.split_once('\n').expect("a case header");
        let (file, workers) = head.split_once(" workers=").expect("workers=");
        let workers = workers.parse::<u32>().ok();
        let before = st.model.get_untracked();
        if file == last_file {
            let select: web_sys::HtmlSelectElement = el(&root, "workers")
                .expect("the workers setting")
                .unchecked_into();
            select.set_value(&workers.map_or(String::new(), |w| w.to_string()));
            select
                .dispatch_event(&web_sys::Event::new("change").unwrap())
                .unwrap();
        } else {
            st.workers.set(workers);
            load::load_bytes(
                st,
                file.into(),
                agreement_trace(file),
                TraceOrigin::Local,
                None,
            );
        }
        last_file = file.to_owned();
        let mut done = false;
        for _ in 0..500 {
            done = st.model.with_untracked(|m| {
                m.as_ref().is_some_and(|m| {
                    m.is_analysed() && before.as_ref().is_none_or(|b| !Arc::ptr_eq(b, m))
                })
            });
            if done {
                break;
            }
            sleep(10).await;
        }
        assert!(done, "{head}: the analysis never finished");
        assert_eq!(st.workers.get_untracked(), workers, "{head}");
        let got: String = st.model.with_untracked(|m| {
            m.as_ref()
                .map(|m| {
                    m.violations()
                        .iter()
                        .filter(|v| v.level != "allow")
                        .map(|v| {
                            format!(
                                "{} {} {} {} {}: {}\n",
                                v.rule,
                                v.event,
                                v.related.map_or("-".into(), |r| r.to_string()),
                                v.class.unwrap_or("-"),
                                v.level,
                                m.message(v)
                            )
                        })
                        .collect()
                })
                .unwrap_or_default()
        });
        assert_eq!(got, rows, "{head}: the page disagrees with check --json");
        // The violation list renders them: the rules that mark an event's order by default,
        // the others (the routing preconditions) once the rule filter picks them.
        for r in rows.lines().filter(|r| !r.starts_with("consumer-loss")) {
            let rule = r.split(' ').next().unwrap_or_default();
            let marks_order = rule
                .parse::<kvscope_core::analysis::Rule>()
                .is_ok_and(|r| r.marks_order());
            st.rule.set((!marks_order).then(|| rule.to_owned()));
            sleep(10).await;
            let shown = text(&root, "violations");
            assert!(
                shown.contains(rule),
                "{head}: {rule} not listed in {shown:?}"
            );
        }
        st.rule.set(None);
        cases += 1;
    }
    assert_eq!(cases, 14);
}

/// Issue 16 point 10: a JSON Lines trace cut mid-line shows the located error and offers its
/// complete leading batches; the button opens exactly those.
#[wasm_bindgen_test]
async fn a_cut_trace_offers_its_complete_batches() {
    let root = container();
    let st = AppState::new();
    let _h = leptos::mount::mount_to(root.clone(), move || {
        provide_context(st);
        view! { <kvscope_web::panels::StatusBanner/> }
    });
    let whole = include_str!("../fixtures/tiers.jsonl");
    let lines: Vec<&str> = whole.lines().collect();
    let batches = lines
        .iter()
        .take(3)
        .filter(|l| l.contains("\"events\""))
        .count();
    let cut = format!("{}\n{}", lines[..3].join("\n"), &lines[3][..20]);
    load::load_bytes(
        st,
        "cut.jsonl".into(),
        cut.into_bytes(),
        TraceOrigin::Local,
        None,
    );
    until(&root, "load-error", "line 4").await;
    let offer = until(&root, "recover", "can be opened").await;
    let plural = if batches == 1 { "batch" } else { "batches" };
    assert!(
        offer.starts_with(&format!(
            "The input broke at line 4, column 20. The {batches} complete {plural} before it"
        )),
        "{offer}"
    );
    let button: web_sys::HtmlElement = root
        .query_selector("[data-testid=recover] button")
        .unwrap()
        .expect("the offer's button")
        .unchecked_into();
    assert_eq!(
        button.inner_text(),
        format!("Open {batches} complete {plural}")
    );
    button.click();
    until(
        &root,
        "status",
        &format!("Loaded cut.jsonl (first {batches} "),
    )
    .await;
    assert!(el(&root, "recover").is_none(), "the offer is gone");
}

/// Issue 16 point 5: the browser keeps one trace for reloads, found by its id only.
#[wasm_bindgen_test]
async fn a_kept_trace_comes_back_by_its_id() {
    use kvscope_web::keep::{keep, kept, new_id};
    use kvscope_web::read::{blob_of, read_blob};
    // What comes back: the name and the bytes (read out of the kept `Blob`).
    let back = |id: String| async move {
        match kept(&id).await.unwrap() {
            Some((name, blob)) => Some((name, read_blob(&blob).await.unwrap())),
            None => None,
        }
    };
    let (a, b) = (new_id(), new_id());
    assert_ne!(a, b);
    keep(&a, "a.jsonl", &blob_of(b"first")).await.expect("kept");
    assert_eq!(
        back(a.clone()).await,
        Some(("a.jsonl".into(), b"first".to_vec()))
    );
    keep(&b, "b.jsonl", &blob_of(b"second"))
        .await
        .expect("kept");
    assert_eq!(back(a).await, None, "one trace is kept: the last");
    assert_eq!(back(b).await, Some(("b.jsonl".into(), b"second".to_vec())));
}
