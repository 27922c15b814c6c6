//! kvscope's visual debugger: a Leptos (CSR) app over `kvscope-core`.
//!
//! Drop a trace (JSON Lines or a msgpack stream) on the page and step through it: a canvas
//! timeline with one lane per tier, parent→child edges (child-first edges as red backwards
//! arrows), step controls, violation navigation, event details, search and permalinks.
//!
//! * [`model`]: the pure view-model (flattened events, lanes, edges, violations, search).
//! * [`permalink`]: URL-hash state.
//! * [`load`]: reading bytes from files, URLs, pastes and the demo into a [`model::Model`].
//! * [`timeline`], [`panels`], [`inspect`], [`controls`]: the components.
//! * [`help`]: the `?` dialog: shortcuts, search grammar, glossary, this trace's timings.
//! * [`search`]: the search box, its matches and next/previous match.
//! * [`text`]: text that fits (plurals, hashes shortened in the middle with a copy button).
//!
//! Trace strings are always rendered as text nodes (never `inner_html`).
#![deny(missing_docs)]

#[cfg(feature = "compare")]
pub mod compare;
#[cfg(feature = "compare")]
pub mod compare_view;
pub mod controls;
pub mod help;
pub mod inspect;
pub mod keep;
pub mod lens;
pub mod load;
pub mod model;
pub mod panels;
pub mod permalink;
pub mod read;
pub mod recover;
pub mod search;
#[cfg(feature = "compare")]
pub mod sim_params;
pub mod text;
pub mod timeline;
pub mod topology;

use std::sync::Arc;

use leptos::prelude::*;

use model::{LaneMode, Model};
use permalink::TraceOrigin;

/// The built-in demo trace (JSON Lines), shown on first open.
pub const DEMO_TRACE: &str = include_str!("../fixtures/demo.jsonl");

/// `x` with `digits` decimals (`fixed(2.345, 1)` = `"2.3"`), by integer arithmetic: the app
/// formats no float through `core::fmt` (whose float code is several KB of wasm).
pub fn fixed(x: f64, digits: u32) -> String {
    if !x.is_finite() {
        return if x.is_nan() {
            "NaN".into()
        } else if x > 0.0 {
            "∞".into()
        } else {
            "-∞".into()
        };
    }
    let p = 10u64.pow(digits.min(9));
    let v = (x.abs() * p as f64).round();
    if v >= 9e15 {
        return format!("{}", x.round() as i64);
    }
    let v = v as u64;
    let sign = if x < 0.0 && v != 0 { "-" } else { "" };
    if digits == 0 {
        format!("{sign}{v}")
    } else {
        format!("{sign}{}.{:0w$}", v / p, v % p, w = digits.min(9) as usize)
    }
}

/// A float as its shortest round-trip text (a trace's `ts`, float extra keys): JavaScript's
/// `Number.prototype.toString` in the browser, Rust's `Display` elsewhere (same digits).
pub fn float_text(x: f64) -> String {
    #[cfg(target_arch = "wasm32")]
    {
        js_sys::Number::from(x)
            .to_string_with_radix(10)
            .map(String::from)
            .unwrap_or_default()
    }
    #[cfg(not(target_arch = "wasm32"))]
    {
        format!("{x}")
    }
}

/// Light or dark.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Theme {
    /// Light background.
    Light,
    /// Dark background.
    Dark,
}

impl Theme {
    /// The `data-theme` attribute value.
    pub fn as_str(self) -> &'static str {
        match self {
            Theme::Light => "light",
            Theme::Dark => "dark",
        }
    }
}

/// What the loader is doing.
#[derive(Clone, Debug, PartialEq)]
pub enum LoadStatus {
    /// Nothing loaded yet.
    Idle,
    /// Reading / parsing: name, bytes done, total bytes, events so far, events/s.
    Loading {
        /// What is being loaded.
        name: String,
        /// Bytes parsed so far.
        done: usize,
        /// Total bytes.
        total: usize,
        /// Events decoded so far.
        events: usize,
        /// Decoding rate.
        events_per_s: f64,
    },
    /// Loaded: name, events, milliseconds, events/s.
    Loaded {
        /// What was loaded.
        name: String,
        /// Number of events.
        events: usize,
        /// Time from bytes to model, ms.
        ms: f64,
        /// Per-phase milliseconds (`parse 12 · analysis 30 · ...`).
        breakdown: String,
    },
    /// Failed, with a located message.
    Error {
        /// What failed to load.
        name: String,
        /// The error (names the line or byte offset).
        message: String,
    },
}

/// Where the core's analysis (consumer models, violation index) of the loaded trace stands.
/// The timeline is drawn before it runs; consumer panels and the full violation list wait.
#[derive(Clone, Debug, PartialEq)]
pub enum AnalysisStatus {
    /// Nothing loaded.
    Idle,
    /// The timeline is shown; the analysis of `events` events is queued or running.
    Running {
        /// Events being analysed.
        events: usize,
        /// Overall completion, `0.0..=1.0`.
        fraction: f64,
        /// Events done in the current phase.
        done: usize,
        /// Analysis rate so far.
        events_per_s: f64,
        /// Still indexing (sources, tiers, jobs) before the consumer models run.
        indexing: bool,
    },
    /// Done, in `ms` milliseconds.
    Done {
        /// Analysis time, ms.
        ms: f64,
    },
}

impl AnalysisStatus {
    /// The analysis of `events` events, queued.
    pub fn queued(events: usize) -> AnalysisStatus {
        AnalysisStatus::Running {
            events,
            fraction: 0.0,
            done: 0,
            events_per_s: 0.0,
            indexing: true,
        }
    }
}

/// The viewport of the timeline.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Viewport {
    /// Event index at the left edge of the plot.
    pub start: f64,
    /// Events per CSS pixel.
    pub per_px: f64,
}

impl Default for Viewport {
    fn default() -> Self {
        Viewport {
            start: 0.0,
            per_px: 0.05,
        }
    }
}

/// The app's reactive state, shared through context. Every field is a `Copy` signal handle.
#[derive(Clone, Copy)]
pub struct AppState {
    /// The loaded trace.
    pub model: RwSignal<Option<Arc<Model>>>,
    /// Where the loaded trace came from (for permalinks).
    pub origin: RwSignal<Option<TraceOrigin>>,
    /// Cursor: the number of applied events (the core's replay convention). `0` is before the
    /// first event; the current event is `cursor - 1` (see [`AppState::current`]).
    pub cursor: RwSignal<u32>,
    /// Playing?
    pub playing: RwSignal<bool>,
    /// Playback speed, events per second.
    pub speed: RwSignal<f64>,
    /// Loader status.
    pub status: RwSignal<LoadStatus>,
    /// Theme.
    pub theme: RwSignal<Theme>,
    /// Help overlay open.
    pub help: RwSignal<bool>,
    /// Paste dialog open.
    pub paste: RwSignal<bool>,
    /// Search text.
    pub query: RwSignal<String>,
    /// The events matching [`AppState::query`], ascending (see [`search`]).
    pub matches: RwSignal<Vec<u32>>,
    /// Violation rule filter (`None`: all rules).
    pub rule: RwSignal<Option<String>>,
    /// Lane layout.
    pub lane_mode: RwSignal<LaneMode>,
    /// The worker count (vLLM's world size) the analysis assumes (`None`: the trace header's
    /// `world_size`, else 1), as `--workers N` on `kvscope check`.
    pub workers: RwSignal<Option<u32>>,
    /// Timeline viewport.
    pub viewport: RwSignal<Viewport>,
    /// Timeline plot width in CSS pixels (set by the timeline).
    pub plot_width: RwSignal<f64>,
    /// Selected consumer name: the router lens' router (`None`: all models).
    pub consumer: RwSignal<Option<String>>,
    /// The event being inspected (a timeline click): the details show it while the cursor
    /// stays where it is. `None`: the details follow the cursor.
    pub inspected: RwSignal<Option<u32>>,
    /// Whether the details show verdicts as known at the cursor or at the end of the trace.
    pub verdict_time: RwSignal<lens::VerdictTime>,
    /// A file is being dragged over the page.
    pub dragging: RwSignal<bool>,
    /// Compare dialog open.
    pub compare: RwSignal<bool>,
    /// The analysis of the loaded trace.
    pub analysis: RwSignal<AnalysisStatus>,
    /// Generation of the newest load: loads and analyses of older ones stop.
    pub load_gen: RwSignal<u64>,
    /// While `true`, the running analysis waits between slices (the page stays interactive).
    /// Lets a test hold the analysis part-way to check what the page does meanwhile.
    pub analysis_hold: RwSignal<bool>,
    /// After a load that broke part-way: the offer to open its complete leading batches.
    pub recovery: RwSignal<Option<recover::Recovery>>,
    /// Where the loaded trace is for a reload (in the link, kept in this browser, or neither).
    pub keeping: RwSignal<keep::Keeping>,
    /// The inspector's open tab (part of the permalink).
    pub tab: RwSignal<inspect::Tab>,
}

impl AppState {
    /// Fresh state (nothing loaded).
    pub fn new() -> Self {
        AppState {
            model: RwSignal::new(None),
            origin: RwSignal::new(None),
            cursor: RwSignal::new(0),
            playing: RwSignal::new(false),
            speed: RwSignal::new(4.0),
            status: RwSignal::new(LoadStatus::Idle),
            theme: RwSignal::new(initial_theme()),
            help: RwSignal::new(false),
            paste: RwSignal::new(false),
            query: RwSignal::new(String::new()),
            matches: RwSignal::new(Vec::new()),
            rule: RwSignal::new(None),
            lane_mode: RwSignal::new(LaneMode::Tier),
            workers: RwSignal::new(None),
            viewport: RwSignal::new(Viewport::default()),
            plot_width: RwSignal::new(1000.0),
            consumer: RwSignal::new(None),
            inspected: RwSignal::new(None),
            verdict_time: RwSignal::new(lens::VerdictTime::AtCursor),
            dragging: RwSignal::new(false),
            compare: RwSignal::new(false),
            analysis: RwSignal::new(AnalysisStatus::Idle),
            load_gen: RwSignal::new(0),
            analysis_hold: RwSignal::new(false),
            recovery: RwSignal::new(None),
            keeping: RwSignal::new(keep::Keeping::InLink),
            tab: RwSignal::new(inspect::Tab::Consumers),
        }
    }

    /// Number of events in the loaded trace (0 when none).
    pub fn len(&self) -> u32 {
        self.model
            .with(|m| m.as_ref().map(|m| m.len() as u32).unwrap_or(0))
    }

    /// Whether no events are loaded.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The current event (`cursor - 1`), tracked.
    pub fn current(&self) -> Option<u32> {
        self.cursor.get().checked_sub(1)
    }

    /// Make event `i` current (cursor `i + 1`, clamped) and keep it in view.
    pub fn seek(&self, i: u32) {
        let n = self.len();
        if n == 0 {
            return;
        }
        let i = i.min(n - 1);
        self.cursor.set(i + 1);
        let w = self.plot_width.get_untracked().max(50.0);
        let vp = self.viewport.get_untracked();
        let x = (f64::from(i) + 0.5 - vp.start) / vp.per_px;
        let start = (f64::from(i) - w * vp.per_px / 2.0).max(0.0);
        // Only a real move: setting the same viewport would redraw every lane on each step.
        if (x < 20.0 || x > w - 20.0) && start != vp.start {
            self.viewport.set(Viewport {
                start,
                per_px: vp.per_px,
            });
        }
    }

    /// Move the cursor by `d` events (clamped to `0..=len`).
    pub fn step(&self, d: i64) {
        let c = i64::from(self.cursor.get_untracked());
        let n = i64::from(self.len());
        let c = (c + d).clamp(0, n);
        if c == 0 {
            self.cursor.set(0);
        } else {
            self.seek((c - 1) as u32);
        }
    }

    /// The router the lens shows (tracked), if one is chosen.
    pub fn router(&self) -> Option<kvscope_core::consumers::ConsumerKind> {
        self.consumer.with(|c| {
            c.as_deref()
                .and_then(kvscope_core::consumers::ConsumerKind::parse)
        })
    }

    /// Whether the router lens navigates: a router chosen and the analysis done.
    fn lens_router(&self, m: &Model) -> Option<kvscope_core::consumers::ConsumerKind> {
        let k = self.consumer.with_untracked(|c| {
            c.as_deref()
                .and_then(kvscope_core::consumers::ConsumerKind::parse)
        })?;
        m.is_analysed().then_some(k)
    }

    /// Jump to the next violation after the current event (respecting the rule filter), or,
    /// with a router chosen, to that router's next loss root.
    pub fn next_violation(&self) -> bool {
        let rule = self.rule.get_untracked();
        let cur = self.cursor.get_untracked().checked_sub(1);
        let target = self.model.with_untracked(|m| {
            m.as_ref().and_then(|m| match self.lens_router(m) {
                Some(k) => lens::with_lens(m, k, |l| l.next_root(cur)).flatten(),
                None => m.next_violation(cur, rule.as_deref()),
            })
        });
        if let Some(t) = target {
            self.playing.set(false);
            self.seek(t);
        }
        target.is_some()
    }

    /// Jump to the previous violation (or, with a router chosen, its previous loss root).
    pub fn prev_violation(&self) -> bool {
        let rule = self.rule.get_untracked();
        let Some(cur) = self.cursor.get_untracked().checked_sub(1) else {
            return false;
        };
        let target = self.model.with_untracked(|m| {
            m.as_ref().and_then(|m| match self.lens_router(m) {
                Some(k) => lens::with_lens(m, k, |l| l.prev_root(cur)).flatten(),
                None => m.prev_violation(cur, rule.as_deref()),
            })
        });
        if let Some(t) = target {
            self.playing.set(false);
            self.seek(t);
        }
        target.is_some()
    }

    /// Fit the whole trace into the viewport.
    pub fn fit(&self) {
        self.fit_events(f64::from(self.len().max(1)));
    }

    /// Fit `n` events into the viewport (a trace being read: as many as the whole file holds).
    pub fn fit_events(&self, n: f64) {
        let w = self.plot_width.get_untracked().max(50.0);
        self.viewport.set(Viewport {
            start: 0.0,
            per_px: (n / w).max(1.0 / 48.0),
        });
    }

    /// Zoom by `factor` (> 1 zooms out) around plot x `at`.
    pub fn zoom(&self, factor: f64, at: f64) {
        self.viewport.update(|vp| {
            let anchor = vp.start + at * vp.per_px;
            vp.per_px = (vp.per_px * factor).clamp(1.0 / 64.0, 1e7);
            vp.start = (anchor - at * vp.per_px).max(-8.0 * vp.per_px);
        });
    }

    /// Pan by `px` CSS pixels.
    pub fn pan(&self, px: f64) {
        self.viewport
            .update(|vp| vp.start = (vp.start + px * vp.per_px).max(-8.0 * vp.per_px));
    }

    /// Go to the next match of the search after the cursor (wrapping); whether there is one.
    pub fn search_next(&self) -> bool {
        search::go(*self, true)
    }
}

impl Default for AppState {
    fn default() -> Self {
        Self::new()
    }
}

fn initial_theme() -> Theme {
    let w = window();
    let saved = w
        .local_storage()
        .ok()
        .flatten()
        .and_then(|s| s.get_item("kvscope-theme").ok().flatten());
    match saved.as_deref() {
        Some("dark") => Theme::Dark,
        Some("light") => Theme::Light,
        _ => match w.match_media("(prefers-color-scheme: dark)") {
            Ok(Some(q)) if q.matches() => Theme::Dark,
            _ => Theme::Light,
        },
    }
}

#[cfg(feature = "compare")]
fn compare_dialog(st: AppState) -> impl IntoView {
    view! { <compare::CompareDialog open=st.compare/> }
}

#[cfg(not(feature = "compare"))]
fn compare_dialog(_st: AppState) -> impl IntoView {}

/// Mount the app on `<body>` (the binary's entry point).
pub fn start() {
    console_error_panic_hook::set_once();
    if let Some(el) = document().get_element_by_id("boot") {
        el.remove();
    }
    leptos::mount::mount_to_body(App);
}

/// The whole debugger. Loads from the URL (hash permalink, `?url=`) or the demo on mount.
#[component]
pub fn App() -> impl IntoView {
    let st = AppState::new();
    provide_context(st);
    load::boot(st);
    controls::install_global_handlers(st);

    Effect::new(move |_| {
        let t = st.theme.get();
        if let Some(root) = document().document_element() {
            let _ = root.set_attribute("data-theme", t.as_str());
        }
        if let Ok(Some(s)) = window().local_storage() {
            let _ = s.set_item("kvscope-theme", t.as_str());
        }
    });
    permalink::sync_permalink(st);

    view! {
        <div class="app" data-testid="app">
            <controls::Header/>
            <panels::StatusBanner/>
            <controls::StepBar/>
            <main class="main">
                <timeline::Timeline/>
                <div class="panes">
                    <panels::Details/>
                    <inspect::Inspector/>
                    <panels::Violations/>
                </div>
            </main>
            <help::HelpOverlay/>
            <panels::PasteDialog/>
            {compare_dialog(st)}
            <Show when=move || st.dragging.get()>
                <div class="drop-overlay" data-testid="drop-overlay">"Drop a trace to open it"</div>
            </Show>
        </div>
    }
}
