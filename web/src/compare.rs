//! Compare: the loaded trace (A) with another trace the user loads ("Compare with trace", any
//! format the page opens), or one of the core's built-in scenarios generated twice (e.g.
//! CPython set order vs the fixed order) with the seeds and sizes a user picks. Either way the
//! page shows the core's comparison (`kvscope_core::analysis::compare_traces`, as `kvscope
//! diff`): the counts side by side, a plain explanation of each count that differs, and the
//! events aligned by block whose order or verdicts differ ([`crate::compare_view`]).
//!
//! The comparison is not in the app's wasm: it runs in a second module (`web/sim`:
//! `kvscope_sim.js` and `kvscope_sim_bg.wasm` next to the app in `dist/`) loaded in a worker
//! the first time the dialog opens, which keeps the first download small and the page
//! responsive while two large traces are compared. It reads (or simulates) and analyses both
//! sides and returns a [`Comparison`]. For that the page keeps the loaded
//! trace's bytes outside wasm memory ([`remember`]). Behind the `compare` cargo feature (on by
//! default).

use leptos::prelude::*;
use wasm_bindgen::prelude::*;
use wasm_bindgen::JsCast;
use wasm_bindgen_futures::JsFuture;

use crate::load::{self, js_text};
use crate::permalink::TraceOrigin;
use crate::sim_params::{Builtin, Comparison, Params, Row};
use crate::AppState;

/// Where the simulator module is, relative to the page (`dist/`).
pub const SIM_JS: &str = "./kvscope_sim.js";
/// Its wasm, relative to the page.
pub const SIM_WASM: &str = "./kvscope_sim_bg.wasm";

// The loaded trace's name and bytes (`current`) and the trace last compared with (`other`)
// stay in JS arrays, outside wasm memory; the JS in `browser.js` reads the picked file and hands both to
// the simulator module (glue here rather than Rust: the app's size budget).
#[wasm_bindgen(module = "/src/browser.js")]
extern "C" {
    /// Start the simulator's worker (once; a failed start is forgotten), which imports its JS
    /// glue and instantiates its wasm; resolves to `call(name, ...args)`, a promise of the
    /// module's `name(...args)`.
    #[wasm_bindgen(catch)]
    fn import_sim(js: &str, wasm: &str) -> Result<js_sys::Promise, JsValue>;
    /// Keep the trace just loaded (its `Blob`, outside wasm memory; no copy): what "Compare
    /// with trace" compares with.
    pub fn remember(name: &str, blob: &web_sys::Blob);
    /// `[name, blob]` of the loaded trace (`left`) or of the one compared with.
    fn kept(left: bool) -> JsValue;
    /// Compare the loaded trace with the file picked in `input` in the simulator (`sim`, the
    /// `call` [`import_sim`] resolves to: `compare_loaded`); resolves to the comparison as JSON.
    #[wasm_bindgen(catch)]
    fn compare_file(
        sim: &JsValue,
        input: &JsValue,
        workers: Option<u32>,
    ) -> Result<js_sys::Promise, JsValue>;
}

/// Start the simulator (once: `browser.js` keeps its start, so dialogs opened while it loads
/// share one worker, and later dialogs reuse it) and return its `call`.
pub async fn simulator() -> Result<JsValue, String> {
    let promise = import_sim(SIM_JS, SIM_WASM).map_err(|e| js_text(&e))?;
    JsFuture::from(promise)
        .await
        .map_err(|e| format!("could not load the simulator ({SIM_JS}): {}", js_text(&e)))
}

/// Call `name(arg)` on the simulator module in its worker (started the first time); a thrown
/// error becomes its message.
async fn call(name: &str, arg: Option<&str>) -> Result<JsValue, String> {
    let sim = simulator().await?;
    let f: &js_sys::Function = sim.unchecked_ref();
    let promise = match arg {
        Some(arg) => f.call2(&JsValue::NULL, &name.into(), &arg.into()),
        None => f.call1(&JsValue::NULL, &name.into()),
    };
    let promise: js_sys::Promise = promise.map_err(|e| js_text(&e))?.unchecked_into();
    JsFuture::from(promise).await.map_err(|e| js_text(&e))
}

/// The simulator's built-in scenarios.
pub async fn builtins() -> Result<Vec<Builtin>, String> {
    let list = call("builtins", None).await?;
    elements(&list, "builtins")?
        .iter()
        .map(|b| {
            Ok(Builtin {
                name: text(&b, "name")?,
                description: text(&b, "description")?,
            })
        })
        .collect()
}

/// Simulate, analyse and compare both sides of `p` (in the simulator module).
pub async fn run(p: &Params) -> Result<Comparison, String> {
    let json = serde_json::to_string(p).map_err(|e| e.to_string())?;
    comparison(call("compare", Some(&json)).await?)
}

/// The simulator's comparison answer as a [`Comparison`].
fn comparison(c: JsValue) -> Result<Comparison, String> {
    let rows = elements(&field(&c, "rows"), "rows")?
        .iter()
        .map(|r| {
            Ok(Row {
                label: text(&r, "label")?,
                rule: flag(&r, "rule"),
                a: text(&r, "a")?,
                b: text(&r, "b")?,
                a_worse: flag(&r, "a_worse"),
                b_worse: flag(&r, "b_worse"),
            })
        })
        .collect::<Result<_, String>>()?;
    Ok(Comparison {
        left: text(&c, "left")?,
        right: text(&c, "right")?,
        rows,
        why: texts(&c, "why")?,
        events: texts(&c, "events")?,
        note: text(&c, "note")?,
    })
}

// The simulator answers in JSON (`sim_params`); its worker parses it with the browser's
// `JSON.parse` and the app reads the fields, not serde_json: serde_json's text deserializer
// (with its own float parser) was 19,224 B gzip of the app's wasm for these two small answers
// (2026-12-05).

/// Field `key` of a JS object (`undefined` when missing).
fn field(v: &JsValue, key: &str) -> JsValue {
    js_sys::Reflect::get(v, &key.into()).unwrap_or_default()
}

/// String field `key` of a JS object.
fn text(v: &JsValue, key: &str) -> Result<String, String> {
    field(v, key)
        .as_string()
        .ok_or_else(|| format!("the simulator's answer has no text `{key}`"))
}

/// List-of-strings field `key` of a JS object.
fn texts(v: &JsValue, key: &str) -> Result<Vec<String>, String> {
    elements(&field(v, key), key)?
        .iter()
        .map(|t| {
            t.as_string()
                .ok_or_else(|| format!("the simulator's `{key}` holds a non-text"))
        })
        .collect()
}

/// Boolean field `key` of a JS object (missing: `false`).
fn flag(v: &JsValue, key: &str) -> bool {
    field(v, key).as_bool().unwrap_or(false)
}

/// `v` as a JS array (`what` names it in the error).
fn elements(v: &JsValue, what: &str) -> Result<js_sys::Array, String> {
    v.dyn_ref::<js_sys::Array>()
        .cloned()
        .ok_or_else(|| format!("the simulator's `{what}` is not a list"))
}

/// Compare the loaded trace with the file picked in `input` (in the simulator module).
async fn compare_with_file(input: JsValue, workers: Option<u32>) -> Outcome {
    let sim = simulator().await?;
    let promise = compare_file(&sim, &input, workers).map_err(|e| js_text(&e))?;
    comparison(JsFuture::from(promise).await.map_err(|e| js_text(&e))?)
}

fn num<T: std::str::FromStr>(s: &str) -> Option<T> {
    let s = s.trim();
    if s.is_empty() {
        None
    } else {
        s.parse().ok()
    }
}

/// The comparison, or an error sentence.
type Outcome = Result<Comparison, String>;

/// The simulator module as the dialog sees it.
#[derive(Clone, Debug, PartialEq)]
enum SimState {
    /// Not requested yet.
    Idle,
    /// Being fetched and instantiated.
    Loading,
    /// Ready: its built-in scenarios.
    Ready(Vec<Builtin>),
    /// Could not be loaded.
    Failed(String),
}

/// The Compare dialog.
#[component]
pub fn CompareDialog(
    /// Whether the dialog is shown.
    open: RwSignal<bool>,
) -> impl IntoView {
    let st = expect_context::<AppState>();
    let params = RwSignal::new(Params::default());
    let result: RwSignal<Option<Outcome>> = RwSignal::new(None);
    let busy = RwSignal::new(false);
    let sim = RwSignal::new(SimState::Idle);
    // Import the simulator the first time the dialog opens.
    Effect::new(move |_| {
        if !open.get() || sim.get_untracked() != SimState::Idle {
            return;
        }
        sim.set(SimState::Loading);
        leptos::task::spawn_local(async move {
            let state = match builtins().await {
                Ok(list) => SimState::Ready(list),
                Err(e) => SimState::Failed(e),
            };
            sim.set(state);
        });
    });
    let ready = move || matches!(sim.get(), SimState::Ready(_));
    // The comparison, rendered as plain DOM (`crate::compare_view`) whenever it changes.
    let out = NodeRef::<leptos::html::Div>::new();
    Effect::new(move |_| {
        let r = result.get();
        let Some(div) = out.get() else { return };
        div.set_text_content(None);
        if let Some(Ok(el)) = r.map(|r| crate::compare_view::render(&r)) {
            let _ = div.append_child(&el);
        }
    });
    let generate = move |_| {
        busy.set(true);
        let p = params.get_untracked();
        leptos::task::spawn_local(async move {
            let outcome = run(&p).await;
            result.set(Some(outcome));
            busy.set(false);
        });
    };
    let compare_with = move |e: leptos::ev::Event| {
        busy.set(true);
        let input = e.target().map(JsValue::from).unwrap_or_default();
        let workers = st.workers.get_untracked();
        leptos::task::spawn_local(async move {
            result.set(Some(compare_with_file(input, workers).await));
            busy.set(false);
        });
    };
    let open_side = move |left: bool| {
        let p = params.get_untracked();
        let Some(Ok(c)) = result.get_untracked() else {
            return;
        };
        // Two loaded traces come back without their texts: the page keeps both.
        let (name, bytes) = if c.left.is_empty() {
            let pair = js_sys::Array::from(&kept(left));
            open.set(false);
            let name = pair.get(0).as_string().unwrap_or_default();
            return load::load_blob(
                st,
                name,
                pair.get(1).unchecked_into(),
                TraceOrigin::Local,
                None,
            );
        } else if left {
            (format!("{} ({})", p.scenario, p.left), c.left.into_bytes())
        } else {
            (
                format!("{} ({})", p.scenario, p.right),
                c.right.into_bytes(),
            )
        };
        open.set(false);
        load::load_bytes(st, name, bytes, TraceOrigin::Local, None);
    };
    /// The orders, named for what they are (`docs/scenario-format.md`, `order`).
    const ORDERS: [(&str, &str); 3] = [
        ("cpython", "vLLM 0.28-0.33, set order"),
        ("legacy", "seeded stand-in for set order"),
        ("fixed", "prefix order, the fix (vLLM 0.34+)"),
    ];
    let order_select = move |label: &'static str,
                             get: fn(&Params) -> String,
                             set: fn(&mut Params, String)| {
        view! {
            <label>{label}
                <select aria-label=label on:change:target=move |e| { let v = e.target().value(); params.update(|p| set(p, v)) }>
                    {ORDERS.into_iter().map(|(o, what)| view! { <option value=o selected=move || get(&params.get()) == o>{format!("{o}: {what}")}</option> }).collect_view()}
                </select>
            </label>
        }
    };
    view! {
        <Show when=move || open.get()>
            <div class="overlay" role="dialog" aria-label="Compare">
                <div class="dialog wide compare" data-testid="compare">
                    <h2>"Compare"</h2>
                    <div class="row">
                        <label class="btn primary" title="Load a trace (B) to compare with the one shown (A), aligned by block">
                            "Compare with trace…"
                            <input type="file" class="visually-hidden" aria-label="Compare with trace" data-testid="compare-file"
                                accept=".jsonl,.json,.msgpack,.bin,.mp,application/json" on:change=compare_with/>
                        </label>
                    </div>
                    <div node_ref=out></div>
                    <div class="row" prop:hidden=move || !matches!(result.get(), Some(Ok(_)))>
                        <button class="btn" on:click=move |_| open_side(true)>"Open left in the debugger"</button>
                        <button class="btn" on:click=move |_| open_side(false)>"Open right in the debugger"</button>
                    </div>
                    <h3>"or generate a scenario in two orders"</h3>
                    <div class="row">
                        <label>"Scenario"
                            <select aria-label="Scenario" on:change:target=move |e| { let v = e.target().value(); params.update(|p| p.scenario = v) }>
                                {move || match sim.get() {
                                    SimState::Ready(list) => list.into_iter().map(|b| {
                                        let (name, value, label) = (b.name.clone(), b.name.clone(), b.name);
                                        view! { <option value=value title=b.description selected=move || params.get().scenario == name>{label}</option> }
                                    }).collect_view().into_any(),
                                    _ => view! { <option value=params.get_untracked().scenario>{params.get_untracked().scenario}</option> }.into_any(),
                                }}
                            </select>
                        </label>
                        {order_select("Left order", |p| p.left.clone(), |p, v| p.left = v)}
                        {order_select("Right order", |p| p.right.clone(), |p, v| p.right = v)}
                    </div>
                    <div class="row">
                        <label>"Seed"<input type="number" min="0" aria-label="Seed" prop:value=move || params.get().seed.to_string()
                            on:change:target=move |e| { let v = num(&e.target().value()).unwrap_or(0); params.update(|p| p.seed = v) }/></label>
                        <label>"PYTHONHASHSEED"<input type="number" min="0" aria-label="PYTHONHASHSEED" prop:value=move || params.get().python_hash_seed.to_string()
                            on:change:target=move |e| { let v = num(&e.target().value()).unwrap_or(0); params.update(|p| p.python_hash_seed = v) }/></label>
                        <label>"Workers"<input type="number" min="1" placeholder="scenario" aria-label="Workers"
                            on:change:target=move |e| { let v = num(&e.target().value()); params.update(|p| p.workers = v) }/></label>
                        <label>"CPU capacity"<input type="number" min="1" placeholder="scenario" aria-label="CPU capacity"
                            on:change:target=move |e| { let v = num(&e.target().value()); params.update(|p| p.capacity = v) }/></label>
                        <label>"STORAGE tiers"<input type="number" min="0" max="8" placeholder="scenario" aria-label="STORAGE tiers"
                            on:change:target=move |e| { let v = num(&e.target().value()); params.update(|p| p.tiers = v) }/></label>
                    </div>
                    <div class="row">
                        <button class="btn primary" aria-label="Generate and compare" prop:disabled=move || busy.get() || !ready() on:click=generate>
                            {move || if busy.get() { "Generating…" } else { "Generate and compare" }}
                        </button>
                        <button class="btn" on:click=move |_| open.set(false)>"Close"</button>
                        {move || match sim.get() {
                            SimState::Loading | SimState::Idle => Some(view! {
                                <span class="muted analysing" data-testid="sim-loading" role="status"><span class="spinner" aria-hidden="true"></span>"Loading the simulator…"</span>
                            }.into_any()),
                            SimState::Failed(e) => Some(view! { <span class="status error" role="alert">{e}</span> }.into_any()),
                            SimState::Ready(_) => None,
                        }}
                    </div>
                </div>
            </div>
        </Show>
    }
}
