//! The timeline's legend: every mark the canvases draw, each as a small drawing in the colour
//! the canvas uses, so a first look needs no guessing (event kinds, violations, arcs, the
//! dashed cross-lane line, the cursor, search matches, and the router lens' verdict marks).

use leptos::prelude::*;

use super::draw::palette;
use super::{lens_colour, match_colour};
use crate::lens::LensMark;
use crate::Theme;

/// How a glyph is painted: an SVG path (22 × 12 box), filled or stroked, dashed or not.
#[derive(Clone, Copy)]
enum Paint {
    Fill,
    Stroke,
    Dashed,
}

fn glyph(d: &'static str, colour: &'static str, paint: Paint) -> impl IntoView {
    let (fill, stroke) = match paint {
        Paint::Fill => (colour, "none"),
        Paint::Stroke | Paint::Dashed => ("none", colour),
    };
    let dash = matches!(paint, Paint::Dashed).then_some("3 2");
    view! {
        <svg class="glyph" width="22" height="12" viewBox="0 0 22 12" aria-hidden="true">
            <path d=d fill=fill stroke=stroke stroke-width="1.6" stroke-dasharray=dash></path>
        </svg>
    }
}

/// The marks of the lanes, edges, cursor and search: `(path, colour, paint, label)`, in the
/// order the legend lists them. One list (not one view per mark): each distinct view shape
/// costs wasm.
fn marks(theme: Theme) -> [(&'static str, &'static str, Paint, &'static str); 9] {
    let p = palette(theme);
    [
        ("M7 2h8v8h-8z", p.stored, Paint::Fill, "BlockStored"),
        ("M8 3h6v6h-6z", p.removed, Paint::Stroke, "BlockRemoved"),
        ("M10 0h2v12h-2z", p.cleared, Paint::Fill, "AllBlocksCleared"),
        ("M7 2h8v8h-8z", p.violation, Paint::Fill, "violation"),
        ("M2 10Q11 0 20 10", p.edge, Paint::Stroke, "parent → child"),
        (
            "M20 2Q11 12 2 2M2 2l4 0M2 2l1 4",
            p.violation,
            Paint::Stroke,
            "child before its parent",
        ),
        (
            "M2 2L20 10",
            p.edge,
            Paint::Dashed,
            "parent in another lane",
        ),
        ("M11 0v12", p.cursor, Paint::Stroke, "cursor"),
        (
            "M4 1h14v10h-14z",
            match_colour(theme),
            Paint::Stroke,
            "search match",
        ),
    ]
}

/// The legend of the lanes, edges, cursor and search marks, for a theme.
pub fn marks_legend(theme: Theme) -> impl IntoView {
    marks(theme)
        .into_iter()
        .map(|(d, colour, paint, label)| {
            view! { <span class="legend-item">{glyph(d, colour, paint)}{label}</span> }
        })
        .collect_view()
}

/// The router lens' mark for a verdict mark, as the canvas draws it.
pub fn lens_glyph(theme: Theme, m: LensMark) -> impl IntoView {
    let (d, paint) = match m {
        LensMark::Applied => ("M7 2h8v8h-8z", Paint::Fill),
        LensMark::Dropped => ("M7 2h8v8h-8zM4 6h14M7 6l4-4M11 10l4-4", Paint::Stroke),
        LensMark::Misrooted => ("M5 0h12v12h-12z", Paint::Stroke),
        LensMark::Pending => ("M9 1h4v4h-4z", Paint::Fill),
        LensMark::Replayed => ("M7 9h8v3h-8z", Paint::Fill),
        LensMark::Ignored => ("M7 2l8 8M15 2l-8 8", Paint::Stroke),
    };
    glyph(d, lens_colour(theme, m), paint)
}
