//! `kvscope capture`: record a trace from running vLLM engines' ZMQ KV-event publishers.
//! The work is done by `kvscope-capture`; this module parses arguments, opens the output,
//! handles Ctrl-C and renders progress on stderr.

use std::fs::File;
use std::io::{self, BufWriter, IsTerminal, Write};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use kvscope_capture::writer::TraceWriter;
use kvscope_capture::{
    Capture, CaptureConfig, CaptureError, Diagnostic, EndpointSpec, Observer, Stats, StopReason,
};

use crate::exit::BadInput;

/// Arguments of `kvscope capture`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// A publisher to subscribe to, `[NAME=]tcp://HOST:PORT` (vLLM's `KVEventsConfig.endpoint`
    /// as seen from here). Repeatable; each is one trace `source`, named NAME or the URL.
    #[arg(long = "endpoint", value_name = "[NAME=]URL", required = true)]
    endpoints: Vec<EndpointSpec>,
    /// ZMQ subscription prefix (vLLM's `KVEventsConfig.topic`; empty = everything).
    #[arg(long, default_value = "")]
    topic: String,
    /// vLLM's replay endpoint (`KVEventsConfig.replay_endpoint`), used to recover sequence
    /// gaps. Repeatable: a plain URL applies to the --endpoint at the same position,
    /// NAME=URL to the endpoint named NAME.
    #[arg(long = "replay-endpoint", value_name = "[NAME=]URL")]
    replay_endpoints: Vec<EndpointSpec>,
    /// Data-parallel ranks per endpoint: subscribe to ports PORT..PORT+N-1 (and the replay
    /// ports likewise), all under the endpoint's source name.
    #[arg(long, value_name = "N", default_value_t = 1)]
    data_parallel_size: u32,
    /// Workers per engine (vLLM's `parallel_config.world_size`, e.g. the tensor-parallel
    /// size): recorded in the trace header as `world_size`, which `check` uses to tell an
    /// in-job inversion from jobs of several workers completing in one step.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    workers: Option<u32>,
    /// Output trace (JSON Lines); `-` or absent = stdout.
    #[arg(short, long, value_name = "OUT")]
    output: Option<PathBuf>,
    /// Keep each batch's exact payload bytes (base64 `raw` next to the decoded batch).
    #[arg(long)]
    raw: bool,
    /// Stop after this many batches. A gap being recovered when N is reached is completed
    /// first (replayed batches are written before the live one), so up to one recovery's
    /// batches more can be written.
    #[arg(long, value_name = "N")]
    max_batches: Option<u64>,
    /// Stop after this many seconds.
    #[arg(long, value_name = "SECONDS")]
    duration: Option<f64>,
    /// Seconds to wait for each reply of a replay request.
    #[arg(long, value_name = "SECONDS", default_value_t = 5.0)]
    replay_timeout: f64,
}

fn seconds(name: &str, v: f64) -> anyhow::Result<Duration> {
    Duration::try_from_secs_f64(v).map_err(|_| {
        BadInput(format!(
            "--{name} must be a non-negative number of seconds, got {v}"
        ))
        .into()
    })
}

/// Progress and diagnostics on stderr: a live status line when stderr is a terminal, else a
/// plain line every 5 seconds.
struct StderrObserver {
    tty: bool,
    line_drawn: bool,
    next_plain: Instant,
}

impl StderrObserver {
    const PLAIN_EVERY: Duration = Duration::from_secs(5);

    fn clear_line(&mut self) {
        if self.line_drawn {
            eprint!("\r\x1b[2K");
            self.line_drawn = false;
        }
    }
}

impl Observer for StderrObserver {
    fn diagnostic(&mut self, d: &Diagnostic) {
        self.clear_line();
        eprintln!("kvscope capture: {d}");
    }

    fn progress(&mut self, stats: &Stats) {
        if self.tty {
            eprint!("\r\x1b[2K{}", stats.status_line());
            let _ = io::stderr().flush();
            self.line_drawn = true;
        } else if Instant::now() >= self.next_plain {
            eprintln!("kvscope capture: {}", stats.status_line());
            self.next_plain = Instant::now() + Self::PLAIN_EVERY;
        }
    }
}

/// Run the command.
pub fn run(args: Args) -> anyhow::Result<()> {
    let config = CaptureConfig {
        endpoints: args.endpoints,
        replay_endpoints: args.replay_endpoints,
        topic: args.topic,
        data_parallel_size: args.data_parallel_size,
        world_size: args.workers,
        raw: args.raw,
        max_batches: args.max_batches,
        duration: args.duration.map(|d| seconds("duration", d)).transpose()?,
        replay_timeout: seconds("replay-timeout", args.replay_timeout)?,
        ..CaptureConfig::default()
    };
    let mut capture = Capture::connect(config).map_err(|e| match e {
        CaptureError::Config(_) | CaptureError::Endpoint(_) => {
            anyhow::Error::new(BadInput(e.to_string()))
        }
        other => anyhow::Error::new(other),
    })?;

    let out: Box<dyn Write> = match &args.output {
        Some(p) if p.as_os_str() != "-" => Box::new(BufWriter::new(
            File::create(p).with_context(|| format!("creating {}", p.display()))?,
        )),
        _ => Box::new(BufWriter::new(io::stdout().lock())),
    };
    let mut writer = TraceWriter::new(out);

    let stop = Arc::new(AtomicBool::new(false));
    let flag = Arc::clone(&stop);
    ctrlc::set_handler(move || {
        // A second Ctrl-C while the first is being honoured exits at once.
        if flag.swap(true, Ordering::SeqCst) {
            std::process::exit(130);
        }
    })
    .context("installing the Ctrl-C handler")?;

    let tty = io::stderr().is_terminal();
    let mut obs = StderrObserver {
        tty,
        line_drawn: false,
        next_plain: Instant::now() + StderrObserver::PLAIN_EVERY,
    };
    for (source, url) in capture.publishers() {
        eprintln!("kvscope capture: subscribing to {url} (source {source})");
    }
    let stats = capture.run(&mut writer, &stop, &mut obs)?;
    writer.flush()?;
    obs.clear_line();
    let reason = stats.stop.map_or("stopped", |r| match r {
        StopReason::MaxBatches => "max batches reached",
        StopReason::Duration => "duration elapsed",
        StopReason::Interrupted => "interrupted",
    });
    eprintln!("kvscope capture: done ({reason}): {}", stats.status_line());
    Ok(())
}
