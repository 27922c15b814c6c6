//! The search box: the query (grammar in [`crate::model::GRAMMAR`], shown by `?`), its match
//! count, next/previous match (buttons, Enter / Shift+Enter) and the list of matches the
//! timeline highlights. The matching itself is the view-model's ([`Model::matches`]).

use leptos::ev;
use leptos::prelude::*;

use crate::model::{match_note, next_match, Model, Query};
use crate::AppState;

/// The events matching a query, for the query text and trace they were computed for.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Matches {
    /// The query text.
    pub query: String,
    /// Whether the analysis was done when they were computed (verdict terms need it).
    pub analysed: bool,
    /// Matching events, ascending.
    pub events: Vec<u32>,
}

fn compute(m: &Model, text: &str) -> Matches {
    Matches {
        query: text.to_owned(),
        analysed: m.is_analysed(),
        events: m.matches(&Query::parse(text)),
    }
}

/// Recompute [`AppState::matches`] when the query, the trace or its analysis changes.
pub fn track_matches(st: AppState) {
    Effect::new(move |_| {
        let text = st.query.get();
        st.analysis.track();
        let fresh = st.model.with(|m| m.as_ref().map(|m| compute(m, &text)));
        st.matches.set(fresh.unwrap_or_default());
    });
}

/// Go to the next (`forward`) or previous match from the cursor, wrapping; whether there is
/// one. Computes the matches first when they are stale (the effect runs later).
pub fn go(st: AppState, forward: bool) -> bool {
    let text = st.query.get_untracked();
    let stale = st.matches.with_untracked(|m| {
        m.query != text
            || !m.analysed
                && st
                    .model
                    .with_untracked(|x| x.as_ref().is_some_and(|x| x.is_analysed()))
    });
    if stale {
        if let Some(fresh) = st
            .model
            .with_untracked(|m| m.as_ref().map(|m| compute(m, &text)))
        {
            st.matches.set(fresh);
        }
    }
    let cur = st.cursor.get_untracked().checked_sub(1);
    let target = st
        .matches
        .with_untracked(|m| next_match(&m.events, cur, forward));
    if let Some(t) = target {
        st.playing.set(false);
        st.seek(t);
    }
    target.is_some()
}

/// The search field, its previous/next buttons and the match note.
#[component]
pub fn SearchBox() -> impl IntoView {
    let st = expect_context::<AppState>();
    track_matches(st);
    let note = move || {
        let cur = st.current();
        st.matches
            .with(|m| match_note(&Query::parse(&m.query), &m.events, cur))
    };
    let none = move || st.matches.with(|m| m.events.is_empty());
    view! {
        <input type="search" class="search" aria-label="Search" data-testid="search" placeholder="/ search: llmd=dropped, hash=…, tier=CPU (? for more)"
            prop:value=move || st.query.get()
            on:input:target=move |e| st.query.set(e.target().value())
            on:keydown=move |e: ev::KeyboardEvent| if e.key() == "Enter" { e.prevent_default(); go(st, !e.shift_key()); }/>
        <button class="btn icon" aria-label="Previous match" title="Previous match (Shift+Enter)" prop:disabled=none
            on:click=move |_| { go(st, false); }>"‹"</button>
        <button class="btn icon" aria-label="Next match" title="Next match (Enter)" prop:disabled=none
            on:click=move |_| { go(st, true); }>"›"</button>
        <span class="note" data-testid="search-note" role="status">{note}</span>
    }
}
