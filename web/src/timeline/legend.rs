//! The timeline's legend: every mark the canvases draw (event kinds, violations, arcs, the
//! dashed cross-lane line, the cursor, search matches, and the router lens' verdict marks),
//! each as a small glyph drawn by the page's CSS (`.g-*` in `index.html`, in the canvas'
//! colours) next to its name: static markup, no per-theme view.

use leptos::prelude::*;

use crate::lens::LensMark;

/// `(glyph class, label)` of the lanes, edges, cursor and search marks, in legend order.
const MARKS: [(&str, &str); 9] = [
    ("g g-stored", "BlockStored"),
    ("g g-removed", "BlockRemoved"),
    ("g g-cleared", "AllBlocksCleared"),
    ("g g-violation", "violation"),
    ("g g-arc", "parent → child"),
    ("g g-back", "child before its parent"),
    ("g g-cross", "parent in another lane"),
    ("g g-cursor", "cursor"),
    ("g g-match", "search match"),
];

/// The legend of the lanes, edges, cursor and search marks.
pub fn marks_legend() -> impl IntoView {
    MARKS
        .map(|(class, label)| view! { <span class="legend-item"><i class=class aria-hidden="true"></i>{label}</span> })
        .collect_view()
}

/// The router lens' glyph of a verdict mark (`.g-applied`, `.g-dropped`, ...), as the canvas
/// draws it.
pub fn lens_glyph(m: LensMark) -> impl IntoView {
    view! { <i class=format!("g g-{}", m.as_str()) aria-hidden="true"></i> }
}
