//! `kvscope capture` end to end: the binary against the Python vLLM publisher peer
//! (`tests/zmq/publisher.py`; pyzmq + msgspec, installed by `scripts/install-tools.sh`).
//! The capture logic itself is tested in `capture/tests/`.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Output, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use kvscope_core::trace::TraceRecord;

fn kvscope(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_kvscope"))
        .args(args)
        .output()
        .expect("run kvscope")
}

/// The peer, killed on drop.
struct Peer(Child, u16);

impl Drop for Peer {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn peer(args: &[&str]) -> Peer {
    let python = std::env::var("KVSCOPE_PYTHON").unwrap_or_else(|_| "python3".into());
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/zmq/publisher.py");
    let mut child = Command::new(&python)
        .arg(script)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| {
            panic!("cannot run {python} {script}: {e}; see scripts/install-tools.sh")
        });
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let line = rx.recv_timeout(Duration::from_secs(20)).unwrap_or_else(|_| {
        panic!("publisher.py printed no READY line (are pyzmq and msgspec installed? run scripts/install-tools.sh)")
    });
    let port = line.split_whitespace().nth(1).and_then(|p| p.parse().ok());
    Peer(
        child,
        port.unwrap_or_else(|| panic!("unexpected line from publisher.py: {line:?}")),
    )
}

#[test]
fn ctrl_c_ends_the_capture_cleanly_with_a_summary() {
    let p = peer(&[
        "--mode",
        "plain",
        "--count",
        "100000",
        "--interval",
        "0.005",
    ]);
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("cap.jsonl");
    let endpoint = format!("eng=tcp://127.0.0.1:{}", p.1);
    let mut cap = Command::new(env!("CARGO_BIN_EXE_kvscope"))
        .args([
            "capture",
            "--endpoint",
            &endpoint,
            "-o",
            out.to_str().unwrap(),
            "--duration",
            "30",
        ])
        .stderr(Stdio::piped())
        .spawn()
        .expect("run kvscope capture");
    // Wait (bounded) until batches are on disk: the trace is flushed as it goes.
    let deadline = Instant::now() + Duration::from_secs(20);
    while std::fs::read_to_string(&out).map_or(0, |t| t.lines().count()) < 5 {
        assert!(Instant::now() < deadline, "no batches written within 20 s");
        std::thread::sleep(Duration::from_millis(50));
    }
    let kill = Command::new("kill")
        .args(["-INT", &cap.id().to_string()])
        .status()
        .unwrap();
    assert!(kill.success());
    let deadline = Instant::now() + Duration::from_secs(10);
    let status = loop {
        if let Some(s) = cap.try_wait().unwrap() {
            break s;
        }
        if Instant::now() > deadline {
            let _ = cap.kill();
            panic!("capture did not end within 10 s of SIGINT");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut cap.stderr.take().unwrap(), &mut stderr).unwrap();
    assert!(status.success(), "exit {status:?}: {stderr}");
    assert!(stderr.contains("done (interrupted):"), "{stderr}");

    let text = std::fs::read_to_string(&out).unwrap();
    let trace = kvscope_core::wire::jsonl::read_trace(text.as_bytes()).unwrap();
    let seqs: Vec<u64> = trace.batches().map(|b| b.seq).collect();
    assert!(seqs.len() >= 4, "{text}");
    assert_eq!(seqs, (0..seqs.len() as u64).collect::<Vec<_>>());
    assert!(trace.batches().all(|b| b.source == "eng"));
    let Some(TraceRecord::Other(end)) = trace.records.last() else {
        panic!("no end note: {text}")
    };
    assert_eq!(end["note"], "capture-end");
    assert_eq!(end["reason"], "interrupted");
    assert_eq!(end["stats"]["batches"], seqs.len());
}

#[test]
fn max_batches_to_stdout_and_bad_arguments() {
    let p = peer(&["--mode", "plain", "--count", "5"]);
    let o = kvscope(&[
        "capture",
        "--endpoint",
        &format!("tcp://127.0.0.1:{}", p.1),
        "--max-batches",
        "5",
        "--duration",
        "20",
        "--raw",
        "--workers",
        "2",
    ]);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{stderr}");
    // The world size is in the header, where a reader finds it as `meta.world_size`.
    let first: serde_json::Value =
        serde_json::from_slice(o.stdout.split(|b| *b == b'\n').next().unwrap()).unwrap();
    assert_eq!(first["kind"], "header", "{first}");
    assert_eq!(first["meta"]["world_size"], 2, "{first}");
    assert!(
        stderr.contains("done (max batches reached): 5 batches"),
        "{stderr}"
    );
    let trace = kvscope_core::wire::jsonl::read_trace(&o.stdout).unwrap();
    assert!(
        matches!(trace.records.first(), Some(TraceRecord::Header(h)) if h.meta.get("world_size") == Some(&serde_json::json!(2)))
    );
    assert_eq!(trace.batches().count(), 5);
    assert!(trace.batches().all(|b| b.raw.is_some()));

    for (args, needle) in [
        (
            vec!["capture", "--endpoint", "tcp://*:5557"],
            "bind address",
        ),
        (
            vec![
                "capture",
                "--endpoint",
                "tcp://h:1",
                "--data-parallel-size",
                "0",
            ],
            "at least 1",
        ),
        (
            vec![
                "capture",
                "--endpoint",
                "a=tcp://h:1",
                "--endpoint",
                "a=tcp://h:2",
            ],
            "distinct",
        ),
        (
            vec!["capture", "--endpoint", "tcp://h:1", "--duration=-1"],
            "--duration",
        ),
        (
            vec!["capture", "--endpoint", "tcp://h:1", "--workers", "0"],
            "--workers",
        ),
    ] {
        let o = kvscope(&args);
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(needle), "{args:?}: {stderr}");
    }
}
