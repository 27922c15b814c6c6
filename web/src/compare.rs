//! Compare: generate one of the core's built-in scenarios in the page twice (e.g. CPython set
//! order vs the fixed order), with the seeds and sizes a user picks, and show the two analyses
//! side by side (`kvscope_core::analysis::compare`); either trace opens in the debugger.
//! Behind the `compare` cargo feature (on by default) because it links the simulator.

use kvscope_core::analysis::{analyze, compare, AnalysisConfig, TraceDiff};
use kvscope_core::order::OrderMode;
use kvscope_core::scenario::{builtin, Scenario, SecondaryTierConfig};
use kvscope_core::sim;
use kvscope_core::trace::Trace;
use kvscope_core::wire::jsonl;
use leptos::prelude::*;

use crate::load;
use crate::permalink::TraceOrigin;
use crate::AppState;

/// What the user picked.
#[derive(Clone, Debug, PartialEq)]
pub struct Params {
    /// Built-in scenario name.
    pub scenario: String,
    /// Order of the left trace (`fixed`, `legacy`, `cpython`).
    pub left: String,
    /// Order of the right trace.
    pub right: String,
    /// Scenario seed (also the legacy permutation seed).
    pub seed: u64,
    /// `PYTHONHASHSEED` for `cpython`.
    pub python_hash_seed: u32,
    /// Workers (`completion.workers`), `None`: the scenario's.
    pub workers: Option<u32>,
    /// CPU capacity in chunks, `None`: the scenario's.
    pub capacity: Option<u64>,
    /// Number of STORAGE tiers, `None`: the scenario's.
    pub tiers: Option<usize>,
}

impl Default for Params {
    fn default() -> Self {
        Params {
            scenario: "legacy-vs-fixed".into(),
            left: "cpython".into(),
            right: "fixed".into(),
            seed: 0,
            python_hash_seed: 0,
            workers: None,
            capacity: None,
            tiers: None,
        }
    }
}

fn order(name: &str, p: &Params) -> OrderMode {
    match name {
        "legacy" => OrderMode::Legacy { seed: p.seed },
        "cpython" => OrderMode::CPython {
            python_hash_seed: p.python_hash_seed,
        },
        _ => OrderMode::Fixed,
    }
}

/// The scenario for one side.
pub fn scenario(p: &Params, side_order: &str) -> Result<Scenario, String> {
    let mut s = builtin::load(&p.scenario)
        .ok_or_else(|| format!("unknown built-in scenario {:?}", p.scenario))?
        .map_err(|e| e.to_string())?;
    s.seed = p.seed;
    s.order = order(side_order, p);
    if let Some(w) = p.workers {
        s.completion.workers = w.max(1);
    }
    if let Some(c) = p.capacity {
        s.cpu.capacity_chunks = c.max(1);
    }
    if let Some(n) = p.tiers {
        let template = s.secondary_tiers.first().cloned();
        s.secondary_tiers.truncate(n);
        while s.secondary_tiers.len() < n {
            let i = s.secondary_tiers.len();
            let mut t = template.clone().unwrap_or(SecondaryTierConfig {
                name: String::new(),
                ownership: None,
                locality: None,
                min_latency_steps: 1,
                max_latency_steps: 2,
                failure_probability: 0.0,
                promotions: true,
            });
            t.name = format!("tier{i}");
            s.secondary_tiers.push(t);
        }
    }
    s.validate().map_err(|e| e.to_string())?;
    Ok(s)
}

/// Simulate both sides and compare their analyses.
pub fn run(p: &Params) -> Result<(Trace, Trace, TraceDiff), String> {
    let a = sim::simulate(&scenario(p, &p.left)?).map_err(|e| e.to_string())?;
    let b = sim::simulate(&scenario(p, &p.right)?).map_err(|e| e.to_string())?;
    let cfg = AnalysisConfig::default();
    let diff = compare(&analyze(&a, &cfg), &analyze(&b, &cfg));
    Ok((a, b, diff))
}

fn num<T: std::str::FromStr>(s: &str) -> Option<T> {
    let s = s.trim();
    if s.is_empty() {
        None
    } else {
        s.parse().ok()
    }
}

/// Event counts of both sides and their comparison, or an error sentence.
type Outcome = Result<(usize, usize, TraceDiff), String>;

/// The Compare dialog.
#[component]
pub fn CompareDialog(
    /// Whether the dialog is shown.
    open: RwSignal<bool>,
) -> impl IntoView {
    let st = expect_context::<AppState>();
    let params = RwSignal::new(Params::default());
    let result: RwSignal<Option<Outcome>> = RwSignal::new(None);
    let traces: StoredValue<Option<(Trace, Trace)>> = StoredValue::new(None);
    let busy = RwSignal::new(false);
    let generate = move |_| {
        busy.set(true);
        let p = params.get_untracked();
        leptos::task::spawn_local(async move {
            load::yield_now().await;
            match run(&p) {
                Ok((a, b, d)) => {
                    result.set(Some(Ok((a.event_count(), b.event_count(), d))));
                    traces.set_value(Some((a, b)));
                }
                Err(e) => result.set(Some(Err(e))),
            }
            busy.set(false);
        });
    };
    let open_side = move |left: bool| {
        let p = params.get_untracked();
        let Some((a, b)) = traces.get_value() else {
            return;
        };
        let (t, o) = if left {
            (a, p.left.clone())
        } else {
            (b, p.right.clone())
        };
        let text = jsonl::write_trace(&t);
        open.set(false);
        load::load_bytes(
            st,
            format!("{} ({o})", p.scenario),
            text.into_bytes(),
            TraceOrigin::Local,
            None,
        );
    };
    let order_select = move |label: &'static str,
                             get: fn(&Params) -> String,
                             set: fn(&mut Params, String)| {
        view! {
            <label>{label}
                <select aria-label=label on:change:target=move |e| { let v = e.target().value(); params.update(|p| set(p, v)) }>
                    {["cpython", "legacy", "fixed"].into_iter().map(|o| view! { <option value=o selected=move || get(&params.get()) == o>{o}</option> }).collect_view()}
                </select>
            </label>
        }
    };
    view! {
        <Show when=move || open.get()>
            <div class="overlay" role="dialog" aria-label="Compare orders">
                <div class="dialog wide" data-testid="compare">
                    <h2>"Compare: generate a scenario in two orders"</h2>
                    <div class="row">
                        <label>"Scenario"
                            <select aria-label="Scenario" on:change:target=move |e| { let v = e.target().value(); params.update(|p| p.scenario = v) }>
                                {builtin::BUILTINS.iter().map(|b| view! { <option value=b.name title=b.description selected=move || params.get().scenario == b.name>{b.name}</option> }).collect_view()}
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
                        <button class="btn primary" aria-label="Generate and compare" prop:disabled=move || busy.get() on:click=generate>
                            {move || if busy.get() { "Generating…" } else { "Generate and compare" }}
                        </button>
                        <button class="btn" on:click=move |_| open.set(false)>"Close"</button>
                    </div>
                    {move || result.get().map(|r| match r {
                        Err(e) => view! { <p class="status error" role="alert">{e}</p> }.into_any(),
                        Ok((na, nb, d)) => {
                            let p = params.get_untracked();
                            view! {
                                <table class="kv compare-table" data-testid="compare-table">
                                    <tr><th></th><th>{format!("left: {}", p.left)}</th><th>{format!("right: {}", p.right)}</th></tr>
                                    <tr><th>"events"</th><td>{na}</td><td>{nb}</td></tr>
                                    {d.rules.iter().filter(|r| r.a + r.b > 0).map(|r| view! {
                                        <tr><th class="rule">{r.rule.name()}</th><td class:bad={r.a > r.b}>{r.a}</td><td class:bad={r.b > r.a}>{r.b}</td></tr>
                                    }).collect_view()}
                                    {d.losses.iter().map(|l| view! {
                                        <tr><th>{format!("{}: blocks / events lost", l.consumer)}</th>
                                            <td class:bad={l.a_blocks_lost > l.b_blocks_lost}>{format!("{} / {}", l.a_blocks_lost, l.a_events_lost)}</td>
                                            <td class:bad={l.b_blocks_lost > l.a_blocks_lost}>{format!("{} / {}", l.b_blocks_lost, l.b_events_lost)}</td></tr>
                                    }).collect_view()}
                                    <tr><th>"violations only on this side"</th><td>{d.disappeared.len()}</td><td>{d.appeared.len()}</td></tr>
                                </table>
                                <div class="row">
                                    <button class="btn" on:click=move |_| open_side(true)>"Open left in the debugger"</button>
                                    <button class="btn" on:click=move |_| open_side(false)>"Open right in the debugger"</button>
                                </div>
                            }.into_any()
                        }
                    })}
                </div>
            </div>
        </Show>
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpython_order_loses_blocks_that_the_fix_keeps() {
        let (a, b, d) = run(&Params::default()).unwrap();
        assert_eq!(a.event_count(), b.event_count());
        let in_job = d
            .rules
            .iter()
            .find(|r| r.rule.name() == "child-before-parent-in-job")
            .unwrap();
        assert!(in_job.a > 0, "the legacy side has in-job violations");
        assert_eq!(in_job.b, 0, "the fix has none");
        let llmd = d.losses.iter().find(|l| l.consumer == "llmd").unwrap();
        assert!(llmd.a_blocks_lost >= llmd.b_blocks_lost);
    }

    #[test]
    fn parameters_apply_and_bad_names_are_errors() {
        let p = Params {
            tiers: Some(2),
            capacity: Some(3),
            workers: Some(2),
            ..Params::default()
        };
        let s = scenario(&p, "legacy").unwrap();
        assert_eq!(s.secondary_tiers.len(), 2);
        assert_eq!(s.cpu.capacity_chunks, 3);
        assert_eq!(s.completion.workers, 2);
        assert_eq!(s.order, OrderMode::Legacy { seed: 0 });
        assert!(scenario(
            &Params {
                scenario: "nope".into(),
                ..Params::default()
            },
            "fixed"
        )
        .is_err());
    }
}
