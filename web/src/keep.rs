//! Reloads never lose a trace silently. A trace opened from a file, a paste or the Compare
//! dialog is not reproducible from a URL: its permalink inlines it when the whole trace
//! compresses small enough ([`crate::permalink::inline_trace`]); otherwise the link carries the
//! view and an id (`s=…`), and the trace is kept in this browser's IndexedDB (one trace: the
//! last one opened) so that a reload restores it. When the browser cannot keep it (quota,
//! storage disabled) or no longer has it, the page says so instead of showing something else.

use leptos::prelude::*;
use wasm_bindgen::prelude::*;
use wasm_bindgen::JsCast;
use wasm_bindgen_futures::JsFuture;

use crate::permalink::{LinkState, TraceOrigin};

/// Where the loaded trace is for a reload or a permalink.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Keeping {
    /// Reproducible from the link itself (demo, same-origin URL, inlined): nothing to keep.
    InLink,
    /// Not in the link; being stored in this browser.
    Saving,
    /// Not in the link (`bytes` long); this browser keeps it for reloads.
    Kept {
        /// Size of the trace.
        bytes: usize,
    },
    /// Not in the link, and this browser could not keep it.
    NotKept {
        /// Size of the trace.
        bytes: usize,
        /// Why (the browser's words).
        reason: String,
    },
}

impl Keeping {
    /// What a permalink of this trace carries, in a sentence; `None` when the link holds the
    /// trace.
    pub fn note(&self) -> Option<String> {
        let size = |b: &usize| crate::panels::fmt_bytes(*b);
        match self {
            Keeping::InLink => None,
            Keeping::Saving => Some(
                "The link carries the view, not the trace (too large to inline); keeping the trace in this browser…".into(),
            ),
            Keeping::Kept { bytes } => Some(format!(
                "The link carries the view, not the trace ({} is too large to inline). This browser keeps the trace, so a reload here restores it; anyone else must open the file.",
                size(bytes)
            )),
            Keeping::NotKept { bytes, reason } => Some(format!(
                "The link carries the view, not the trace ({} is too large to inline), and this browser could not keep it ({reason}): a reload will not restore it.",
                size(bytes)
            )),
        }
    }
}

/// A new id for a kept trace (the time in ms, base 36, and a random tail).
pub fn new_id() -> String {
    let t = js_sys::Date::now() as u64;
    let r = (js_sys::Math::random() * 1e9) as u64;
    format!("{}{}", radix36(t), radix36(r))
}

fn radix36(mut n: u64) -> String {
    let digits = b"0123456789abcdefghijklmnopqrstuvwxyz";
    let mut out = Vec::new();
    loop {
        out.push(digits[(n % 36) as usize]);
        n /= 36;
        if n == 0 {
            break;
        }
    }
    out.reverse();
    String::from_utf8(out).unwrap_or_default()
}

#[wasm_bindgen(module = "/src/browser.js")]
extern "C" {
    #[wasm_bindgen(catch)]
    fn keep_trace(id: &str, name: &str, blob: &web_sys::Blob) -> Result<js_sys::Promise, JsValue>;
    #[wasm_bindgen(catch)]
    fn kept_trace(id: &str) -> Result<js_sys::Promise, JsValue>;
}

fn reason(e: &JsValue) -> String {
    js_sys::Reflect::get(e, &"message".into())
        .ok()
        .and_then(|m| m.as_string())
        .filter(|m| !m.is_empty())
        .or_else(|| e.as_string())
        .unwrap_or_else(|| "browser storage is not available".into())
}

/// Keep trace `blob` under `id` in this browser (replacing the one kept before). The browser
/// stores the `Blob` itself: nothing is copied on the page's thread.
pub async fn keep(id: &str, name: &str, blob: &web_sys::Blob) -> Result<(), String> {
    let p = keep_trace(id, name, blob).map_err(|e| reason(&e))?;
    JsFuture::from(p).await.map(|_| ()).map_err(|e| reason(&e))
}

/// The trace kept under `id`: `(name, bytes)`; `Ok(None)` when this browser no longer has it.
pub async fn kept(id: &str) -> Result<Option<(String, web_sys::Blob)>, String> {
    let p = kept_trace(id).map_err(|e| reason(&e))?;
    let v = JsFuture::from(p).await.map_err(|e| reason(&e))?;
    if v.is_undefined() {
        return Ok(None);
    }
    let pair = js_sys::Array::from(&v);
    let name = pair
        .get(0)
        .as_string()
        .unwrap_or_else(|| "kept trace".into());
    Ok(Some((name, pair.get(1).unchecked_into())))
}

/// After a local trace's first paint: inline it in the permalink when the whole trace fits,
/// else keep it in this browser under `id` (the link names the id), publishing where it is in
/// [`crate::AppState::keeping`]. `current` says whether this load is still the shown one.
pub async fn inline_or_keep(
    st: crate::AppState,
    id: &str,
    name: &str,
    blob: &web_sys::Blob,
    current: impl Fn() -> bool,
) {
    if let Some(text) = crate::permalink::inline_trace(blob).await {
        if current() {
            st.origin.set(Some(TraceOrigin::Inline(text)));
            st.keeping.set(Keeping::InLink);
        }
        return;
    }
    if current() {
        st.keeping.set(Keeping::Saving);
    }
    let kept = keep(id, name, blob).await;
    let bytes = blob.size() as usize;
    if current() {
        st.keeping.set(match kept {
            Ok(()) => Keeping::Kept { bytes },
            Err(reason) => Keeping::NotKept { bytes, reason },
        });
    }
}

/// On start with a link naming a kept trace (`s=id`): load it from this browser's storage
/// with the link's view, or say that this browser does not have it.
pub fn restore(st: crate::AppState, id: String, link: LinkState) {
    leptos::task::spawn_local(async move {
        let message = match kept(&id).await {
            Ok(Some((name, blob))) => {
                return crate::load::load_blob(st, name, blob, TraceOrigin::Kept(id), Some(link));
            }
            Ok(None) => missing_sentence(None),
            Err(why) => missing_sentence(Some(&why)),
        };
        st.status.set(crate::LoadStatus::Error {
            name: "the linked trace".into(),
            message,
        });
    });
}

/// The sentence a reload shows when the link's trace is not in it and this browser does not
/// have it.
pub fn missing_sentence(why: Option<&str>) -> String {
    let why = why.map(|w| format!(" ({w})")).unwrap_or_default();
    format!(
        "This link carries the view but not the trace (it was too large to inline), and this browser does not keep it{why}: open the trace file again."
    )
}

/// The note next to the Permalink button: what a link of the loaded trace carries.
#[component]
pub fn KeepNote() -> impl IntoView {
    let st = expect_context::<crate::AppState>();
    move || {
        st.keeping.get().note().map(|n| {
            let short = match st.keeping.get() {
                Keeping::Kept { .. } => "view only · kept here",
                Keeping::NotKept { .. } => "view only · not kept",
                _ => "view only",
            };
            view! { <span class="keep-note muted small" data-testid="keep-note" title=n.clone() aria-label=n>{short}</span> }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn notes_say_the_trace_is_not_in_the_link() {
        assert_eq!(Keeping::InLink.note(), None);
        let kept = Keeping::Kept { bytes: 3 << 20 }.note().expect("a note");
        assert!(kept.contains("not the trace"), "{kept}");
        assert!(kept.contains(&crate::panels::fmt_bytes(3 << 20)), "{kept}");
        assert!(kept.contains("reload here restores it"), "{kept}");
        let lost = Keeping::NotKept {
            bytes: 100,
            reason: "QuotaExceededError".into(),
        }
        .note()
        .expect("a note");
        assert!(
            lost.contains("could not keep it (QuotaExceededError)"),
            "{lost}"
        );
        assert!(lost.contains("will not restore"), "{lost}");
        assert!(missing_sentence(None).contains("does not keep it: open"));
        assert_eq!(radix36(0), "0");
        assert_eq!(radix36(36 * 36 + 35), "10z");
    }
}
