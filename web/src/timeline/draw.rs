//! Drawing the timeline's canvases: the head (overview strip, axis), the lanes (bands, marks,
//! edges) and the cursor layer.

use web_sys::CanvasRenderingContext2d as Ctx;

use super::geometry::*;
use crate::model::{Edge, EdgeKind, EventKind, Model};
use crate::Theme;

pub(super) struct Palette {
    pub(super) bg: &'static str,
    pub(super) band: &'static str,
    pub(super) grid: &'static str,
    pub(super) text: &'static str,
    pub(super) muted: &'static str,
    pub(super) stored: &'static str,
    pub(super) removed: &'static str,
    pub(super) cleared: &'static str,
    pub(super) violation: &'static str,
    pub(super) edge: &'static str,
    pub(super) cursor: &'static str,
    pub(super) cursor_fill: &'static str,
}

pub(super) fn palette(t: Theme) -> Palette {
    match t {
        Theme::Light => Palette {
            bg: "#ffffff",
            band: "#f4f6f9",
            grid: "#dde2ea",
            text: "#1d2430",
            muted: "#6b7585",
            stored: "#2f6fdb",
            removed: "#c77a12",
            cleared: "#8a4fd6",
            violation: "#d92d2d",
            edge: "#9aa5b5",
            cursor: "#0b8a5f",
            cursor_fill: "rgba(11,138,95,0.10)",
        },
        Theme::Dark => Palette {
            bg: "#151a22",
            band: "#1b212b",
            grid: "#2c3441",
            text: "#e3e8ef",
            muted: "#8d97a7",
            stored: "#5b9cff",
            removed: "#f0a33a",
            cleared: "#b48cff",
            violation: "#ff5a5a",
            edge: "#5d687a",
            cursor: "#3ddc97",
            cursor_fill: "rgba(61,220,151,0.12)",
        },
    }
}

/// Shorten `label` with an ellipsis until it is at most `max_w` px wide in the current font.
pub(super) fn fit_text(ctx: &Ctx, label: &mut String, max_w: f64) {
    let width = |s: &str| ctx.measure_text(s).map(|m| m.width()).unwrap_or(0.0);
    if width(label) <= max_w {
        return;
    }
    let mut chars: Vec<char> = label.chars().collect();
    while !chars.is_empty() {
        chars.pop();
        let s = format!("{}…", chars.iter().collect::<String>());
        if width(&s) <= max_w {
            *label = s;
            return;
        }
    }
    label.clear();
}

pub(super) fn arrow_head(ctx: &Ctx, x: f64, y: f64, dx: f64, dy: f64, size: f64) {
    let len = (dx * dx + dy * dy).sqrt().max(1e-6);
    let (ux, uy) = (dx / len, dy / len);
    ctx.begin_path();
    ctx.move_to(x, y);
    ctx.line_to(
        x - ux * size - uy * size * 0.6,
        y - uy * size + ux * size * 0.6,
    );
    ctx.line_to(
        x - ux * size + uy * size * 0.6,
        y - uy * size - ux * size * 0.6,
    );
    ctx.close_path();
    ctx.fill();
}

/// Draw the head: the overview strip (the whole trace, its violations, the viewport window and
/// the cursor) and the axis of the lanes below: event index, and under it `below(i)` (the
/// batch and time). `f` is the lanes' frame (same x axis); `cols` comes from
/// [`overview_columns`].
pub fn draw_head(
    ctx: &Ctx,
    n: u32,
    current: Option<u32>,
    f: Frame,
    theme: Theme,
    cols: &[(u32, u32)],
    below: &dyn Fn(u32) -> String,
) {
    let p = palette(theme);
    ctx.set_fill_style_str(p.bg);
    ctx.fill_rect(0.0, 0.0, f.w.max(GUTTER) + 64.0, HEAD);
    ctx.set_fill_style_str(p.grid);
    ctx.fill_rect(0.0, HEAD - 1.0, f.w + 64.0, 1.0);
    ctx.set_font("10px system-ui, sans-serif");
    ctx.set_text_baseline("middle");
    ctx.set_fill_style_str(p.muted);
    let _ = ctx.fill_text("overview", 8.0, 6.5);
    let _ = ctx.fill_text("event #", 8.0, 20.0);
    let _ = ctx.fill_text("batch · time", 8.0, 32.0);
    if n == 0 {
        return;
    }
    let ow = f.plot_w();
    ctx.set_fill_style_str(p.band);
    ctx.fill_rect(GUTTER, 2.0, ow, 8.0);
    // Violations per column, as their share of the column's events (at least 2 px): clusters
    // stand out, a steady trickle is a low line.
    ctx.set_fill_style_str(p.violation);
    let per_col = (f64::from(n) / ow).max(1.0);
    for &(c, k) in cols {
        let hgt = (8.0 * f64::from(k) / per_col).clamp(2.0, 8.0);
        ctx.fill_rect(GUTTER + f64::from(c), 10.0 - hgt, 1.5, hgt);
    }
    let nf = f64::from(n);
    let a = GUTTER + (f.vp.start.max(0.0) / nf) * ow;
    let b = GUTTER + ((f.vp.start + ow * f.vp.per_px).min(nf) / nf) * ow;
    ctx.set_stroke_style_str(p.muted);
    ctx.set_line_width(1.0);
    ctx.stroke_rect(a.min(GUTTER + ow - 2.0), 1.5, (b - a).max(2.0), 9.0);
    if let Some(c) = current {
        ctx.set_fill_style_str(p.cursor);
        ctx.fill_rect(GUTTER + f64::from(c) / nf * ow, 0.0, 2.0, OVERVIEW_H);
    }
    // Axis labels (event index) for the visible range.
    let Some((lo, hi)) = f.range(n) else { return };
    ctx.save();
    ctx.begin_path();
    ctx.rect(GUTTER, OVERVIEW_H, ow, HEAD - OVERVIEW_H);
    ctx.clip();
    ctx.set_font("11px system-ui, sans-serif");
    ctx.set_fill_style_str(p.muted);
    // Wide enough steps for the second line (`batch 1234 · +12.25 s`).
    let step = nice_step(AXIS_PX * f.vp.per_px);
    let step_px = step / f.vp.per_px;
    let mut t = (f64::from(lo) / step).floor() * step;
    let mut prev = String::new();
    while t <= f64::from(hi) {
        let x = f.x(t as u32);
        ctx.fill_rect(x.floor(), OVERVIEW_H + 1.0, 1.0, HEAD - OVERVIEW_H - 2.0);
        let _ = ctx.fill_text(&format!("#{}", t as u64), x + 3.0, 20.0);
        // The batch and time: when they change, and only where the whole label fits (before
        // the next tick and the edge), never cut or overlapping.
        let label = below(t as u32);
        let w = ctx.measure_text(&label).map_or(f64::MAX, |m| m.width());
        if label != prev && x + 3.0 + w < (x + step_px).min(f.w) {
            let _ = ctx.fill_text(&label, x + 3.0, 32.0);
        }
        prev = label;
        t += step;
    }
    ctx.restore();
}

/// Draw one edge (`touches`: it touches the current event: thicker, cursor-coloured).
pub(super) fn draw_edge(ctx: &Ctx, m: &Model, f: &Frame, p: &Palette, e: &Edge, touches: bool) {
    let (Some(&lp), Some(&lc)) = (
        m.lane_of.get(e.parent as usize),
        m.lane_of.get(e.child as usize),
    ) else {
        return;
    };
    let (_, mark_h) = mark_size(f);
    let (xp, yp, xc, yc) = (f.x(e.parent), f.y(lp), f.x(e.child), f.y(lc));
    let (colour, width, bow) = match e.kind {
        EdgeKind::Forward => (
            if touches { p.cursor } else { p.edge },
            if touches { 2.0 } else { 1.0 },
            -1.0,
        ),
        EdgeKind::ChildFirst => (p.violation, if touches { 3.0 } else { 2.0 }, 1.0),
        EdgeKind::CrossLane => (
            if touches { p.cursor } else { p.edge },
            if touches { 1.5 } else { 0.8 },
            -1.0,
        ),
    };
    ctx.set_stroke_style_str(colour);
    ctx.set_fill_style_str(colour);
    ctx.set_line_width(width);
    if e.kind == EdgeKind::CrossLane {
        let _ = ctx.set_line_dash(&js_sys::Array::of2(&4.0.into(), &4.0.into()));
    }
    let dx = (xc - xp).abs();
    // At least 8 px and at most 0.45 of a lane: short lanes (many per-job lanes) win. Not
    // `f64::clamp`, which panics when its bounds are NaN or crossed (and links the float
    // `Debug` formatter for its message).
    let max_lift = f.lane_h * 0.45;
    let lift = (dx * 0.35).max(8.0).min(max_lift) * bow;
    let (sy, ey) = if lp == lc {
        (yp + bow * mark_h / 2.0, yc + bow * mark_h / 2.0)
    } else {
        (yp, yc)
    };
    let cx = (xp + xc) / 2.0;
    let cy = (sy + ey) / 2.0 + if lp == lc { lift } else { 0.0 };
    ctx.begin_path();
    ctx.move_to(xp, sy);
    ctx.quadratic_curve_to(cx, cy, xc, ey);
    ctx.stroke();
    if e.kind == EdgeKind::CrossLane {
        let _ = ctx.set_line_dash(&js_sys::Array::new());
    }
    if e.kind != EdgeKind::CrossLane || touches {
        arrow_head(
            ctx,
            xc,
            ey,
            xc - cx,
            ey - cy,
            if e.kind == EdgeKind::ChildFirst {
                8.0
            } else {
                5.0
            },
        );
    }
}

/// Whether the lanes canvas draws every edge of the visible range (else only child-first
/// edges of violations).
pub(super) fn all_edges(lo: u32, hi: u32) -> bool {
    f64::from(hi - lo + 1) <= EDGE_LIMIT
}

/// Draw the lanes (bands, labels, grid, marks, edges): everything but the cursor. Redrawn when
/// the model, viewport, size or theme change, not on a step.
pub fn draw_lanes(ctx: &Ctx, m: &Model, f: Frame, theme: Theme) {
    let p = palette(theme);
    let n = m.len() as u32;
    ctx.set_fill_style_str(p.bg);
    ctx.fill_rect(0.0, 0.0, f.w, f.h);
    let plot_h = (f.lane_h * f.lanes as f64).min(f.h - TOP);
    // Lane bands and labels: the lanes in view only (and the pinned one, over the bottom row).
    ctx.set_font("12px system-ui, sans-serif");
    ctx.set_text_baseline("middle");
    let shown = f.shown();
    for (k, &li) in shown.iter().enumerate() {
        let Some(lane) = m.lanes.get(usize::from(li)) else {
            continue;
        };
        let pinned = f.pinned == Some(li);
        let y0 = f.y(li) - f.lane_h / 2.0;
        if pinned {
            ctx.set_fill_style_str(p.bg);
            ctx.fill_rect(0.0, y0 - 2.0, f.w, f.lane_h + 2.0);
            ctx.set_fill_style_str(p.cursor);
            ctx.fill_rect(0.0, y0 - 2.0, f.w, 1.0);
        }
        if li % 2 == 0 || pinned {
            ctx.set_fill_style_str(p.band);
            ctx.fill_rect(0.0, y0, f.w, f.lane_h);
        }
        // Per-job sub-lanes after the first of their tier: indented, without the tier prefix
        // (the top row and the pinned lane keep it).
        let prev = usize::from(li).checked_sub(1).and_then(|i| m.lanes.get(i));
        let sub = lane.job.is_some()
            && k > 0
            && !pinned
            && prev.is_some_and(|q| {
                (&q.tier, &q.label, &q.source) == (&lane.tier, &lane.label, &lane.source)
            });
        if !sub && li > 0 && lane.job.is_some() && !pinned {
            // A new tier group: a separator line.
            ctx.set_fill_style_str(p.grid);
            ctx.fill_rect(0.0, y0, f.w, 1.0);
        }
        let (x, mut label) = if sub {
            (20.0, lane.job_title().unwrap_or_else(|| lane.title()))
        } else {
            (8.0, lane.title())
        };
        ctx.set_fill_style_str(if sub { p.muted } else { p.text });
        fit_text(ctx, &mut label, GUTTER - x - 6.0);
        let _ = ctx.fill_text(&label, x, y0 + f.lane_h / 2.0);
    }
    ctx.set_stroke_style_str(p.grid);
    ctx.set_line_width(1.0);
    ctx.begin_path();
    ctx.move_to(GUTTER - 0.5, 0.0);
    ctx.line_to(GUTTER - 0.5, TOP + plot_h);
    ctx.stroke();

    let Some((lo, hi)) = f.range(n) else { return };
    ctx.save();
    ctx.begin_path();
    ctx.rect(GUTTER, 0.0, f.plot_w(), f.h);
    ctx.clip();

    // Grid lines at the axis ticks (labels are in the head).
    let step = nice_step(AXIS_PX * f.vp.per_px);
    ctx.set_stroke_style_str(p.grid);
    ctx.begin_path();
    let mut t = (f64::from(lo) / step).floor() * step;
    while t <= f64::from(hi) {
        let x = f.x(t as u32).floor() + 0.5;
        ctx.move_to(x, 0.0);
        ctx.line_to(x, TOP + plot_h);
        t += step;
    }
    ctx.stroke();

    let (mark_w, mark_h) = mark_size(&f);
    if f.vp.per_px <= 0.5 {
        // Batch separators when there is room.
        if f.vp.per_px <= 0.1 {
            ctx.set_stroke_style_str(p.grid);
            let mut prev = None;
            for i in lo..=hi {
                let b = m.events.get(i as usize).map(|r| r.batch);
                if prev.is_some() && b != prev {
                    let x = f.x(i) - 0.5 / f.vp.per_px;
                    ctx.begin_path();
                    ctx.move_to(x.floor() + 0.5, TOP);
                    ctx.line_to(x.floor() + 0.5, TOP + plot_h);
                    ctx.stroke();
                }
                prev = b;
            }
        }
        // One mark per event.
        for i in lo..=hi {
            let (Some(&l), Some(&k)) = (m.lane_of.get(i as usize), m.kinds.get(i as usize)) else {
                continue;
            };
            let Some(y) = f.lane_y(l) else { continue };
            let x = f.x(i);
            let viol = m.is_violation(i);
            match k {
                EventKind::Stored => {
                    ctx.set_fill_style_str(if viol { p.violation } else { p.stored });
                    ctx.fill_rect(x - mark_w / 2.0, y - mark_h / 2.0, mark_w, mark_h);
                }
                EventKind::Removed => {
                    ctx.set_stroke_style_str(p.removed);
                    ctx.set_line_width(2.0);
                    ctx.stroke_rect(
                        x - mark_w / 2.0 + 1.0,
                        y - mark_h / 2.0 + 1.0,
                        (mark_w - 2.0).max(1.0),
                        mark_h - 2.0,
                    );
                    ctx.set_line_width(1.0);
                }
                EventKind::Cleared => {
                    ctx.set_fill_style_str(p.cleared);
                    ctx.fill_rect(x - 1.5, TOP, 3.0, plot_h);
                }
            }
        }
    } else {
        draw_density(ctx, m, &f, &p, (lo, hi), &shown, mark_h);
    }

    // Edges: every edge when few events are visible; zoomed out, only the selected event's
    // (on the cursor layer), never thousands of overlapping arcs.
    if all_edges(lo, hi) {
        for e in m.edges_with_child_in(lo, hi) {
            draw_edge(ctx, m, &f, &p, e, false);
        }
    }
    ctx.set_line_width(1.0);
    ctx.restore();
}

/// Zoomed out (more than two events per pixel): per lane and pixel column, a bar whose height
/// grows with the number of events there (log scale against the densest column), removals and
/// clears as half-height marks, and violations as a red bar at the foot of the column whose
/// height is their share of its events (at least 2 px): one violation among a hundred events
/// is a tick, not a red column.
fn draw_density(
    ctx: &Ctx,
    m: &Model,
    f: &Frame,
    p: &Palette,
    (lo, hi): (u32, u32),
    shown: &[u16],
    mark_h: f64,
) {
    let cols = f.plot_w().ceil() as usize + 1;
    // Per shown lane (not per lane of the trace: many per-job lanes are scrolled away).
    let slots = f.slot_map(shown);
    let slot = |i: u32| -> Option<usize> {
        let l = *m.lane_of.get(i as usize)?;
        let s = *slots.get(usize::from(l))?;
        let c = ((f64::from(i) - f.vp.start) / f.vp.per_px).floor();
        (s != u32::MAX && c >= 0.0 && (c as usize) < cols).then(|| s as usize * cols + c as usize)
    };
    let mut events = vec![0u32; shown.len() * cols];
    let mut viols = vec![0u32; shown.len() * cols];
    for i in lo..=hi {
        if let Some(e) = slot(i).and_then(|k| events.get_mut(k)) {
            *e += 1;
        }
    }
    // One count per event (an event may have several findings).
    for &e in m.order_events_in(lo, hi) {
        if let Some(x) = slot(e).and_then(|k| viols.get_mut(k)) {
            *x += 1;
        }
    }
    let max = events.iter().copied().max().unwrap_or(1).max(1);
    let scale = f64::from(max + 1).ln();
    let row = |k: usize| k * cols..(k + 1) * cols;
    // Events.
    ctx.set_fill_style_str(p.stored);
    ctx.begin_path();
    for (k, &l) in shown.iter().enumerate() {
        let Some(y) = f.lane_y(l) else { continue };
        let foot = y + mark_h / 2.0;
        for (c, &e) in events.get(row(k)).unwrap_or_default().iter().enumerate() {
            if e > 0 {
                let hgt = mark_h * (0.3 + 0.7 * f64::from(e + 1).ln() / scale);
                ctx.rect(GUTTER + c as f64, foot - hgt, 1.0, hgt);
            }
        }
    }
    ctx.fill();
    // Removals and clears: half-height marks where there are any.
    let bins = m.bins(lo, hi, f.vp.start, f.vp.per_px, cols);
    for (bit, colour) in [(2u8, p.removed), (4, p.cleared)] {
        ctx.set_fill_style_str(colour);
        ctx.begin_path();
        for &l in shown {
            let Some(y) = f.lane_y(l) else { continue };
            let l = usize::from(l);
            for (c, b) in bins.get(row(l)).unwrap_or_default().iter().enumerate() {
                if b & bit != 0 {
                    ctx.rect(GUTTER + c as f64, y - mark_h / 4.0, 1.0, mark_h / 2.0);
                }
            }
        }
        ctx.fill();
    }
    // Violations: their share of the column, from its foot (whole pixels: crisp ticks).
    ctx.set_fill_style_str(p.violation);
    ctx.begin_path();
    for (k, &l) in shown.iter().enumerate() {
        let Some(y) = f.lane_y(l) else { continue };
        let foot = (y + mark_h / 2.0).round();
        let (ev, vi) = (
            events.get(row(k)).unwrap_or_default(),
            viols.get(row(k)).unwrap_or_default(),
        );
        for (c, (&e, &v)) in ev.iter().zip(vi).enumerate() {
            if v > 0 {
                let hgt = (mark_h * f64::from(v) / f64::from(e.max(v)))
                    .max(2.0)
                    .round();
                ctx.rect(GUTTER + c as f64, foot - hgt, 1.0, hgt);
            }
        }
    }
    ctx.fill();
}

/// Draw the cursor layer (transparent canvas over the lanes): the current event's band, line
/// and mark, and the edges touching it, highlighted. Redrawn on every step: O(its edges).
pub fn draw_cursor(ctx: &Ctx, m: &Model, current: Option<u32>, f: Frame, theme: Theme) {
    ctx.clear_rect(0.0, 0.0, f.w, f.h);
    let Some(c) = current else { return };
    let n = m.len() as u32;
    let Some((lo, hi)) = f.range(n) else { return };
    let p = palette(theme);
    let plot_h = (f.lane_h * f.lanes as f64).min(f.h - TOP);
    ctx.save();
    ctx.begin_path();
    ctx.rect(GUTTER, 0.0, f.plot_w(), f.h);
    ctx.clip();
    let _ = (lo, hi);
    // The selected event's parent and children, at any zoom.
    for e in m.parents_of(c).iter().chain(m.children_of(c)) {
        draw_edge(ctx, m, &f, &p, e, true);
    }
    let (mark_w, mark_h) = mark_size(&f);
    let cursor_x = f.x(c);
    ctx.set_fill_style_str(p.cursor_fill);
    let cw = (1.0 / f.vp.per_px).max(3.0);
    ctx.fill_rect(cursor_x - cw / 2.0, TOP, cw, plot_h);
    ctx.set_stroke_style_str(p.cursor);
    ctx.set_line_width(2.0);
    ctx.begin_path();
    ctx.move_to(cursor_x, 0.0);
    ctx.line_to(cursor_x, TOP + plot_h);
    ctx.stroke();
    if let Some(y) = m.lane_of.get(c as usize).and_then(|l| f.lane_y(*l)) {
        ctx.stroke_rect(
            cursor_x - mark_w / 2.0 - 3.0,
            y - mark_h / 2.0 - 3.0,
            mark_w + 6.0,
            mark_h + 6.0,
        );
    }
    ctx.set_line_width(1.0);
    ctx.restore();
}
