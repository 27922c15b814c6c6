//! Drawing the router lens over the lanes: what the chosen router did with each visible event
//! (see [`crate::lens`]). Zoomed in, each non-applied event's mark gets its own sign (dropped:
//! struck through and hatched; misrooted: a box; pending: a dot above; replayed: a bar below;
//! ignored: a cross). Zoomed out, a thin bar under each lane marks the pixel columns holding
//! such events, dropped ones drawn last so they stay visible.

use kvscope_core::consumers::ConsumerKind;
use web_sys::CanvasRenderingContext2d as Ctx;

use super::geometry::*;
use crate::lens::{with_lens, LensMark};
use crate::model::Model;
use crate::Theme;

/// The colour of a lens mark.
pub fn lens_colour(theme: Theme, k: LensMark) -> &'static str {
    let dark = theme == Theme::Dark;
    match (k, dark) {
        (LensMark::Applied, false) => "#2f6fdb",
        (LensMark::Applied, true) => "#5b9cff",
        (LensMark::Dropped, false) => "#d92d2d",
        (LensMark::Dropped, true) => "#ff5a5a",
        (LensMark::Misrooted, false) => "#8a4fd6",
        (LensMark::Misrooted, true) => "#b48cff",
        (LensMark::Pending, false) => "#c77a12",
        (LensMark::Pending, true) => "#f0a33a",
        (LensMark::Replayed, false) => "#0b8a5f",
        (LensMark::Replayed, true) => "#3ddc97",
        (LensMark::Ignored, false) => "#6b7585",
        (LensMark::Ignored, true) => "#8d97a7",
    }
}

/// Draw `router`'s verdict marks for the visible events of frame `f` (after the lanes).
pub fn draw_lens(ctx: &Ctx, m: &Model, f: Frame, theme: Theme, router: ConsumerKind) {
    let n = m.len() as u32;
    let Some((lo, hi)) = f.range(n) else { return };
    ctx.save();
    ctx.begin_path();
    ctx.rect(GUTTER, 0.0, f.plot_w(), f.h);
    ctx.clip();
    let (mark_w, mark_h) = mark_size(&f);
    if f.vp.per_px <= 0.5 {
        with_lens(m, router, |lens| {
            lens.marks(lo, hi, |i, k| {
                let Some(y) = m.lane_of.get(i as usize).and_then(|l| f.lane_y(*l)) else {
                    return;
                };
                let x = f.x(i);
                let (x0, y0) = (x - mark_w / 2.0, y - mark_h / 2.0);
                let colour = lens_colour(theme, k);
                ctx.set_stroke_style_str(colour);
                ctx.set_fill_style_str(colour);
                ctx.set_line_width(2.0);
                ctx.begin_path();
                match k {
                    LensMark::Dropped => {
                        // Hatched body, struck through past its edges.
                        ctx.set_line_width(1.0);
                        let mut d = 0.0;
                        while d < mark_w + mark_h {
                            ctx.move_to(x0 + d.min(mark_w), y0 + (d - mark_w).max(0.0));
                            ctx.line_to(x0 + (d - mark_h).max(0.0), y0 + d.min(mark_h));
                            d += 4.0;
                        }
                        ctx.stroke();
                        ctx.begin_path();
                        ctx.set_line_width(2.0);
                        ctx.move_to(x0 - 3.0, y);
                        ctx.line_to(x0 + mark_w + 3.0, y);
                    }
                    LensMark::Misrooted => ctx.rect(x0 - 2.0, y0 - 2.0, mark_w + 4.0, mark_h + 4.0),
                    LensMark::Pending => {
                        let _ = ctx.arc(x, y0 - 5.0, 2.5, 0.0, std::f64::consts::TAU);
                        ctx.fill();
                    }
                    LensMark::Replayed => ctx.fill_rect(x0, y0 + mark_h + 2.0, mark_w, 2.5),
                    LensMark::Ignored => {
                        ctx.move_to(x0, y0);
                        ctx.line_to(x0 + mark_w, y0 + mark_h);
                        ctx.move_to(x0 + mark_w, y0);
                        ctx.line_to(x0, y0 + mark_h);
                    }
                    LensMark::Applied => {}
                }
                ctx.stroke();
            })
        });
    } else {
        // One bit per mark per (lane, column); drawn in legend order, dropped last on top.
        // Per shown lane only (many per-job lanes are scrolled away).
        let cols = f.plot_w().ceil() as usize + 1;
        let shown = f.shown();
        let slots = f.slot_map(&shown);
        let mut bins = vec![0u8; shown.len() * cols];
        with_lens(m, router, |lens| {
            lens.marks(lo, hi, |i, k| {
                let Some(&s) = m
                    .lane_of
                    .get(i as usize)
                    .and_then(|l| slots.get(usize::from(*l)))
                else {
                    return;
                };
                let c = ((f64::from(i) - f.vp.start) / f.vp.per_px).floor();
                if s != u32::MAX && c >= 0.0 && (c as usize) < cols {
                    if let Some(b) = bins.get_mut(s as usize * cols + c as usize) {
                        *b |= 1 << (k as u8);
                    }
                }
            })
        });
        for k in [
            LensMark::Ignored,
            LensMark::Replayed,
            LensMark::Pending,
            LensMark::Misrooted,
            LensMark::Dropped,
        ] {
            ctx.set_fill_style_str(lens_colour(theme, k));
            ctx.begin_path();
            for (slot, &l) in shown.iter().enumerate() {
                let Some(y) = f.lane_y(l) else { continue };
                let y = y + mark_h / 2.0 + 1.0;
                let row = bins.get(slot * cols..(slot + 1) * cols).unwrap_or_default();
                let mut c = 0;
                while c < row.len() {
                    if row[c] & (1 << (k as u8)) != 0 {
                        let s = c;
                        while c < row.len() && row[c] & (1 << (k as u8)) != 0 {
                            c += 1;
                        }
                        ctx.rect(GUTTER + s as f64, y, (c - s) as f64, 3.0);
                    } else {
                        c += 1;
                    }
                }
            }
            ctx.fill();
        }
    }
    ctx.set_line_width(1.0);
    ctx.restore();
}

/// Highlight the cascade of loss root `root` on the cursor layer: a ring around the root and
/// each visible event lost because of it (zoomed out, one ring per pixel column).
pub fn draw_cascade(ctx: &Ctx, m: &Model, f: Frame, theme: Theme, root: u32, cascade: &[u32]) {
    let n = m.len() as u32;
    let Some((lo, hi)) = f.range(n) else { return };
    let colour = lens_colour(theme, LensMark::Dropped);
    ctx.save();
    ctx.begin_path();
    ctx.rect(GUTTER, 0.0, f.plot_w(), f.h);
    ctx.clip();
    let (mark_w, mark_h) = mark_size(&f);
    let (rw, rh) = (mark_w.max(4.0) + 6.0, mark_h + 6.0);
    let from = cascade.partition_point(|e| *e < lo);
    let to = cascade.partition_point(|e| *e <= hi);
    let visible = cascade.get(from..to).unwrap_or_default();
    ctx.set_stroke_style_str(colour);
    ctx.set_line_width(2.0);
    ctx.begin_path();
    let mut last_col = f64::NEG_INFINITY;
    for &e in std::iter::once(&root).chain(visible) {
        let Some(y) = m.lane_of.get(e as usize).and_then(|l| f.lane_y(*l)) else {
            continue;
        };
        let x = f.x(e);
        if x - last_col < 1.0 && e != root {
            continue;
        }
        last_col = x;
        ctx.rect(x - rw / 2.0, y - rh / 2.0, rw, rh);
    }
    ctx.stroke();
    ctx.set_line_width(1.0);
    ctx.restore();
}
