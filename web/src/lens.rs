//! The router lens of the loaded trace: the core's [`RouterLens`] (marks, loss roots and
//! their cascades) over the model's replay.

use kvscope_core::consumers::ConsumerKind;
pub use kvscope_core::replay::{LensMark, RouterLens, VerdictTime};

use crate::model::Model;
use crate::AppState;
use leptos::prelude::*;

/// `f` with `router`'s lens; `None` before the analysis has run or when the model did not
/// run that router.
pub fn with_lens<T>(
    m: &Model,
    router: ConsumerKind,
    f: impl FnOnce(RouterLens<'_>) -> T,
) -> Option<T> {
    let r = m.replay()?;
    RouterLens::new(r.analysis(), router).map(f)
}

/// The loss root whose cascade is highlighted: the root of the inspected event, else of the
/// current one (`None` when neither lost anything for `lens`' router). Tracks both.
pub fn selected_root(st: AppState, lens: &RouterLens<'_>) -> Option<u32> {
    let sel = st.inspected.get().or_else(|| st.current())?;
    lens.root_of(sel)
}

/// A row of the loss list: `(root event, its first block and missing parent, what was lost)`.
pub type LossRow = (u32, String, String);

/// The loss list's rows for `router`, as the violation list shows them: `(root event, its
/// first block and missing parent, what was lost with it)`, the roots whose index is in
/// `lo..hi`; and the number of roots. `None` before the analysis.
pub fn loss_rows(
    m: &Model,
    router: ConsumerKind,
    lo: usize,
    hi: usize,
) -> Option<(usize, Vec<LossRow>)> {
    use crate::text::{count, mid_ellipsis, HASH_CHARS};
    let short = |h: u64| mid_ellipsis(&h.to_string(), HASH_CHARS);
    with_lens(m, router, |l| {
        let roots = l.roots();
        let rows = roots
            .get(lo.min(roots.len())..hi.min(roots.len()))
            .unwrap_or_default()
            .iter()
            .map(|r| {
                let block = r
                    .first_block
                    .map_or_else(|| "no block".to_string(), |b| format!("block {}", short(b)));
                let parent = r.missing_parent.map_or_else(
                    || " · no missing parent".to_string(),
                    |p| format!(" · parent {} missing", short(p)),
                );
                let lost = format!(
                    "{} lost: {}",
                    count(r.blocks, "block", "blocks"),
                    match r.events.saturating_sub(1) {
                        0 => "this event only".to_owned(),
                        d => format!("this event and {}", count(d, "descendant", "descendants")),
                    }
                );
                (r.event as u32, block + &parent, lost)
            })
            .collect();
        (roots.len(), rows)
    })
}
