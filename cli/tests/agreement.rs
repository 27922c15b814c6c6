//! One source of truth: `kvscope check --json` and the page (`web/tests/web/agreement.rs`,
//! `page_agrees_with_check`) give the same findings on the same traces. Both compare against
//! `tests/fixtures/agreement/expected.txt`: per case (a trace file and a worker count), one row
//! per finding: rule, event, related event, class, level. This test runs `check --json` for
//! every case and asserts it prints exactly those rows (set `KVSCOPE_BLESS=1` to rewrite the
//! file from `check`'s output after a deliberate change); the page's test loads the same files
//! with the same worker setting and asserts the same rows.
//!
//! The traces are the shapes of issue 14 (`docs/rules.md`, "Worked examples"), made by
//! `kvscope generate` from the scenarios next to them: msgpack streams carry no provenance
//! (what a capture of vLLM gives), the `.jsonl` one keeps it. This test also regenerates each
//! trace and asserts the committed file is still what `generate` writes. One trace is written
//! by hand instead, because no scenario makes it: `routing-preconditions.jsonl`, two pods that
//! hash the same root tokens differently (`hash-seed-mismatch`) and a block hash below 2^32
//! (`undecodable-batch` for llm-d), so the routing preconditions are compared too.

mod common;

use std::path::PathBuf;

use common::{fixtures, run_in};

fn dir() -> PathBuf {
    fixtures().join("agreement")
}

/// Trace file -> the `kvscope generate` arguments that make it (in the fixture directory).
const TRACES: &[(&str, &[&str])] = &[
    (
        "two-groups-fixed.msgpack",
        &["two-groups.json", "--order", "fixed", "--format", "msgpack"],
    ),
    (
        "two-groups-cpython.msgpack",
        &[
            "two-groups.json",
            "--order",
            "cpython",
            "--format",
            "msgpack",
        ],
    ),
    (
        "one-job-cpython.msgpack",
        &["one-job.json", "--order", "cpython", "--format", "msgpack"],
    ),
    (
        "two-jobs-fixed.msgpack",
        &["two-jobs.json", "--order", "fixed", "--format", "msgpack"],
    ),
    (
        "two-jobs-cpython.msgpack",
        &["two-jobs.json", "--order", "cpython", "--format", "msgpack"],
    ),
    (
        "two-jobs-gpu-fixed.msgpack",
        &[
            "two-jobs-gpu.json",
            "--order",
            "fixed",
            "--format",
            "msgpack",
        ],
    ),
    (
        "two-jobs-gpu-cpython.msgpack",
        &[
            "two-jobs-gpu.json",
            "--order",
            "cpython",
            "--format",
            "msgpack",
        ],
    ),
    (
        "two-jobs-fixed-provenance.jsonl",
        &["two-jobs.json", "--order", "fixed"],
    ),
    (
        "cascade-one-job-cpython.msgpack",
        &[
            "cascade-one-job.json",
            "--order",
            "cpython",
            "--format",
            "msgpack",
        ],
    ),
    (
        "cascade-two-jobs-fixed.msgpack",
        &[
            "cascade-two-jobs.json",
            "--order",
            "fixed",
            "--format",
            "msgpack",
        ],
    ),
    (
        "cascade-two-jobs-cpython.msgpack",
        &[
            "cascade-two-jobs.json",
            "--order",
            "cpython",
            "--format",
            "msgpack",
        ],
    ),
];

/// Traces written by hand, not by `kvscope generate`: a shape no scenario makes (two pods
/// hashing the same tokens differently, a block hash below 2^32).
const HAND_WRITTEN: &[&str] = &["routing-preconditions.jsonl"];

/// (trace file, `--workers`; `None`: the trace's own worker count).
const CASES: &[(&str, Option<u32>)] = &[
    ("two-groups-fixed.msgpack", None),
    ("two-groups-cpython.msgpack", None),
    ("one-job-cpython.msgpack", None),
    ("one-job-cpython.msgpack", Some(2)),
    ("two-jobs-fixed.msgpack", None),
    ("two-jobs-fixed.msgpack", Some(2)),
    ("two-jobs-cpython.msgpack", Some(2)),
    ("two-jobs-gpu-fixed.msgpack", None),
    ("two-jobs-gpu-cpython.msgpack", Some(2)),
    ("two-jobs-fixed-provenance.jsonl", None),
    ("routing-preconditions.jsonl", None),
    ("cascade-one-job-cpython.msgpack", None),
    ("cascade-two-jobs-fixed.msgpack", None),
    ("cascade-two-jobs-cpython.msgpack", None),
];

/// The header line of a case in `expected.txt`.
fn header(file: &str, workers: Option<u32>) -> String {
    match workers {
        Some(w) => format!("== {file} workers={w}"),
        None => format!("== {file} workers=trace"),
    }
}

/// One finding of `check --json` as a row: rule, event, related event, class, level, then
/// `: ` and its message.
fn row(f: &serde_json::Value) -> String {
    let s = |k: &str| f[k].as_str().unwrap_or("-").to_owned();
    let related = f["related_event"]
        .as_u64()
        .map_or_else(|| "-".to_owned(), |e| e.to_string());
    format!(
        "{} {} {} {} {}: {}",
        s("rule"),
        f["event"],
        related,
        s("class"),
        s("level"),
        s("message")
    )
}

/// Every trace in the directory (a `.msgpack` or `.jsonl` file; the `.json` files are the
/// scenarios) is made by `TRACES` or listed in `HAND_WRITTEN`, and has a case in `CASES`, and each listed file is there: a
/// new fixture is never silently skipped (the package's test, `wasm/tests/agreement/`, reads
/// the directory too).
#[test]
fn every_trace_in_the_directory_has_a_case() {
    let mut on_disk: Vec<String> = std::fs::read_dir(dir())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|f| f.ends_with(".msgpack") || f.ends_with(".jsonl"))
        .collect();
    on_disk.sort();
    let mut made: Vec<String> = TRACES
        .iter()
        .map(|(f, _)| *f)
        .chain(HAND_WRITTEN.iter().copied())
        .map(str::to_owned)
        .collect();
    made.sort();
    let mut cased: Vec<String> = CASES.iter().map(|(f, _)| (*f).to_owned()).collect();
    cased.sort();
    cased.dedup();
    assert_eq!(
        on_disk, made,
        "TRACES and HAND_WRITTEN must list every trace file in the directory"
    );
    assert_eq!(
        on_disk, cased,
        "CASES must cover every trace file in the directory"
    );
}

#[test]
fn the_fixture_traces_are_what_generate_writes() {
    let tmp = tempfile::tempdir().unwrap();
    for (file, args) in TRACES {
        let out = tmp.path().join(file);
        let mut a: Vec<&str> = vec!["generate"];
        a.extend_from_slice(args);
        let out_s = out.display().to_string();
        a.extend_from_slice(&["-o", &out_s]);
        let o = run_in(&dir(), &a);
        assert!(o.status.success(), "{file}: {o:?}");
        let committed = dir().join(file);
        if std::env::var_os("KVSCOPE_BLESS").is_some() {
            std::fs::copy(&out, &committed).unwrap();
        }
        assert_eq!(
            std::fs::read(&out).unwrap(),
            std::fs::read(&committed).unwrap_or_default(),
            "{file} is not what `kvscope generate {}` writes (KVSCOPE_BLESS=1 rewrites it)",
            args.join(" ")
        );
    }
}

#[test]
fn check_json_gives_the_expected_rows() {
    let mut text = String::new();
    for (file, workers) in CASES {
        let w = workers.map(|w| w.to_string());
        let mut a = vec!["check", "--json", "--max-findings", "all"];
        if let Some(w) = &w {
            a.extend_from_slice(&["--workers", w]);
        }
        a.push(file);
        let o = run_in(&dir(), &a);
        let code = o.status.code();
        assert!(matches!(code, Some(0 | 1)), "{file}: {o:?}");
        let report: serde_json::Value = serde_json::from_slice(&o.stdout).expect("check --json");
        text.push_str(&header(file, *workers));
        text.push('\n');
        for f in report["findings"].as_array().expect("findings") {
            text.push_str(&row(f));
            text.push('\n');
        }
        // The exit code is the deny verdict the rows show.
        let denies = report["findings"]
            .as_array()
            .unwrap()
            .iter()
            .any(|f| f["level"] == "deny");
        assert_eq!(code == Some(1), denies, "{file} {workers:?}");
    }
    let path = dir().join("expected.txt");
    if std::env::var_os("KVSCOPE_BLESS").is_some() {
        std::fs::write(&path, &text).unwrap();
    }
    let expected = std::fs::read_to_string(&path).unwrap_or_default();
    assert_eq!(
        text,
        expected,
        "check --json disagrees with {} (KVSCOPE_BLESS=1 rewrites it)",
        path.display()
    );
}

/// The table covers what issue 14 asks the page and `check` to agree on: the two-group trace,
/// the two-job two-worker trace with and without a worker count of 2, a set-order single job,
/// traces with GPU events and one with provenance, the routing preconditions, and a file-system
/// tier behind the CPU tier; and each of them says what it should.
#[test]
fn the_expected_rows_say_what_the_shapes_should() {
    let expected = std::fs::read_to_string(dir().join("expected.txt")).unwrap();
    let case = |file: &str, w: Option<u32>| -> Vec<String> {
        let h = header(file, w);
        let mut lines = expected.lines().skip_while(|l| *l != h);
        assert!(lines.next().is_some(), "no case {h}");
        lines
            .take_while(|l| !l.starts_with("== "))
            .filter(|l| !l.starts_with("consumer-loss"))
            .map(str::to_owned)
            .collect()
    };
    let rules = |rows: &[String]| -> Vec<String> {
        rows.iter()
            .map(|r| r.split(' ').next().unwrap_or("").to_owned())
            .collect()
    };
    // Two groups, fixed order: nothing (no false double-store or remove-unknown).
    assert!(case("two-groups-fixed.msgpack", None).is_empty());
    // Set order: in-job denies, in both groups.
    let tg = case("two-groups-cpython.msgpack", None);
    assert!(
        !tg.is_empty() && tg.iter().all(|r| r.contains(" in-job deny: ")),
        "{tg:?}"
    );
    for w in [None, Some(2)] {
        let one = case("one-job-cpython.msgpack", w);
        assert!(!one.is_empty() && one.iter().all(|r| r.contains(" in-job deny: ")));
    }
    // Two jobs on two workers, fixed order: in-job deny with one worker, ambiguous warn with two.
    let w1 = case("two-jobs-fixed.msgpack", None);
    assert_eq!(rules(&w1), ["child-before-parent-in-job"]);
    let w2 = case("two-jobs-fixed.msgpack", Some(2));
    assert_eq!(rules(&w2), ["child-before-parent-ambiguous"]);
    assert!(w2[0].contains(" ambiguous warn: "));
    // GPU events or provenance show the job boundary: across jobs, warn.
    for file in [
        "two-jobs-gpu-fixed.msgpack",
        "two-jobs-fixed-provenance.jsonl",
    ] {
        let r = case(file, None);
        assert_eq!(rules(&r), ["child-before-parent-across-jobs"], "{file}");
    }
    // Behind a file-system tier (no provenance, no GPU events), the tier's copy of a CPU job
    // takes the CPU tier's class: in-job for set order; across jobs for fixed-order cascades
    // that finish out of order.
    let copy = case("cascade-one-job-cpython.msgpack", None);
    assert_eq!(copy.len(), 2, "{copy:?}");
    assert!(
        copy.iter().all(|r| r.contains(" in-job deny: ")),
        "{copy:?}"
    );
    assert!(copy[1].contains("the CPU tier has this inversion in one job"));
    assert_eq!(
        rules(&case("cascade-two-jobs-fixed.msgpack", None)),
        ["child-before-parent-across-jobs"]
    );
    // Set order fails with two workers, with or without GPU events.
    for file in ["two-jobs-cpython.msgpack", "two-jobs-gpu-cpython.msgpack"] {
        assert!(case(file, Some(2))
            .iter()
            .any(|r| r.contains(" in-job deny: ")));
    }
    // Two pods hashing the same root tokens differently, and a hash llm-d cannot decode.
    let pre = case("routing-preconditions.jsonl", None);
    assert_eq!(rules(&pre), ["hash-seed-mismatch", "undecodable-batch"]);
}
