//! The search box: the query (grammar in [`crate::model::GRAMMAR`], shown by `?`), its match
//! count, next/previous match (buttons, Enter / Shift+Enter) and the list of matches the
//! timeline highlights. The matching itself is the view-model's ([`Model::matches`]).

use leptos::ev;
use leptos::prelude::*;

use crate::model::{match_note, next_match, Query};
use crate::AppState;

fn compute(st: AppState, text: &str) -> Vec<u32> {
    st.model.with_untracked(|m| {
        m.as_ref()
            .map(|m| m.matches(&Query::parse(text)))
            .unwrap_or_default()
    })
}

/// Recompute [`AppState::matches`] when the query, the trace or its analysis' completion
/// changes. Not on the analysis' progress: that changes every slice, and a new match list
/// (even an equal one) redraws every lane of the timeline, which at a million events took
/// about a tenth of the analysis' time.
pub fn track_matches(st: AppState) {
    let analysed =
        Memo::new(move |_| matches!(st.analysis.get(), crate::AnalysisStatus::Done { .. }));
    Effect::new(move |_| {
        let text = st.query.get();
        analysed.track();
        st.model.track();
        let found = compute(st, &text);
        if st.matches.with_untracked(|m| *m != found) {
            st.matches.set(found);
        }
    });
}

/// Go to the next (`forward`) or previous match from the cursor, wrapping; whether there is
/// one. Matches the query first (the effect that keeps [`AppState::matches`] runs later).
pub fn go(st: AppState, forward: bool) -> bool {
    let events = compute(st, &st.query.get_untracked());
    let cur = st.cursor.get_untracked().checked_sub(1);
    let target = next_match(&events, cur, forward);
    st.matches.set(events);
    if let Some(t) = target {
        st.playing.set(false);
        st.seek(t);
    }
    target.is_some()
}

/// A previous (`forward == false`) or next match button (one view shape for both).
fn match_button(st: AppState, forward: bool) -> impl IntoView {
    let (label, title, text) = if forward {
        ("Next match", "Next match (Enter)", "›")
    } else {
        ("Previous match", "Previous match (Shift+Enter)", "‹")
    };
    view! {
        <button class="btn icon" aria-label=label title=title
            prop:disabled=move || st.matches.with(Vec::is_empty)
            on:click=move |_| { go(st, forward); }>{text}</button>
    }
}

/// The search field, its previous/next buttons and the match note.
#[component]
pub fn SearchBox() -> impl IntoView {
    let st = expect_context::<AppState>();
    track_matches(st);
    let note = move || {
        let cur = st.current();
        let q = Query::parse(&st.query.get());
        st.matches.with(|m| match_note(&q, m, cur))
    };
    view! {
        <input type="search" class="search" aria-label="Search" data-testid="search" placeholder="/ search: llmd=dropped, hash=…, tier=CPU (? for more)"
            prop:value=move || st.query.get()
            on:input:target=move |e| st.query.set(e.target().value())
            on:keydown=move |e: ev::KeyboardEvent| if e.key() == "Enter" { e.prevent_default(); go(st, !e.shift_key()); }/>
        {match_button(st, false)}
        {match_button(st, true)}
        <span class="note" data-testid="search-note" role="status">{note}</span>
    }
}
