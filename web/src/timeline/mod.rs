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

mod draw;
mod geometry;
mod highlight;
mod legend;
mod lens;

use draw::palette;
pub use draw::{draw_cursor, draw_head, draw_lanes};
pub use geometry::*;
pub use highlight::{draw_matches, match_colour};
pub use lens::{draw_cascade, draw_lens, lens_colour};

use leptos::ev;
use leptos::html::Canvas;
use leptos::prelude::*;
use wasm_bindgen::JsCast;
use web_sys::CanvasRenderingContext2d as Ctx;

use crate::AppState;

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
    // How far the lanes are scrolled (many per-job lanes): only the lanes in view are drawn.
    let scroll = RwSignal::new(0.0f64);
    let base_frame = move || {
        let (w, _) = size.get();
        let lanes = lane_count.get();
        // The CSS height follows the lane count: use it, not a measurement that may lag a
        // re-layout by a frame (a stretched, mis-scaled first frame).
        let total = canvas_height(lanes);
        Frame {
            w,
            h: view_height(lanes),
            lane_h: lane_height(total, lanes),
            vp: st.viewport.get(),
            lanes,
            scroll: scroll.get(),
            pinned: None,
        }
    };
    // The current event's lane when it is scrolled out of view: pinned to the bottom row, so
    // the cursor's job is always on screen. Changes only when that lane leaves or enters the
    // view, not on every step.
    let cursor_lane = Memo::new(move |_| {
        let c = st.current()?;
        st.model
            .with(|m| m.as_ref().and_then(|m| m.lane_of.get(c as usize).copied()))
    });
    let pinned = Memo::new(move |_| {
        let l = cursor_lane.get()?;
        (!base_frame().in_view(l)).then_some(l)
    });
    let frame = move || Frame {
        pinned: pinned.get(),
        ..base_frame()
    };
    // Lanes: not on a step.
    Effect::new(move |_| {
        let f = frame();
        let theme = st.theme.get();
        let router = st.router();
        let Some(c) = canvas.get() else { return };
        let Some(ctx) = context(&c, f.w, f.h) else {
            return;
        };
        st.model.with(|m| match m {
            Some(m) => {
                draw_lanes(&ctx, m, f, theme);
                if let Some(k) = router {
                    draw_lens(&ctx, m, f, theme, k);
                }
                st.matches.with(|s| draw_matches(&ctx, m, f, theme, s));
            }
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
        let router = st.router();
        let Some(c) = overlay.get() else { return };
        let Some(ctx) = context(&c, f.w, f.h) else {
            return;
        };
        st.model.with(|m| match m {
            Some(m) => {
                draw_cursor(&ctx, m, cursor, f, theme);
                // The cascade of the selected event's loss root, for the chosen router.
                if let Some(k) = router {
                    crate::lens::with_lens(m, k, |l| {
                        if let Some(root) = crate::lens::selected_root(st, &l) {
                            draw_cascade(&ctx, m, f, theme, root, &l.cascade(root));
                        }
                    });
                }
            }
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
        st.model.with(|m| {
            let below = |i: u32| m.as_ref().map(|m| m.axis_label(i)).unwrap_or_default();
            columns.with(|cols| draw_head(&ctx, n, cursor, f, theme, cols, &below));
        });
    });
    // Many lanes scroll under the head: keep the current event's lane in view.
    let scroller = NodeRef::<leptos::html::Div>::new();
    Effect::new(move |_| {
        let Some(lane) = cursor_lane.get() else {
            return;
        };
        let f = untrack(base_frame);
        if canvas_height(f.lanes) <= SCROLL_MAX {
            return; // no scrolling
        }
        let Some(div) = scroller.get() else { return };
        let (top, view_h) = (f64::from(div.scroll_top()), f64::from(div.client_height()));
        let y = f.content_y(lane);
        if view_h > 0.0 && (y - f.lane_h < top || y + f.lane_h > top + view_h) {
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
        // A click inspects the event (details and verdicts) without moving the cursor.
        if let Some(i) = hit {
            st.inspected.set(Some(i));
        }
    };
    // A double click moves the cursor there.
    let on_dbl = move |e: ev::MouseEvent| {
        let f = frame();
        let hit = st.model.with_untracked(|m| {
            m.as_ref()
                .and_then(|m| pick(m, f, f64::from(e.offset_x()), f64::from(e.offset_y())))
        });
        if let Some(i) = hit {
            st.playing.set(false);
            st.inspected.set(None);
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
        // `max`/`min`, not `f64::clamp`: it panics on NaN bounds (see `draw::draw_edge`).
        let i = ((x - GUTTER) / plot_w * n).floor().max(0.0).min(n - 1.0);
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
    // Hovering an event tells what it is: the canvas' title (the browser's own tooltip, plain
    // text), the view-model's one-line description of the event under the mouse, refreshed on
    // every move (so it follows the chosen router and the finished analysis).
    let on_hover = move |e: &ev::MouseEvent| {
        let Some(c) = canvas.get_untracked() else {
            return;
        };
        let f = frame();
        let (x, y) = (f64::from(e.offset_x()), f64::from(e.offset_y()));
        let text = st
            .model
            .with_untracked(|m| {
                let m = m.as_ref()?;
                Some(m.describe(pick(m, f, x, y)?, st.router()))
            })
            .unwrap_or_default();
        if c.title() != text {
            c.set_title(&text);
        }
    };
    let px = |v: f64| format!("{}px", crate::fixed(v, 0));
    let height = move || px(view_height(lane_count.get()));
    // Below the sticky canvases: the rest of the stack's height, so the container scrolls.
    let spacer = move || {
        let n = lane_count.get();
        px(canvas_height(n) - view_height(n))
    };
    view! {
        <section class="timeline" aria-label="Timeline">
            <div class="legend" data-testid="legend">
                {legend::marks_legend()}
                <span class="hint">"? for help"</span>
                <crate::controls::RouterPicker/>
                <crate::controls::LanePicker/>
            </div>
            <div class="legend lens-legend" data-testid="lens-legend">
                {move || lens_legend(st)}
                {move || cascade_note(st)}
            </div>
            // Layout that the constants above depend on is inline (works without the page's CSS).
            <canvas node_ref=head class="timeline-head" data-testid="timeline-head" role="img"
                style:display="block" style:width="100%" style:height=format!("{}px", crate::fixed(HEAD, 0))
                aria-label="Overview of the whole trace (click to jump) and event index axis"
                on:mousedown=move |e: ev::MouseEvent| overview_seek(&e)
                on:mousemove=move |e: ev::MouseEvent| if e.buttons() & 1 != 0 { overview_seek(&e) }></canvas>
            <div class="timeline-scroll" node_ref=scroller data-testid="timeline-scroll"
                style:max-height=px(SCROLL_MAX) style:overflow-y="auto"
                on:scroll=move |_| if let Some(d) = scroller.get_untracked() { scroll.set(f64::from(d.scroll_top())) }>
                // The canvases are as tall as the view and stay put (sticky) while the lanes
                // scroll under them: only the lanes in view are drawn.
                <div class="timeline-lanes" style:position="sticky" style:top="0" style:height=height
                    data-testid="timeline-lanes"
                    data-pinned=move || pinned.get().and_then(|l| st.model.with(|m| m.as_ref().and_then(|m| m.lanes.get(usize::from(l)).map(|l| l.title())))).unwrap_or_default()>
                    <canvas node_ref=canvas class="timeline-canvas" data-testid="timeline" role="img" aria-label=label
                        style:display="block" style:width="100%" style:height=height
                        on:mousedown=on_down on:mousemove=move |e: ev::MouseEvent| { if e.buttons() & 1 == 0 { on_hover(&e) } on_move(e) }
                        on:mouseup=on_up on:dblclick=on_dbl on:wheel=on_wheel></canvas>
                    <canvas node_ref=overlay class="timeline-overlay" data-testid="timeline-cursor" aria-hidden="true"
                        style:position="absolute" style:left="0" style:top="0" style:width="100%" style:height="100%"
                        style:pointer-events="none"></canvas>
                </div>
                <div style:height=spacer></div>
            </div>
            <ol class="visually-hidden" data-testid="lane-list" aria-label="Lanes">
                {move || st.model.with(|m| m.as_ref().map(|m| {
                    m.lanes.iter().map(|l| view! { <li>{l.title()}</li> }).collect_view()
                }))}
            </ol>
        </section>
    }
}

/// What the cascade highlight shows: the selected event's loss root and how many events were
/// lost with it (nothing when no router is chosen or the selection lost nothing).
fn cascade_note(st: AppState) -> Option<AnyView> {
    let k = st.router()?;
    let (root, n) = st.model.with(|m| {
        crate::lens::with_lens(m.as_ref()?, k, |l| {
            let root = crate::lens::selected_root(st, &l)?;
            Some((root, l.cascade(root).len()))
        })?
    })?;
    Some(view! {
        <span class="cascade-note" data-testid="cascade">{match n {
            0 => format!("Loss root #{root}: no later event lost with it"),
            n => format!("Cascade of loss root #{root}: {} lost with it (ringed)", crate::text::count(n, "later event", "later events")),
        }}</span>
    }.into_any())
}

/// The router lens' legend: each mark with its colour and how many events of the trace get it
/// from the chosen router; a hint when no router is chosen.
fn lens_legend(st: AppState) -> AnyView {
    let Some(k) = st.router() else {
        return view! { <span class="muted">"Router lens: choose a router to mark what it did with each event"</span> }.into_any();
    };
    let counts = st.model.with(|m| {
        m.as_ref()
            .and_then(|m| crate::lens::with_lens(m, k, |l| l.counts()))
    });
    let Some(counts) = counts else {
        return view! { <span class="muted">{format!("Router lens ({}): waiting for the analysis", k.as_str())}</span> }.into_any();
    };
    let items = crate::lens::LensMark::ALL
        .iter()
        .zip(counts)
        .map(|(m, c)| {
            view! {
                <span class=format!("lens-item lens-{}", m.as_str()) data-testid=format!("lens-{}", m.as_str())>
                    {legend::lens_glyph(*m)}
                    {format!("{} {}", m.as_str(), c)}
                </span>
            }
        })
        .collect_view();
    view! {
        <span>{format!("{} (final verdicts):", k.as_str())}</span>
        {items}
    }
    .into_any()
}
