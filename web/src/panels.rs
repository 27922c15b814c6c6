//! Side panels: loader status, event details, the violation list, the help overlay and the
//! paste dialog. Every trace string goes into a text node.

use kvscope_core::event::{ExtraValue, KvEvent};
use kvscope_core::hash::BlockHash;
use kvscope_core::trace::{Provenance, TraceBatch};
use leptos::prelude::*;

use crate::model::{EdgeKind, Model};
use crate::{fixed, load, AnalysisStatus, AppState, LoadStatus};

/// At most this many violation rows are in the DOM (a window around the cursor).
const VIOLATION_ROWS: usize = 200;
/// Token ids shown before "… more".
const TOKENS_SHOWN: usize = 64;

/// A byte count in B, KB or MB (one decimal).
pub fn fmt_bytes(n: usize) -> String {
    if n >= 1 << 20 {
        format!("{} MB", fixed(n as f64 / (1u64 << 20) as f64, 1))
    } else if n >= 1 << 10 {
        format!("{} KB", fixed(n as f64 / 1024.0, 1))
    } else {
        format!("{n} B")
    }
}

/// The analysis' progress as a short sentence: `analysing 1000000 events: 42% · 310000
/// events/s` (`indexing 3%` while the trace is indexed).
pub fn analysis_text(events: usize, fraction: f64, events_per_s: f64, indexing: bool) -> String {
    let pct = fixed((100.0 * fraction).floor(), 0);
    let what = if indexing { "indexing " } else { "" };
    if events_per_s > 0.0 && !indexing {
        format!(
            "analysing {events} events: {what}{pct}% · {} events/s",
            fixed(events_per_s, 0)
        )
    } else {
        format!("analysing {events} events: {what}{pct}%")
    }
}

/// Loading progress, success summary (events/s) or a located error.
#[component]
pub fn StatusBanner() -> impl IntoView {
    let st = expect_context::<AppState>();
    view! {
        {move || match st.status.get() {
            LoadStatus::Idle => view! { <div class="status" data-testid="status">"Drop a trace anywhere, open one, or paste it."</div> }.into_any(),
            LoadStatus::Loading { name, done, total, events, events_per_s } => {
                let pct = if total > 0 { 100.0 * done as f64 / total as f64 } else { 0.0 };
                view! {
                    <div class="status loading" data-testid="status" role="status">
                        <span class="spinner" aria-hidden="true"></span>
                        {if done == 0 {
                            format!("Loading {name} ({}): reading…", fmt_bytes(total))
                        } else {
                            format!("Reading {name}: {} of {} · {events} events · {} events/s", fmt_bytes(done), fmt_bytes(total), fixed(events_per_s, 0))
                        }}
                        <progress max="100" prop:value=pct aria-label="Loading progress" data-testid="load-progress"></progress>
                    </div>
                }.into_any()
            }
            LoadStatus::Loaded { name, events, ms, breakdown } => {
                // Timing internals (rate, per-phase milliseconds) are on hover and in `?`.
                view! {
                    <div class="status ok" data-testid="status" role="status">
                        <span data-testid="loaded" title=format!("milliseconds per phase: {breakdown}")>{format!("Loaded {name}: {} in {} ms", crate::text::count(events, "event", "events"), fixed(ms, 0))}</span>
                        {move || match st.analysis.get() {
                            AnalysisStatus::Running { events, fraction, events_per_s, indexing, .. } => Some(view! {
                                <span class="analysing" data-testid="analysis-state" title="consumer models (llm-d, Dynamo, SGLang, ideal), violation index, lint rules">
                                    <span class="spinner" aria-hidden="true"></span>
                                    {analysis_text(events, fraction, events_per_s, indexing)}
                                    <progress max="100" prop:value=100.0 * fraction aria-label="Analysis progress" data-testid="analysis-progress"></progress>
                                </span>
                            }.into_any()),
                            AnalysisStatus::Done { ms } => Some(view! {
                                <span class="muted small" data-testid="analysis-state">{format!("analysed in {} ms", fixed(ms, 0))}</span>
                            }.into_any()),
                            AnalysisStatus::Idle => None,
                        }}
                    </div>
                }.into_any()
            }
            LoadStatus::Error { name, message } => view! {
                <div class="status error" data-testid="load-error" role="alert">
                    <strong>{format!("Could not load {name}: ")}</strong>{message}
                    <crate::recover::RecoverOffer/>
                    <button class="btn" on:click=move |_| { st.recovery.set(None); st.status.set(LoadStatus::Idle) }>"Dismiss"</button>
                </div>
            }.into_any(),
        }}
    }
}

fn hash_row(label: &'static str, h: &BlockHash) -> impl IntoView {
    let dec = h.to_display_string();
    let hex = h.to_hex_string();
    view! { <tr><th>{label}</th><td class="mono">{crate::text::hash_text(dec, Some(hex))}</td></tr> }
}

fn extra_text(v: &ExtraValue) -> String {
    match v {
        ExtraValue::Nil => "None".into(),
        ExtraValue::Bool(b) => b.to_string(),
        ExtraValue::UInt(u) => u.to_string(),
        ExtraValue::Int(i) => i.to_string(),
        ExtraValue::Float(f) => crate::float_text(*f),
        ExtraValue::Str(s) => format!("{s:?}"),
        ExtraValue::Bytes(b) => format!(
            "b'{}'",
            b.iter().map(|x| format!("{x:02x}")).collect::<String>()
        ),
        ExtraValue::Array(a) => format!(
            "({})",
            a.iter().map(extra_text).collect::<Vec<_>>().join(", ")
        ),
        ExtraValue::Map(m) => format!(
            "{{{}}}",
            m.iter()
                .map(|(k, v)| format!("{}: {}", extra_text(k), extra_text(v)))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

fn opt<T: ToString>(v: &Option<T>) -> String {
    v.as_ref()
        .map(|v| v.to_string())
        .unwrap_or_else(|| "None".into())
}

fn row(label: &'static str, value: String) -> impl IntoView {
    view! { <tr><th>{label}</th><td class="mono">{value}</td></tr> }
}

fn jump(st: AppState, i: u32, label: String) -> impl IntoView {
    view! { <button class="link" on:click=move |_| st.seek(i)>{label}</button> }
}

fn details_view(st: AppState, m: &Model, i: u32) -> AnyView {
    use crate::lens::VerdictTime;
    let when = st.verdict_time.get();
    let cursor = st.cursor.get() as usize;
    // The step diff first: `with_event` holds the replay lock.
    let step = m.replay().and_then(|r| {
        let s = r.step_at(i as usize)?;
        let shown: Vec<_> = s
            .verdicts
            .iter()
            .map(|c| r.verdict_when(c.consumer, i as usize, cursor, when))
            .collect();
        Some((s, shown, r.story(i as usize)))
    });
    // What happened here, in one sentence (the core's, from the findings and verdicts).
    let story = step
        .as_ref()
        .and_then(|s| s.2.clone())
        .map(|s| view! { <p class="story" data-testid="story" role="note">{s}</p> });
    let analysing = (!m.is_analysed()).then(|| {
        let reading = st.status.with(|s| matches!(s, LoadStatus::Loading { .. }));
        let when = if reading { "once the whole trace is read" } else { "analysing…" };
        view! { <p class="muted small" data-testid="details-analysing">"Consumer verdicts: "{when}</p> }
    });
    let pick = move |t: VerdictTime, label: &'static str| {
        view! {
            <button class="btn" aria-pressed=move || (st.verdict_time.get() == t).to_string() on:click=move |_| st.verdict_time.set(t)>{label}</button>
        }
    };
    let verdicts = step.map(|(s, shown, _)| {
        let caption = match when {
            VerdictTime::AtCursor => "as known at the cursor",
            VerdictTime::EndOfTrace => "final, at the end of the trace",
        };
        view! {
            <h3>"Consumer verdicts " <span class="seg" role="group" aria-label="Verdicts when">{pick(VerdictTime::AtCursor, "At cursor")}{pick(VerdictTime::EndOfTrace, "End of trace")}</span></h3>
            <p class="muted small" data-testid="verdict-time">{caption}</p>
            <table class="kv" data-testid="details-verdicts">
                {s.verdicts.into_iter().zip(shown).map(|(c, shown)| {
                    let v = shown.map_or("not applied yet", |k| k.as_str());
                    let missing = c.verdict.missing_parent.map(|p| view! { <span class="muted small">" missing parent "{crate::text::hash_text(p.to_string(), None)}</span> });
                    let note = [
                        c.verdict.reason.map(|r| r.to_string()),
                        (shown != Some(c.verdict.verdict)).then(|| format!("at delivery {}", c.verdict.verdict.as_str())),
                        (when == VerdictTime::AtCursor).then_some(()).and(c.final_verdict).filter(|f| Some(*f) != shown).map(|f| format!("later {}", f.as_str())),
                    ].into_iter().flatten().collect::<Vec<_>>().join(" · ");
                    view! { <tr><th>{c.consumer.as_str()}</th><td><span class=format!("verdict v-{v}")>{v}</span>" "{missing}" "<span class="muted small">{note}</span></td></tr> }
                }).collect_view()}
            </table>
        }
    });
    let verdicts = Some((verdicts, analysing));
    // The findings' sentences before `with_event`, which holds the replay lock they need.
    let violations: Vec<_> = m
        .violations_at(i)
        .map(|v| (v.clone(), m.message(v)))
        .collect();
    let body = m
        .with_event(i, |b, ev, prov| {
            event_view(st, m, i, b, ev, prov, (verdicts, violations))
        })
        .unwrap_or_else(|| view! { <p class="muted">"No event."</p> }.into_any());
    view! { {story}{body} }.into_any()
}

fn event_view(
    st: AppState,
    m: &Model,
    i: u32,
    b: &TraceBatch,
    ev: &KvEvent,
    prov: Option<&Provenance>,
    (verdicts, violations): (
        Option<impl IntoView + 'static>,
        Vec<(crate::model::Violation, String)>,
    ),
) -> AnyView {
    let r = m.events.get(i as usize).unwrap_or(crate::model::EventAt {
        batch: 0,
        record: 0,
        pos: 0,
    });
    let lane = m
        .lane_of
        .get(i as usize)
        .and_then(|l| m.lanes.get(*l as usize))
        .map(|l| l.title())
        .unwrap_or_default();
    let viol_view = (!violations.is_empty()).then(|| {
        view! {
            <div class="violation-box" data-testid="violation-detail" role="note">
                {violations.into_iter().map(|(v, message)| {
                    let rel = v.related.map(|p| jump(st, p, format!("go to parent #{p}")));
                    view! { <div><span class="rule">{v.rule}</span>" "<span class="level">{v.level}</span>" "{message}" "{rel}</div> }
                }).collect_view()}
            </div>
        }
    });
    let head = format!("#{i} {} · {lane}", ev.type_name());
    let batch_rows = view! {
        {row("source", b.source.clone())}
        {row("dp_rank", opt(&b.dp_rank))}
        {row("seq", b.seq.to_string())}
        {row("ts", crate::float_text(b.ts))}
        {row("line / batch", b.origin.to_string())}
        {row("index in batch", r.pos.to_string())}
    };
    let ev_rows = match ev {
        KvEvent::BlockStored(s) => {
            let toks = if s.token_ids.len() > TOKENS_SHOWN {
                format!(
                    "[{} … {} more] ({} tokens)",
                    s.token_ids[..TOKENS_SHOWN]
                        .iter()
                        .map(|t| t.to_string())
                        .collect::<Vec<_>>()
                        .join(", "),
                    s.token_ids.len() - TOKENS_SHOWN,
                    s.token_ids.len()
                )
            } else {
                format!(
                    "[{}] ({} tokens)",
                    s.token_ids
                        .iter()
                        .map(|t| t.to_string())
                        .collect::<Vec<_>>()
                        .join(", "),
                    s.token_ids.len()
                )
            };
            view! {
                {s.block_hashes.iter().map(|h| hash_row("block_hash", h)).collect_view()}
                {match &s.parent_block_hash { Some(p) => hash_row("parent_block_hash", p).into_any(), None => row("parent_block_hash", "None (root)".into()).into_any() }}
                <tr><th>"token_ids"</th><td class="mono wrap">{toks}</td></tr>
                {row("block_size", s.block_size.to_string())}
                {row("medium", opt(&s.medium))}
                {row("lora_id", opt(&s.lora_id))}
                {row("lora_name", opt(&s.lora_name))}
                {s.extra_keys.as_ref().map(|k| row("extra_keys", format!("[{}]", k.iter().map(|e| e.as_ref().map(extra_text).unwrap_or_else(|| "None".into())).collect::<Vec<_>>().join(", "))))}
                {s.group_idx.map(|g| row("group_idx", g.to_string()))}
                {s.kv_cache_spec_kind.as_deref().map(|g| row("kv_cache_spec_kind", g.to_owned()))}
                {s.kv_cache_spec_sliding_window.map(|g| row("sliding_window", g.to_string()))}
                {s.locality.as_deref().map(|g| row("locality", g.to_owned()))}
                {s.ownership.as_deref().map(|g| row("ownership", g.to_owned()))}
            }
            .into_any()
        }
        KvEvent::BlockRemoved(s) => view! {
            {s.block_hashes.iter().map(|h| hash_row("block_hash", h)).collect_view()}
            {row("medium", opt(&s.medium))}
            {s.group_idx.map(|g| row("group_idx", g.to_string()))}
            {s.locality.as_deref().map(|g| row("locality", g.to_owned()))}
            {s.ownership.as_deref().map(|g| row("ownership", g.to_owned()))}
        }
        .into_any(),
        KvEvent::AllBlocksCleared => row("fields", "(none)".into()).into_any(),
    };
    let prov = prov.map(|p| {
        view! {
            <h3>"Provenance"</h3>
            <table class="kv">
                {row("tier", p.tier.clone())}
                {row("kind", format!("{:?}", p.kind))}
                {p.job_id.map(|j| row("job_id", j.to_string()))}
                {p.req_id.clone().map(|q| row("req_id", q))}
                {p.group_idx.map(|g| row("group_idx", g.to_string()))}
                {p.chunk_idx.map(|c| row("chunk_idx", c.to_string()))}
                {p.step.map(|s| row("step", s.to_string()))}
            </table>
        }
    });
    let parents: Vec<_> = m.parents_of(i).to_vec();
    let children: Vec<_> = m.children_of(i).take(64).copied().collect();
    let link_list = |edges: Vec<crate::model::Edge>, parent_side: bool| {
        edges
            .into_iter()
            .map(|e| {
                let other = if parent_side { e.parent } else { e.child };
                let tag = match e.kind {
                    EdgeKind::Forward => "",
                    EdgeKind::ChildFirst => " (child first!)",
                    EdgeKind::CrossLane => " (other lane)",
                };
                view! { <li>{jump(st, other, format!("#{other}{tag}"))}</li> }
            })
            .collect_view()
    };
    view! {
        <h3 data-testid="details-title">{head}</h3>
        {viol_view}
        <table class="kv">{batch_rows}{ev_rows}</table>
        {verdicts}
        {prov}
        <div class="links">
            <div><h4>"Parent stored at"</h4><ul>{link_list(parents, true)}</ul></div>
            <div><h4>"Children stored at"</h4><ul>{link_list(children, false)}</ul></div>
        </div>
    }
    .into_any()
}

/// Every field of the event at the cursor.
#[component]
pub fn Details() -> impl IntoView {
    let st = expect_context::<AppState>();
    // A cursor move ends the inspection: the details follow the cursor again.
    Effect::new(move |_| {
        st.cursor.track();
        st.inspected.set(None);
    });
    view! {
        <section class="pane details" aria-label="Details" data-testid="details">
            <h2>"Details"</h2>
            {move || {
                let cur = st.current();
                let inspected = st.inspected.get().filter(|i| Some(*i) != cur);
                st.model.with(|m| match (m, cur, inspected) {
                    (Some(m), _, Some(i)) => view! {
                        <div class="inspecting" data-testid="inspecting" role="status">
                            {format!("Inspecting #{i}: the cursor stays at {} / {}. ", st.cursor.get_untracked(), m.len())}
                            <button class="link" on:click=move |_| st.seek(i)>{format!("Go to #{i}")}</button>" · "
                            <button class="link" on:click=move |_| st.inspected.set(None)>"Back to the cursor"</button>
                        </div>
                        {details_view(st, m, i)}
                    }.into_any(),
                    (Some(m), Some(i), None) => details_view(st, m, i),
                    (Some(m), None, None) if !m.is_empty() => view! {
                        <p class="muted" data-testid="details-title">{format!("Start of the trace: nothing applied yet. {}; press → to step or n to jump to the first violation.", crate::text::count(m.len(), "event", "events"))}</p>
                    }.into_any(),
                    _ => view! { <p class="muted" data-testid="details-title">"Load a trace to see its events."</p> }.into_any(),
                })
            }}
        </section>
    }
}

/// The window of the violation list is re-cut when the cursor comes within this many rows of
/// its edge, so most steps leave the rows alone.
const VIOLATION_WINDOW_STEP: usize = 50;

/// The first row of the violation list's window for the row `at` nearest the cursor, among
/// `total` rows: a multiple of [`VIOLATION_WINDOW_STEP`], so it moves in jumps.
pub fn violation_window(at: usize, total: usize) -> (usize, usize) {
    let lo = at.saturating_sub(VIOLATION_ROWS / 2) / VIOLATION_WINDOW_STEP * VIOLATION_WINDOW_STEP;
    let hi = (lo + VIOLATION_ROWS).min(total);
    (hi.saturating_sub(VIOLATION_ROWS), hi)
}

/// `f` of the model and the positions (in its `violations()`) of the violation list's rows:
/// `filtered`'s (a chosen rule's), or with no rule chosen the default filter's, which the model
/// counted as the findings were listed.
fn with_filtered<R>(
    st: AppState,
    filtered: Memo<Option<Vec<u32>>>,
    f: impl FnOnce(&Model, &[u32]) -> R,
) -> Option<R> {
    st.model.with(|m| {
        let m = m.as_ref()?;
        Some(filtered.with(|rows| f(m, rows.as_deref().unwrap_or(m.marked_rows()))))
    })
}

/// The violation list (filtered by rule), a window of rows around the cursor. A step only
/// moves the "current" mark (two rows notified); the rows are rebuilt when the window moves,
/// the rule filter changes or the analysis lands.
#[component]
pub fn Violations() -> impl IntoView {
    let st = expect_context::<AppState>();
    // Positions (in `violations()`) of the rows of a chosen rule; `None` for the default
    // filter, whose rows the model counted as the findings were listed (`Model::marked_rows`:
    // at a million findings, filtering them all again when the analysis lands was a pause).
    let filtered = Memo::new(move |_| {
        let rule = st.rule.get()?;
        st.model.with(|m| {
            let m = m.as_ref()?;
            let rows = m.violations().iter().enumerate();
            Some(
                rows.filter(|(_, v)| crate::model::rule_matches(v, Some(&rule)))
                    .map(|(k, _)| k as u32)
                    .collect::<Vec<u32>>(),
            )
        })
    });
    // With a router chosen, the list is its loss roots (`n` / `p` walk them): their events.
    let roots = Memo::new(move |_| {
        let k = st.router()?;
        st.analysis.track();
        st.model.with(|m| {
            crate::lens::with_lens(m.as_ref()?, k, |l| {
                l.roots()
                    .iter()
                    .map(|r| r.event as u32)
                    .collect::<Vec<u32>>()
            })
        })
    });
    let total = move || {
        roots
            .with(|r| r.as_ref().map(Vec::len))
            .or_else(|| with_filtered(st, filtered, |_, rows| rows.len()))
            .unwrap_or(0)
    };
    let window = Memo::new(move |_| {
        let cursor = st.cursor.get().saturating_sub(1);
        if let Some(at) = roots.with(|r| {
            r.as_ref()
                .map(|r| (r.partition_point(|e| *e < cursor), r.len()))
        }) {
            return violation_window(at.0, at.1);
        }
        with_filtered(st, filtered, |m, rows| {
            let event = |k: &u32| {
                m.violations()
                    .get(*k as usize)
                    .map_or(u32::MAX, |v| v.event)
            };
            violation_window(rows.partition_point(|k| event(k) < cursor), rows.len())
        })
        .unwrap_or((0, 0))
    });
    let rows = move || {
        let (lo, hi) = window.get();
        if let Some(k) = st.router() {
            return st
                .model
                .with(|m| crate::lens::loss_rows(m.as_ref()?, k, lo, hi))
                .map(|r| r.1)
                .unwrap_or_default();
        }
        with_filtered(st, filtered, |m, rows| {
            let rows = rows.get(lo..hi).unwrap_or_default().iter();
            rows.filter_map(|k| m.violations().get(*k as usize))
                .map(|v| (v.event, v.rule.to_owned(), m.message(v)))
                .collect::<Vec<_>>()
        })
        .unwrap_or_default()
    };
    let current = Selector::new(move || st.current());
    view! {
        <section class="pane violations" class:losses=move || st.router().is_some() aria-label="Violations" data-testid="violations">
            {move || {
                let total = total();
                let (lo, hi) = window.get();
                let shown = hi - lo;
                let analysing = matches!(st.analysis.get(), AnalysisStatus::Running { .. });
                let reading = matches!(st.status.get(), LoadStatus::Loading { .. });
                let router = st.router();
                let title = match router {
                    Some(k) => format!("{}: {}", k.as_str(), crate::text::count(total, "loss root", "loss roots")),
                    // While the file is read no violation is looked for yet: no count.
                    None if reading => "Violations".to_string(),
                    None => format!("Violations ({total}{})", if analysing { " so far" } else { "" }),
                };
                view! {
                    <h2 data-testid="violations-title">{title}{(shown < total).then(|| format!(" · showing {shown} near the cursor"))}</h2>
                    {router.map(|k| view! { <p class="muted small" data-testid="loss-note">{if total == 0 && !analysing {
                        format!("{} lost no block of this trace.", k.as_str())
                    } else {
                        "Each loss root is an event this router lost; the events lost because of it are its cascade, ringed on the timeline. n / p walk the roots; \"all models\" lists the ordering violations.".to_string()
                    }}</p> })}
                    {analysing.then(|| view! {
                        <p class="muted small analysing" data-testid="violations-analysing" role="status">
                            <span class="spinner" aria-hidden="true"></span>
                            {move || if matches!(st.status.get(), LoadStatus::Loading { .. }) {
                                // The timeline shows the events read so far; the analysis starts after.
                                "Reading the trace: the violations are found once all of it is read."
                            } else {
                                "Analysing… child-first deliveries are listed; the consumer models' findings follow."
                            }}
                        </p>
                    })}
                    {(total == 0 && !analysing && router.is_none()).then(|| view! { <p class="muted">"No ordering violations in this trace."</p> })}
                }
            }}
            <ol class="vlist">
                {move || {
                    let current = current.clone();
                    rows().into_iter().map(move |(ev, rule, msg)| {
                        let current = current.clone();
                        view! {
                            <li class:current=move || current.selected(&Some(ev))>
                                <button class="vrow" on:click=move |_| { st.playing.set(false); st.seek(ev) }>
                                    <span class="mono idx">{format!("#{ev}")}</span>
                                    <span class="rule">{rule}</span>
                                    <span class="msg">{msg}</span>
                                </button>
                            </li>
                        }
                    }).collect_view()
                }}
            </ol>
        </section>
    }
}

/// Paste a trace as text.
#[component]
pub fn PasteDialog() -> impl IntoView {
    let st = expect_context::<AppState>();
    let text = RwSignal::new(String::new());
    view! {
        <Show when=move || st.paste.get()>
            <div class="overlay" role="dialog" aria-label="Paste trace">
                <div class="dialog wide">
                    <h2>"Paste a trace (JSON Lines)"</h2>
                    <textarea aria-label="Trace text" data-testid="paste-text" rows="12" prop:value=move || text.get()
                        on:input:target=move |e| text.set(e.target().value())></textarea>
                    <div class="row">
                        <button class="btn primary" aria-label="Load pasted trace" on:click=move |_| {
                            st.paste.set(false);
                            load::load_bytes(st, "pasted trace".into(), text.get_untracked().into_bytes(), crate::permalink::TraceOrigin::Local, None);
                        }>"Load"</button>
                        <button class="btn" on:click=move |_| st.paste.set(false)>"Cancel"</button>
                    </div>
                </div>
            </div>
        </Show>
    }
}
