//! Loading traces: files (picker, drop), pasted text, same-origin URLs, permalinks and the demo.
//!
//! Input is read from its `Blob` by [`crate::read`] (the core's resumable reader,
//! `wire::stream::Decoder`) a chunk at a time so the page can show progress (bytes, events,
//! events/s) between chunks. The timeline is laid
//! out and painted before the core's analysis runs ([`crate::model::Model::analyse`], after the
//! first paint; [`crate::AnalysisStatus`] tracks it). Every failure ends in
//! [`LoadStatus::Error`] with the core's located message (line or byte offset), never a blank
//! page.

use std::sync::Arc;
use std::time::Duration;

use kvscope_core::replay::BuildPhase;
use leptos::prelude::*;
use wasm_bindgen::JsCast;
use wasm_bindgen_futures::JsFuture;

use crate::keep::Keeping;
use crate::model::LaneMode;
use crate::permalink::{LinkState, TraceOrigin};
use crate::read::{blob_of, drop_partial, parse, read_prefix, Failed, Shown};
use crate::recover::Recovery;
use crate::{AnalysisStatus, AppState, LoadStatus, Viewport, DEMO_TRACE};

/// Milliseconds since page start.
pub fn now_ms() -> f64 {
    window()
        .performance()
        .map(|p| p.now())
        .unwrap_or_else(js_sys::Date::now)
}

/// A `performance.mark` (for benchmarks: `kvscope:bytes` when a load starts reading its input,
/// `kvscope:first-timeline`, `kvscope:analysed`).
pub fn mark(name: &str) {
    if let Some(p) = window().performance() {
        let _ = p.mark(name);
    }
}

/// Wait for the next animation frame, then yield once more: the frame in between is painted.
pub async fn after_paint() {
    let p = js_sys::Promise::new(&mut |resolve, _| {
        let _ = window().request_animation_frame(&resolve);
    });
    let _ = JsFuture::from(p).await;
    yield_now().await;
}

#[wasm_bindgen::prelude::wasm_bindgen(module = "/src/browser.js")]
extern "C" {
    /// A promise resolved in a new task (a message to ourselves).
    fn next_task() -> js_sys::Promise;
}

/// Yield to the browser (input, a due frame) and resume in a new task: a message to ourselves,
/// not a zero-delay timeout, which browsers clamp to 4 ms once timeouts nest (40 ms of idle
/// per 10 slices: a tenth of a million-event load).
pub async fn yield_now() {
    let _ = JsFuture::from(next_task()).await;
}

/// Target duration of one slice of the analysis, ms: long enough to amortise the yield,
/// short enough that a pan or a click waits at most about this long.
const SLICE_MS: f64 = 30.0;

/// Target duration of one call of the analysis within a slice, ms (see [`spawn_analysis`]).
const CALL_MS: f64 = 5.0;

/// Budget (`ReplayBuilder::advance` units) of the first call of each analysis phase.
const FIRST_BUDGET: usize = 2_000;

/// Start a new load: every load or analysis task of an earlier one stops at its next slice.
/// Returns the new load's generation.
fn begin_load(st: AppState) -> u64 {
    st.load_gen.update_untracked(|g| *g += 1);
    st.load_gen.get_untracked()
}

/// Whether the load of generation `gen` is still the newest.
fn is_current(st: AppState, gen: u64) -> bool {
    st.load_gen.get_untracked() == gen
}

/// Run (or resume) the core's analysis of the loaded model in slices of about [`SLICE_MS`]
/// (calls of about [`CALL_MS`] until the slice's time is up), yielding to the browser between
/// slices (the timeline pans and zooms meanwhile) and publishing progress in
/// [`AppState::analysis`]. Stops when a newer load starts; the model it works on is whatever
/// [`AppState::model`] holds (a re-layout keeps the analysis going).
pub fn spawn_analysis(st: AppState) {
    let gen = st.load_gen.get_untracked();
    leptos::task::spawn_local(async move {
        // First the edges the first paint went without, then the analysis.
        index_edges(st, gen).await;
        yield_now().await;
        let events = st.len() as usize;
        let t0 = now_ms();
        let mut budget = FIRST_BUDGET;
        let mut phase = None;
        let mut last_done = 0usize;
        let mut last_paint = t0;
        let mut events_per_s = 0.0;
        loop {
            if !is_current(st, gen) {
                return; // a newer load took over
            }
            // Calls of about CALL_MS until the slice's SLICE_MS are up: a call's cost is only
            // known after it (uneven costs per event, a busy machine), so a slice of short
            // calls overshoots its target by about one call. A new phase starts a new slice.
            let slice = now_ms();
            let mut progress = None;
            while now_ms() - slice < SLICE_MS {
                let ts = now_ms();
                progress = st
                    .model
                    .with_untracked(|m| m.as_ref().and_then(|m| m.analyse_some(budget)));
                let took = (now_ms() - ts).max(0.05);
                let Some(p) = &progress else { break };
                // Adapt the budget so a call takes about CALL_MS; a new phase has other costs
                // per unit (indexing counts batches, the analysis events): start small again.
                // A call that did much less than its budget (a whole step that ends its call:
                // freeing a model, a sort, a loss summary) says nothing about the cost per
                // unit: keep the budget (growing it there let the findings' last step run a
                // million units, seconds, in one slice).
                let did = p.done.saturating_sub(last_done);
                last_done = p.done;
                if phase.replace(p.phase).is_some_and(|q| q != p.phase) {
                    budget = FIRST_BUDGET;
                    break;
                } else if did >= budget / 2 || took > CALL_MS {
                    let scale = (CALL_MS / took).clamp(0.25, 4.0);
                    budget = ((budget as f64 * scale) as usize).clamp(64, 1 << 22);
                }
            }
            let Some(p) = progress else { break };
            // The rate of the events' phase; after it, `done` counts findings, roots and rows
            // (the last rate stays).
            if p.phase == BuildPhase::Analysis {
                let secs = ((now_ms() - t0) / 1000.0).max(1e-3);
                events_per_s = p.done as f64 / secs;
            }
            st.analysis.set(AnalysisStatus::Running {
                events,
                fraction: p.fraction(),
                done: p.done,
                events_per_s,
                indexing: p.phase == BuildPhase::Index,
            });
            // Held (see `AppState::analysis_hold`): wait, a frame at a time, until released or
            // a newer load takes over.
            while st.analysis_hold.get_untracked() && is_current(st, gen) {
                after_paint().await;
                last_paint = now_ms();
            }
            // Let the browser handle input; give it a frame now and then.
            if now_ms() - last_paint > 100.0 {
                after_paint().await;
                last_paint = now_ms();
            } else {
                yield_now().await;
            }
        }
        let ms = now_ms() - t0;
        mark("kvscope:analysed");
        st.analysis.set(AnalysisStatus::Done { ms });
        st.model.update(|_| {}); // violations and consumer models changed
                                 // The demo opens at its first violation, where the details tell what happened.
        let demo = st
            .origin
            .with_untracked(|o| matches!(o, Some(TraceOrigin::Demo)));
        if demo && st.cursor.get_untracked() == 0 {
            st.next_violation();
        }
        st.status.update(|s| {
            if let LoadStatus::Loaded { breakdown, .. } = s {
                breakdown.push_str(&format!(" · analysis {}", crate::fixed(ms, 0)));
            }
        });
    });
}

/// Index the parent→child edges of the shown model (`Model::index_edges_some`) in slices of
/// about [`SLICE_MS`] if a re-layout has not done it already, then redraw and add their time
/// to the status line's breakdown. Stops when a load newer than `gen` starts.
async fn index_edges(st: AppState, gen: u64) {
    let t0 = now_ms();
    // Small at first: the first slice also sizes the builder's tables for every event.
    let mut budget = 8_192usize;
    let mut worked = false;
    loop {
        if !is_current(st, gen) {
            return;
        }
        let ts = now_ms();
        let mut done = true;
        st.model.update_untracked(|slot| {
            let Some(arc) = slot.as_mut() else { return };
            if arc.edges_indexed() {
                return;
            }
            worked = true;
            match Arc::get_mut(arc) {
                Some(m) => done = m.index_edges_some(budget),
                // Still shared (a render holds it): lay out a copy, edges included.
                None => {
                    if let Ok(m) = arc.relaid(st.lane_mode.get_untracked()) {
                        *arc = Arc::new(m);
                    }
                }
            }
        });
        if done {
            break;
        }
        let scale = (SLICE_MS / (now_ms() - ts).max(0.05)).clamp(0.25, 4.0);
        budget = ((budget as f64 * scale) as usize).clamp(1 << 10, 1 << 24);
        yield_now().await;
    }
    if worked {
        st.model.update(|_| {}); // draw the edges
        let ms = now_ms() - t0;
        st.status.update(|s| {
            if let LoadStatus::Loaded { breakdown, .. } = s {
                breakdown.push_str(&format!(" · edges {}", crate::fixed(ms, 0)));
            }
        });
    }
}

/// A load that did not replace the model (error, cancelled): make sure the model still shown
/// gets analysed (the failed load stopped its analysis).
fn resume_analysis(st: AppState) {
    let unfinished = st
        .model
        .with_untracked(|m| m.as_ref().is_some_and(|m| !m.is_analysed()));
    if unfinished {
        begin_load(st);
        spawn_analysis(st);
    }
}

/// Load trace bytes (any supported format) under a display name.
pub fn load_bytes(
    st: AppState,
    name: String,
    bytes: Vec<u8>,
    origin: TraceOrigin,
    link: Option<LinkState>,
) {
    load_blob(st, name, blob_of(&bytes), origin, link);
}

/// Load a trace (any supported format) from a `Blob` (a picked or dropped file, a fetched
/// URL, a kept trace, [`blob_of`] bytes) under a display name.
pub fn load_blob(
    st: AppState,
    name: String,
    blob: web_sys::Blob,
    origin: TraceOrigin,
    link: Option<LinkState>,
) {
    st.playing.set(false);
    st.recovery.set(None);
    let gen = begin_load(st);
    drop_partial(st);
    let size = blob.size() as usize;
    st.status.set(LoadStatus::Loading {
        name: name.clone(),
        done: 0,
        total: size,
        events: 0,
        events_per_s: 0.0,
    });
    leptos::task::spawn_local(async move {
        yield_now().await;
        if !is_current(st, gen) {
            return;
        }
        let t0 = now_ms();
        mark("kvscope:bytes");
        let mut shown = Shown::default();
        let parsed = parse(st, &name, &blob, t0, &mut shown, move || {
            is_current(st, gen)
        })
        .await;
        let (mut model, scan) = match parsed {
            None => return, // a newer load took over
            Some(Ok(read)) => read,
            Some(Err(Failed::Read(message))) => {
                st.status.set(LoadStatus::Error { name, message });
                resume_analysis(st);
                return;
            }
            Some(Err(Failed::Broken(broken))) => {
                st.status.set(LoadStatus::Error {
                    name: name.clone(),
                    message: broken.error.to_string(),
                });
                // The complete leading records, read back from the input for the offer.
                if let Ok(bytes) = read_prefix(&blob, broken.complete_bytes.min(size)).await {
                    st.recovery.set(Recovery::offer(&name, &broken, bytes));
                }
                resume_analysis(st);
                return;
            }
        };
        // The whole trace is in `model` (taken out of the page, which showed it while reading):
        // lay out its lanes (in the default mode gathered while reading, `Scan`) and show it,
        // with no yield in between. The parent→child edges are indexed after the first paint
        // (`index_edges`): they are drawn only zoomed in.
        let read_ms = now_ms() - t0;
        model.set_workers(st.workers.get_untracked());
        let mode = st.lane_mode.get_untracked();
        match mode {
            LaneMode::Tier => model.layout_scanned(&scan),
            _ => model.layout_lanes(mode),
        }
        drop(scan);
        let phases = [("parse", read_ms), ("lanes", now_ms() - t0 - read_ms)];
        let ms = now_ms() - t0;
        let n = model.len();
        // A local trace goes into permalinks inline if it compresses small enough, else it is
        // kept in this browser's storage under a new id (`crate::keep`): decided after the
        // first paint (asynchronous compression); the link names the id meanwhile.
        let keep_id = (origin == TraceOrigin::Local).then(crate::keep::new_id);
        let origin = match &keep_id {
            Some(id) => TraceOrigin::Kept(id.clone()),
            None => origin,
        };
        // (A local trace counts as in the link until its inlining fails: no flicker of the
        // "view only" note for the small ones.)
        st.keeping.set(match (&keep_id, &origin) {
            (None, TraceOrigin::Kept(_)) => Keeping::Kept { bytes: size },
            _ => Keeping::InLink,
        });
        st.analysis.set(AnalysisStatus::queued(n));
        #[cfg(feature = "compare")]
        crate::compare::remember(&name, &blob);
        st.origin.set(Some(origin));
        st.model.set(Some(Arc::new(model)));
        if st.lane_mode.get_untracked() != mode {
            relayout(st); // the lane picker changed while this trace was laid out
        }
        let breakdown = phases
            .iter()
            .map(|(p, t)| format!("{p} {}", crate::fixed(*t, 0)))
            .collect::<Vec<_>>()
            .join(" · ");
        st.status.set(LoadStatus::Loaded {
            name: name.clone(),
            events: n,
            ms,
            breakdown,
        });
        let link = link.unwrap_or_default();
        st.rule.set(link.rule.clone());
        st.query.set(link.query.clone().unwrap_or_default());
        if link.consumer.is_some() {
            st.consumer.set(link.consumer.clone());
        }
        match link.viewport {
            Some((start, per_px)) => st.viewport.set(Viewport { start, per_px }),
            None => st.fit(),
        }
        st.cursor.set(link.cursor.unwrap_or(0).min(n as u32));

        // The timeline is up: let the browser paint it, then run the core's analysis in slices
        // (the page stays interactive) and re-render what depends on it when it is done.
        after_paint().await;
        mark("kvscope:first-timeline");
        if !is_current(st, gen) {
            return;
        }
        spawn_analysis(st);
        if let Some(id) = keep_id {
            crate::keep::inline_or_keep(st, &id, &name, &blob, move || is_current(st, gen)).await;
        }
    });
}

/// Load the built-in demo.
pub fn load_demo(st: AppState, link: Option<LinkState>) {
    load_bytes(
        st,
        "demo".into(),
        DEMO_TRACE.as_bytes().to_vec(),
        TraceOrigin::Demo,
        link,
    );
}

/// Read a `File` (picker or drop) and load it.
pub fn load_file(st: AppState, file: web_sys::File) {
    // Read a chunk at a time while decoding (`parse`), not whole first (`load_blob` says
    // "Loading" at once).
    load_blob(st, file.name(), file.into(), TraceOrigin::Local, None);
}

/// A JS exception's text: an `Error`'s message, a thrown string, or its debug form (shared by
/// loading and the comparison's simulator import).
pub fn js_text(v: &wasm_bindgen::JsValue) -> String {
    v.dyn_ref::<js_sys::Error>()
        .map(|e| String::from(e.message()))
        .or_else(|| v.as_string())
        .unwrap_or_else(|| format!("{v:?}"))
}

/// Whether `url` resolves to this page's origin.
pub fn same_origin(url: &str) -> Result<String, String> {
    let here = window().location().href().map_err(|e| js_text(&e))?;
    let u = web_sys::Url::new_with_base(url, &here).map_err(|_| format!("not a URL: {url}"))?;
    let origin = window().location().origin().map_err(|e| js_text(&e))?;
    if u.origin() != origin {
        return Err(format!(
            "only same-origin URLs can be loaded ({} is not {origin})",
            u.origin()
        ));
    }
    Ok(u.href())
}

/// Fetch a same-origin URL and load it.
pub fn load_url(st: AppState, url: String, link: Option<LinkState>) {
    st.status.set(LoadStatus::Loading {
        name: url.clone(),
        done: 0,
        total: 0,
        events: 0,
        events_per_s: 0.0,
    });
    leptos::task::spawn_local(async move {
        let result: Result<web_sys::Blob, String> = async {
            let href = same_origin(&url)?;
            let resp = JsFuture::from(window().fetch_with_str(&href))
                .await
                .map_err(|e| js_text(&e))?;
            let resp: web_sys::Response = resp
                .dyn_into()
                .map_err(|_| "fetch returned no response".to_string())?;
            if !resp.ok() {
                return Err(format!("HTTP {} {}", resp.status(), resp.status_text()));
            }
            let blob = JsFuture::from(resp.blob().map_err(|e| js_text(&e))?)
                .await
                .map_err(|e| js_text(&e))?;
            Ok(blob.unchecked_into())
        }
        .await;
        match result {
            Ok(blob) => load_blob(st, url.clone(), blob, TraceOrigin::Url(url), link),
            Err(message) => st.status.set(LoadStatus::Error { name: url, message }),
        }
    });
}

/// On start: a permalink in the hash wins, then `?url=`, then the demo.
pub fn boot(st: AppState) {
    let loc = window().location();
    let hash = loc.hash().unwrap_or_default();
    let link = match LinkState::from_hash(&hash) {
        Ok(l) => l,
        Err(message) => {
            st.status.set(LoadStatus::Error {
                name: "permalink".into(),
                message,
            });
            return;
        }
    };
    st.lane_mode.set(link.lanes);
    st.workers.set(link.workers);
    if let Some(t) = link.tab {
        st.tab.set(t);
    }
    let query_url = loc
        .search()
        .ok()
        .and_then(|s| web_sys::UrlSearchParams::new_with_str(&s).ok())
        .and_then(|p| p.get("url"));
    match (link.origin.clone(), query_url) {
        (Some(TraceOrigin::Inline(text)), _) => {
            leptos::task::spawn_local(async move {
                match crate::permalink::uninline_trace(&text).await {
                    Ok(bytes) => load_bytes(
                        st,
                        "linked trace".into(),
                        bytes,
                        TraceOrigin::Inline(text),
                        Some(link),
                    ),
                    Err(message) => st.status.set(LoadStatus::Error {
                        name: "permalink".into(),
                        message,
                    }),
                }
            });
        }
        (Some(TraceOrigin::Kept(id)), _) => crate::keep::restore(st, id, link),
        (Some(TraceOrigin::Url(u)), _) => load_url(st, u, Some(link)),
        (_, Some(u)) => load_url(st, u, Some(link)),
        (Some(TraceOrigin::Demo), None) => load_demo(st, Some(link)),
        _ => load_demo(st, None),
    }
}

/// Re-layout the lanes (tier, source × tier or tier × job) of the loaded model.
pub fn relayout(st: AppState) {
    let mode = st.lane_mode.get_untracked();
    st.model.update(|slot| {
        let Some(arc) = slot.take() else { return };
        *slot = Some(match Arc::try_unwrap(arc) {
            Ok(mut m) => {
                m.layout(mode);
                Arc::new(m)
            }
            Err(shared) => {
                // Still shared (a render holds it): rebuild from the batches.
                match shared.relaid(mode) {
                    Ok(m) => {
                        m.analyse();
                        Arc::new(m)
                    }
                    Err(_) => shared,
                }
            }
        });
    });
}

/// Analyse the loaded trace again with the page's worker count ([`AppState::workers`]): the
/// core's findings change with it (`docs/rules.md`, "Jobs and evidence"). The timeline stays;
/// the findings are the core's once its pass is done ("analysing…" meanwhile).
pub fn reanalyse(st: AppState) {
    // While a trace is read, the model shown is part of it: the load applies the worker
    // count when it ends.
    if matches!(st.status.get_untracked(), LoadStatus::Loading { .. }) {
        return;
    }
    let mode = st.lane_mode.get_untracked();
    let Some(Ok(mut m)) = st
        .model
        .with_untracked(|m| m.as_ref().map(|m| m.relaid(mode)))
    else {
        return;
    };
    m.set_workers(st.workers.get_untracked());
    begin_load(st);
    st.analysis.set(AnalysisStatus::queued(m.len()));
    st.model.set(Some(Arc::new(m)));
    spawn_analysis(st);
}

/// Delay helper for tests and UI niceties.
pub fn after(ms: u64, f: impl FnOnce() + 'static) {
    set_timeout(f, Duration::from_millis(ms));
}
