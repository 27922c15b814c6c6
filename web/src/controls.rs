//! The header (open, paste, demo, permalink, theme, help), the step bar (play/pause, step,
//! scrubber, violations, search, lanes) and the page-wide handlers: keyboard shortcuts,
//! drag-and-drop anywhere, paste, and the playback timer.

use std::time::Duration;

use leptos::ev;
use leptos::prelude::*;
use wasm_bindgen::JsCast;

use crate::load;
use crate::model::LaneMode;
use crate::text::count;
use crate::{AppState, LoadStatus, Theme};

/// Every keyboard shortcut, as shown by the `?` overlay.
pub const SHORTCUTS: &[(&str, &str)] = &[
    ("→ / ←", "Step forward / back"),
    ("Shift + → / ←", "Step 10 events"),
    ("Home / End", "Start (nothing applied) / last event"),
    ("n / p", "Next / previous violation"),
    ("Space", "Play / pause"),
    ("/", "Search (Enter / Shift+Enter: next / previous match)"),
    ("w / s", "Zoom in / out"),
    ("a / d", "Pan left / right"),
    ("f", "Fit the whole trace"),
    ("o", "Open a trace file"),
    ("t", "Toggle light / dark theme"),
    ("?", "This help: keys, search grammar, glossary"),
    ("Esc", "Close dialogs, leave the search box"),
];

/// Whether the key belongs to the focused element rather than to the page: text fields
/// (text-like inputs, text areas, editable content) keep every key. A select keeps only what
/// opens or changes it (arrows up/down, Enter; an open select's popup gets its keys before the
/// page does); sliders, buttons, checkboxes and closed selects hand the shortcuts to the page.
pub fn keeps_key(tag: &str, input_type: &str, editable: bool, key: &str) -> bool {
    if editable {
        return true;
    }
    match tag {
        "TEXTAREA" => true,
        "INPUT" => !matches!(
            input_type,
            "range"
                | "checkbox"
                | "radio"
                | "button"
                | "submit"
                | "reset"
                | "file"
                | "color"
                | "image"
        ),
        "SELECT" => matches!(key, "ArrowUp" | "ArrowDown" | "Enter"),
        _ => false,
    }
}

fn is_typing(e: &web_sys::KeyboardEvent) -> bool {
    let Some(el) = e
        .target()
        .and_then(|t| t.dyn_into::<web_sys::HtmlElement>().ok())
    else {
        return false;
    };
    let input_type = el
        .dyn_ref::<web_sys::HtmlInputElement>()
        .map(|i| i.type_())
        .unwrap_or_default();
    keeps_key(
        &el.tag_name(),
        &input_type,
        el.is_content_editable(),
        &e.key(),
    )
}

/// Whether a dialog (help, paste, compare) is open: keys pressed in it never act on the page.
fn dialog_open(st: AppState) -> bool {
    st.help.get_untracked() || st.paste.get_untracked() || st.compare.get_untracked()
}

fn focus_search() {
    if let Some(el) = document()
        .query_selector("[data-testid=search]")
        .ok()
        .flatten()
    {
        if let Ok(el) = el.dyn_into::<web_sys::HtmlElement>() {
            let _ = el.focus();
        }
    }
}

fn open_picker() {
    if let Some(el) = document()
        .query_selector("[data-testid=file-input]")
        .ok()
        .flatten()
    {
        if let Ok(el) = el.dyn_into::<web_sys::HtmlElement>() {
            el.click();
        }
    }
}

/// Keyboard, drag-and-drop, paste and playback handlers for the whole page.
pub fn install_global_handlers(st: AppState) {
    let keys = window_event_listener(ev::keydown, move |e| {
        if e.key() == "Escape" {
            st.help.set(false);
            st.paste.set(false);
            st.compare.set(false);
            if let Some(el) = document()
                .active_element()
                .and_then(|a| a.dyn_into::<web_sys::HtmlElement>().ok())
            {
                let _ = el.blur();
            }
            return;
        }
        if dialog_open(st) {
            // Only `?` (toggles the help it opened) reaches the app; the dialog handles the rest.
            if e.key() == "?" && st.help.get_untracked() && !is_typing(&e) {
                st.help.set(false);
                e.prevent_default();
            }
            return;
        }
        if is_typing(&e) || e.ctrl_key() || e.meta_key() || e.alt_key() {
            return;
        }
        let w = st.plot_width.get_untracked();
        let handled = match e.key().as_str() {
            "ArrowRight" => {
                st.playing.set(false);
                st.step(if e.shift_key() { 10 } else { 1 });
                true
            }
            "ArrowLeft" => {
                st.playing.set(false);
                st.step(if e.shift_key() { -10 } else { -1 });
                true
            }
            "Home" => {
                st.cursor.set(0);
                true
            }
            "End" => {
                st.step(i64::from(st.len()));
                true
            }
            "n" => {
                st.next_violation();
                true
            }
            "p" => {
                st.prev_violation();
                true
            }
            " " => {
                st.playing.update(|p| *p = !*p);
                true
            }
            "/" => {
                focus_search();
                true
            }
            "?" => {
                st.help.update(|h| *h = !*h);
                true
            }
            "w" | "W" => {
                st.zoom(if e.shift_key() { 0.5 } else { 0.8 }, w / 2.0);
                true
            }
            "s" | "S" => {
                st.zoom(if e.shift_key() { 2.0 } else { 1.25 }, w / 2.0);
                true
            }
            "a" | "A" => {
                st.pan(-w * if e.shift_key() { 0.5 } else { 0.15 });
                true
            }
            "d" | "D" => {
                st.pan(w * if e.shift_key() { 0.5 } else { 0.15 });
                true
            }
            "f" => {
                st.fit();
                true
            }
            "o" => {
                open_picker();
                true
            }
            "t" => {
                st.theme.update(|t| {
                    *t = if *t == Theme::Dark {
                        Theme::Light
                    } else {
                        Theme::Dark
                    }
                });
                true
            }
            _ => false,
        };
        if handled {
            e.prevent_default();
        }
    });
    let over = window_event_listener(ev::dragover, move |e| {
        e.prevent_default();
        st.dragging.set(true);
    });
    let leave = window_event_listener(ev::dragleave, move |e| {
        if e.related_target().is_none() {
            st.dragging.set(false);
        }
    });
    let drop = window_event_listener(ev::drop, move |e| {
        e.prevent_default();
        st.dragging.set(false);
        let Some(dt) = e.data_transfer() else { return };
        if let Some(file) = dt.files().and_then(|f| f.get(0)) {
            load::load_file(st, file);
        } else if let Ok(text) = dt.get_data("text/plain") {
            if !text.trim().is_empty() {
                load::load_bytes(
                    st,
                    "dropped text".into(),
                    text.into_bytes(),
                    crate::permalink::TraceOrigin::Local,
                    None,
                );
            }
        }
    });
    let paste = window_event_listener(ev::paste, move |e| {
        let target_is_input = e
            .target()
            .and_then(|t| t.dyn_into::<web_sys::Element>().ok())
            .is_some_and(|el| matches!(el.tag_name().as_str(), "INPUT" | "TEXTAREA"));
        if target_is_input {
            return;
        }
        if let Some(text) = e
            .clipboard_data()
            .and_then(|d| d.get_data("text/plain").ok())
        {
            if !text.trim().is_empty() {
                e.prevent_default();
                load::load_bytes(
                    st,
                    "pasted trace".into(),
                    text.into_bytes(),
                    crate::permalink::TraceOrigin::Local,
                    None,
                );
            }
        }
    });
    // Playback: one step per tick at the chosen speed; stops at the end.
    let timer: StoredValue<Option<IntervalHandle>, LocalStorage> = StoredValue::new_local(None);
    Effect::new(move |_| {
        let playing = st.playing.get();
        let speed = st.speed.get().clamp(0.25, 240.0);
        if let Some(h) = timer.get_value() {
            h.clear();
        }
        timer.set_value(None);
        if playing {
            let h = set_interval_with_handle(
                move || {
                    let n = st.len();
                    if n == 0 || st.cursor.get_untracked() >= n {
                        st.playing.set(false);
                    } else {
                        st.step(1);
                    }
                },
                Duration::from_secs_f64(1.0 / speed),
            );
            timer.set_value(h.ok());
        }
    });
    on_cleanup(move || {
        keys.remove();
        over.remove();
        leave.remove();
        drop.remove();
        paste.remove();
        if let Some(h) = timer.get_value() {
            h.clear();
        }
    });
}

/// Top bar: brand, trace name, open / paste / demo / permalink / theme / help.
#[component]
pub fn Header() -> impl IntoView {
    let st = expect_context::<AppState>();
    let on_file = move |e: ev::Event| {
        let Some(input) = e
            .target()
            .and_then(|t| t.dyn_into::<web_sys::HtmlInputElement>().ok())
        else {
            return;
        };
        if let Some(file) = input.files().and_then(|f| f.get(0)) {
            load::load_file(st, file);
        }
        input.set_value("");
    };
    let copied = RwSignal::new(false);
    let copy_link = move |_| {
        crate::permalink::write_permalink(st);
        if let Ok(href) = window().location().href() {
            let _ = window().navigator().clipboard().write_text(&href);
            copied.set(true);
            load::after(1500, move || copied.set(false));
        }
    };
    let title = move || {
        st.model.with(|m| match m {
            Some(m) => {
                let scen = m
                    .header
                    .as_ref()
                    .and_then(|h| h.scenario.clone())
                    .map(|s| format!(" — {s}"))
                    .unwrap_or_default();
                format!("{}{scen}", m.name)
            }
            None => "no trace loaded".into(),
        })
    };
    // The same counts as the lists below: the violations the rule filter keeps (as the
    // violation list), and with a router chosen its loss roots and the events lost with them
    // (as the loss list and the lens legend).
    let stats = move || {
        let rule = st.rule.get();
        let router = st.router();
        st.model.with(|m| {
            let Some(m) = m else { return String::new() };
            let mut parts = vec![
                count(m.len(), "event", "events"),
                count(m.batch_count, "batch", "batches"),
                count(m.lanes.len(), "lane", "lanes"),
            ];
            if !m.is_analysed() {
                // While a file is read: the events so far (the analysis starts after).
                let reading = st.status.with(|s| matches!(s, LoadStatus::Loading { .. }));
                parts.push(
                    if reading {
                        "reading…"
                    } else {
                        "analysing…"
                    }
                    .into(),
                );
                return parts.join(" · ");
            }
            parts.push(count(
                m.violation_count(rule.as_deref()),
                "violation",
                "violations",
            ));
            let lost = router.and_then(|k| {
                crate::lens::with_lens(m, k, |l| {
                    let roots = l.roots();
                    let events: usize = roots.iter().map(|r| r.events).sum();
                    format!(
                        "{}: {}, {} lost",
                        k.as_str(),
                        count(roots.len(), "loss root", "loss roots"),
                        count(events, "event", "events")
                    )
                })
            });
            parts.extend(lost);
            parts.join(" · ")
        })
    };
    view! {
        <header class="top">
            <span class="brand">"kvscope"</span>
            <span class="trace-name" data-testid="trace-name" title=title>{title}</span>
            <span class="stats" data-testid="stats">{stats}</span>
            <span class="spacer"></span>
            <label class="btn primary" title="Open trace (o)">
                "Open trace"
                <input type="file" data-testid="file-input" aria-label="Open trace" accept=".jsonl,.json,.msgpack,.bin,.mp,application/json" on:change=on_file class="visually-hidden"/>
            </label>
            <button class="btn" aria-label="Paste trace" on:click=move |_| st.paste.set(true)>"Paste"</button>
            <button class="btn" aria-label="Load demo" on:click=move |_| load::load_demo(st, None)>"Demo"</button>
            {cfg!(feature = "compare").then(|| view! { <button class="btn" aria-label="Compare" title="Generate a scenario in two orders and compare" on:click=move |_| st.compare.set(true)>"Compare"</button> })}
            <button class="btn" aria-label="Copy permalink" on:click=copy_link>{move || if copied.get() { "Copied" } else { "Permalink" }}</button>
            <crate::keep::KeepNote/>
            <button class="btn icon" aria-label="Toggle theme" title="Toggle theme (t)"
                on:click=move |_| st.theme.update(|t| *t = if *t == Theme::Dark { Theme::Light } else { Theme::Dark })>
                {move || if st.theme.get() == Theme::Dark { "☀" } else { "☾" }}
            </button>
            <button class="btn icon" aria-label="Help" title="Help: keys, search, glossary (?)" on:click=move |_| st.help.update(|h| *h = !*h)>"?"</button>
        </header>
    }
}

/// Play/pause, step, scrubber, violation navigation, search and lane layout.
#[component]
pub fn StepBar() -> impl IntoView {
    let st = expect_context::<AppState>();
    let n = move || st.len();
    let rules = move || {
        st.model
            .with(|m| m.as_ref().map(|m| m.rules()).unwrap_or_default())
    };
    let disabled = move || n() == 0 || matches!(st.status.get(), LoadStatus::Loading { .. });
    let counter = move || {
        let n = n();
        if n == 0 {
            "– / –".to_string()
        } else {
            format!("{} / {}", st.cursor.get(), n)
        }
    };
    view! {
        <nav class="stepbar" aria-label="Step controls">
            <button class="btn icon" aria-label="Step back" title="Step back (←)" data-testid="step-back" prop:disabled=disabled
                on:click=move |_| { st.playing.set(false); st.step(-1) }>"|◀"</button>
            <button class="btn icon play" data-testid="play"
                aria-label=move || if st.playing.get() { "Pause" } else { "Play" }
                title=move || if st.playing.get() { "Pause (space)" } else { "Play (space)" }
                prop:disabled=disabled
                on:click=move |_| st.playing.update(|p| *p = !*p)>
                {move || if st.playing.get() { "❚❚" } else { "▶" }}
            </button>
            <button class="btn icon" aria-label="Step forward" title="Step forward (→)" data-testid="step-forward" prop:disabled=disabled
                on:click=move |_| { st.playing.set(false); st.step(1) }>"▶|"</button>
            <select class="speed" aria-label="Speed" title="Playback speed (events per second)"
                on:change:target=move |e| { if let Some(v) = crate::permalink::parse_f64(&e.target().value()) { st.speed.set(v) } }>
                <option value="1">"1/s"</option>
                <option value="4" selected>"4/s"</option>
                <option value="15">"15/s"</option>
                <option value="60">"60/s"</option>
                <option value="240">"240/s"</option>
            </select>
            <input type="range" class="scrubber" aria-label="Cursor position" data-testid="scrubber" min="0"
                prop:max=move || n().to_string()
                prop:value=move || st.cursor.get().to_string()
                prop:disabled=disabled
                on:input:target=move |e| { if let Ok(v) = e.target().value().parse::<u32>() { st.playing.set(false); st.step(i64::from(v) - i64::from(st.cursor.get_untracked())) } }/>
            <span class="counter" data-testid="counter">{counter}</span>
            <span class="sep"></span>
            <button class="btn" aria-label="Previous violation" title="Previous violation (p)" data-testid="prev-violation" prop:disabled=disabled
                on:click=move |_| { st.prev_violation(); }>"◀ Violation"</button>
            <button class="btn warn" aria-label="Next violation" title="Next violation (n)" data-testid="next-violation" prop:disabled=disabled
                on:click=move |_| { st.next_violation(); }>"Violation ▶"</button>
            <select aria-label="Rule filter" title="Only this rule for next/previous violation" data-testid="rule-filter"
                on:change:target=move |e| { let v = e.target().value(); st.rule.set(if v.is_empty() { None } else { Some(v) }) }>
                <option value="" selected=move || st.rule.get().is_none()>"ordering + lint rules"</option>
                <For each=rules key=|r| r.clone() let:r>
                    {
                        let r2 = r.clone();
                        view! { <option value=r.clone() selected=move || st.rule.get().as_deref() == Some(r2.as_str())>{r.clone()}</option> }
                    }
                </For>
            </select>
            <WorkersPicker/>
            <span class="sep"></span>
            <crate::search::SearchBox/>
        </nav>
    }
}

/// The router lens' picker: one router model (the timeline marks its verdicts, `n`/`p` go to
/// its loss roots) or all models (ordering violations, as without a lens). Shares its state
/// with the inspector's consumer picker.
#[component]
pub fn RouterPicker() -> impl IntoView {
    let st = expect_context::<AppState>();
    router_select(
        st,
        "Router",
        "router",
        "all routers",
        Signal::derive(|| false),
        Signal::derive(|| "Router lens: mark what this router did with each event"),
    )
}

/// A select of [`AppState::consumer`] (one router model or all of them), shared by the
/// timeline's router lens and the inspector's consumer picker.
pub fn router_select(
    st: AppState,
    label: &'static str,
    testid: &'static str,
    all: &'static str,
    disabled: Signal<bool>,
    title: Signal<&'static str>,
) -> impl IntoView {
    view! {
        <select aria-label=label title=title data-testid=testid prop:disabled=disabled
            on:change:target=move |e| { let v = e.target().value(); st.consumer.set(if v.is_empty() { None } else { Some(v) }) }>
            <option value="" selected=move || st.consumer.get().is_none()>{all}</option>
            {kvscope_core::consumers::ConsumerKind::ALL.iter().map(|k| {
                let name = k.as_str();
                view! { <option value=name selected=move || st.consumer.get().as_deref() == Some(name)>{name}</option> }
            }).collect_view()}
        </select>
    }
}

/// The worker-count setting: what `--workers N` is to `kvscope check` (the analysis runs again
/// when it changes).
#[component]
pub fn WorkersPicker() -> impl IntoView {
    let st = expect_context::<AppState>();
    let from_trace = move || {
        let w = st.model.with(|m| m.as_ref().map(|m| m.trace_workers()));
        format!("workers: trace ({})", w.unwrap_or(1))
    };
    view! {
        <select aria-label="Workers" data-testid="workers"
            title="Worker count (vLLM world size) the job inference assumes, as kvscope check --workers N; default: the trace header's world_size, else 1"
            on:change:target=move |e| {
                st.workers.set(e.target().value().parse::<u32>().ok().filter(|w| *w > 0));
                load::reanalyse(st);
            }>
            <option value="" selected=move || st.workers.get().is_none()>{from_trace}</option>
            {[1u32, 2, 4, 8].map(|w| view! {
                <option value=w.to_string() selected=move || st.workers.get() == Some(w)>{format!("workers: {w}")}</option>
            })}
        </select>
    }
}

/// The lane layout picker (tier, source × tier, or tier × job).
#[component]
pub fn LanePicker() -> impl IntoView {
    let st = expect_context::<AppState>();
    view! {
        <select aria-label="Lanes" title="Lane layout" on:change:target=move |e| {
                st.lane_mode.set(LaneMode::parse(&e.target().value()));
                load::relayout(st);
            }>
            {LaneMode::ALL.map(|m| view! {
                <option value=m.as_str() selected=move || st.lane_mode.get() == m>{m.label()}</option>
            })}
        </select>
    }
}

#[cfg(test)]
mod tests {
    use super::keeps_key;

    #[test]
    fn text_fields_keep_their_keys_other_controls_hand_shortcuts_to_the_page() {
        for t in ["text", "search", "number", "url", ""] {
            assert!(keeps_key("INPUT", t, false, "n"), "input type {t:?}");
        }
        assert!(keeps_key("TEXTAREA", "", false, "ArrowRight"));
        assert!(keeps_key("DIV", "", true, "n"), "editable content");
        for t in ["range", "checkbox", "button", "file"] {
            assert!(!keeps_key("INPUT", t, false, "n"), "input type {t}");
            assert!(
                !keeps_key("INPUT", t, false, "ArrowRight"),
                "input type {t}"
            );
        }
        // A (closed) select keeps only what opens or changes it.
        assert!(!keeps_key("SELECT", "", false, "n"));
        assert!(!keeps_key("SELECT", "", false, "ArrowRight"));
        assert!(keeps_key("SELECT", "", false, "ArrowDown"));
        assert!(keeps_key("SELECT", "", false, "Enter"));
        assert!(!keeps_key("BUTTON", "", false, " "));
    }
}
