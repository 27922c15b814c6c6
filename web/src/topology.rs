//! The Topology tab: the block tree around the current event, laid out as chains with
//! collapsed runs ([`crate::model::topology`]), each block coloured by its state for the chosen
//! router at the cursor or at the end of the trace (the details' "At cursor / End of trace"
//! switch). At a loss root of the router the tree is the one at the end of the trace, so the
//! whole cascade shows (blocks stored after the cursor are "not stored yet" at the cursor).

use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};

use kvscope_core::consumers::ConsumerKind;
use kvscope_core::replay::Replay;
use leptos::prelude::*;

use crate::inspect::{analysing_view, block_state};
use crate::lens::VerdictTime;
use crate::model::topology::{layout, Chain, Look, Segment};
use crate::model::Model;
use crate::text::{count, mid_ellipsis, HASH_CHARS};
use crate::AppState;

/// Blocks laid out at most.
const TREE_BLOCKS: usize = 1000;

fn short(h: u64) -> String {
    mid_ellipsis(&h.to_string(), HASH_CHARS)
}

/// State of `hash` for `kind` as of the replay's cursor (`later`: not stored by then).
fn state_of(r: &Replay, hash: u64, kind: ConsumerKind) -> &'static str {
    let b = r.block(hash);
    let v = b
        .last_outcome
        .iter()
        .find(|(k, _, _)| *k == kind)
        .map(|(_, _, v)| *v);
    match (b.first_stored, v) {
        (None, None) => "later",
        (_, v) => block_state(v),
    }
}

/// The tab's view at cursor `cursor` for router `kind`.
pub fn topology_view(st: AppState, m: &Model, cursor: u32, kind: ConsumerKind) -> AnyView {
    let Some(cur) = cursor.checked_sub(1) else {
        return view! { <p class="muted">"Nothing stored yet: step forward to grow the tree."</p> }
            .into_any();
    };
    let when = st.verdict_time.get();
    let at_root = crate::lens::with_lens(m, kind, |l| l.root_at(cur).is_some()).unwrap_or(false);
    let Some(mut r) = m.replay() else {
        return analysing_view(st, m);
    };
    // The tree: as stored by the cursor, or by the end (end-of-trace colours, or a loss root
    // whose cascade comes later).
    let whole = when == VerdictTime::EndOfTrace || at_root;
    let upto = if whole { r.len() } else { cursor as usize };
    r.seek(upto);
    let Some(info) = r.event_info(cur as usize) else {
        return view! { <p class="muted">"No event."</p> }.into_any();
    };
    let current: HashSet<u64> = info.hashes.iter().copied().collect();
    let Some(&start) = info.hashes.first() else {
        return view! { <p class="muted">"This event names no blocks (AllBlocksCleared)."</p> }
            .into_any();
    };
    // Walk up to the root (bounded), then collect the stored subtree (bounded).
    let mut root = start;
    let mut seen = HashSet::default();
    for _ in 0..1024 {
        if !seen.insert(root) {
            break;
        }
        match r.block(root).parent {
            Some(p) if r.block(p).first_stored.is_some() => root = p,
            _ => break,
        }
    }
    // The root's named parent when it is not stored (child first): shown as a ghost.
    let ghost = r
        .block(root)
        .parent
        .filter(|p| r.block(*p).first_stored.is_none());
    let mut children: HashMap<u64, Vec<u64>> = HashMap::default();
    let mut queue = std::collections::VecDeque::from([root]);
    let mut visited = HashSet::default();
    while let Some(h) = queue.pop_front() {
        if visited.len() > TREE_BLOCKS || !visited.insert(h) {
            continue;
        }
        let kids = r.block(h).children;
        queue.extend(kids.iter().copied());
        children.insert(h, kids);
    }
    // Colours: at the cursor or at the end of the trace.
    if when == VerdictTime::AtCursor && whole {
        r.seek(cursor as usize);
    }
    let states: HashMap<u64, &'static str> = visited
        .iter()
        .map(|h| (*h, state_of(&r, *h, kind)))
        .collect();
    drop(r);
    let tree = layout(
        root,
        &children,
        |h| states.get(&h).copied().unwrap_or("unknown"),
        &current,
        TREE_BLOCKS,
    );
    let chain = chain_view(st, &tree.root);
    let chain = match ghost {
        Some(p) => view! {
            <span class="node s-unknown ghost" title=format!("{p}: named as parent, not stored")>
                <span class="dot"></span><span class="mono">{short(p)}</span><span class="muted small">"parent not stored yet"</span>
            </span>
            <div class="branches">{chain}</div>
        }
        .into_any(),
        None => chain,
    };
    let legend = ["indexed", "pending", "dropped", "misrooted", "removed", "later"]
        .into_iter()
        .map(|s| view! { <span class=format!("node s-{s}")><span class="dot"></span>{state_label(s)}</span> })
        .collect_view();
    let caption = format!(
        "{} around event #{cur}, coloured by {} {}{}{}.",
        count(tree.blocks, "block", "blocks"),
        kind.as_str(),
        if when == VerdictTime::EndOfTrace {
            "at the end of the trace"
        } else {
            "at the cursor"
        },
        if at_root {
            " (a loss root: the whole cascade)"
        } else {
            ""
        },
        if tree.truncated {
            format!(" (first {TREE_BLOCKS})")
        } else {
            String::new()
        },
    );
    view! {
        <p class="muted small" data-testid="topology-caption">{caption}</p>
        <div class="tabs">{legend}</div>
        <div class="topology" data-testid="topology">{chain}</div>
    }
    .into_any()
}

fn state_label(s: &'static str) -> &'static str {
    if s == "later" {
        "not stored yet"
    } else {
        s
    }
}

fn node_class(look: Look) -> String {
    format!("node link-plain s-{}", look.state)
}

fn node_title(look: Look) -> &'static str {
    if look.under_dropped {
        " (an ancestor was dropped)"
    } else {
        ""
    }
}

/// A chain: its segments on one row (wrapping), its branches below.
fn chain_view(st: AppState, c: &Chain) -> AnyView {
    let segments = c
        .segments
        .iter()
        .map(|s| segment_view(st, s))
        .collect_view();
    let branches = (!c.branches.is_empty()).then(|| {
        let b = c
            .branches
            .iter()
            .map(|b| view! { <li>{chain_view(st, b)}</li> })
            .collect_view();
        view! { <ul class="tree branches">{b}</ul> }
    });
    view! { <div class="chain">{segments}</div>{branches} }.into_any()
}

fn segment_view(st: AppState, s: &Segment) -> AnyView {
    let (first, look, label, title, is_run) = match *s {
        Segment::Block { hash, look } => (
            hash,
            look,
            short(hash),
            format!("{hash}: {}{}", state_label(look.state), node_title(look)),
            false,
        ),
        Segment::Run {
            first,
            last,
            count: n,
            look,
        } => (
            first,
            look,
            format!("{} ×{n}", short(first)),
            format!(
                "{n} blocks, {first} … {last}: {}{}",
                state_label(look.state),
                node_title(look)
            ),
            true,
        ),
    };
    let q = format!("hash={first}");
    view! {
        <button class=node_class(look) class:run=is_run class:under-dropped=look.under_dropped && look.state != "dropped"
            class:current=look.current title=title
            on:click=move |_| { st.query.set(q.clone()); st.search_next(); }>
            <span class="dot"></span><span class="mono">{label}</span>
        </button>
    }
    .into_any()
}
