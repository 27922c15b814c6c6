//! The timeline: a canvas with one lane per tier (or source × tier, or tier × job: many lanes
//! grow the canvas and its container scrolls), one mark per event in
//! delivery order, parent→child edges (child-first edges as red backwards arrows), the cursor,
//! and an overview strip of the whole trace with its violations.
//!
//! Three canvases: the **head** (overview strip and axis labels) stays put above the lanes'
//! scroll container; the **lanes** canvas (bands, marks, edges) is redrawn only when the model,
//! viewport, size or theme change; a transparent **cursor** canvas on top of it holds what a step
//! changes (the cursor band and mark, the edges touching the current event), so a step redraws
//! O(edges at the cursor), not the lanes.
//!
//! Only the visible index range is drawn. Zoomed out (more than one event per pixel) marks are
//! binned per pixel column and lane, so a frame costs O(visible events) array reads plus
//! O(lanes × width) rectangles, never one draw call per event.

use leptos::ev;
use leptos::html::Canvas;
use leptos::prelude::*;
use wasm_bindgen::JsCast;
use web_sys::CanvasRenderingContext2d as Ctx;

use crate::model::{Edge, EdgeKind, EventKind, Model};
use crate::{AppState, Theme, Viewport};

/// Width of the lane-label gutter, CSS px.
pub const GUTTER: f64 = 128.0;
/// Height of the head canvas (overview strip + axis labels), CSS px.
pub const HEAD: f64 = 28.0;
/// Bottom of the overview strip in the head canvas (clicks above it jump), CSS px.
const OVERVIEW_H: f64 = 12.0;
/// Lanes start this far below the top of the lanes canvas.
const TOP: f64 = 2.0;
/// Tallest the lanes' scroll container gets (CSS `max-height` of `.timeline-scroll`).
pub const SCROLL_MAX: f64 = 312.0;
/// Edges are drawn when at most this many events are visible.
const EDGE_LIMIT: f64 = 6000.0;

struct Palette {
    bg: &'static str,
    band: &'static str,
    grid: &'static str,
    text: &'static str,
    muted: &'static str,
    stored: &'static str,
    removed: &'static str,
    cleared: &'static str,
    violation: &'static str,
    edge: &'static str,
    cursor: &'static str,
    cursor_fill: &'static str,
}

fn palette(t: Theme) -> Palette {
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

/// Geometry of one frame.
#[derive(Clone, Copy, Debug)]
pub struct Frame {
    /// Canvas width, CSS px.
    pub w: f64,
    /// Canvas height, CSS px.
    pub h: f64,
    /// Lane height.
    pub lane_h: f64,
    /// Viewport.
    pub vp: Viewport,
}

impl Frame {
    /// Plot width (right of the gutter).
    pub fn plot_w(&self) -> f64 {
        (self.w - GUTTER).max(1.0)
    }
    /// x of the centre of event `i`.
    pub fn x(&self, i: u32) -> f64 {
        GUTTER + (f64::from(i) + 0.5 - self.vp.start) / self.vp.per_px
    }
    /// y of the centre of lane `l`.
    pub fn y(&self, l: u16) -> f64 {
        TOP + (f64::from(l) + 0.5) * self.lane_h
    }
    /// Visible event index range (inclusive), clamped to `n`.
    pub fn range(&self, n: u32) -> Option<(u32, u32)> {
        if n == 0 {
            return None;
        }
        let lo = self.vp.start.floor().max(0.0);
        let hi = (self.vp.start + self.plot_w() * self.vp.per_px).ceil();
        if hi < 0.0 || lo > f64::from(n - 1) {
            return None;
        }
        Some((lo as u32, (hi.min(f64::from(n - 1))) as u32))
    }
    /// The lane under y.
    pub fn lane_at(&self, y: f64, lanes: usize) -> Option<u16> {
        let l = ((y - TOP) / self.lane_h).floor();
        (l >= 0.0 && (l as usize) < lanes).then_some(l as u16)
    }
}

/// Smallest lane height before the canvas grows (and its container scrolls) instead.
const MIN_LANE: f64 = 24.0;

/// Lanes canvas height (CSS px) for a lane count: about 56 px per lane within
/// 92..=[`SCROLL_MAX`], taller when that would squeeze lanes under [`MIN_LANE`] px (many per-job
/// lanes): the lanes then scroll under the fixed head.
pub fn canvas_height(lanes: usize) -> f64 {
    let n = lanes.max(1) as f64;
    (TOP + 8.0 + 56.0 * n)
        .clamp(92.0, SCROLL_MAX)
        .max(TOP + 4.0 + MIN_LANE * n)
}

/// Lane height for a canvas height and lane count.
pub fn lane_height(h: f64, lanes: usize) -> f64 {
    ((h - TOP - 4.0) / lanes.max(1) as f64).clamp(16.0, 72.0)
}

/// Shorten `label` with an ellipsis until it is at most `max_w` px wide in the current font.
fn fit_text(ctx: &Ctx, label: &mut String, max_w: f64) {
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

fn nice_step(raw: f64) -> f64 {
    let raw = raw.max(1.0);
    let p = 10f64.powf(raw.log10().floor());
    for m in [1.0, 2.0, 5.0, 10.0] {
        if m * p >= raw {
            return m * p;
        }
    }
    10.0 * p
}

fn arrow_head(ctx: &Ctx, x: f64, y: f64, dx: f64, dy: f64, size: f64) {
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

/// Mark width and height for a frame.
fn mark_size(f: &Frame) -> (f64, f64) {
    (
        (0.72 / f.vp.per_px).clamp(1.0, 18.0),
        (f.lane_h * 0.56).clamp(6.0, 26.0),
    )
}

/// Pixel columns (offsets from the gutter, plot width `ow`) of the overview strip that hold a
/// violation, ascending and distinct: computed once per model and width, drawn every step.
pub fn overview_columns(m: &Model, ow: f64) -> Vec<u32> {
    let n = m.len();
    let mut cols: Vec<u32> = Vec::new();
    if n == 0 {
        return cols;
    }
    for v in m
        .violations()
        .iter()
        .filter(|v| v.rule != crate::model::CONSUMER_LOSS)
    {
        let c = (f64::from(v.event) / n as f64 * ow).floor().max(0.0) as u32;
        if cols.last() != Some(&c) {
            cols.push(c);
        }
    }
    cols
}

/// Draw the head: the overview strip (the whole trace, its violations, the viewport window and
/// the cursor) and the axis labels of the lanes below. `f` is the lanes' frame (same x axis);
/// `cols` comes from [`overview_columns`].
pub fn draw_head(ctx: &Ctx, n: u32, current: Option<u32>, f: Frame, theme: Theme, cols: &[u32]) {
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
    if n == 0 {
        return;
    }
    let ow = f.plot_w();
    ctx.set_fill_style_str(p.band);
    ctx.fill_rect(GUTTER, 2.0, ow, 8.0);
    ctx.set_fill_style_str(p.violation);
    for &c in cols {
        ctx.fill_rect(GUTTER + f64::from(c), 2.0, 1.5, 8.0);
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
    let step = nice_step(90.0 * f.vp.per_px);
    let mut t = (f64::from(lo) / step).floor() * step;
    while t <= f64::from(hi) {
        let x = f.x(t as u32);
        ctx.fill_rect(x.floor(), HEAD - 5.0, 1.0, 4.0);
        let _ = ctx.fill_text(&format!("#{}", t as u64), x + 3.0, 19.0);
        t += step;
    }
    ctx.restore();
}

/// Draw one edge (`touches`: it touches the current event: thicker, cursor-coloured).
fn draw_edge(ctx: &Ctx, m: &Model, f: &Frame, p: &Palette, e: &Edge, touches: bool) {
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
    // Short lanes (many per-job lanes) cap the bow below 8 px: `clamp` needs min <= max.
    let max_lift = f.lane_h * 0.45;
    let lift = (dx * 0.35).clamp(max_lift.min(8.0), max_lift) * bow;
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
fn all_edges(lo: u32, hi: u32) -> bool {
    f64::from(hi - lo + 1) <= EDGE_LIMIT
}

/// Draw the lanes (bands, labels, grid, marks, edges): everything but the cursor. Redrawn when
/// the model, viewport, size or theme change, not on a step.
pub fn draw_lanes(ctx: &Ctx, m: &Model, f: Frame, theme: Theme) {
    let p = palette(theme);
    let n = m.len() as u32;
    ctx.set_fill_style_str(p.bg);
    ctx.fill_rect(0.0, 0.0, f.w, f.h);
    let plot_h = f.lane_h * m.lanes.len() as f64;
    // Lane bands and labels.
    ctx.set_font("12px system-ui, sans-serif");
    ctx.set_text_baseline("middle");
    for (li, lane) in m.lanes.iter().enumerate() {
        let y0 = TOP + li as f64 * f.lane_h;
        if li % 2 == 0 {
            ctx.set_fill_style_str(p.band);
            ctx.fill_rect(0.0, y0, f.w, f.lane_h);
        }
        // Per-job sub-lanes after the first of their tier: indented, without the tier prefix.
        let prev = li.checked_sub(1).and_then(|i| m.lanes.get(i));
        let sub = lane.job.is_some()
            && prev.is_some_and(|q| {
                (&q.tier, &q.label, &q.source) == (&lane.tier, &lane.label, &lane.source)
            });
        if !sub && li > 0 && lane.job.is_some() {
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
    let step = nice_step(90.0 * f.vp.per_px);
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
            let x = f.x(i);
            let y = f.y(l);
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
        // Binned: one column per pixel and lane; colour priority violation > removed > stored.
        let cols = f.plot_w().ceil() as usize + 1;
        let lanes = m.lanes.len();
        let bins = m.bins(lo, hi, f.vp.start, f.vp.per_px, cols);
        for (bit, colour) in [(1u8, p.stored), (2, p.removed), (4, p.cleared)] {
            ctx.set_fill_style_str(colour);
            ctx.begin_path();
            for l in 0..lanes {
                let y = f.y(l as u16);
                let row = bins.get(l * cols..(l + 1) * cols).unwrap_or_default();
                let mut c = 0;
                while c < row.len() {
                    if row[c] & bit != 0 {
                        let s = c;
                        while c < row.len() && row[c] & bit != 0 {
                            c += 1;
                        }
                        let hgt = if bit == 1 { mark_h } else { mark_h * 0.5 };
                        ctx.rect(GUTTER + s as f64, y - hgt / 2.0, (c - s) as f64, hgt);
                    } else {
                        c += 1;
                    }
                }
            }
            ctx.fill();
        }
        // Violations on top, always visible.
        let a = m.violations().partition_point(|v| v.event < lo);
        let b = m.violations().partition_point(|v| v.event <= hi);
        ctx.set_fill_style_str(p.violation);
        let mut last = (f64::NAN, u16::MAX);
        for v in m
            .violations()
            .get(a..b)
            .unwrap_or_default()
            .iter()
            .filter(|v| v.rule != crate::model::CONSUMER_LOSS)
        {
            let l = m.lane_of.get(v.event as usize).copied().unwrap_or(0);
            let x = f.x(v.event).floor();
            if (x, l) == last {
                continue;
            }
            last = (x, l);
            ctx.fill_rect(x - 1.0, f.y(l) - mark_h / 2.0 - 2.0, 3.0, mark_h + 4.0);
        }
    }

    // Edges.
    if all_edges(lo, hi) {
        for e in m.edges_with_child_in(lo, hi) {
            draw_edge(ctx, m, &f, &p, e, false);
        }
    } else {
        let a = m.violations().partition_point(|v| v.event < lo);
        let b = m.violations().partition_point(|v| v.event <= hi);
        for v in m
            .violations()
            .get(a..b)
            .unwrap_or_default()
            .iter()
            .take(400)
        {
            for e in m.parents_of(v.event) {
                if e.kind == EdgeKind::ChildFirst {
                    draw_edge(ctx, m, &f, &p, e, false);
                }
            }
        }
    }
    ctx.set_line_width(1.0);
    ctx.restore();
}

/// Draw the cursor layer (transparent canvas over the lanes): the current event's band, line
/// and mark, and the edges touching it, highlighted. Redrawn on every step: O(its edges).
pub fn draw_cursor(ctx: &Ctx, m: &Model, current: Option<u32>, f: Frame, theme: Theme) {
    ctx.clear_rect(0.0, 0.0, f.w, f.h);
    let Some(c) = current else { return };
    let n = m.len() as u32;
    let Some((lo, hi)) = f.range(n) else { return };
    let p = palette(theme);
    let plot_h = f.lane_h * m.lanes.len() as f64;
    ctx.save();
    ctx.begin_path();
    ctx.rect(GUTTER, 0.0, f.plot_w(), f.h);
    ctx.clip();
    let all = all_edges(lo, hi);
    let touching = m
        .parents_of(c)
        .iter()
        .chain(m.children_of(c))
        .filter(|e| all || e.kind == EdgeKind::ChildFirst);
    for e in touching {
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
    if let Some(&l) = m.lane_of.get(c as usize) {
        ctx.stroke_rect(
            cursor_x - mark_w / 2.0 - 3.0,
            f.y(l) - mark_h / 2.0 - 3.0,
            mark_w + 6.0,
            mark_h + 6.0,
        );
    }
    ctx.set_line_width(1.0);
    ctx.restore();
}

/// Pick the event nearest to a click at (x, y): in the lane under y when possible.
pub fn pick(m: &Model, f: Frame, x: f64, y: f64) -> Option<u32> {
    let n = m.len() as u32;
    if n == 0 || x < GUTTER {
        return None;
    }
    let at = f.vp.start + (x - GUTTER) * f.vp.per_px - 0.5;
    let radius = (8.0 * f.vp.per_px).clamp(1.0, 50_000.0);
    let lo = (at - radius).floor().max(0.0) as u32;
    let hi = ((at + radius).ceil().max(0.0) as u32).min(n - 1);
    let lane = f.lane_at(y, m.lanes.len());
    let dist = |i: u32| (f64::from(i) - at).abs();
    let best_in_lane = (lo..=hi)
        .filter(|&i| lane.is_none_or(|l| m.lane_of.get(i as usize) == Some(&l)))
        .min_by(|a, b| dist(*a).total_cmp(&dist(*b)));
    let nearest = at.round().max(0.0) as u32;
    best_in_lane.or_else(|| (nearest < n).then_some(nearest))
}

/// Size a canvas for `w × h` CSS px at the device pixel ratio and return its 2-D context,
/// scaled so drawing uses CSS px.
fn context(c: &web_sys::HtmlCanvasElement, w: f64, h: f64) -> Option<Ctx> {
    let dpr = window().device_pixel_ratio().max(1.0);
    let (pw, ph) = ((w * dpr).round() as u32, (h * dpr).round() as u32);
    if c.width() != pw || c.height() != ph {
        c.set_width(pw);
        c.set_height(ph);
    }
    let ctx = c
        .get_context("2d")
        .ok()
        .flatten()
        .and_then(|x| x.dyn_into::<Ctx>().ok())?;
    let _ = ctx.set_transform(dpr, 0.0, 0.0, dpr, 0.0, 0.0);
    Some(ctx)
}

/// The timeline component.
#[component]
pub fn Timeline() -> impl IntoView {
    let st = expect_context::<AppState>();
    let head = NodeRef::<Canvas>::new();
    let canvas = NodeRef::<Canvas>::new();
    let overlay = NodeRef::<Canvas>::new();
    // (lanes canvas width, head canvas width), CSS px.
    let size = RwSignal::new((1000.0f64, 1000.0f64));
    let measure = move || {
        let width = |c: Option<web_sys::HtmlCanvasElement>| {
            c.map(|c| {
                let el: &web_sys::Element = c.as_ref();
                el.get_bounding_client_rect().width()
            })
            .unwrap_or(0.0)
        };
        let (w, hw) = (width(canvas.get_untracked()), width(head.get_untracked()));
        if w > 0.0 && (w, hw) != size.get_untracked() {
            size.set((w, hw.max(w)));
            st.plot_width.set((w - GUTTER).max(1.0));
        }
    };
    let resize = window_event_listener(ev::resize, move |_| measure());
    on_cleanup(move || resize.remove());
    // Measure once mounted, and when the lane count changes (a scrollbar may appear).
    Effect::new(move |_| {
        st.model.track();
        request_animation_frame(measure);
    });
    let lane_count = Memo::new(move |_| {
        st.model
            .with(|m| m.as_ref().map(|m| m.lanes.len()).unwrap_or(1))
    });
    let frame = move || {
        let (w, _) = size.get();
        let lanes = lane_count.get();
        // The CSS height follows the lane count: use it, not a measurement that may lag a
        // re-layout by a frame (a stretched, mis-scaled first frame).
        let h = canvas_height(lanes);
        Frame {
            w,
            h,
            lane_h: lane_height(h, lanes),
            vp: st.viewport.get(),
        }
    };
    // Lanes: not on a step.
    Effect::new(move |_| {
        let f = frame();
        let theme = st.theme.get();
        let Some(c) = canvas.get() else { return };
        let Some(ctx) = context(&c, f.w, f.h) else {
            return;
        };
        st.model.with(|m| match m {
            Some(m) => draw_lanes(&ctx, m, f, theme),
            None => {
                ctx.set_fill_style_str(palette(theme).bg);
                ctx.fill_rect(0.0, 0.0, f.w, f.h);
            }
        });
    });
    // Cursor layer: every step.
    Effect::new(move |_| {
        let f = frame();
        let cursor = st.current();
        let theme = st.theme.get();
        let Some(c) = overlay.get() else { return };
        let Some(ctx) = context(&c, f.w, f.h) else {
            return;
        };
        st.model.with(|m| match m {
            Some(m) => draw_cursor(&ctx, m, cursor, f, theme),
            None => ctx.clear_rect(0.0, 0.0, f.w, f.h),
        });
    });
    // Head: the overview's violation columns once per model and width, the rest every step.
    let columns = Memo::new(move |_| {
        let ow = (size.get().0 - GUTTER).max(1.0);
        st.model.with(|m| {
            m.as_ref()
                .map(|m| overview_columns(m, ow))
                .unwrap_or_default()
        })
    });
    Effect::new(move |_| {
        let f = frame();
        let (_, hw) = size.get();
        let cursor = st.current();
        let theme = st.theme.get();
        let n = st.len();
        let Some(c) = head.get() else { return };
        let Some(ctx) = context(&c, hw, HEAD) else {
            return;
        };
        columns.with(|cols| draw_head(&ctx, n, cursor, f, theme, cols));
    });
    // Many lanes scroll under the head: keep the current event's lane in view.
    let scroller = NodeRef::<leptos::html::Div>::new();
    Effect::new(move |_| {
        let Some(c) = st.current() else { return };
        let f = frame();
        if f.h <= SCROLL_MAX {
            return; // no scrolling
        }
        let Some(lane) = st
            .model
            .with(|m| m.as_ref().and_then(|m| m.lane_of.get(c as usize).copied()))
        else {
            return;
        };
        let Some(div) = scroller.get() else { return };
        let (top, view_h) = (f64::from(div.scroll_top()), f64::from(div.client_height()));
        let y = f.y(lane);
        if view_h > 0.0 && f.h > view_h && (y - f.lane_h < top || y + f.lane_h > top + view_h) {
            div.set_scroll_top((y - view_h / 2.0).max(0.0) as i32);
        }
    });
    let drag: StoredValue<Option<(f64, f64, bool)>> = StoredValue::new(None);
    let on_down = move |e: ev::MouseEvent| {
        drag.set_value(Some((
            f64::from(e.offset_x()),
            f64::from(e.offset_y()),
            false,
        )));
    };
    let on_move = move |e: ev::MouseEvent| {
        if let Some((x0, y0, moved)) = drag.get_value() {
            if e.buttons() & 1 == 0 {
                drag.set_value(None);
                return;
            }
            let x = f64::from(e.offset_x());
            if moved || (x - x0).abs() > 3.0 {
                st.pan(x0 - x);
                drag.set_value(Some((x, y0, true)));
            }
        }
    };
    let on_up = move |e: ev::MouseEvent| {
        let Some((_, _, moved)) = drag.get_value() else {
            return;
        };
        drag.set_value(None);
        if moved {
            return;
        }
        let f = frame();
        let hit = st.model.with_untracked(|m| {
            m.as_ref()
                .and_then(|m| pick(m, f, f64::from(e.offset_x()), f64::from(e.offset_y())))
        });
        if let Some(i) = hit {
            st.playing.set(false);
            st.cursor.set(i + 1);
        }
    };
    let on_wheel = move |e: ev::WheelEvent| {
        e.prevent_default();
        let (dx, dy) = (e.delta_x(), e.delta_y());
        if e.shift_key() || dx.abs() > dy.abs() {
            st.pan(if dx.abs() > dy.abs() { dx } else { dy });
        } else {
            st.zoom((dy * 0.0015).exp(), f64::from(e.offset_x()) - GUTTER);
        }
    };
    // The overview: click or drag to jump.
    let overview_seek = move |e: &ev::MouseEvent| {
        let x = f64::from(e.offset_x());
        if x <= GUTTER {
            return;
        }
        let plot_w = (size.get_untracked().0 - GUTTER).max(1.0);
        let n = f64::from(st.len());
        let i = ((x - GUTTER) / plot_w * n)
            .floor()
            .clamp(0.0, (n - 1.0).max(0.0));
        st.playing.set(false);
        st.seek(i as u32);
    };
    let label = move || {
        st.model.with(|m| match m {
            Some(m) => format!(
                "Timeline: {} events in {} lanes; {} events applied",
                m.len(),
                m.lanes.len(),
                st.cursor.get()
            ),
            None => "Timeline: no trace".into(),
        })
    };
    let height = move || format!("{}px", crate::fixed(canvas_height(lane_count.get()), 0));
    view! {
        <section class="timeline" aria-label="Timeline">
            <div class="legend">
                <span class="sw stored" aria-hidden="true"></span>"BlockStored"
                <span class="sw removed"></span>"BlockRemoved"
                <span class="sw cleared"></span>"AllBlocksCleared"
                <span class="sw viol"></span>"violation (red arrow: child delivered before parent)"
                <span class="hint">"drag to pan · wheel to zoom · click to select · ? for keys"</span>
                <crate::controls::LanePicker/>
            </div>
            // Layout that the constants above depend on is inline (works without the page's CSS).
            <canvas node_ref=head class="timeline-head" data-testid="timeline-head" role="img"
                style:display="block" style:width="100%" style:height=format!("{}px", crate::fixed(HEAD, 0))
                aria-label="Overview of the whole trace (click to jump) and event index axis"
                on:mousedown=move |e: ev::MouseEvent| overview_seek(&e)
                on:mousemove=move |e: ev::MouseEvent| if e.buttons() & 1 != 0 { overview_seek(&e) }></canvas>
            <div class="timeline-scroll" node_ref=scroller data-testid="timeline-scroll"
                style:max-height=format!("{}px", crate::fixed(SCROLL_MAX, 0)) style:overflow-y="auto">
                <div class="timeline-lanes" style:position="relative" style:height=height>
                    <canvas node_ref=canvas class="timeline-canvas" data-testid="timeline" role="img" aria-label=label
                        style:display="block" style:width="100%" style:height=height
                        on:mousedown=on_down on:mousemove=on_move on:mouseup=on_up on:wheel=on_wheel></canvas>
                    <canvas node_ref=overlay class="timeline-overlay" data-testid="timeline-cursor" aria-hidden="true"
                        style:position="absolute" style:left="0" style:top="0" style:width="100%" style:height="100%"
                        style:pointer-events="none"></canvas>
                </div>
            </div>
            <ol class="visually-hidden" data-testid="lane-list" aria-label="Lanes">
                {move || st.model.with(|m| m.as_ref().map(|m| {
                    m.lanes.iter().map(|l| view! { <li>{l.title()}</li> }).collect_view()
                }))}
            </ol>
        </section>
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frame_geometry() {
        let f = Frame {
            w: 1128.0,
            h: 200.0,
            lane_h: 40.0,
            vp: Viewport {
                start: 10.0,
                per_px: 0.1,
            },
        };
        assert_eq!(f.range(1000), Some((10, 110)));
        assert_eq!(f.range(50), Some((10, 49)));
        assert_eq!(f.range(5), None);
        assert!((f.x(10) - (GUTTER + 5.0)).abs() < 1e-9);
        assert_eq!(f.lane_at(TOP + 45.0, 3), Some(1));
        assert_eq!(f.lane_at(TOP + 500.0, 3), None);
        // Few lanes fit in 92..=SCROLL_MAX px; many lanes (per job) grow the canvas instead of
        // squeezing lanes under MIN_LANE.
        assert_eq!(canvas_height(1), 92.0);
        assert_eq!(canvas_height(2), 122.0);
        assert_eq!(canvas_height(5), 290.0);
        assert_eq!(canvas_height(6), SCROLL_MAX);
        for n in [6, 41, 300] {
            let h = canvas_height(n);
            assert!(lane_height(h, n) >= MIN_LANE, "{n} lanes in {h} px");
            assert!(
                TOP + lane_height(h, n) * n as f64 <= h,
                "{n} lanes fit in {h} px"
            );
        }
        assert_eq!(nice_step(3.0), 5.0);
        assert_eq!(nice_step(120.0), 200.0);
    }
}
