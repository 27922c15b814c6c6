//! The timeline's geometry: canvas and lane sizes, the [`Frame`] mapping events to pixels, axis
//! steps, the overview strip's violation columns and hit testing.

use crate::model::Model;
use crate::Viewport;

/// Width of the lane-label gutter, CSS px.
pub const GUTTER: f64 = 128.0;
/// Height of the head canvas (overview strip + two lines of axis labels), CSS px.
pub const HEAD: f64 = 40.0;
/// The least distance between two axis ticks, CSS px: room for `batch 1234 · +12.25 s`.
pub const AXIS_PX: f64 = 130.0;
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
    /// Lanes in the trace.
    pub lanes: usize,
    /// How far the lanes are scrolled, CSS px: only the lanes in view are drawn (see
    /// [`Frame::shown`]).
    pub scroll: f64,
    /// A lane drawn in the bottom row whatever the scroll (the current event's lane when it is
    /// scrolled out of view).
    pub pinned: Option<u16>,
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
    /// y of the centre of lane `l` in the whole (unscrolled) stack of lanes.
    pub fn content_y(&self, l: u16) -> f64 {
        TOP + (f64::from(l) + 0.5) * self.lane_h
    }
    /// y of the centre of lane `l` on the canvas: the pinned lane in the bottom row, the others
    /// scrolled (above or below the canvas when out of view).
    pub fn y(&self, l: u16) -> f64 {
        if self.pinned == Some(l) {
            self.h - 2.0 - self.lane_h / 2.0
        } else {
            self.content_y(l) - self.scroll
        }
    }
    /// y of the centre of lane `l` when it is drawn in this frame (not under the pinned row).
    pub fn lane_y(&self, l: u16) -> Option<f64> {
        let y = self.y(l);
        let bottom = match self.pinned {
            Some(p) if p != l => self.h - 2.0 - self.lane_h,
            _ => self.h,
        };
        (y + self.lane_h / 2.0 > 0.0 && y - self.lane_h / 2.0 < bottom).then_some(y)
    }
    /// Per lane, its index in `shown` (`u32::MAX`: not drawn): per-lane arrays are built for
    /// the shown lanes only.
    pub fn slot_map(&self, shown: &[u16]) -> Vec<u32> {
        let mut slots = vec![u32::MAX; self.lanes];
        for (k, &l) in shown.iter().enumerate() {
            if let Some(s) = slots.get_mut(usize::from(l)) {
                *s = k as u32;
            }
        }
        slots
    }
    /// The lanes drawn in this frame: those scrolled into view, then the pinned one. Everything
    /// per lane (bands, bins, marks) is built for these only.
    pub fn shown(&self) -> Vec<u16> {
        let first = ((self.scroll - TOP) / self.lane_h).floor().max(0.0) as usize;
        let end = (((self.scroll + self.h - TOP) / self.lane_h).ceil().max(0.0) as usize)
            .min(self.lanes)
            .min(usize::from(u16::MAX));
        let mut out: Vec<u16> = (first..end)
            .map(|l| l as u16)
            .filter(|l| Some(*l) != self.pinned)
            .collect();
        out.extend(self.pinned);
        out
    }
    /// Whether lane `l` is wholly on the canvas without pinning.
    pub fn in_view(&self, l: u16) -> bool {
        let y = self.content_y(l) - self.scroll;
        y - self.lane_h / 2.0 >= 0.0 && y + self.lane_h / 2.0 <= self.h
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
    /// The lane under canvas y (the pinned one in the bottom row).
    pub fn lane_at(&self, y: f64) -> Option<u16> {
        if let Some(p) = self.pinned {
            if (y - self.y(p)).abs() <= self.lane_h / 2.0 {
                return Some(p);
            }
        }
        let l = ((y + self.scroll - TOP) / self.lane_h).floor();
        (l >= 0.0 && (l as usize) < self.lanes).then_some(l as u16)
    }
}

/// Smallest lane height before the canvas grows (and its container scrolls) instead.
pub(super) const MIN_LANE: f64 = 24.0;

/// Height (CSS px) of the whole stack of lanes for a lane count: about 56 px per lane within
/// 92..=[`SCROLL_MAX`], taller when that would squeeze lanes under [`MIN_LANE`] px (many per-job
/// lanes): the lanes then scroll under the fixed head, and the canvas is only
/// [`view_height`] tall.
pub fn canvas_height(lanes: usize) -> f64 {
    let n = lanes.max(1) as f64;
    (TOP + 8.0 + 56.0 * n)
        .clamp(92.0, SCROLL_MAX)
        .max(TOP + 4.0 + MIN_LANE * n)
}

/// Height of the lanes canvas (CSS px): the stack of lanes, at most [`SCROLL_MAX`].
pub fn view_height(lanes: usize) -> f64 {
    canvas_height(lanes).min(SCROLL_MAX)
}

/// Lane height for a stack height and lane count.
pub fn lane_height(h: f64, lanes: usize) -> f64 {
    ((h - TOP - 4.0) / lanes.max(1) as f64).clamp(16.0, 72.0)
}

/// The axis step for `raw` events: the smallest 1, 2 or 5 times a power of ten at least `raw`
/// (at least 1; `raw` is taken as at most 10^15, far beyond any trace).
pub(super) fn nice_step(raw: f64) -> f64 {
    let raw = raw.clamp(1.0, 1e15);
    // The largest power of ten not above `raw`.
    let mut p = 1.0;
    while p * 10.0 <= raw {
        p *= 10.0;
    }
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
    let lane = f.lane_at(y);
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
            lanes: 3,
            scroll: 0.0,
            pinned: None,
        };
        assert_eq!(f.range(1000), Some((10, 110)));
        assert_eq!(f.range(50), Some((10, 49)));
        assert_eq!(f.range(5), None);
        assert!((f.x(10) - (GUTTER + 5.0)).abs() < 1e-9);
        assert_eq!(f.lane_at(TOP + 45.0), Some(1));
        assert_eq!(f.lane_at(TOP + 500.0), None);
        assert_eq!(f.shown(), vec![0, 1, 2]);
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
    }

    /// 300 per-job lanes: only the ones scrolled into view are drawn, and the cursor's lane,
    /// scrolled away, is pinned to the bottom row (drawn, and hit by clicks there).
    #[test]
    fn many_lanes_draw_only_what_is_in_view_and_pin_the_cursor_lane() {
        let lanes = 300;
        let total = canvas_height(lanes);
        let lane_h = lane_height(total, lanes);
        let h = view_height(lanes);
        assert_eq!(h, SCROLL_MAX);
        let mut f = Frame {
            w: 1000.0,
            h,
            lane_h,
            vp: Viewport::default(),
            lanes,
            scroll: 100.0 * lane_h + TOP,
            pinned: None,
        };
        let shown = f.shown();
        let rows = (h / lane_h).ceil() as usize;
        assert!(
            shown.len() <= rows + 1,
            "{} lanes drawn of {lanes}",
            shown.len()
        );
        assert_eq!(shown.first(), Some(&100));
        assert!(f.in_view(101) && !f.in_view(3) && !f.in_view(299));
        assert!(
            (f.y(100) - lane_h / 2.0).abs() < 1e-9,
            "scrolled to the top row"
        );
        assert_eq!(f.lane_at(lane_h * 1.5), Some(101));
        assert_eq!(f.lane_y(3), None, "lane 3 is above the canvas");
        f.pinned = Some(3);
        let shown = f.shown();
        assert_eq!(
            shown.last(),
            Some(&3),
            "the pinned lane is drawn last, over the bottom row"
        );
        let y = f.lane_y(3).expect("pinned lane on the canvas");
        assert!(y + lane_h / 2.0 <= h && y > h - lane_h);
        assert_eq!(f.lane_at(y), Some(3));
        assert_eq!(nice_step(120.0), 200.0);
        for (raw, step) in [(0.2, 1.0), (1.0, 1.0), (1000.0, 1000.0), (1001.0, 2000.0)] {
            assert_eq!(nice_step(raw), step, "{raw}");
        }
        assert_eq!(nice_step(7.5e6), 1e7);
        assert!(nice_step(f64::NAN).is_finite());
        assert_eq!(nice_step(f64::INFINITY), 1e15);
    }
}
