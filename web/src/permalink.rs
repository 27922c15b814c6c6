//! Permalinks: the view state (cursor, filters, lanes, viewport, consumer) and the trace's
//! origin (demo, same-origin URL, or the whole trace inlined as raw deflate + base64url) encoded
//! in the URL hash, e.g. `#c=12&r=child-before-parent-in-job&v=0,0.05&u=/trace`.
//!
//! Encoding and decoding the hash are pure functions. Inlining uses the browser's
//! `CompressionStream` / `DecompressionStream` (`deflate-raw`): asynchronous, and no deflate
//! code in the app's wasm. [`sync_permalink`] keeps the URL hash in step with the view.

use std::time::Duration;

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use leptos::prelude::*;
use wasm_bindgen::prelude::*;
use wasm_bindgen_futures::JsFuture;

use crate::inspect::Tab;
use crate::model::LaneMode;
use crate::AppState;

/// Traces whose compressed form is at most this many bytes are inlined in permalinks.
pub const INLINE_LIMIT: usize = 24 * 1024;

/// Where the trace of a permalink comes from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TraceOrigin {
    /// The built-in demo.
    Demo,
    /// A same-origin URL.
    Url(String),
    /// The trace inlined in the link: raw deflate, base64url ([`inline_trace`]).
    Inline(String),
    /// Not in the link: a local trace too large to inline, kept in this browser's storage under
    /// this id (`s=…`, [`crate::keep`]).
    Kept(String),
    /// A local trace (file, paste, generated) being loaded: inlined when it fits, else kept.
    Local,
}

/// Everything a permalink restores.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LinkState {
    /// Cursor (event index).
    pub cursor: Option<u32>,
    /// Violation rule filter.
    pub rule: Option<String>,
    /// Search query.
    pub query: Option<String>,
    /// Selected consumer.
    pub consumer: Option<String>,
    /// Lane layout (`l=source`, `l=job`; absent: per tier).
    pub lanes: LaneMode,
    /// The analysis' worker count (`w=2`; absent: the trace's own).
    pub workers: Option<u32>,
    /// Viewport: (first event at the left edge, events per pixel).
    pub viewport: Option<(f64, f64)>,
    /// Trace origin (`None`: not given).
    pub origin: Option<TraceOrigin>,
    /// The inspector's tab (`i=topology`, `i=jobs`; absent: Consumers).
    pub tab: Option<Tab>,
}

/// Percent-encode everything outside unreserved characters (and `/`, `:`).
fn enc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-_.~/:".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

fn dec(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match (bytes.get(i), bytes.get(i + 1..i + 3)) {
            (Some(b'%'), Some(h)) => match std::str::from_utf8(h)
                .ok()
                .and_then(|h| u8::from_str_radix(h, 16).ok())
            {
                Some(v) => {
                    out.push(v);
                    i += 3;
                }
                None => {
                    out.push(b'%');
                    i += 1;
                }
            },
            (Some(b), _) => {
                out.push(*b);
                i += 1;
            }
            (None, _) => break,
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Inflated inline traces larger than this are refused (a link is not a zip bomb).
pub const INFLATE_LIMIT: usize = 64 << 20;

#[wasm_bindgen(module = "/src/browser.js")]
extern "C" {
    /// Raw-deflate `blob`; resolves to `undefined` as soon as the output exceeds `limit`.
    #[wasm_bindgen(catch)]
    fn deflate_raw_limited(blob: &web_sys::Blob, limit: u32) -> Result<js_sys::Promise, JsValue>;
    /// Inflate raw deflate; rejects on bad data or when the output exceeds `limit`.
    #[wasm_bindgen(catch)]
    fn inflate_raw_limited(bytes: &[u8], limit: u32) -> Result<js_sys::Promise, JsValue>;
}

fn js_message(v: &JsValue) -> String {
    js_sys::Reflect::get(v, &"message".into())
        .ok()
        .and_then(|m| m.as_string())
        .or_else(|| v.as_string())
        .unwrap_or_else(|| "unknown error".into())
}

/// The inline form of a trace (raw deflate, base64url) for a permalink, or `None` when it
/// would exceed [`INLINE_LIMIT`]: the compressor reads the `Blob` as a stream and stops as
/// soon as its output outgrows the limit, so a large trace costs only its first few hundred KB
/// of deflate work (and no copy of it). Browser only.
pub async fn inline_trace(blob: &web_sys::Blob) -> Option<String> {
    // The base64url text must fit INLINE_LIMIT * 4 / 3 + 4 characters.
    let max_packed = (INLINE_LIMIT * 4 / 3 + 4) * 3 / 4;
    let packed = JsFuture::from(deflate_raw_limited(blob, max_packed as u32).ok()?)
        .await
        .ok()?;
    let packed = packed.dyn_into::<js_sys::Uint8Array>().ok()?.to_vec();
    let s = URL_SAFE_NO_PAD.encode(packed);
    (s.len() <= INLINE_LIMIT * 4 / 3 + 4).then_some(s)
}

/// Inverse of [`inline_trace`] (any raw deflate stream, e.g. links made before the browser's
/// compressor was used); errors are readable sentences. Browser only.
pub async fn uninline_trace(s: &str) -> Result<Vec<u8>, String> {
    let packed = URL_SAFE_NO_PAD
        .decode(s.as_bytes())
        .map_err(|e| format!("the link's inline trace is not base64url: {e}"))?;
    let bad = |e: JsValue| {
        format!(
            "the link's inline trace does not inflate: {}",
            js_message(&e)
        )
    };
    let out = JsFuture::from(inflate_raw_limited(&packed, INFLATE_LIMIT as u32).map_err(bad)?)
        .await
        .map_err(bad)?;
    out.dyn_into::<js_sys::Uint8Array>()
        .map(|a| a.to_vec())
        .map_err(|_| "the link's inline trace does not inflate".into())
}

/// `s` as an `f64`, accepting exactly what `str::parse::<f64>` accepts (sign, digits with an
/// optional `.`, exponent, `inf` / `infinity` / `nan` in any case). The conversion itself is
/// JavaScript's `parseFloat` (correctly rounded up to 20 significant digits, which covers
/// everything the app writes: shortest round-trip numbers and `<option>` values), so the wasm
/// carries no copy of the standard library's decimal-to-float tables (~7 KB gzip).
pub fn parse_f64(s: &str) -> Option<f64> {
    let body = s.strip_prefix(['+', '-']).unwrap_or(s);
    let negative = s.starts_with('-');
    let special = match body.to_ascii_lowercase().as_str() {
        "inf" | "infinity" => Some(f64::INFINITY),
        "nan" => Some(f64::NAN),
        _ => None,
    };
    if let Some(v) = special {
        return Some(if negative { -v } else { v });
    }
    let (mantissa, exponent) = match body.find(['e', 'E']) {
        Some(i) => (&body[..i], Some(&body[i + 1..])),
        None => (body, None),
    };
    let (int, frac) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    let digits = |t: &str| t.bytes().all(|b| b.is_ascii_digit());
    let exponent_ok = exponent.is_none_or(|e| {
        let e = e.strip_prefix(['+', '-']).unwrap_or(e);
        !e.is_empty() && digits(e)
    });
    let ok = !(int.is_empty() && frac.is_empty()) && digits(int) && digits(frac) && exponent_ok;
    ok.then(|| convert_f64(s))
}

/// The conversion behind [`parse_f64`] for text already checked against Rust's float grammar:
/// JavaScript's `parseFloat` in the browser.
#[cfg(target_arch = "wasm32")]
fn convert_f64(s: &str) -> f64 {
    js_sys::Number::parse_float(s)
}

/// Native builds (the crate's host-side unit tests) have no JavaScript: the standard parser.
#[cfg(not(target_arch = "wasm32"))]
fn convert_f64(s: &str) -> f64 {
    s.parse().unwrap_or(f64::NAN)
}

/// Whether `s` can be an inline trace (base64url text, no padding).
fn is_base64url(s: &str) -> bool {
    !s.is_empty()
        && s.len() % 4 != 1
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

impl LinkState {
    /// Encode as a URL hash (without the leading `#`).
    pub fn to_hash(&self) -> String {
        let mut parts = Vec::new();
        if let Some(c) = self.cursor {
            parts.push(format!("c={c}"));
        }
        if let Some(r) = &self.rule {
            parts.push(format!("r={}", enc(r)));
        }
        if let Some(q) = self.query.as_ref().filter(|q| !q.is_empty()) {
            parts.push(format!("q={}", enc(q)));
        }
        if let Some(k) = &self.consumer {
            parts.push(format!("k={}", enc(k)));
        }
        if self.lanes != LaneMode::Tier {
            parts.push(format!("l={}", self.lanes.as_str()));
        }
        if let Some(w) = self.workers {
            parts.push(format!("w={w}"));
        }
        if let Some((s, p)) = self.viewport {
            parts.push(format!("v={},{}", crate::fixed(s, 1), crate::fixed(p, 4)));
        }
        match &self.origin {
            Some(TraceOrigin::Demo) => parts.push("d=1".into()),
            Some(TraceOrigin::Url(u)) => parts.push(format!("u={}", enc(u))),
            Some(TraceOrigin::Inline(s)) => parts.push(format!("t={s}")),
            Some(TraceOrigin::Kept(id)) => parts.push(format!("s={}", enc(id))),
            Some(TraceOrigin::Local) | None => {}
        }
        if let Some(t) = self.tab.and_then(Tab::as_str) {
            parts.push(format!("i={t}"));
        }
        parts.join("&")
    }

    /// Decode a URL hash (with or without `#`). Unknown keys are ignored; an inline trace that
    /// is not base64url is an error (one that does not inflate fails when it is loaded).
    pub fn from_hash(hash: &str) -> Result<LinkState, String> {
        let mut st = LinkState::default();
        for part in hash
            .trim_start_matches('#')
            .split('&')
            .filter(|p| !p.is_empty())
        {
            let (k, v) = part.split_once('=').unwrap_or((part, ""));
            match k {
                "c" => st.cursor = v.parse().ok(),
                "r" => st.rule = Some(dec(v)),
                "q" => st.query = Some(dec(v)),
                "k" => st.consumer = Some(dec(v)),
                "l" => st.lanes = LaneMode::parse(v),
                "w" => st.workers = v.parse().ok().filter(|w| *w > 0),
                "v" => {
                    st.viewport = v
                        .split_once(',')
                        .and_then(|(a, b)| Some((parse_f64(a)?, parse_f64(b)?)))
                        .filter(|(a, b): &(f64, f64)| a.is_finite() && b.is_finite() && *b > 0.0)
                }
                "d" => st.origin = Some(TraceOrigin::Demo),
                "u" => st.origin = Some(TraceOrigin::Url(dec(v))),
                "t" if is_base64url(v) => st.origin = Some(TraceOrigin::Inline(v.to_owned())),
                "t" => return Err("the link's inline trace is not base64url".into()),
                "s" if !v.is_empty() => st.origin = Some(TraceOrigin::Kept(dec(v))),
                "i" => st.tab = Some(Tab::parse(v)),
                _ => {}
            }
        }
        Ok(st)
    }
}

/// The permalink of the current view (`#c=…&…`), `None` before a trace is loaded.
pub fn permalink_hash(st: AppState) -> Option<String> {
    st.origin.with_untracked(|origin| {
        let origin = origin.as_ref()?;
        let vp = st.viewport.get_untracked();
        let link = LinkState {
            cursor: Some(st.cursor.get_untracked()),
            rule: st.rule.get_untracked(),
            query: Some(st.query.get_untracked()),
            consumer: st.consumer.get_untracked(),
            lanes: st.lane_mode.get_untracked(),
            workers: st.workers.get_untracked(),
            viewport: Some((vp.start, vp.per_px)),
            origin: Some(origin.clone()),
            tab: Some(st.tab.get_untracked()),
        };
        Some(format!("#{}", link.to_hash()))
    })
}

/// Write the current view into the URL hash now (`history.replaceState`).
pub fn write_permalink(st: AppState) {
    if let Some(hash) = permalink_hash(st) {
        if let Ok(h) = window().history() {
            let _ = h.replace_state_with_url(&wasm_bindgen::JsValue::NULL, "", Some(&hash));
        }
    }
}

/// Milliseconds the URL hash lags the view: `replaceState` costs about 2 ms, too much for
/// every step of a 60 fps playback.
const PERMALINK_DELAY_MS: u64 = 120;

/// Keep the URL hash in sync with the view: `replaceState` once the view has been still for
/// [`PERMALINK_DELAY_MS`] (the "Copy permalink" button writes it at once).
pub fn sync_permalink(st: AppState) {
    let pending: StoredValue<Option<TimeoutHandle>, leptos::prelude::LocalStorage> =
        StoredValue::new_local(None);
    Effect::new(move |_| {
        st.origin.track();
        st.viewport.track();
        st.cursor.track();
        st.rule.track();
        st.query.track();
        st.consumer.track();
        st.lane_mode.track();
        st.workers.track();
        st.tab.track();
        if let Some(h) = pending.get_value() {
            h.clear();
        }
        let h = set_timeout_with_handle(
            move || {
                pending.set_value(None);
                write_permalink(st);
            },
            Duration::from_millis(PERMALINK_DELAY_MS),
        );
        pending.set_value(h.ok());
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        let st = LinkState {
            cursor: Some(42),
            rule: Some("child-before-parent-in-job".into()),
            query: Some("tier=CPU && job=3".into()),
            consumer: Some("llmd".into()),
            lanes: LaneMode::SourceTier,
            workers: Some(2),
            viewport: Some((10.0, 0.125)),
            origin: Some(TraceOrigin::Inline("q1ZKzs8pLS7Jz00sSlWyMqwFAA".into())),
            tab: Some(Tab::Topology),
        };
        let h = st.to_hash();
        assert!(
            !h.contains(' ') && !h.contains('&') || h.split('&').count() == 9,
            "{h}"
        );
        assert_eq!(LinkState::from_hash(&format!("#{h}")).unwrap(), st);
    }

    /// Issue 16 point 5: a trace too large to inline is named by its storage id, never
    /// silently dropped from the link; the active tab is part of the view.
    #[test]
    fn kept_traces_and_the_tab_are_in_the_link() {
        let st = LinkState {
            cursor: Some(7),
            origin: Some(TraceOrigin::Kept("lz3k9a1b2".into())),
            tab: Some(Tab::JobOrder),
            ..Default::default()
        };
        assert_eq!(st.to_hash(), "c=7&s=lz3k9a1b2&i=jobs");
        assert_eq!(LinkState::from_hash("#c=7&s=lz3k9a1b2&i=jobs").unwrap(), st);
        let local = LinkState {
            origin: Some(TraceOrigin::Local),
            tab: Some(Tab::Consumers),
            ..Default::default()
        };
        assert_eq!(
            local.to_hash(),
            "",
            "the default tab and a local trace add nothing"
        );
        assert_eq!(
            LinkState::from_hash("i=topology").unwrap().tab,
            Some(Tab::Topology)
        );
        assert_eq!(LinkState::from_hash("s=").unwrap().origin, None);
    }

    #[test]
    fn url_origin_and_garbage() {
        let st = LinkState {
            origin: Some(TraceOrigin::Url("/trace?x=1&y=2".into())),
            ..Default::default()
        };
        assert_eq!(LinkState::from_hash(&st.to_hash()).unwrap(), st);
        assert!(LinkState::from_hash("t=!!!").is_err());
        assert!(LinkState::from_hash("t=").is_err());
        assert!(
            LinkState::from_hash("t=abcde").is_err(),
            "not a base64 length"
        );
        let jobs = LinkState {
            lanes: LaneMode::TierJob,
            ..Default::default()
        };
        assert_eq!(jobs.to_hash(), "l=job");
        assert_eq!(LinkState::from_hash("#l=job").unwrap(), jobs);
        assert_eq!(
            LinkState::from_hash("l=nosuch").unwrap(),
            LinkState::default()
        );
        assert_eq!(
            LinkState::from_hash("c=abc&zz=1").unwrap(),
            LinkState::default()
        );
    }
}
