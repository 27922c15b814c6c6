//! A closed stdout (`kvscope check big.msgpack | head -1`) ends every command quietly with exit
//! 0, as ripgrep does: no panic (exit 101), no "Broken pipe" error (exit 3).

use std::process::{Command, Stdio};

fn fixture(name: &str) -> String {
    format!(
        "{}/../tests/fixtures/vllm/{name}",
        env!("CARGO_MANIFEST_DIR")
    )
}

/// Run kvscope with stdout a pipe whose read end is already closed, so its first write fails
/// with EPIPE (Rust ignores SIGPIPE, so the write returns an error instead of killing it).
fn with_closed_stdout(args: &[&str]) -> (Option<i32>, String) {
    let (reader, writer) = std::io::pipe().expect("pipe");
    drop(reader);
    let out = Command::new(env!("CARGO_BIN_EXE_kvscope"))
        .args(args)
        .stdout(writer)
        .stderr(Stdio::piped())
        .output()
        .expect("run kvscope");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn every_command_exits_0_quietly_on_a_closed_stdout() {
    let legacy = fixture("b_chunked.legacy.msgpack");
    let fixed = fixture("b_chunked.fixed.msgpack");
    let cases: Vec<Vec<&str>> = vec![
        vec!["check", &legacy],
        vec!["check", "--json", &legacy],
        vec!["check", "--format", "github", &legacy],
        vec!["check", &fixed],
        vec!["verdicts", "--consumer", "llmd", &legacy],
        vec!["convert", &legacy],
        vec!["diff", &legacy, &fixed],
        vec!["diff", "--json", &legacy, &fixed],
        vec!["generate", "chunked"],
        vec!["generate", "--list"],
    ];
    for args in &cases {
        let (code, stderr) = with_closed_stdout(args);
        assert_eq!(code, Some(0), "kvscope {args:?}: stderr {stderr:?}");
        assert!(stderr.is_empty(), "kvscope {args:?}: stderr {stderr:?}");
    }
}

#[test]
fn an_open_stdout_still_gets_the_exit_code_of_the_findings() {
    let out = Command::new(env!("CARGO_BIN_EXE_kvscope"))
        .args(["check", &fixture("b_chunked.legacy.msgpack")])
        .output()
        .expect("run kvscope");
    assert_eq!(out.status.code(), Some(1));
}

#[test]
fn capture_to_a_closed_stdout_stops_at_once_with_exit_0() {
    // The header is written before anything is received, so no publisher is needed: the
    // first write fails and the capture ends instead of running for its --duration.
    let started = std::time::Instant::now();
    let (code, stderr) = with_closed_stdout(&[
        "capture",
        "--endpoint",
        "tcp://127.0.0.1:9",
        "--duration",
        "30",
    ]);
    assert_eq!(code, Some(0), "stderr {stderr:?}");
    assert!(
        !stderr.contains("error") && !stderr.contains("panicked"),
        "{stderr}"
    );
    assert!(started.elapsed() < std::time::Duration::from_secs(25));
}
