//! Loading: progress while a large trace is read and analysed, the page while a file is read,
//! and newer loads replacing older ones.

use super::*;

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
        include_bytes!("../../fixtures/tiers.jsonl").to_vec(),
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
