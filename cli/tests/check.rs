//! `kvscope check`, `verdicts` and `diff` end to end. Reports are golden transcripts (exit
//! code, stdout, stderr) in `snapshots/`, one per format.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use common::{run_in, transcript};
use insta::assert_snapshot;
use kvscope_core::consumers::testkit::{batch, h, removed, stored, trace};
use kvscope_core::trace::Trace;
use kvscope_core::wire::jsonl::write_trace;

fn kvscope(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_kvscope"))
        .args(args)
        .output()
        .expect("run kvscope")
}

fn write(name: &str, t: &Trace) -> String {
    let dir = std::env::temp_dir().join(format!("kvscope-check-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let p: PathBuf = dir.join(name);
    std::fs::write(&p, write_trace(t)).unwrap();
    p.display().to_string()
}

/// GPU holds 1..3, evicts them, then one CPU job offloads them: legacy order child-first.
fn scenario(legacy: bool) -> Trace {
    let chain = [1u64, 2, 3];
    let order: Vec<usize> = if legacy { vec![2, 1, 0] } else { vec![0, 1, 2] };
    let cpu = order
        .iter()
        .map(|&i| {
            stored(
                &[chain[i]],
                if i == 0 { None } else { Some(chain[i - 1]) },
                Some("CPU"),
                16,
            )
        })
        .collect();
    trace(vec![
        batch("pod", 0, vec![stored(&chain, None, Some("GPU"), 16)]),
        batch("pod", 1, vec![removed(&chain, Some("GPU"))]),
        batch("pod", 2, cpu),
    ])
}

/// `n` one-event batches, each storing a block whose parent is never stored: `n`
/// `unknown-parent` findings (and a loss for every parent-strict router).
fn orphans(n: u64) -> Trace {
    trace(
        (0..n)
            .map(|i| {
                batch(
                    "pod",
                    i,
                    vec![stored(&[1000 + i], Some(i + 1), Some("GPU"), 4)],
                )
            })
            .collect(),
    )
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// A folder holding `legacy.jsonl`, `fixed.jsonl` and `orphans.jsonl`, for runs whose output
/// names the file (relative, so the snapshots do not depend on the temp path).
fn traces() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let put =
        |name: &str, t: &Trace| std::fs::write(dir.path().join(name), write_trace(t)).unwrap();
    put("legacy.jsonl", &scenario(true));
    put("fixed.jsonl", &scenario(false));
    put("orphans.jsonl", &orphans(30));
    dir
}

fn check_in(dir: &Path, args: &[&str]) -> String {
    let mut a = vec!["check"];
    a.extend_from_slice(args);
    transcript(&run_in(dir, &a))
}

#[test]
fn text_report_of_legacy_fixed_and_downgraded() {
    let d = traces();
    assert_snapshot!("text_legacy", check_in(d.path(), &["legacy.jsonl"]));
    assert_snapshot!("text_fixed", check_in(d.path(), &["fixed.jsonl"]));
    // Downgrading the rule makes the legacy trace pass.
    assert_snapshot!(
        "text_legacy_in_job_warn",
        check_in(
            d.path(),
            &["legacy.jsonl", "--rule", "child-before-parent-in-job=warn"]
        )
    );
}

#[test]
fn text_report_of_a_msgpack_stream_names_batches() {
    let vllm = common::fixtures().join("vllm");
    assert_snapshot!(
        "text_msgpack_max_1",
        check_in(&vllm, &["b_chunked.legacy.msgpack", "--max-findings", "1"])
    );
}

#[test]
fn text_report_shows_at_most_max_findings_per_rule() {
    let d = traces();
    let count = |args: &[&str], prefix: &str| {
        let o = run_in(d.path(), &[&["check", "orphans.jsonl"], args].concat());
        assert_eq!(o.status.code(), Some(0), "{}", transcript(&o));
        let s = stdout(&o);
        let more = s
            .lines()
            .filter(|l| {
                l.starts_with("... ") && l.ends_with(" more (see --json or --max-findings all)")
            })
            .map(str::to_owned)
            .collect::<Vec<_>>();
        (s.lines().filter(|l| l.starts_with(prefix)).count(), more)
    };
    let (n, more) = count(&[], "warning[unknown-parent]");
    assert_eq!(n, 20);
    assert!(
        more.contains(&"... 10 more (see --json or --max-findings all)".to_string()),
        "{more:?}"
    );
    let (n, more) = count(&["--max-findings", "all"], "warning[unknown-parent]");
    assert_eq!((n, more.len()), (30, 0));
    let (n, _) = count(&["--max-findings", "3"], "warning[unknown-parent]");
    assert_eq!(n, 3);
    // The summary still counts them all.
    let (n, _) = count(&["--max-findings", "0"], "warning[");
    assert_eq!(n, 0);
    let o = run_in(d.path(), &["check", "orphans.jsonl", "--max-findings", "0"]);
    assert!(
        stdout(&o)
            .lines()
            .any(|l| l.trim_start().starts_with("unknown-parent")
                && l.contains(" 30  first at line 1, event 0")),
        "{}",
        stdout(&o)
    );
    let o = run_in(
        d.path(),
        &["check", "orphans.jsonl", "--max-findings", "many"],
    );
    assert_eq!(o.status.code(), Some(2));
}

#[test]
fn json_report_is_one_compact_complete_document() {
    let d = traces();
    let o = run_in(
        d.path(),
        &[
            "check",
            "legacy.jsonl",
            "--json",
            "--consumer",
            "llmd",
            "--consumer",
            "dynamo",
        ],
    );
    assert_eq!(o.status.code(), Some(1));
    assert!(o.stderr.is_empty(), "{}", transcript(&o));
    let s = stdout(&o);
    assert_eq!(s.lines().count(), 1, "compact: one line");
    let v: serde_json::Value = serde_json::from_str(&s).unwrap();
    assert_snapshot!("json_legacy", serde_json::to_string_pretty(&v).unwrap());
    // `--format json` is the same document; every finding is in it whatever --max-findings.
    let o2 = run_in(
        d.path(),
        &[
            "check",
            "orphans.jsonl",
            "--format",
            "json",
            "--max-findings",
            "1",
        ],
    );
    let v2: serde_json::Value = serde_json::from_slice(&o2.stdout).unwrap();
    let unknown = v2["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["rule"] == "unknown-parent")
        .count();
    assert_eq!(unknown, 30);
    let o3 = run_in(
        d.path(),
        &["check", "legacy.jsonl", "--json", "--format", "text"],
    );
    assert_eq!(o3.status.code(), Some(2), "--json and --format conflict");
}

#[test]
fn github_report_annotates_findings() {
    let d = traces();
    assert_snapshot!(
        "github_legacy",
        check_in(d.path(), &["legacy.jsonl", "--format", "github"])
    );
    assert_snapshot!(
        "github_fixed",
        check_in(d.path(), &["fixed.jsonl", "--format", "github"])
    );
    let vllm = common::fixtures().join("vllm");
    assert_snapshot!(
        "github_msgpack_max_1",
        check_in(
            &vllm,
            &[
                "b_chunked.legacy.msgpack",
                "--format",
                "github",
                "--max-findings",
                "1"
            ]
        )
    );
}

#[test]
fn check_bad_input_exits_2() {
    let dir = std::env::temp_dir().join(format!("kvscope-check-bad-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join("bad.jsonl");
    std::fs::write(&p, "{\"source\": \"a\", \"events\": [oops]}\n").unwrap();
    let o = kvscope(&["check", p.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("line 1"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let o = kvscope(&["check", dir.join("missing.jsonl").to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    let good = write("good.jsonl", &scenario(false));
    assert_eq!(
        kvscope(&["check", &good, "--consumer", "nope"])
            .status
            .code(),
        Some(2)
    );
    assert_eq!(
        kvscope(&["check", &good, "--rule", "seq-gap=loud"])
            .status
            .code(),
        Some(2)
    );
    assert_eq!(
        kvscope(&["check", &good, "--rule", "no-such-rule=warn"])
            .status
            .code(),
        Some(2)
    );
}

#[test]
fn verdicts_one_line_per_event() {
    let legacy = write("legacy-verdicts.jsonl", &scenario(true));
    let o = kvscope(&["verdicts", &legacy, "--consumer", "llmd"]);
    assert_eq!(o.status.code(), Some(0));
    let lines: Vec<serde_json::Value> = stdout(&o)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 5);
    assert_eq!(lines[0]["type"], "BlockStored");
    assert_eq!(
        (lines[2]["line"].as_u64(), lines[2]["index"].as_u64()),
        (Some(3), Some(0))
    );
    assert_eq!(lines[2]["verdict"], "dropped_orphan");
    assert_eq!(lines[2]["missing_parent"], h(2));
    assert_eq!(lines[2]["blocks"][0]["hash"], h(3));
    assert_eq!(lines[4]["verdict"], "applied");
    let o = kvscope(&["verdicts", &legacy, "--consumer", "ideal"]);
    let lines: Vec<serde_json::Value> = stdout(&o)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines[2]["verdict"], "replayed");
    assert_eq!(lines[2]["delivered_as"], "pending");
    assert_eq!(lines[2]["resolved_by"], 4);
    let d = traces();
    assert_snapshot!(
        "verdicts_llmd",
        transcript(&run_in(
            d.path(),
            &["verdicts", "legacy.jsonl", "--consumer", "llmd"]
        ))
    );
    assert_eq!(
        kvscope(&["verdicts", &legacy, "--consumer", "x"])
            .status
            .code(),
        Some(2)
    );
}

#[test]
fn diff_legacy_vs_fixed() {
    let legacy = write("legacy-diff.jsonl", &scenario(true));
    let fixed = write("fixed-diff.jsonl", &scenario(false));
    let o = kvscope(&["diff", &legacy, &fixed, "--json"]);
    assert_eq!(o.status.code(), Some(0));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["disappeared"].as_array().unwrap().len(), 2);
    assert_eq!(v["appeared"].as_array().unwrap().len(), 0);
    let llmd = v["losses"]
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["consumer"] == "llmd")
        .unwrap();
    assert_eq!(
        (
            llmd["a_blocks_lost"].as_u64(),
            llmd["b_blocks_lost"].as_u64()
        ),
        (Some(2), Some(0))
    );
    let d = traces();
    assert_snapshot!(
        "diff_text",
        transcript(&run_in(d.path(), &["diff", "legacy.jsonl", "fixed.jsonl"]))
    );
    // The lists (2 violations only in A, 2 differing events) cut at one each, with the rest
    // counted; the counts above them stay whole.
    let o = run_in(
        d.path(),
        &["diff", "legacy.jsonl", "fixed.jsonl", "--max-findings", "1"],
    );
    let text = String::from_utf8(o.stdout).unwrap();
    assert_eq!(o.status.code(), Some(0));
    assert_eq!(
        text.matches("  ... 1 more (see --json or --max-findings all)\n")
            .count(),
        2,
        "{text}"
    );
    assert!(
        text.contains("violations only in A (disappear): 2\n"),
        "{text}"
    );
    assert!(
        text.contains("events that differ (1 of 2; A | B):\n"),
        "{text}"
    );
    assert_eq!(
        text.matches("  - child-before-parent-in-job block ")
            .count(),
        1
    );
    let all = run_in(
        d.path(),
        &[
            "diff",
            "legacy.jsonl",
            "fixed.jsonl",
            "--max-findings",
            "all",
        ],
    );
    assert_eq!(
        all.stdout,
        run_in(d.path(), &["diff", "legacy.jsonl", "fixed.jsonl"]).stdout
    );
}

/// Router block sizes default to `auto` (the engine block size in the trace): the built-in
/// `legacy-vs-fixed` demo uses engine block size 4, so with `--order fixed` no model loses
/// anything, while the legacy (CPython) order makes llm-d drop orphans. A fixed
/// `--llmd-block-size 16` / `--dynamo-block-size 16` reproduces a misconfigured router.
#[test]
fn block_sizes_default_to_the_engine_block_size() {
    let dir = std::env::temp_dir().join(format!("kvscope-bs-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let fixed = dir.join("f.jsonl").display().to_string();
    let legacy = dir.join("l.jsonl").display().to_string();
    let o = kvscope(&[
        "generate",
        "legacy-vs-fixed",
        "--order",
        "fixed",
        "-o",
        &fixed,
    ]);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let o = kvscope(&["generate", "legacy-vs-fixed", "-o", &legacy]);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let losses = |args: &[&str]| -> serde_json::Value {
        let mut a = vec!["check", "--json"];
        a.extend_from_slice(args);
        let o = kvscope(&a);
        serde_json::from_slice(&o.stdout).unwrap()
    };
    let lost = |v: &serde_json::Value, c: &str| -> u64 {
        v["losses"]
            .as_array()
            .unwrap()
            .iter()
            .find(|l| l["consumer"] == c)
            .unwrap()["blocks_lost"]
            .as_u64()
            .unwrap()
    };
    let v = losses(&[&fixed]);
    assert_eq!(v["deny"], 0, "{v}");
    assert_eq!(lost(&v, "llmd"), 0, "{v}");
    assert_eq!(lost(&v, "dynamo"), 0, "{v}");
    let v = losses(&[&legacy]);
    assert!(lost(&v, "llmd") > 0, "{v}");
    assert_eq!(lost(&v, "dynamo"), 0, "{v}");
    assert!(v.to_string().contains("dropped_orphan"), "{v}");
    // Explicit sizes override auto: a router configured for 16-token blocks.
    let v = losses(&[
        &fixed,
        "--llmd-block-size",
        "16",
        "--dynamo-block-size",
        "16",
    ]);
    assert_eq!(lost(&v, "llmd"), 12, "{v}");
    assert_eq!(lost(&v, "dynamo"), 12, "{v}");
    let v = losses(&[
        &fixed,
        "--llmd-block-size",
        "auto",
        "--dynamo-block-size",
        "4",
    ]);
    assert_eq!(lost(&v, "llmd") + lost(&v, "dynamo"), 0, "{v}");
    let o = kvscope(&["check", &fixed, "--llmd-block-size", "0"]);
    assert_eq!(o.status.code(), Some(2), "{}", stdout(&o));
}

/// The routing preconditions come first in the summary: here `hash-seed-mismatch` (two pods
/// hash the same root tokens differently) before `unknown-parent` and `consumer-loss`.
#[test]
fn text_report_lists_routing_preconditions_first() {
    use kvscope_core::event::KvEvent;
    let root = stored(&[1], None, Some("GPU"), 16);
    let mut other = root.clone();
    if let KvEvent::BlockStored(e) = &mut other {
        e.block_hashes = vec![kvscope_core::hash::BlockHash::Int(h(1001))].into();
    }
    let t = trace(vec![
        batch("pod-a", 0, vec![root]),
        batch("pod-a", 1, vec![stored(&[3], Some(2), Some("GPU"), 16)]),
        batch("pod-b", 0, vec![other]),
    ]);
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("seeds.jsonl"), write_trace(&t)).unwrap();
    let out = check_in(dir.path(), &["seeds.jsonl", "--max-findings", "1"]);
    let rules: Vec<&str> = out
        .lines()
        .skip_while(|l| !l.starts_with("findings per rule"))
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    assert_eq!(
        rules,
        ["hash-seed-mismatch", "unknown-parent", "consumer-loss"],
        "{out}"
    );
    assert_snapshot!("text_preconditions_first", out);
}

/// Issue 20, "memory per finding": a trace where every event is an orphan for every strict
/// router (one-event batches whose parents are never stored) used to abort in a failed
/// allocation at 2M events. Its outcome, at a size a test can afford (the 2M run's peak memory
/// is `scripts/bench-memory.sh`'s): a clean exit, every finding counted in the summary and
/// every one in the JSON document, the losses complete.
#[test]
fn an_orphan_per_event_ends_cleanly_with_every_finding() {
    const N: usize = 20_000;
    // Blocks and parents from two disjoint ranges: no parent is ever stored.
    let t = trace(
        (0..N as u64)
            .map(|i| {
                batch(
                    "pod",
                    i,
                    vec![stored(
                        &[(1 << 40) + i],
                        Some((1 << 41) + i),
                        Some("GPU"),
                        4,
                    )],
                )
            })
            .collect(),
    );
    let path = write("orphans-many.jsonl", &t);
    let o = kvscope(&["check", &path, "--max-findings", "0"]);
    assert_eq!(o.status.code(), Some(0), "{}", transcript(&o));
    let s = stdout(&o);
    let n = "20,000"; // N as the report writes counts
    assert!(
        s.contains(&format!("{n} events")) && s.contains(&format!("unknown-parent  warning   {n}")),
        "{s}"
    );
    for router in ["llmd", "dynamo", "smg", "sglang"] {
        assert!(
            s.lines().any(|l| l.trim_start().starts_with(router)
                && l.contains(&format!("{n} events, {n} blocks lost; {n} unreachable"))),
            "{router}: {s}"
        );
    }
    let o = kvscope(&["check", &path, "--json"]);
    assert_eq!(o.status.code(), Some(0), "{}", transcript(&o));
    let doc: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let findings = doc["findings"].as_array().unwrap();
    let of = |rule: &str| findings.iter().filter(|f| f["rule"] == rule).count();
    assert_eq!(of("unknown-parent"), N);
    // One consumer-loss per event for each of the four strict routers, and the ideal
    // router's (it holds a bounded number of orphans, then drops them).
    assert!(of("consumer-loss") >= 4 * N, "{}", of("consumer-loss"));
    for l in doc["losses"].as_array().unwrap() {
        if l["consumer"] != "ideal" {
            assert_eq!(
                l["unreachable_prefixes"].as_array().unwrap().len(),
                N,
                "{l}"
            );
        }
    }
}
