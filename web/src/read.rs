//! Reading a trace for the page: from its `Blob` (a picked or dropped file, a fetched URL, a
//! kept trace, bytes made in the page) a part at a time, through the core's resumable reader
//! (`wire::stream::Decoder`). The input stays outside wasm memory: a part is read while the
//! one before is decoded, so a large file is never copied whole (reading it first, copying it
//! into wasm and keeping copies for Compare and for reloads took seconds at a million events).

use std::sync::Arc;

use kvscope_core::trace::TraceRecord;
use kvscope_core::wire::stream::Decoder;
use leptos::prelude::*;
use wasm_bindgen::JsCast;
use wasm_bindgen_futures::JsFuture;

use crate::load::{js_text, mark, now_ms, yield_now};
use crate::model::{LaneMode, Model, ModelError, Scan};
use crate::recover::Broken;
use crate::{AnalysisStatus, AppState, LoadStatus};

/// Input is pushed to the reader in chunks of this many bytes (a JSON Lines chunk decodes in a
/// few tens of milliseconds: the page answers input between chunks).
const CHUNK: usize = 2 << 20;

/// Input is read from its `Blob` in parts of this many bytes: each read costs the page's thread
/// about a millisecond of its own (slicing, the browser's reply), so fewer, larger reads.
const READ: usize = 16 << 20;

// JS glue rather than web-sys bindings: fewer imports (the app's size budget).
#[wasm_bindgen::prelude::wasm_bindgen(module = "/src/browser.js")]
extern "C" {
    /// Bytes `at..end` of `blob`: a promise of a `Uint8Array`.
    fn blob_part(blob: &web_sys::Blob, at: f64, end: f64) -> js_sys::Promise;
    /// Bytes made in the page (a paste, the demo, a generated trace) as a `Blob` (a copy), the
    /// form [`crate::load::load_blob`] reads.
    pub fn blob_of(bytes: &[u8]) -> web_sys::Blob;
}

/// Report parsing progress (`done` of the bytes, `events` so far) and let the page paint.
async fn progress(st: AppState, name: &str, done: usize, total: usize, events: usize, t0: f64) {
    let secs = ((now_ms() - t0) / 1000.0).max(1e-3);
    st.status.set(LoadStatus::Loading {
        name: name.to_owned(),
        done,
        total,
        events,
        events_per_s: events as f64 / secs,
    });
    yield_now().await;
}

/// While reading, the timeline grows to the records read so far at most this often, ms: each
/// time costs a pass over the lanes of the events read and a redraw (tens of ms at a million
/// events on a busy machine).
const GROW_MS: f64 = 500.0;

/// Parse a trace through the core's resumable reader (`wire::stream::Decoder`, the one the CLI
/// and the package read with), [`CHUNK`] bytes at a time, reporting progress (bytes, events,
/// events/s) after each chunk. The input stays a `Blob` outside wasm memory: each chunk is read
/// from it while the one before is decoded, so a large file is never copied whole (reading it,
/// copying it into wasm and keeping copies for Compare and for reloads took seconds at 1M
/// events). Records, numbering and errors (byte offset or line) are the core's; on an error,
/// the batches complete before it and the bytes they span ([`Broken`]). `current` says whether
/// this load is still wanted (a newer one cancels it: `None`).
///
/// The timeline does not wait for the end: the records read so far go into a model in
/// [`AppState::model`] after the first chunk, which grows every [`GROW_MS`] (the first paint
/// needs a chunk, not the file). At the end the model, taken back, holds the whole trace (its
/// lanes are the caller's to lay out); meanwhile the page says how far reading is. On an error
/// the model shown is this load's partial one; a load that cancels it clears it
/// ([`drop_partial`]), and a cancelled load changes nothing once it is no longer `current`.
pub(crate) async fn parse(
    st: AppState,
    name: &str,
    blob: &web_sys::Blob,
    t0: f64,
    shown: &mut Shown,
    current: impl Fn() -> bool,
) -> Option<Result<(Model, Scan), Failed>> {
    // The records read since the timeline last grew.
    let mut fresh: Vec<TraceRecord> = Vec::new();
    let mut scan = Scan::default();
    let mut events = 0usize;
    let mut batches = 0usize;
    let mut grown_at = f64::NEG_INFINITY;
    let mut decoder =
        Decoder::with_floats(kvscope_core::trace::stream_source_name(name), json_float);
    let total = blob.size() as usize;
    let read = |at: usize| read_part(blob, at, (at + READ).min(total));
    // The part read last, how far into it the decoder is, and the part being read.
    let mut part = js_sys::Uint8Array::new_with_length(0);
    let mut used = 0u32;
    let mut read_at = 0;
    let mut next = (total > 0).then(|| read(0));
    loop {
        if used >= part.length() {
            if let Some(p) = next.take() {
                let p = p.await;
                if !current() {
                    return None; // (a newer load cleared what this one showed)
                }
                part = match p {
                    Ok(p) => p,
                    Err(e) => return Some(Err(Failed::Read(e))),
                };
                used = 0;
                read_at += part.length() as usize;
                if read_at < total && part.length() > 0 {
                    next = Some(read(read_at)); // read ahead while this part is decoded
                }
            }
        }
        let more = used < part.length();
        if more {
            let end = part.length().min(used.saturating_add(CHUNK as u32));
            let piece = part.subarray(used, end);
            decoder.push_with(piece.length() as usize, |room| piece.copy_to(room));
            used = end;
        } else {
            decoder.finish();
        }
        loop {
            match decoder.next_record() {
                Ok(Some(r)) => {
                    if let TraceRecord::Batch(b) = &r {
                        events += b.events.len();
                        batches += 1;
                        scan.batch(b); // while the batch is in the cache
                    }
                    fresh.push(r);
                }
                Ok(None) => break,
                Err(error) => {
                    return Some(Err(Failed::Broken(Broken {
                        error,
                        batches,
                        complete_bytes: usize::try_from(decoder.position()).unwrap_or(0),
                    })))
                }
            }
        }
        if !more {
            break;
        }
        let done = usize::try_from(decoder.position()).unwrap_or(total);
        // (Not when this chunk ends the input: the whole trace is shown next.)
        if events > 0 && done < total && now_ms() - grown_at >= GROW_MS {
            if let Err(e) = shown.grow(st, name, &mut fresh, &scan, done, total) {
                return Some(Err(Failed::Read(e.to_string())));
            }
            grown_at = now_ms();
        }
        progress(st, name, done, total, events, t0).await;
        if !current() {
            return None;
        }
    }
    // The whole trace: the model shown, taken back (a copy if something still holds it).
    let mut model = match shown.take(st) {
        Some(m) => m,
        None => Model::empty(name),
    };
    match model.extend(&mut fresh) {
        Ok(()) => Some(Ok((model, scan))),
        Err(e) => Some(Err(Failed::Read(e.to_string()))),
    }
}

/// A load's partial model in [`AppState::model`] while it reads ([`Model::partial`]). If the
/// load fails, it stays: the records before the error, under the error's message. A newer load
/// clears it when it starts ([`drop_partial`]); a whole trace stays until the next one paints.
#[derive(Default)]
pub(crate) struct Shown {
    /// Whether `AppState::model` holds this load's model.
    ours: bool,
}

impl Shown {
    /// Move `fresh` into this load's model (made and shown the first time) and lay out its
    /// lanes; the first time, the viewport is sized for the whole trace (`done` of `total`
    /// bytes read), so the timeline grows from the left as reading goes on. A render still
    /// holding the model defers this to the next call.
    fn grow(
        &mut self,
        st: AppState,
        name: &str,
        fresh: &mut Vec<TraceRecord>,
        scan: &Scan,
        done: usize,
        total: usize,
    ) -> Result<(), ModelError> {
        let first = !self.ours;
        if first {
            self.ours = true;
            // Not analysed yet: the views that need the analysis wait ("analysing 0%").
            st.analysis.set(AnalysisStatus::queued(0));
        }
        let mode = st.lane_mode.get_untracked();
        let mut r = Ok(());
        st.model.update(|slot| {
            if first {
                let mut m = Model::empty(name);
                m.partial = true;
                *slot = Some(Arc::new(m));
            }
            if let Some(m) = slot.as_mut().and_then(Arc::get_mut) {
                r = m.extend(fresh).map(|()| match mode {
                    LaneMode::Tier => m.layout_scanned(scan),
                    _ => m.layout_lanes(mode),
                });
            }
        });
        if first {
            st.fit_events(f64::from(st.len()) * total as f64 / done.max(1) as f64);
            // For benchmarks: the first timeline of this load, painted at the next frame.
            mark("kvscope:first-paint");
        }
        r
    }

    /// This load's model, taken out of [`AppState::model`] (a copy if something still holds
    /// it); `None` if none was shown.
    fn take(&mut self, st: AppState) -> Option<Model> {
        if !std::mem::take(&mut self.ours) {
            return None;
        }
        let arc = st.model.update_untracked(Option::take)?;
        let mut m = Arc::try_unwrap(arc)
            .or_else(|arc| arc.relaid(LaneMode::Tier))
            .ok()?;
        m.partial = false;
        Some(m)
    }
}

/// A new load starts: a partial model shown (a load it cancels, or one that failed) goes at
/// once, so the page does not show one trace under another's status; the new load's own
/// timeline replaces it when it paints.
pub(crate) fn drop_partial(st: AppState) {
    if st
        .model
        .with_untracked(|m| m.as_ref().is_some_and(|m| m.partial))
    {
        st.model.set(None);
    }
}

/// Why a load failed: the browser could not read the input, or the core could not decode it.
pub(crate) enum Failed {
    /// The browser's words (or the debugger's limit on events).
    Read(String),
    /// The core's located error, after the complete batches.
    Broken(Broken),
}

/// Bytes `at..end` of `blob`, read by the browser (started now, awaited later), outside wasm
/// memory.
fn read_part(
    blob: &web_sys::Blob,
    at: usize,
    end: usize,
) -> impl std::future::Future<Output = Result<js_sys::Uint8Array, String>> {
    let read = JsFuture::from(blob_part(blob, at as f64, end as f64));
    async move {
        read.await
            .map(JsCast::unchecked_into)
            .map_err(|e| format!("could not read the file: {}", js_text(&e)))
    }
}

/// Bytes `0..end` of `blob` (a recovered prefix, a kept trace in tests).
pub async fn read_prefix(blob: &web_sys::Blob, end: usize) -> Result<Vec<u8>, String> {
    Ok(read_part(blob, 0, end).await?.to_vec())
}

/// The whole of `blob`.
pub async fn read_blob(blob: &web_sys::Blob) -> Result<Vec<u8>, String> {
    read_prefix(blob, blob.size() as usize).await
}

/// The JSON Lines reader's [`kvscope_core::wire::FloatParser`] in the page: the JavaScript engine's
/// `parseFloat`, as in the npm package (`wasm/src/js.rs`), so the app links no float parser of
/// its own. The reader hands it JSON number text only, which `parseFloat` reads whole and
/// rounds correctly in every current engine (the package's `floats` tests check it).
#[cfg(target_arch = "wasm32")]
fn json_float(text: &str) -> Option<f64> {
    Some(js_sys::Number::parse_float(text)).filter(|f| !f.is_nan())
}

/// Native builds (host-side unit tests) have no JavaScript engine: the core's own parser.
#[cfg(not(target_arch = "wasm32"))]
use kvscope_core::wire::parse_float as json_float;
