//! The `?` dialog: keyboard shortcuts, the search grammar, a glossary of the verdict names and
//! marks the page shows.

use kvscope_core::consumers::VerdictKind;
use leptos::prelude::*;

use crate::controls::SHORTCUTS;
use crate::model::GRAMMAR;
use crate::AppState;

/// What a router's verdict means, in a few words (every verdict the core has).
pub fn verdict_meaning(v: VerdictKind) -> &'static str {
    match v {
        VerdictKind::Applied => "indexed: the router can route to this block",
        VerdictKind::DroppedOrphan => {
            "not indexed: its parent was unknown (its descendants are lost too)"
        }
        VerdictKind::Misrooted => "indexed under the wrong parent: unreachable for routing",
        VerdictKind::Pending => "held until its parent arrives (never released by the end)",
        VerdictKind::Replayed => "held, then applied once its parent arrived",
        VerdictKind::Truncated => "partly applied: the blocks after the first bad one were dropped",
        VerdictKind::Removed => "a removal that took effect",
        VerdictKind::RemoveUnknown => "a removal of a block the router did not hold",
        VerdictKind::Ignored => "skipped on purpose (the details say why)",
        VerdictKind::Cleared => "AllBlocksCleared applied",
    }
}

/// Other words the page uses.
pub const TERMS: &[(&str, &str)] = &[
    ("child first", "a block delivered before its parent block: the ordering violation routers lose blocks over"),
    ("in-job / across-jobs / ambiguous", "the child and its parent in one transfer job, in two, or unknown"),
    ("loss root", "an event a router lost that made later events unreachable"),
    ("cascade", "the later events lost because of a loss root (ringed on the timeline)"),
    ("at cursor / end of trace", "a verdict as known at the cursor, or the final one"),
];

/// One section of the dialog: a title and `(term, meaning)` rows. Every section has this one
/// shape (a distinct view shape per section would cost wasm).
fn section(
    title: &'static str,
    id: &'static str,
    rows: Vec<(&'static str, &'static str)>,
) -> impl IntoView {
    view! {
        <h2>{title}</h2>
        <table class="kv" data-testid=id>
            {rows.into_iter().map(|(k, v)| view! { <tr><th><code>{k}</code></th><td>{v}</td></tr> }).collect_view()}
        </table>
    }
}

/// `?`: shortcuts, search grammar and glossary.
#[component]
pub fn HelpOverlay() -> impl IntoView {
    let st = expect_context::<AppState>();
    view! {
        <Show when=move || st.help.get()>
            <div class="overlay" role="dialog" aria-label="Help" data-testid="help" on:click=move |_| st.help.set(false)>
                <div class="dialog wide help" on:click=|e| e.stop_propagation()>
                    {[
                        section("Keyboard shortcuts", "shortcuts", SHORTCUTS.to_vec()),
                        section("Search", "search-grammar", GRAMMAR.to_vec()),
                        section("Glossary", "glossary", VerdictKind::ALL.iter().map(|v| (v.as_str(), verdict_meaning(*v))).chain(TERMS.iter().copied()).collect()),
                    ]}
                    <p class="muted">"Timeline: drag to pan, wheel to zoom, hover for what an event is, click to inspect it, double-click to move the cursor there."</p>
                    <button class="btn" on:click=move |_| st.help.set(false)>"Close"</button>
                </div>
            </div>
        </Show>
    }
}
