//! `kvscope check`, `verdicts` and `diff` end to end.

use std::path::PathBuf;
use std::process::{Command, Output};

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

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

#[test]
fn check_legacy_fails_and_fixed_passes() {
    let legacy = write("legacy.jsonl", &scenario(true));
    let fixed = write("fixed.jsonl", &scenario(false));
    let o = kvscope(&["check", &legacy]);
    assert_eq!(
        o.status.code(),
        Some(1),
        "{}{}",
        stdout(&o),
        String::from_utf8_lossy(&o.stderr)
    );
    let s = stdout(&o);
    assert!(
        s.contains("error[child-before-parent-in-job]: line 3, event 2"),
        "{s}"
    );
    assert!(s.contains("job inferred"), "{s}");
    assert!(
        s.contains(&format!(
            "block {} delivered before its parent {}, which arrives at event 3",
            h(3),
            h(2)
        )),
        "{s}"
    );
    assert!(s.contains("llmd: dropped_orphan"), "{s}");
    assert!(s.contains("2 error(s)"), "{s}");
    let o = kvscope(&["check", &fixed]);
    assert_eq!(o.status.code(), Some(0), "{}", stdout(&o));
    assert!(stdout(&o).contains("0 error(s)"));
    // Downgrading the rule makes the legacy trace pass.
    let o = kvscope(&[
        "check",
        &legacy,
        "--rule",
        "child-before-parent-in-job=warn",
    ]);
    assert_eq!(o.status.code(), Some(0));
    assert!(stdout(&o).contains("warning[child-before-parent-in-job]"));
}

#[test]
fn check_json_report() {
    let legacy = write("legacy-json.jsonl", &scenario(true));
    let o = kvscope(&[
        "check",
        &legacy,
        "--json",
        "--consumer",
        "llmd",
        "--consumer",
        "dynamo",
    ]);
    assert_eq!(o.status.code(), Some(1));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["deny"], 2);
    let losses = v["losses"].as_array().unwrap();
    assert_eq!(losses.len(), 2);
    assert_eq!(losses[0]["consumer"], "llmd");
    assert_eq!(losses[0]["blocks_lost"], 2);
    assert_eq!(losses[1]["blocks_lost"], 0);
    let f = &v["findings"][0];
    assert_eq!(f["rule"], "child-before-parent-in-job");
    assert_eq!(f["verdicts"]["llmd"], "dropped_orphan");
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
    let o = kvscope(&["diff", &legacy, &fixed]);
    let s = stdout(&o);
    assert!(s.contains("child-before-parent-in-job"), "{s}");
    assert!(s.contains("llmd"), "{s}");
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
