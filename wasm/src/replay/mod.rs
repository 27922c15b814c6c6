//! The `ReplaySession` class: a cursor over a trace's delivered events with the consumer
//! models' state at the cursor, stepping, seeking and violation search (core:
//! `kvscope_core::replay::Replay`).
//!
//! Cursor convention (core's): cursor `c` shows the state after events `0..c`; `0` is before
//! the first event, `length` after the last; "the event at the cursor" is `c - 1`.

mod snapshot;
mod step;

pub use snapshot::*;
pub use step::*;

use kvscope_core::replay as kr;
use wasm_bindgen::prelude::*;

use crate::dto::hash_from_js;
use crate::js::{js_error, js_string, ToJs};
use crate::options::{
    parse_options, AnalyzeOptions, AnalyzeOptionsArg, ViolationFilterArg, ViolationFilterOptions,
};
use crate::report::{num, Analysis};
use crate::trace::{out_of_range, range_error, Trace};

/// A cursor position or event index given by JS: a non-negative integer.
fn index_arg(v: f64, what: &str) -> Result<usize, JsValue> {
    if v.is_finite() && v >= 0.0 && v.fract() == 0.0 && v <= 9_007_199_254_740_991.0 {
        Ok(v as usize)
    } else {
        // `String(v)`, not Rust's float formatting (which would add ~14 KB of wasm).
        Err(range_error(&format!(
            "{what} must be a non-negative integer, got {}",
            js_string(&JsValue::from_f64(v))
        )))
    }
}

/// A replay session: the trace, its analysis, and a cursor. Owns wasm memory (the trace copy
/// and the recorded histories): call `.free()` when done to return it to the allocator.
#[wasm_bindgen]
pub struct ReplaySession {
    inner: kr::Replay,
}

impl ReplaySession {
    /// A session over `trace`, shared rather than copied (pure Rust side).
    pub fn from_trace(trace: &Trace, options: &AnalyzeOptions) -> Result<Self, String> {
        let config = options.to_config()?;
        Ok(ReplaySession {
            inner: kr::Replay::new(trace.shared(), &config),
        })
    }

    /// The core replay engine.
    pub fn core(&self) -> &kr::Replay {
        &self.inner
    }

    fn step_js(step: Option<kr::Step>) -> JsValue {
        step.map_or(JsValue::NULL, |s| Step::from(s).to_js())
    }

    fn filter(filter: Option<ViolationFilterArg>) -> Result<kr::ViolationFilter, JsValue> {
        parse_options(
            filter.map(JsValue::from),
            "violation filter",
            ViolationFilterOptions::from_js,
        )?
        .to_filter()
        .map_err(|m| js_error(&m))
    }

    /// `nextViolation` / `previousViolation`'s result: apply the violation `found` (the
    /// cursor moves just past it) and return its index, or `null` when there is none.
    fn apply_found(&mut self, found: Option<usize>) -> JsValue {
        match found {
            Some(e) => {
                self.inner.seek(e + 1);
                JsValue::from_f64(num(e))
            }
            None => JsValue::NULL,
        }
    }
}

#[wasm_bindgen]
impl ReplaySession {
    /// Analyse `trace` (with `options`, as for `Trace.analyze`) and open a session at cursor 0.
    /// The session keeps its own copy of the trace.
    #[wasm_bindgen(constructor)]
    pub fn new(
        trace: &Trace,
        options: Option<AnalyzeOptionsArg>,
    ) -> Result<ReplaySession, JsValue> {
        let options = parse_options(
            options.map(JsValue::from),
            "analyze options",
            AnalyzeOptions::from_js,
        )?;
        ReplaySession::from_trace(trace, &options).map_err(|m| js_error(&m))
    }

    /// Number of events (the last cursor position).
    #[wasm_bindgen(getter)]
    pub fn length(&self) -> usize {
        self.inner.len()
    }

    /// Number of applied events: `0` before the first event, `length` after the last.
    #[wasm_bindgen(getter)]
    pub fn cursor(&self) -> usize {
        self.inner.cursor()
    }

    /// Move the cursor to `cursor` (clamped to `0..=length`) and return the new cursor.
    /// Cost: one binary search per lane, never a replay.
    pub fn seek(&mut self, cursor: f64) -> Result<usize, JsValue> {
        self.inner.seek(index_arg(cursor, "cursor")?);
        Ok(self.inner.cursor())
    }

    /// Apply the event at the cursor and advance; returns that event's diff, or `null` at the
    /// end.
    #[wasm_bindgen(js_name = stepForward, unchecked_return_type = "Step | null")]
    pub fn step_forward(&mut self) -> JsValue {
        Self::step_js(self.inner.step_forward())
    }

    /// Revert the event at the cursor and move back; returns the diff that event had made
    /// (which this step undid), or `null` at cursor 0.
    #[wasm_bindgen(js_name = stepBack, unchecked_return_type = "Step | null")]
    pub fn step_back(&mut self) -> JsValue {
        Self::step_js(self.inner.step_back())
    }

    /// Jump to the next violation matching `filter`: the first matching event with index ≥
    /// the cursor is applied (the cursor moves just past it, so `lastStep()` is its diff).
    /// Returns its event index, or `null` (cursor unchanged) when there is none.
    #[wasm_bindgen(js_name = nextViolation, unchecked_return_type = "number | null")]
    pub fn next_violation(
        &mut self,
        filter: Option<ViolationFilterArg>,
    ) -> Result<JsValue, JsValue> {
        let filter = Self::filter(filter)?;
        let found = self.inner.next_violation(&filter);
        Ok(self.apply_found(found))
    }

    /// Jump to the previous violation matching `filter` (an event before the one at the
    /// cursor), applying it like `nextViolation`. Returns its index, or `null`.
    #[wasm_bindgen(js_name = previousViolation, unchecked_return_type = "number | null")]
    pub fn previous_violation(
        &mut self,
        filter: Option<ViolationFilterArg>,
    ) -> Result<JsValue, JsValue> {
        let filter = Self::filter(filter)?;
        let found = self.inner.prev_violation(&filter);
        Ok(self.apply_found(found))
    }

    /// The state at the cursor: per consumer and lane counters, active jobs, totals.
    #[wasm_bindgen(unchecked_return_type = "Snapshot")]
    pub fn state(&self) -> JsValue {
        Snapshot::from(self.inner.snapshot()).to_js()
    }

    /// The diff of the last step: what applying the event at the cursor (`cursor - 1`)
    /// changed, or `null` at cursor 0.
    #[wasm_bindgen(js_name = lastStep, unchecked_return_type = "Step | null")]
    pub fn last_step(&self) -> JsValue {
        match self.inner.cursor().checked_sub(1) {
            Some(e) => Self::step_js(self.inner.step_at(e)),
            None => JsValue::NULL,
        }
    }

    /// The diff of applying event `index` (independent of the cursor).
    #[wasm_bindgen(js_name = stepAt, unchecked_return_type = "Step")]
    pub fn step_at(&self, index: f64) -> Result<JsValue, JsValue> {
        let i = index_arg(index, "event index")?;
        let step = self
            .inner
            .step_at(i)
            .ok_or_else(|| out_of_range("event", "events", i, self.inner.len()))?;
        Ok(Step::from(step).to_js())
    }

    /// Describe event `index`.
    #[wasm_bindgen(unchecked_return_type = "EventInfo")]
    pub fn event(&self, index: f64) -> Result<JsValue, JsValue> {
        let i = index_arg(index, "event index")?;
        let info = self
            .inner
            .event_info(i)
            .ok_or_else(|| out_of_range("event", "events", i, self.inner.len()))?;
        Ok(EventInfo::from(info).to_js())
    }

    /// What is known about a block at the cursor. `hash` is a decimal string (or `0x` hex of
    /// a byte hash, normalised like routers do) or a `bigint`.
    #[wasm_bindgen(unchecked_return_type = "BlockInfo")]
    pub fn block(
        &self,
        #[wasm_bindgen(unchecked_param_type = "BlockHashString | bigint")] hash: JsValue,
    ) -> Result<JsValue, JsValue> {
        let h = if let Some(s) = hash.as_string() {
            hash_from_js(&s).map_err(|m| js_error(&m))?.as_u64()
        } else if hash.is_bigint() {
            u64::try_from(hash).map_err(|_| range_error("block hash bigint must be in 0..2^64"))?
        } else {
            return Err(js_error(
                "block hash must be a string or a bigint (never a number)",
            ));
        };
        Ok(BlockInfo::from(self.inner.block(h)).to_js())
    }

    /// The session's analysis (same shape as `Trace.analyze()`).
    #[wasm_bindgen(unchecked_return_type = "Analysis")]
    pub fn analysis(&self) -> JsValue {
        // The replay keeps its findings compact: render them all for this whole report.
        let (findings, violations) = self.inner.rendered_findings();
        Analysis::with_findings(self.inner.analysis(), &findings, &violations).to_js()
    }

    /// Bytes of the recorded index (what seeking uses), for memory accounting.
    #[wasm_bindgen(getter, js_name = indexBytes)]
    pub fn index_bytes(&self) -> usize {
        self.inner.index_bytes()
    }
}

#[wasm_bindgen]
impl Trace {
    /// Analyse the trace: the violation index, lint findings and each consumer model's
    /// losses, for the chosen consumers and rules. Returns a plain object.
    #[wasm_bindgen(unchecked_return_type = "Analysis")]
    pub fn analyze(&self, options: Option<AnalyzeOptionsArg>) -> Result<JsValue, JsValue> {
        let options = parse_options(
            options.map(JsValue::from),
            "analyze options",
            AnalyzeOptions::from_js,
        )?;
        let config = options.to_config().map_err(|m| js_error(&m))?;
        Ok(Analysis::from(&kvscope_core::analysis::analyze(self.core(), &config)).to_js())
    }

    /// Open a replay session over a copy of this trace (same options as `analyze`).
    pub fn replay(&self, options: Option<AnalyzeOptionsArg>) -> Result<ReplaySession, JsValue> {
        ReplaySession::new(self, options)
    }
}
