//! The comparison of two traces read record by record ([`SideBuilder`], what `kvscope diff`
//! runs) against the one of two whole analysed traces ([`compare_traces`], what the page's
//! Compare dialog runs): the same alignment and the same JSON (counts, differing events,
//! explanations), on the upstream fixtures' legacy and fixed pairs and on every built-in
//! scenario in legacy and fixed order, both ways round.

use kvscope_core::analysis::compare::{
    compare_sides, compare_traces, Side, SideBuilder, TraceComparison,
};
use kvscope_core::analysis::{analyze, AnalysisConfig};
use kvscope_core::scenario::builtin::BUILTINS;
use kvscope_core::scenario::Scenario;
use kvscope_core::sim::simulate;
use kvscope_core::trace::Trace;

fn streamed(t: &Trace, config: &AnalysisConfig) -> Side {
    let mut b = SideBuilder::new(config);
    for rec in &t.records {
        b.push(rec);
    }
    b.finish()
}

/// Compare `a` with `b` both ways; returns the number of differing events (so the callers know
/// there was something to compare).
fn same(name: &str, a: &Trace, b: &Trace) -> usize {
    let config = AnalysisConfig {
        workers: Some(2),
        ..AnalysisConfig::default()
    };
    let mut differing = 0;
    for (x, y) in [(a, b), (b, a)] {
        let whole: TraceComparison =
            compare_traces(x, &analyze(x, &config), y, &analyze(y, &config));
        let stream = compare_sides(streamed(x, &config), streamed(y, &config));
        assert_eq!(stream.alignment, whole.alignment, "{name}: alignment");
        assert_eq!(stream.differing(), whole.differing(), "{name}: differing");
        assert_eq!(
            serde_json::to_string_pretty(&stream).unwrap(),
            serde_json::to_string_pretty(&whole).unwrap(),
            "{name}: comparison"
        );
        differing += whole.differing() + whole.explanations.len();
    }
    differing
}

#[test]
fn streamed_comparison_equals_whole_on_upstream_fixture_pairs() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/vllm");
    let read = |p: &std::path::Path| {
        kvscope_core::wire::read_trace(&std::fs::read(p).unwrap(), "fixture").unwrap()
    };
    let (mut pairs, mut differing) = (0, 0);
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        let name = path.display().to_string();
        let Some(stem) = name.strip_suffix(".legacy.msgpack") else {
            continue;
        };
        let fixed = std::path::PathBuf::from(format!("{stem}.fixed.msgpack"));
        if !fixed.exists() {
            continue;
        }
        differing += same(&name, &read(&path), &read(&fixed));
        pairs += 1;
    }
    assert!(pairs >= 5, "only {pairs} fixture pairs");
    assert!(differing > 10, "too little compared: {differing}");
}

#[test]
fn streamed_comparison_equals_whole_on_builtin_scenarios() {
    let mut differing = 0;
    for b in BUILTINS {
        let mut traces = Vec::new();
        for order in [
            serde_json::json!({"mode": "legacy", "seed": 7}),
            serde_json::json!({"mode": "fixed"}),
        ] {
            let mut s: serde_json::Value = serde_json::from_str(b.json).unwrap();
            s["order"] = order;
            let Ok(scenario) = Scenario::from_json(&s.to_string()) else {
                continue;
            };
            traces.push(simulate(&scenario).unwrap());
        }
        if let [legacy, fixed] = &traces[..] {
            differing += same(b.name, legacy, fixed);
        }
    }
    assert!(differing > 10, "too little compared: {differing}");
}
