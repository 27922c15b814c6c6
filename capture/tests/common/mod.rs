//! Test harness: a real ZMQ peer (`tests/zmq/publisher.py`, pyzmq + msgspec, speaking vLLM's
//! publisher protocol) and a bounded capture run against it.
//!
//! Nothing here is skipped: without python3, pyzmq or msgspec the tests fail with a message
//! saying how to install them (`scripts/install-tools.sh`).

#![allow(dead_code)]

use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::atomic::AtomicBool;
use std::sync::mpsc;
use std::sync::{Arc, Mutex, Once};
use std::time::Duration;

use kvscope_capture::writer::TraceWriter;
use kvscope_capture::{Capture, CaptureConfig, Diagnostic, EndpointSpec, Observer, Stats};
use kvscope_core::trace::{Trace, TraceBatch, TraceRecord};

/// `ts` of a lifetime's batch 0 (the peer uses `ts = TS0 + i`).
pub const TS0: f64 = 1_700_000_000.0;

/// Hard bound on every capture run in the tests.
pub const CAPTURE_BOUND: Duration = Duration::from_secs(20);

fn python() -> String {
    std::env::var("KVSCOPE_PYTHON").unwrap_or_else(|_| "python3".to_string())
}

fn script() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/zmq/publisher.py")
}

static DEPS: Once = Once::new();

/// Fail (never skip) with instructions when the Python peer cannot run.
fn check_python_deps() {
    DEPS.call_once(|| {
        let out = Command::new(python())
            .args(["-c", "import zmq, msgspec"])
            .output()
            .unwrap_or_else(|e| {
                panic!(
                    "cannot run {} ({e}); install Python 3 and run scripts/install-tools.sh",
                    python()
                )
            });
        assert!(
            out.status.success(),
            "the ZMQ test peer needs pyzmq and msgspec: run scripts/install-tools.sh \
             (or `{} -m pip install pyzmq msgspec`): {}",
            python(),
            String::from_utf8_lossy(&out.stderr)
        );
    });
}

/// A running publisher peer; killed when dropped.
pub struct Peer {
    child: Child,
    stdin: Option<ChildStdin>,
    /// Base live port (rank r publishes on `pub_port + r`).
    pub pub_port: u16,
    /// Base replay port, 0 without `--replay`.
    pub replay_port: u16,
}

impl Peer {
    /// Start `publisher.py` with `args` and wait (bounded) for its `READY` line.
    pub fn spawn(args: &[&str]) -> Peer {
        check_python_deps();
        let mut child = Command::new(python())
            .arg(script())
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap_or_else(|e| panic!("spawning {} {}: {e}", python(), script().display()));
        let stdout = child.stdout.take().expect("piped stdout");
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let stdin = child.stdin.take();
        let mut peer = Peer {
            child,
            stdin,
            pub_port: 0,
            replay_port: 0,
        };
        let line = rx
            .recv_timeout(Duration::from_secs(20))
            .unwrap_or_else(|_| panic!("publisher.py {args:?} printed no READY line within 20 s"));
        let parts: Vec<&str> = line.split_whitespace().collect();
        let ["READY", p, r] = parts[..] else {
            panic!("unexpected first line from publisher.py: {line:?}")
        };
        peer.pub_port = p.parse().expect("pub port");
        peer.replay_port = r.parse().expect("replay port");
        peer
    }

    /// The live endpoint, optionally named.
    pub fn endpoint(&self, name: Option<&str>) -> EndpointSpec {
        spec(name, self.pub_port)
    }

    /// The replay endpoint, optionally named.
    pub fn replay_endpoint(&self, name: Option<&str>) -> EndpointSpec {
        assert_ne!(self.replay_port, 0, "peer started without --replay");
        spec(name, self.replay_port)
    }
}

impl Drop for Peer {
    fn drop(&mut self) {
        if let Some(mut s) = self.stdin.take() {
            let _ = s.flush();
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn spec(name: Option<&str>, port: u16) -> EndpointSpec {
    let url = format!("tcp://127.0.0.1:{port}");
    match name {
        Some(n) => format!("{n}={url}").parse().expect("endpoint"),
        None => url.parse().expect("endpoint"),
    }
}

/// Collects diagnostics.
#[derive(Default)]
pub struct Collect {
    /// Every diagnostic, in order.
    pub diagnostics: Vec<Diagnostic>,
    /// Progress calls seen.
    pub progress_calls: usize,
}

impl Observer for Collect {
    fn diagnostic(&mut self, d: &Diagnostic) {
        self.diagnostics.push(d.clone());
    }
    fn progress(&mut self, _: &Stats) {
        self.progress_calls += 1;
    }
}

/// An in-memory output that remembers the length at every flush.
#[derive(Clone, Default)]
pub struct Recorder {
    /// Everything written.
    pub bytes: Arc<Mutex<Vec<u8>>>,
    /// `bytes.len()` at each flush.
    pub flushes: Arc<Mutex<Vec<usize>>>,
}

impl Write for Recorder {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.bytes.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        let n = self.bytes.lock().unwrap().len();
        self.flushes.lock().unwrap().push(n);
        Ok(())
    }
}

/// The result of a capture run.
pub struct Captured {
    /// The JSONL text written.
    pub text: String,
    /// The trace read back with kvscope's JSONL reader.
    pub trace: Trace,
    /// Final counters.
    pub stats: Stats,
    /// Diagnostics reported.
    pub diagnostics: Vec<Diagnostic>,
    /// Output length at each flush.
    pub flushes: Vec<usize>,
}

impl Captured {
    /// Batches of `source` (and, if given, `dp_rank`), in trace order.
    pub fn batches(&self, source: &str, dp_rank: Option<Option<u32>>) -> Vec<&TraceBatch> {
        self.trace
            .batches()
            .filter(|b| b.source == source && dp_rank.is_none_or(|r| b.dp_rank == r))
            .collect()
    }

    /// `(seq, ts offset)` of those batches.
    pub fn seq_ts(&self, source: &str, dp_rank: Option<Option<u32>>) -> Vec<(u64, f64)> {
        self.batches(source, dp_rank)
            .iter()
            .map(|b| (b.seq, b.ts - TS0))
            .collect()
    }

    /// Note lines (`{"kind": "note", "note": what}`, read as `TraceRecord::Other`).
    pub fn notes(&self, what: &str) -> Vec<&serde_json::Value> {
        self.trace
            .records
            .iter()
            .filter_map(|r| match r {
                TraceRecord::Other(v) if v["kind"] == "note" && v["note"] == what => Some(v),
                _ => None,
            })
            .collect()
    }
}

/// Run a capture (bounded by `max_batches` and [`CAPTURE_BOUND`]) and read its trace back.
pub fn capture(config: CaptureConfig, max_batches: u64) -> Captured {
    capture_for(config, Some(max_batches), CAPTURE_BOUND)
}

/// Run a capture bounded by `max_batches` and `bound`, and read its trace back.
pub fn capture_for(
    mut config: CaptureConfig,
    max_batches: Option<u64>,
    bound: Duration,
) -> Captured {
    config.max_batches = max_batches;
    config.duration = Some(bound);
    config.progress_interval = Duration::from_millis(50);
    let rec = Recorder::default();
    let mut writer = TraceWriter::new(rec.clone());
    let mut cap = Capture::connect(config).expect("capture connects");
    let mut obs = Collect::default();
    let stop = AtomicBool::new(false);
    let stats = cap.run(&mut writer, &stop, &mut obs).expect("capture runs");
    let bytes = rec.bytes.lock().unwrap().clone();
    let text = String::from_utf8(bytes).expect("utf-8 trace");
    let trace = kvscope_core::wire::jsonl::read_trace(text.as_bytes())
        .unwrap_or_else(|e| panic!("captured trace does not read back: {e}\n{text}"));
    assert!(obs.progress_calls >= 1, "progress never reported");
    let flushes = rec.flushes.lock().unwrap().clone();
    Captured {
        text,
        trace,
        stats,
        diagnostics: obs.diagnostics,
        flushes,
    }
}
