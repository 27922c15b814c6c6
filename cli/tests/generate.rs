//! End-to-end tests of `kvscope generate`.

use std::process::Command;

fn kvscope(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_kvscope"))
        .args(args)
        .output()
        .expect("run kvscope")
}

#[test]
fn list_prints_names_first() {
    let out = kvscope(&["generate", "--list"]);
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    let names: Vec<&str> = text
        .lines()
        .map(|l| l.split('\t').next().unwrap())
        .collect();
    // every scenario file is listed (read from `scenarios/`, so a new one is never skipped)
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../scenarios");
    let mut files: Vec<String> = std::fs::read_dir(&dir)
        .expect("scenarios/")
        .map(|e| e.expect("dir entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .map(|p| p.file_stem().unwrap().to_str().unwrap().to_owned())
        .collect();
    files.sort();
    assert!(files.len() >= 8, "only {} scenario files", files.len());
    for want in files.iter().map(String::as_str) {
        assert!(names.contains(&want), "{want} missing from {names:?}");
    }
}

#[test]
fn same_scenario_same_bytes_and_order_flag_changes_output() {
    let a = kvscope(&["generate", "single-request"]);
    let b = kvscope(&["generate", "single-request"]);
    assert!(a.status.success(), "{}", String::from_utf8_lossy(&a.stderr));
    assert!(!a.stdout.is_empty());
    assert_eq!(a.stdout, b.stdout);
    let c = kvscope(&[
        "generate",
        "single-request",
        "--order",
        "cpython",
        "--python-hash-seed",
        "0",
    ]);
    assert!(c.status.success());
    assert_ne!(a.stdout, c.stdout);
    let m1 = kvscope(&["generate", "two-tiers-async", "--format", "msgpack"]);
    let m2 = kvscope(&["generate", "two-tiers-async", "--format", "msgpack"]);
    assert!(m1.status.success());
    assert!(!m1.stdout.is_empty());
    assert_eq!(m1.stdout, m2.stdout);
}
