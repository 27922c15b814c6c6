//! The timeline's geometry: canvas and lane sizes, the [`Frame`] mapping events to pixels, axis
//! steps, the overview strip's violation columns and hit testing.

use crate::model::Model;
use crate::Viewport;

/// Width of the lane-label gutter, CSS px.
pub const GUTTER: f64 = 128.0;
/// Height of the head canvas (overview strip + axis labels), CSS px.
pub const HEAD: f64 = 28.0;
/// Bottom of the overview strip in the head canvas (clicks above it jump), CSS px.
pub(super) const OVERVIEW_H: f64 = 12.0;
/// Lanes start this far below the top of the lanes canvas.
pub(super) const TOP: f64 = 2.0;
/// Tallest the lanes' scroll container gets (CSS `max-height` of `.timeline-scroll`).
pub const SCROLL_MAX: f64 = 312.0;
/// Edges are drawn when at most this many events are visible.
pub(super) const EDGE_LIMIT: f64 = 1000.0;

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
pub(super) const MIN_LANE: f64 = 24.0;

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

pub(super) fn nice_step(raw: f64) -> f64 {
    let raw = raw.max(1.0);
    let p = 10f64.powf(raw.log10().floor());
    for m in [1.0, 2.0, 5.0, 10.0] {
        if m * p >= raw {
            return m * p;
        }
    }
    10.0 * p
}

/// Mark width and height for a frame.
pub(super) fn mark_size(f: &Frame) -> (f64, f64) {
    (
        (0.72 / f.vp.per_px).clamp(1.0, 18.0),
        (f.lane_h * 0.56).clamp(6.0, 26.0),
    )
}

/// The overview strip's violation density: `(column, violations)` for each pixel column
/// (offset from the gutter, plot width `ow`) holding a violation, ascending: computed once per
/// model and width, drawn every step.
pub fn overview_columns(m: &Model, ow: f64) -> Vec<(u32, u32)> {
    let n = m.len();
    let mut cols: Vec<(u32, u32)> = Vec::new();
    if n == 0 {
        return cols;
    }
    for &e in m.order_events() {
        let c = (f64::from(e) / n as f64 * ow).floor().max(0.0) as u32;
        match cols.last_mut() {
            Some((lc, k)) if *lc == c => *k += 1,
            _ => cols.push((c, 1)),
        }
    }
    cols
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
