//! The web debugger's Compare simulator, built as its own wasm module (`kvscope_sim.js` +
//! `kvscope_sim_bg.wasm` in `dist/`). The debugger imports it only when the Compare dialog
//! opens, so the core's scenario simulator stays out of the app's first download; the debugger
//! itself parses the returned traces and compares their analyses.
//!
//! The JS surface: `builtins()` (JSON list of [`Builtin`]), `compare(params_json)` (both sides
//! of [`Params`] simulated and analysed: a [`Comparison`] as JSON), and for two traces the user
//! loaded, in any format the debugger opens, a [`SideReader`] per trace (fed the file a chunk at
//! a time) and `compare_read(a, b)` (a [`Comparison`] as JSON). The analyses and the core's
//! comparison (events aligned by block, what differs, why each count differs: `compare_traces`
//! for the simulated pair, `compare_sides` of two streamed sides for loaded traces) run here
//! too, so the app carries no comparison code: it renders the [`Comparison`].
#![deny(missing_docs)]

#[path = "../../src/sim_params.rs"]
pub mod params;

use kvscope_core::analysis::compare::{self as comparison, Side, SideBuilder, TraceComparison};
use kvscope_core::analysis::{analyze, AnalysisConfig};
use kvscope_core::order::OrderMode;
use kvscope_core::scenario::{builtin, Scenario, SecondaryTierConfig};
use kvscope_core::sim;
use kvscope_core::trace::Trace;
use kvscope_core::wire::jsonl;
use kvscope_core::wire::stream::Decoder;
use wasm_bindgen::prelude::*;

pub use params::{Builtin, Comparison, Params, Row};

fn order(name: &str, p: &Params) -> OrderMode {
    match name {
        "legacy" => OrderMode::Legacy { seed: p.seed },
        "cpython" => OrderMode::CPython {
            python_hash_seed: p.python_hash_seed,
        },
        _ => OrderMode::Fixed,
    }
}

/// The scenario for one side: the built-in with the user's seed, order, workers, CPU capacity
/// and number of STORAGE tiers (extra tiers copy the first one's settings).
pub fn scenario(p: &Params, side_order: &str) -> Result<Scenario, String> {
    let mut s = builtin::load(&p.scenario)
        .ok_or_else(|| format!("unknown built-in scenario {:?}", p.scenario))?
        .map_err(|e| e.to_string())?;
    s.seed = p.seed;
    s.order = order(side_order, p);
    if let Some(w) = p.workers {
        s.completion.workers = w.max(1);
    }
    if let Some(c) = p.capacity {
        s.cpu.capacity_chunks = c.max(1);
    }
    if let Some(n) = p.tiers {
        let template = s.secondary_tiers.first().cloned();
        s.secondary_tiers.truncate(n);
        while s.secondary_tiers.len() < n {
            let i = s.secondary_tiers.len();
            let mut t = template.clone().unwrap_or(SecondaryTierConfig {
                name: String::new(),
                ownership: None,
                locality: None,
                min_latency_steps: 1,
                max_latency_steps: 2,
                failure_probability: 0.0,
                promotions: true,
                preload: Vec::new(),
                kind: Default::default(),
                io_finished: Default::default(),
                io_release_order: Default::default(),
            });
            t.name = format!("tier{i}");
            s.secondary_tiers.push(t);
        }
    }
    s.validate().map_err(|e| e.to_string())?;
    Ok(s)
}

/// Simulate one side (`left`: [`Params::left`]'s order, else [`Params::right`]'s).
pub fn simulate_side(p: &Params, left: bool) -> Result<Trace, String> {
    let side = if left { &p.left } else { &p.right };
    sim::simulate(&scenario(p, side)?).map_err(|e| e.to_string())
}

/// The built-in scenarios, for the dialog's picker.
pub fn builtin_list() -> Vec<Builtin> {
    builtin::BUILTINS
        .iter()
        .map(|b| Builtin {
            name: b.name.to_owned(),
            description: b.description.to_owned(),
        })
        .collect()
}

/// JS: the built-in scenarios as a JSON array of `{name, description}`.
#[wasm_bindgen]
pub fn builtins() -> String {
    serde_json::to_string(&builtin_list()).unwrap_or_else(|_| "[]".into())
}

/// Differing events listed in a [`Comparison`] (the page's side-by-side list).
pub const EVENT_ROWS: usize = 200;

/// Tabulate a comparison of two traces under the headings `heads`: events, every rule with
/// findings on either side, each consumer model's losses, violations on one side only, the
/// alignment; why each count differs; the first [`EVENT_ROWS`] events that differ.
pub fn tabulate(c: TraceComparison, heads: [String; 2]) -> Comparison {
    let d = &c.diff;
    let row = |label: String, rule: bool, a: String, b: String, a_worse: bool, b_worse: bool| Row {
        label,
        rule,
        a,
        b,
        a_worse,
        b_worse,
    };
    let [ha, hb] = heads;
    let mut rows = vec![row(String::new(), false, ha, hb, false, false)];
    rows.push(row(
        "events".into(),
        false,
        c.events_a.to_string(),
        c.events_b.to_string(),
        false,
        false,
    ));
    rows.extend(d.rules.iter().filter(|r| r.a + r.b > 0).map(|r| {
        row(
            r.rule.name().into(),
            true,
            r.a.to_string(),
            r.b.to_string(),
            r.a > r.b,
            r.b > r.a,
        )
    }));
    rows.extend(d.losses.iter().map(|l| {
        row(
            format!("{}: blocks / events lost", l.consumer),
            false,
            format!("{} / {}", l.a_blocks_lost, l.a_events_lost),
            format!("{} / {}", l.b_blocks_lost, l.b_events_lost),
            l.a_blocks_lost > l.b_blocks_lost,
            l.b_blocks_lost > l.a_blocks_lost,
        )
    }));
    rows.push(row(
        "violations only on this side".into(),
        false,
        d.disappeared.len().to_string(),
        d.appeared.len().to_string(),
        false,
        false,
    ));
    rows.push(row(
        "events only on this side".into(),
        false,
        c.only_a.to_string(),
        c.only_b.to_string(),
        false,
        false,
    ));
    let side = |i: Option<usize>, batch: Option<u32>| {
        i.map_or_else(String::new, |i| match batch {
            Some(b) => format!("#{i} · batch {b}"),
            None => format!("#{i}"),
        })
    };
    let listed = c.differing().min(EVENT_ROWS);
    let events = c
        .events()
        .take(EVENT_ROWS)
        .flat_map(|p| {
            let marks = match (p.moved, !p.verdicts.is_empty()) {
                (true, true) => "moved judged",
                (true, false) => "moved",
                (false, true) => "judged",
                (false, false) => "",
            };
            vec![
                side(p.a, p.batch_a),
                side(p.b, p.batch_b),
                p.what.clone(),
                p.changes(),
                marks.to_owned(),
            ]
        })
        .collect::<Vec<_>>();
    let mut note = format!(
        "{} aligned by block, {} moved; {} differ",
        plural(c.aligned, "event", "events"),
        c.moved,
        c.differing()
    );
    if listed < c.differing() {
        note += &format!(" (the first {listed} are listed)");
    }
    Comparison {
        left: String::new(),
        right: String::new(),
        rows,
        why: c.explanations.into_iter().map(|e| e.text).collect(),
        events,
        note,
    }
}

/// `n` and the noun, singular for exactly one.
fn plural(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// Simulate both sides of `p`, analyse and compare them ([`tabulate`]); the traces come back
/// as JSON Lines.
pub fn compare_sides(p: &Params) -> Result<Comparison, String> {
    let a = simulate_side(p, true)?;
    let b = simulate_side(p, false)?;
    let heads = [format!("left: {}", p.left), format!("right: {}", p.right)];
    let cfg = AnalysisConfig::default();
    let mut c = tabulate(
        comparison::compare_traces(&a, &analyze(&a, &cfg), &b, &analyze(&b, &cfg)),
        heads,
    );
    c.left = jsonl::write_trace(&a);
    c.right = jsonl::write_trace(&b);
    Ok(c)
}

/// Read two loaded traces (any format the debugger opens) and compare them ([`tabulate`]),
/// with the debugger's worker count (`None`: each trace header's, else 1). An unreadable trace
/// is an error naming the side, the file and where it broke. The page's worker does the same a
/// chunk at a time ([`SideReader`], [`compare_read`]).
pub fn compare_traces_of(
    a: &[u8],
    a_name: &str,
    b: &[u8],
    b_name: &str,
    workers: Option<u32>,
) -> Result<Comparison, String> {
    let mut a_side = SideReader::new(a_name, true, workers);
    a_side.read(a)?;
    let mut b_side = SideReader::new(b_name, false, workers);
    b_side.read(b)?;
    compare_read_sides(a_side, b_side)
}

/// JS: one loaded trace read into its side of a comparison, a chunk at a time (the worker
/// reads the file's `Blob` in slices): record by record, as `kvscope diff` reads files
/// ([`SideBuilder`]), so no trace is held whole and no finding is rendered but the few an
/// explanation quotes. At a million events a side, two whole traces and two analyses peaked at
/// 2.8 GB natively, near what a wasm32 module can address at all (`docs/performance.md`).
#[wasm_bindgen]
pub struct SideReader {
    decoder: Decoder,
    builder: SideBuilder,
    /// The file's name and which side it is, for errors.
    name: String,
    left: bool,
    /// The first error, given again by every later call (the decoder reads nothing after it:
    /// a side that broke never compares as if its file had ended there).
    error: Option<String>,
}

#[wasm_bindgen]
impl SideReader {
    /// The side of the trace named `name` (`left`: the current trace, A; else the trace to
    /// compare with, B), analysed with the debugger's worker count.
    #[wasm_bindgen(constructor)]
    pub fn new(name: &str, left: bool, workers: Option<u32>) -> SideReader {
        let cfg = AnalysisConfig {
            workers,
            ..AnalysisConfig::default()
        };
        SideReader {
            decoder: Decoder::new(kvscope_core::trace::stream_source_name(name)),
            builder: SideBuilder::new(&cfg),
            name: name.to_owned(),
            left,
            error: None,
        }
    }

    /// Read the next chunk of the file. Throws an `Error` naming the side, the file and where
    /// it broke.
    pub fn push(&mut self, bytes: &[u8]) -> Result<(), JsError> {
        self.read(bytes).map_err(|e| JsError::new(&e))
    }
}

impl SideReader {
    /// [`SideReader::push`] (`String` errors: a `JsError` is made in the browser only).
    fn read(&mut self, bytes: &[u8]) -> Result<(), String> {
        self.decoder.push(bytes);
        self.drain()
    }

    /// Analyse the records read so far.
    fn drain(&mut self) -> Result<(), String> {
        while self.error.is_none() {
            match self.decoder.next_record() {
                Ok(Some(rec)) => self.builder.push(&rec),
                Ok(None) => return Ok(()),
                Err(e) => {
                    let side = match self.left {
                        true => "the current trace",
                        false => "the trace to compare with",
                    };
                    self.error = Some(format!("{side} ({}): {e}", self.name));
                }
            }
        }
        Err(self.error.clone().unwrap_or_default())
    }

    /// The file is read whole: its side.
    fn finish(mut self) -> Result<(Side, String), String> {
        self.decoder.finish();
        self.drain()?;
        Ok((self.builder.finish(), self.name))
    }
}

/// Compare two sides read whole ([`tabulate`], headed `A: name` and `B: name`).
fn compare_read_sides(a: SideReader, b: SideReader) -> Result<Comparison, String> {
    let (a, a_name) = a.finish()?;
    let (b, b_name) = b.finish()?;
    Ok(tabulate(
        comparison::compare_sides(a, b),
        [format!("A: {a_name}"), format!("B: {b_name}")],
    ))
}

/// JS: compare two loaded traces read with [`SideReader`]s (see [`compare_traces_of`]); returns
/// a [`Comparison`] as JSON (no traces in it). Throws an `Error` naming the trace that cannot be
/// read.
#[wasm_bindgen]
pub fn compare_read(a: SideReader, b: SideReader) -> Result<String, JsError> {
    let c = compare_read_sides(a, b).map_err(|e| JsError::new(&e))?;
    serde_json::to_string(&c).map_err(|e| JsError::new(&e.to_string()))
}

/// JS: simulate and compare both sides of `params_json` (a [`Params`] object as JSON); returns
/// a [`Comparison`] as JSON. Throws an `Error` naming what is wrong with the parameters.
#[wasm_bindgen]
pub fn compare(params_json: &str) -> Result<String, JsError> {
    let p: Params = serde_json::from_str(params_json)
        .map_err(|e| JsError::new(&format!("bad Compare parameters: {e}")))?;
    let c = compare_sides(&p).map_err(|e| JsError::new(&e))?;
    serde_json::to_string(&c).map_err(|e| JsError::new(&e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpython_order_loses_blocks_that_the_fix_keeps() {
        let c = compare_sides(&Params::default()).unwrap();
        let get = |label: &str| c.rows.iter().find(|r| r.label == label).cloned().unwrap();
        let events = get("events");
        assert_eq!(events.a, events.b);
        let in_job = get("child-before-parent-in-job");
        assert!(
            in_job.rule && in_job.a_worse && !in_job.b_worse,
            "{in_job:?}"
        );
        assert!(
            in_job.a.parse::<usize>().unwrap() > 0,
            "the legacy side has in-job violations"
        );
        assert_eq!(in_job.b, "0", "the fix has none");
        let llmd = get("llmd: blocks / events lost");
        assert!(!llmd.b_worse, "{llmd:?}");
        // The traces are the simulated ones.
        let left = jsonl::read_trace(c.left.as_bytes()).unwrap();
        assert_eq!(left.event_count().to_string(), events.a);
        let right = jsonl::read_trace(c.right.as_bytes()).unwrap();
        let sim = simulate_side(&Params::default(), false).unwrap();
        assert_eq!(right.records.len(), sim.records.len());
        assert_eq!(right.event_count(), sim.event_count());
    }

    #[test]
    fn parameters_apply_and_bad_names_are_errors() {
        let p = Params {
            tiers: Some(2),
            capacity: Some(3),
            workers: Some(2),
            ..Params::default()
        };
        let s = scenario(&p, "legacy").unwrap();
        assert_eq!(s.secondary_tiers.len(), 2);
        assert_eq!(s.cpu.capacity_chunks, 3);
        assert_eq!(s.completion.workers, 2);
        assert_eq!(s.order, OrderMode::Legacy { seed: 0 });
        let bad = Params {
            scenario: "nope".into(),
            ..Params::default()
        };
        assert!(scenario(&bad, "fixed").is_err());
        assert!(simulate_side(&bad, true).unwrap_err().contains("nope"));
    }

    /// Two loaded traces in different formats (JSON Lines against a msgpack stream): the
    /// same comparison as the generated pair, explained, with the events that differ.
    #[test]
    fn loaded_traces_in_any_format_compare_like_generated_ones() {
        let p = Params::default();
        let (a, b) = (
            simulate_side(&p, true).unwrap(),
            simulate_side(&p, false).unwrap(),
        );
        let mut packed = Vec::new();
        for r in &b.records {
            if let kvscope_core::trace::TraceRecord::Batch(batch) = r {
                kvscope_core::wire::msgpack::encode_trace_batch_into(
                    &mut packed,
                    batch,
                    kvscope_core::wire::EventEncoding::default(),
                );
            }
        }
        let text = jsonl::write_trace(&a);
        let c = compare_traces_of(text.as_bytes(), "a.jsonl", &packed, "b.msgpack", None).unwrap();
        let generated = compare_sides(&p).unwrap();
        assert_eq!(c.rows[0].a, "A: a.jsonl");
        assert_eq!(c.rows[0].b, "B: b.msgpack");
        assert_eq!(generated.rows[0].a, "left: cpython");
        assert_eq!(c.rows[1..], generated.rows[1..]);
        assert_eq!(c.why, generated.why);
        assert!(
            c.left.is_empty() && c.right.is_empty(),
            "no traces sent back"
        );
        assert!(
            c.why.iter().any(
                |w| w.starts_with("llmd lost ") && w.contains(" on A and 0 on B: on A, batch ")
            ),
            "{:?}",
            c.why
        );
        assert!(!c.events.is_empty() && c.events.len() <= 5 * EVENT_ROWS);
        assert_eq!(c.events.len() % 5, 0, "five texts per event");
        let events: Vec<&[String]> = c.events.chunks(5).collect();
        assert!(
            events
                .iter()
                .any(|e| e[4].contains("judged") && e[3].contains("llmd dropped_orphan → applied")),
            "{events:?}"
        );
        assert!(events
            .iter()
            .any(|e| e[4].contains("moved") && e[3].starts_with("moved")));
        assert!(c.note.contains(" aligned by block, "), "{}", c.note);
        // A trace that cannot be read names its side, its file and where it broke.
        let e = compare_traces_of(
            text.as_bytes(),
            "a.jsonl",
            b"{\"events\": [}\n",
            "bad.jsonl",
            None,
        )
        .unwrap_err();
        assert!(
            e.starts_with("the trace to compare with (bad.jsonl): "),
            "{e}"
        );
        assert!(e.contains("line 1"), "{e}");
    }

    /// The page's worker reads each file in chunks: records cut at any byte give the same
    /// comparison as the whole files, and a bad record is still found, named by its side.
    #[test]
    fn sides_read_in_chunks_compare_like_whole_files() -> Result<(), String> {
        let p = Params::default();
        let a = jsonl::write_trace(&simulate_side(&p, true).unwrap());
        let b = jsonl::write_trace(&simulate_side(&p, false).unwrap());
        let whole = compare_traces_of(a.as_bytes(), "a.jsonl", b.as_bytes(), "b.jsonl", None);
        let read = |text: &str, name: &str, left: bool, chunk: usize| {
            let mut r = SideReader::new(name, left, None);
            for part in text.as_bytes().chunks(chunk) {
                r.read(part)?;
            }
            Ok::<_, String>(r)
        };
        let chunked = compare_read_sides(
            read(&a, "a.jsonl", true, 7)?,
            read(&b, "b.jsonl", false, 13)?,
        );
        assert_eq!(chunked, whole);
        assert!(whole.as_ref().is_ok_and(|c| !c.why.is_empty()), "{whole:?}");
        let bad = format!("{b}{{\"events\": [}}\n");
        let e = read(&bad, "bad.jsonl", false, 5)
            .and_then(|r| compare_read_sides(read(&a, "a.jsonl", true, 5)?, r));
        let e = e.unwrap_err();
        assert!(
            e.starts_with("the trace to compare with (bad.jsonl): "),
            "{e}"
        );
        assert!(
            e.contains(&format!("line {}", b.lines().count() + 1)),
            "{e}"
        );
        // Read on past the error (a caller that ignored it): the side still fails, with it.
        let mut r = SideReader::new("bad.jsonl", false, None);
        assert_eq!(r.read(bad.as_bytes()), Err(e.clone()));
        assert_eq!(r.read(b.as_bytes()), Err(e.clone()));
        let good = read(&a, "a.jsonl", true, 64)?;
        assert_eq!(compare_read_sides(good, r), Err(e));
        Ok(())
    }

    /// The JSON contract: the debugger's serialized parameters come back as a comparison it
    /// can read; unknown fields are refused.
    #[test]
    fn json_contract() {
        let json = serde_json::to_string(&Params::default()).unwrap();
        let text = compare(&json).map_err(|_| ()).unwrap();
        let c: Comparison = serde_json::from_str(&text).unwrap();
        assert_eq!(c, compare_sides(&Params::default()).unwrap());
        let list: Vec<Builtin> = serde_json::from_str(&builtins()).unwrap();
        assert!(list.iter().any(|b| b.name == "legacy-vs-fixed"));
        assert!(serde_json::from_str::<Params>(r#"{"scenario":"x","bogus":1}"#).is_err());
    }
}
