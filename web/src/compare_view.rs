//! The comparison as the Compare dialog shows it: the counts of both traces side by side (the
//! worse side marked), one plain sentence per count that differs, and the events aligned by
//! block whose order or verdicts differ, A beside B (moved and re-judged events marked).
//! Everything is rendered from the simulator module's [`Comparison`] (the core's
//! `compare_traces`); nothing is decided here.
//!
//! Built as plain DOM (elements and text nodes, never HTML): the view is static once made,
//! and a Leptos view of these tables cost about 9 KB of the app's gzip size budget
//! (`docs/web-build.md`), this about a tenth of that.

use leptos::prelude::document;
use wasm_bindgen::JsValue;
use web_sys::Element;

use crate::sim_params::Comparison;

/// A `tag` element with class `class` and text `text` (each left out when empty), appended
/// to `parent`.
fn add(parent: &Element, tag: &str, class: &str, text: &str) -> Result<Element, JsValue> {
    let el = document().create_element(tag)?;
    if !class.is_empty() {
        el.set_class_name(class);
    }
    if !text.is_empty() {
        el.set_text_content(Some(text));
    }
    parent.append_child(&el)?;
    Ok(el)
}

/// `el` with `data-testid` `id`.
fn tid(el: Element, id: &str) -> Result<Element, JsValue> {
    el.set_attribute("data-testid", id)?;
    Ok(el)
}

/// The comparison `c` as a `div`: its counts table (`compare-table`; the first row the two
/// traces' headings), the explanations (`compare-why`), how many events differ
/// (`compare-note`) and the events that differ (`compare-events`, rows classed by their marks);
/// or the error that stopped it, as an alert.
pub fn render(c: &Result<Comparison, String>) -> Result<Element, JsValue> {
    let root = document().create_element("div")?;
    let c = match c {
        Ok(c) => c,
        Err(e) => {
            add(&root, "p", "status error", e)?.set_attribute("role", "alert")?;
            return Ok(root);
        }
    };
    let table = tid(
        add(&root, "table", "kv compare-table", "")?,
        "compare-table",
    )?;
    for (k, r) in c.rows.iter().enumerate() {
        let tr = add(&table, "tr", "", "")?;
        let cell = if k == 0 { "th" } else { "td" };
        add(&tr, "th", if r.rule { "rule" } else { "" }, &r.label)?;
        add(&tr, cell, if r.a_worse { "bad" } else { "" }, &r.a)?;
        add(&tr, cell, if r.b_worse { "bad" } else { "" }, &r.b)?;
    }
    if !c.why.is_empty() {
        add(&root, "h3", "", "Why the counts differ")?;
        let list = tid(add(&root, "ul", "compare-why", "")?, "compare-why")?;
        for w in &c.why {
            add(&list, "li", "", w)?;
        }
    }
    add(&root, "h3", "", "Events that differ")?;
    tid(add(&root, "p", "muted", &c.note)?, "compare-note")?;
    if c.events.len() >= 5 {
        let wrap = add(&root, "div", "compare-events-wrap", "")?;
        let table = tid(
            add(&wrap, "table", "kv compare-events", "")?,
            "compare-events",
        )?;
        let head = add(&table, "tr", "", "")?;
        let heads = c
            .rows
            .first()
            .map_or(["", ""], |r| [r.a.as_str(), r.b.as_str()]);
        for h in [heads[0], heads[1], "event", "what differs"] {
            add(&head, "th", "", h)?;
        }
        for e in c.events.chunks(5) {
            let text = |k: usize| e.get(k).map_or("", String::as_str);
            let tr = add(&table, "tr", text(4), "")?;
            for (k, class) in [(0, "mono"), (1, "mono"), (2, "mono"), (3, "wrap")] {
                let t = match text(k) {
                    "" => "—",
                    t => t,
                };
                add(&tr, "td", class, t)?;
            }
        }
    }
    Ok(root)
}
