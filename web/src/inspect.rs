//! The inspector: what the router models made of the trace at the cursor, from the core's
//! replay engine (`kvscope_core::replay`).
//!
//! * Consumers: each model's verdict on the current event, its counters (indexed, pending,
//!   dropped, unreachable) with what this step changed highlighted, and the prefixes it can no
//!   longer route to so far. One model or all side by side.
//! * Topology: the parent/child tree around the current event's blocks, each node coloured by
//!   its state for the selected model; a dropped node's subtree is struck through.
//! * Job order: the current event's transfer job, in emitted order vs prefix order, with
//!   inversions marked.

use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};

use kvscope_core::consumers::{ConsumerKind, VerdictKind};
use kvscope_core::replay::{Snapshot, Step};
use leptos::prelude::*;

use crate::model::Model;
use crate::text::{count, hash_text, mid_ellipsis, HASH_CHARS};
use crate::{AnalysisStatus, AppState};

/// Topology nodes rendered at most.
const TREE_NODES: usize = 160;
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
    view! {
        <div class="muted analysing-box" data-testid="analysing" role="status">
            <p class="analysing"><span class="spinner" aria-hidden="true"></span>
                {move || format!("Analysing {} with the consumer models: {}%", count(n, "event", "events"), crate::fixed(pct().floor(), 0))}</p>
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
                    c.verdict.status.as_ref().map(|s| format!("status {s}")),
                    c.final_verdict.map(|f| format!("later: {}", f.as_str())),
                    (!c.resolved.is_empty()).then(|| format!("resolved {}", count(c.resolved.len(), "pending event", "pending events"))),
                ]
                .into_iter()
                .flatten()
                .collect::<Vec<_>>()
                .join(" · ");
                view! {
                    <div><span class=format!("verdict v-{v}") data-testid=format!("verdict-{}", k.as_str())>{v}</span></div>
                    {missing}
                    <div class="muted small">{extra}</div>
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

fn topology_view(st: AppState, m: &Model, cursor: u32, kind: ConsumerKind) -> AnyView {
    let Some(cur) = cursor.checked_sub(1) else {
        return view! { <p class="muted">"Nothing stored yet: step forward to grow the tree."</p> }
            .into_any();
    };
    let Some(mut r) = m.replay() else {
        return analysing_view(st, m);
    };
    r.seek(cursor as usize);
    let Some(info) = r.event_info(cur as usize) else {
        return view! { <p class="muted">"No event."</p> }.into_any();
    };
    let current: HashSet<u64> = info.hashes.iter().copied().collect();
    let Some(&start) = info.hashes.first() else {
        return view! { <p class="muted">"This event names no blocks (AllBlocksCleared)."</p> }
            .into_any();
    };
    // Walk up to the root (bounded), then collect the subtree breadth-first (bounded).
    let mut root = start;
    let mut seen = HashSet::default();
    for _ in 0..256 {
        if !seen.insert(root) {
            break;
        }
        match r.block(root).parent {
            Some(p) if r.block(p).first_stored.is_some() => root = p,
            _ => break,
        }
    }
    // The root's named parent when it is not stored yet (child first): shown as a ghost.
    let ghost = r
        .block(root)
        .parent
        .filter(|p| r.block(*p).first_stored.is_none());
    let mut children: HashMap<u64, Vec<u64>> = HashMap::default();
    let mut state: HashMap<u64, &'static str> = HashMap::default();
    let mut queue = std::collections::VecDeque::from([root]);
    let mut count = 0;
    let mut visited = HashSet::default();
    while let Some(h) = queue.pop_front() {
        if count >= TREE_NODES || !visited.insert(h) {
            continue;
        }
        count += 1;
        let b = r.block(h);
        let v = b
            .last_outcome
            .iter()
            .find(|(k, _, _)| *k == kind)
            .map(|(_, _, v)| *v);
        state.insert(
            h,
            if b.first_stored.is_none() && v.is_none() {
                "unknown"
            } else {
                block_state(v)
            },
        );
        for c in &b.children {
            queue.push_back(*c);
        }
        children.insert(h, b.children.clone());
    }
    drop(r);
    fn node(
        h: u64,
        depth: usize,
        under_dropped: bool,
        children: &HashMap<u64, Vec<u64>>,
        state: &HashMap<u64, &'static str>,
        current: &HashSet<u64>,
        st: AppState,
    ) -> AnyView {
        let s = state.get(&h).copied().unwrap_or("unknown");
        let dropped_here = s == "dropped";
        let kids = children.get(&h).cloned().unwrap_or_default();
        let kid_views = if depth < 64 {
            kids.iter()
                .filter(|k| state.contains_key(k))
                .map(|k| {
                    node(
                        *k,
                        depth + 1,
                        under_dropped || dropped_here,
                        children,
                        state,
                        current,
                        st,
                    )
                })
                .collect::<Vec<_>>()
        } else {
            Vec::new()
        };
        let q = format!("hash={h}");
        view! {
            <li>
                <button class=format!("node link-plain s-{s}") class:under-dropped=under_dropped && !dropped_here class:current=current.contains(&h)
                    title=format!("{h}: {s}{}", if under_dropped { " (an ancestor was dropped)" } else { "" })
                    on:click=move |_| { st.query.set(q.clone()); st.search_next(); }>
                    <span class="dot"></span><span class="mono">{short(h)}</span><span class="muted small">{s}</span>
                </button>
                {(!kid_views.is_empty()).then(|| view! { <ul class="tree">{kid_views}</ul> })}
            </li>
        }
        .into_any()
    }
    let tree = node(root, 0, false, &children, &state, &current, st);
    let tree = match ghost {
        Some(p) => view! {
            <li>
                <span class="node s-unknown ghost" title=format!("{p}: named as parent, not stored before the cursor")>
                    <span class="dot"></span><span class="mono">{short(p)}</span><span class="muted small">"parent not stored yet"</span>
                </span>
                <ul class="tree">{tree}</ul>
            </li>
        }
        .into_any(),
        None => tree,
    };
    let legend = ["indexed", "pending", "dropped", "misrooted", "removed"]
        .into_iter()
        .map(|s| view! { <span class=format!("node s-{s}")><span class="dot"></span>{s}</span> })
        .collect_view();
    view! {
        <p class="muted small">{format!("Blocks around event #{cur}, coloured by {} at the cursor{}.", kind.as_str(), if count >= TREE_NODES { format!(" (first {TREE_NODES} nodes)") } else { String::new() })}</p>
        <div class="tabs">{legend}</div>
        <ul class="tree root" data-testid="topology">{tree}</ul>
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
    let tab = RwSignal::new(Tab::Consumers);
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
                            topology_view(st, m, cursor, k)
                        }
                        Tab::JobOrder => job_view(st, m, cursor),
                    },
                })
            }}
        </section>
    }
}
