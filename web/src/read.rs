//! Reading a trace for the page: from its `Blob` (a picked or dropped file, a fetched URL, a
//! kept trace, bytes made in the page) a part at a time, through the core's resumable reader
//! (`wire::stream::Decoder`). The input stays outside wasm memory: a part is read while the
//! one before is decoded, so a large file is never copied whole (reading it first, copying it
//! into wasm and keeping copies for Compare and for reloads took seconds at a million events).

use kvscope_core::trace::{Trace, TraceRecord};
use kvscope_core::wire::stream::Decoder;
use leptos::prelude::*;
use wasm_bindgen::JsCast;
use wasm_bindgen_futures::JsFuture;

use crate::load::{js_text, now_ms, yield_now};
use crate::model::Scan;
use crate::recover::Broken;
use crate::{AppState, LoadStatus};

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

/// Parse a trace through the core's resumable reader (`wire::stream::Decoder`, the one the CLI
/// and the package read with), [`CHUNK`] bytes at a time, reporting progress (bytes, events,
/// events/s) after each chunk. The input stays a `Blob` outside wasm memory: each chunk is read
/// from it while the one before is decoded, so a large file is never copied whole (reading it,
/// copying it into wasm and keeping copies for Compare and for reloads took seconds at 1M
/// events). Records, numbering and errors (byte offset or line) are the core's; on an error,
/// the batches complete before it and the bytes they span ([`Broken`]). `current` says whether
/// this load is still wanted (a newer one cancels it: `None`).
pub(crate) async fn parse(
    st: AppState,
    name: &str,
    blob: &web_sys::Blob,
    t0: f64,
    current: impl Fn() -> bool,
) -> Option<Result<(Trace, Scan), Failed>> {
    let mut records: Vec<TraceRecord> = Vec::new();
    let mut scan = Scan::default();
    let mut events = 0usize;
    let mut batches = 0usize;
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
                part = match p.await {
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
                    }
                    records.push(r);
                    scan.batch(&records, records.len() - 1); // while the batch is in the cache
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
        progress(st, name, done, total, events, t0).await;
        if !current() {
            return None;
        }
    }
    Some(Ok((Trace { records }, scan)))
}

/// Why a load failed: the browser could not read the input, or the core could not decode it.
pub(crate) enum Failed {
    /// The browser's words.
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
