//! The inspector: what the router models made of the trace at the cursor, from the core's
//! replay engine (`kvscope_core::replay`).
//!
//! * Consumers: each model's verdict on the current event, its counters (indexed, pending,
//!   dropped, unreachable) with what this step changed highlighted, and the prefixes it can no
//!   longer route to so far. One model or all side by side.
//! * Topology: the block tree around the current event ([`crate::topology`]).
//! * Job order: the current event's transfer job, in emitted order vs prefix order, with
//!   inversions marked.

use kvscope_core::consumers::{ConsumerKind, VerdictKind};
use kvscope_core::replay::{Snapshot, Step};
use leptos::prelude::*;

use crate::model::Model;
use crate::text::{count, hash_text, mid_ellipsis, HASH_CHARS};
use crate::{AnalysisStatus, AppState, LoadStatus};

/// Job events listed at most.
const JOB_EVENTS: usize = 300;

/// Which inspector tab is open.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tab {
    /// Consumer verdicts and counters.
    Consumers,
    /// Block tree.
    Topology,
    /// Per-job order.
    JobOrder,
}

impl Tab {
    /// The permalink's name of the tab (`i=topology`); `None` for the default (Consumers).
    pub fn as_str(self) -> Option<&'static str> {
        match self {
            Tab::Consumers => None,
            Tab::Topology => Some("topology"),
            Tab::JobOrder => Some("jobs"),
        }
    }

    /// Inverse of [`Tab::as_str`]; anything else is the default tab.
    pub fn parse(s: &str) -> Tab {
        match s {
            "topology" => Tab::Topology,
            "jobs" => Tab::JobOrder,
            _ => Tab::Consumers,
        }
    }
}

/// The consumer the views focus on (`None` in the state means all side by side; topology then
/// colours by llm-d).
pub fn selected_consumers(sel: Option<&str>) -> Vec<ConsumerKind> {
    match sel.and_then(ConsumerKind::parse) {
        Some(k) => vec![k],
        None => ConsumerKind::ALL.to_vec(),
    }
}

fn short(h: u64) -> String {
    mid_ellipsis(&h.to_string(), HASH_CHARS)
}

/// State of a block for the topology colouring.
pub fn block_state(v: Option<VerdictKind>) -> &'static str {
    match v {
        Some(VerdictKind::Applied | VerdictKind::Replayed) => "indexed",
        Some(VerdictKind::Pending) => "pending",
        Some(VerdictKind::DroppedOrphan | VerdictKind::Truncated) => "dropped",
        Some(VerdictKind::Misrooted) => "misrooted",
        Some(VerdictKind::Removed | VerdictKind::RemoveUnknown | VerdictKind::Cleared) => "removed",
        Some(VerdictKind::Ignored) => "ignored",
        None => "unknown",
    }
}

/// Snapshot and step diff at a cursor (seeks the replay engine).
/// `None` while the analysis has not run.
pub fn at_cursor(m: &Model, cursor: u32) -> Option<(Snapshot, Option<Step>)> {
    let mut r = m.replay()?;
    r.seek(cursor as usize);
    let snap = r.snapshot();
    let step = (cursor as usize).checked_sub(1).and_then(|e| r.step_at(e));
    Some((snap, step))
}

/// What the consumer views show while the core's analysis runs: what is coming and how far
/// the analysis is.
pub fn analysing_view(st: AppState, m: &Model) -> AnyView {
    let n = m.len();
    let pct = move || match st.analysis.get() {
        AnalysisStatus::Running { fraction, .. } => 100.0 * fraction,
        _ => 100.0,
    };
    // While the file is read the timeline shows the events so far; the models start after.
    let line = move || match st.status.get() {
        LoadStatus::Loading { .. } => {
            "Reading the trace: the consumer models run once all of it is read".to_owned()
        }
        _ => format!(
            "Analysing {} with the consumer models: {}%",
            count(n, "event", "events"),
            crate::fixed(pct().floor(), 0)
        ),
    };
    view! {
        <div class="muted analysing-box" data-testid="analysing" role="status">
            <p class="analysing"><span class="spinner" aria-hidden="true"></span>
                {line}</p>
            <progress max="100" prop:value=pct aria-label="Analysis progress"></progress>
            <p class="small">"The timeline is ready (pan, zoom, step, jump between child-first deliveries). Verdicts, snapshots, the topology, job order and the full violation list follow."</p>
        </div>
    }
    .into_any()
}

fn consumers_view(st: AppState, m: &Model, cursor: u32, kinds: Vec<ConsumerKind>) -> AnyView {
    let Some((snap, step)) = at_cursor(m, cursor) else {
        return analysing_view(st, m);
    };
    let Some(r) = m.replay() else {
        return analysing_view(st, m);
    };
    let cards = kinds
        .into_iter()
        .map(|k| {
            let cs = step.as_ref().and_then(|s| s.verdicts.iter().find(|v| v.consumer == k));
            let verdict = cs.map(|c| {
                let v = c.verdict.verdict.as_str();
                let missing = c.verdict.missing_parent.map(|p| view! { <div class="muted small">"missing parent "{hash_text(p.to_string(), None)}</div> });
                let extra = [
                    c.verdict.reason.as_ref().map(|r| r.to_string()),
                    c.final_verdict.map(|f| format!("later: {}", f.as_str())),
                    (!c.resolved.is_empty()).then(|| format!("resolved {}", count(c.resolved.len(), "pending event", "pending events"))),
                ]
                .into_iter()
                .flatten()
                .collect::<Vec<_>>()
                .join(" · ");
                // The router's status is one identifier (`parent_block_not_found`): on its own
                // line, cut with an ellipsis rather than broken mid-word, whole on hover.
                let status = c.verdict.status.as_ref().map(|s| {
                    let text = format!("status {s}");
                    view! { <div class="muted small clip" title=text.clone()>{text.clone()}</div> }
                });
                view! {
                    <div><span class=format!("verdict v-{v}") data-testid=format!("verdict-{}", k.as_str())>{v}</span></div>
                    {missing}
                    <div class="muted small">{extra}</div>
                    {status}
                }
                .into_any()
            });
            let total = snap.consumers.iter().find(|c| c.consumer == k).map(|c| c.total).unwrap_or_default();
            let (mut before, mut after) = (kvscope_core::consumers::LaneCounts::default(), kvscope_core::consumers::LaneCounts::default());
            if let Some(c) = cs {
                for l in &c.lanes {
                    before.indexed += l.before.indexed;
                    before.pending += l.before.pending;
                    before.dropped += l.before.dropped;
                    before.unreachable += l.before.unreachable;
                    after.indexed += l.after.indexed;
                    after.pending += l.after.pending;
                    after.dropped += l.after.dropped;
                    after.unreachable += l.after.unreachable;
                }
            }
            let counter = |label: &'static str, v: i64, changed: bool| {
                view! { <tr><th>{label}</th><td class="mono" class:changed=changed>{v.to_string()}</td></tr> }
            };
            let loss = r.analysis().loss(k);
            // Prefixes are in delivery order: the ones before the cursor are a prefix of the list.
            let so_far: &[_] = loss.map_or(&[], |l| {
                let k = l.unreachable_prefixes.partition_point(|p| p.event < cursor as usize);
                l.unreachable_prefixes.get(..k).unwrap_or_default()
            });
            let n_prefixes = so_far.len();
            let prefixes: Vec<_> = so_far.iter().take(5).cloned().collect();
            let whole = loss.map(|l| format!("whole trace: {} lost, {} lost", count(l.blocks_lost, "block", "blocks"), count(l.events_lost, "event", "events"))).unwrap_or_default();
            view! {
                <div class="card" data-testid=format!("consumer-{}", k.as_str())>
                    <h4>{k.as_str()}</h4>
                    {verdict.unwrap_or_else(|| view! { <div><span class="verdict muted">"—"</span></div><div class="muted small">"no event applied"</div> }.into_any())}
                    <table class="kv">
                        {counter("indexed", total.indexed, before.indexed != after.indexed)}
                        {counter("pending", total.pending, before.pending != after.pending)}
                        {counter("dropped", total.dropped, before.dropped != after.dropped)}
                        {counter("unreachable", total.unreachable, before.unreachable != after.unreachable)}
                    </table>
                    <div class="muted small">{format!("unreachable prefixes so far: {n_prefixes}")}</div>
                    <ul class="plain">
                        {prefixes.into_iter().take(5).map(|p| {
                            let e = p.event as u32;
                            let label = format!("#{e}: {}", count(p.blocks, "block", "blocks"));
                            let parent = p.missing_parent.map(|m| view! { <span class="muted small">", parent "{hash_text(m.to_string(), None)}" missing"</span> });
                            view! { <li><button class="link" on:click=move |_| st.seek(e)>{label}</button>{parent}</li> }
                        }).collect_view()}
                    </ul>
                    <div class="muted small">{whole}</div>
                </div>
            }
            .into_any()
        })
        .collect_view();
    let findings = step.as_ref().map(|s| s.findings.len()).unwrap_or(0);
    view! {
        <p class="muted small">{format!("{} of {} applied · {} stored · {} so far{}", snap.cursor, count(snap.total, "event", "events"), count(snap.blocks_seen, "distinct block", "distinct blocks"), count(snap.findings_so_far, "finding", "findings"), if findings > 0 { format!(" · {findings} at this event") } else { String::new() })}</p>
        <div class="consumers">{cards}</div>
    }
    .into_any()
}

fn job_view(st: AppState, m: &Model, cursor: u32) -> AnyView {
    let Some(cur) = cursor.checked_sub(1) else {
        return view! { <p class="muted">"Step to an event of a transfer job to see its order."</p> }.into_any();
    };
    let Some(r) = m.replay() else {
        return analysing_view(st, m);
    };
    // The job, both orders and the inversions are the core's (`Replay::job_order`).
    let Some(order) = r.job_order(cur as usize, JOB_EVENTS) else {
        return view! { <p class="muted">"The current event belongs to no transfer job (GPU events have none)."</p> }.into_any();
    };
    drop(r);
    let job = &order.job;
    let mut notes = Vec::new();
    if order.in_job > 0 {
        notes.push(count(
            order.in_job,
            "inversion in the job",
            "inversions in the job",
        ));
    }
    if order.other > 0 {
        notes.push(count(
            order.other,
            "other child-first finding",
            "other child-first findings",
        ));
    }
    if order.truncated {
        notes.push(format!("first {JOB_EVENTS} events"));
    }
    let title = format!(
        "Job {}{} · {} · {} · {} · evidence {}{}",
        job.job_id
            .map(|j| j.to_string())
            .unwrap_or_else(|| format!("#{}", job.id)),
        if job.inferred { " (inferred)" } else { "" },
        job.source,
        job.tier,
        count(job.events, "event", "events"),
        job.evidence.name(),
        notes.iter().map(|n| format!(" · {n}")).collect::<String>(),
    );
    let item = move |row: &kvscope_core::replay::JobOrderRow, mark: bool| {
        let e = row.event as u32;
        let h = row.hash;
        let class = row.violation.filter(|_| mark).map(|c| c.name());
        let group = (row.group > 0).then(|| format!(" g{}", row.group));
        view! {
            <li class:inv=class.is_some() class:cur=e == cur>
                <button class="link" on:click=move |_| st.seek(e)>{format!("#{e}")}</button>" "<span class="mono" title=h.to_string()>{short(h)}</span>{group}{class.map(|c| format!(" ← child first ({c})"))}
            </li>
        }
    };
    view! {
        <p class="small" data-testid="job-title">{title}</p>
        <div class="order">
            <div><h4>"Emitted (delivery) order"</h4><ol>{order.emitted.iter().map(|r| item(r, true)).collect_view()}</ol></div>
            <div><h4>"Prefix order"</h4><ol>{order.prefix.iter().map(|r| item(r, false)).collect_view()}</ol></div>
        </div>
    }
    .into_any()
}

/// Consumers / topology / job order, with the consumer picker.
#[component]
pub fn Inspector() -> impl IntoView {
    let st = expect_context::<AppState>();
    let tab = st.tab;
    let analysing = move || matches!(st.analysis.get(), AnalysisStatus::Running { .. });
    let wait_title = "Available when the analysis is done";
    let tab_btn = move |t: Tab, label: &'static str| {
        // Consumers stays clickable (it shows the analysis' progress); the others need it.
        let needs_analysis = t != Tab::Consumers;
        view! {
            <button class="btn" role="tab" aria-selected=move || (tab.get() == t).to_string()
                prop:disabled=move || needs_analysis && analysing()
                title=move || if needs_analysis && analysing() { wait_title } else { label }
                on:click=move |_| tab.set(t)>{label}</button>
        }
    };
    view! {
        <section class="pane inspector" aria-label="Inspector" data-testid="inspector">
            <div class="tabs" role="tablist">
                {tab_btn(Tab::Consumers, "Consumers")}
                {tab_btn(Tab::Topology, "Topology")}
                {tab_btn(Tab::JobOrder, "Job order")}
                {crate::controls::router_select(st, "Consumer", "consumer", "all models", Signal::derive(analysing),
                    Signal::derive(move || if analysing() { wait_title } else { "Router model" }))}
            </div>
            {move || {
                let cursor = st.cursor.get();
                let sel = st.consumer.get();
                let t = tab.get();
                st.model.with(|m| match m {
                    None => view! { <p class="muted">"Load a trace."</p> }.into_any(),
                    Some(m) => match t {
                        Tab::Consumers => consumers_view(st, m, cursor, selected_consumers(sel.as_deref())),
                        Tab::Topology => {
                            let k = sel.as_deref().and_then(ConsumerKind::parse).unwrap_or(ConsumerKind::Llmd);
                            crate::topology::topology_view(st, m, cursor, k)
                        }
                        Tab::JobOrder => job_view(st, m, cursor),
                    },
                })
            }}
        </section>
    }
}
