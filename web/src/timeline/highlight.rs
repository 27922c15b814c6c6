//! Drawing the search's matches over the lanes: zoomed in, a ring around each visible match;
//! zoomed out, a bar above the lane in each pixel column holding one.

use web_sys::CanvasRenderingContext2d as Ctx;

use super::geometry::*;
use crate::model::Model;
use crate::Theme;

/// The colour of search highlights.
pub fn match_colour(theme: Theme) -> &'static str {
    match theme {
        Theme::Light => "#e0a800",
        Theme::Dark => "#ffd43b",
    }
}

/// Highlight the matches (ascending event indices) visible in frame `f`.
pub fn draw_matches(ctx: &Ctx, m: &Model, f: Frame, theme: Theme, matches: &[u32]) {
    let Some((lo, hi)) = f.range(m.len() as u32) else {
        return;
    };
    let from = matches.partition_point(|e| *e < lo);
    let to = matches.partition_point(|e| *e <= hi);
    let visible = matches.get(from..to).unwrap_or_default();
    if visible.is_empty() {
        return;
    }
    ctx.save();
    ctx.begin_path();
    ctx.rect(GUTTER, 0.0, f.plot_w(), f.h);
    ctx.clip();
    let colour = match_colour(theme);
    let (mark_w, mark_h) = mark_size(&f);
    ctx.set_stroke_style_str(colour);
    ctx.set_fill_style_str(colour);
    ctx.set_line_width(2.0);
    ctx.begin_path();
    let zoomed_in = f.vp.per_px <= 0.5;
    let mut last = (f64::NEG_INFINITY, u16::MAX);
    for &e in visible {
        let Some(&l) = m.lane_of.get(e as usize) else {
            continue;
        };
        let Some(y) = f.lane_y(l) else { continue };
        let x = f.x(e);
        if zoomed_in {
            ctx.rect(
                x - mark_w / 2.0 - 4.5,
                y - mark_h / 2.0 - 4.5,
                mark_w + 9.0,
                mark_h + 9.0,
            );
        } else if (x.floor(), l) != last {
            last = (x.floor(), l);
            ctx.fill_rect(x.floor(), y - mark_h / 2.0 - 4.0, 1.0, 3.0);
        }
    }
    ctx.stroke();
    ctx.set_line_width(1.0);
    ctx.restore();
}
