//! The capture loop: SUB sockets → frame validation → sequence tracking → gap recovery over
//! the replay socket → JSON Lines trace, flushed after every record.
//!
//! One publisher per (endpoint, DP rank), as vLLM binds one `ZmqEventPublisher` per
//! data-parallel rank at `PORT + rank` (`offset_endpoint_port`). Sequence numbers are tracked
//! per publisher. A batch's `dp_rank` is its own `data_parallel_rank`, falling back to the port
//! offset when `--data-parallel-size` is given (DECISIONS.md, trace model).

use std::fmt;
use std::io::{self, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use base64::Engine as _;
use kvscope_core::event::KvEventBatch;
use kvscope_core::trace::{SeqGap, TraceBatch, TraceHeader, TraceRecord};
use kvscope_core::wire::{msgpack, WireError};
use serde_json::{json, Value};

use crate::endpoint::{EndpointError, EndpointSpec};
use crate::frame::parse_live;
use crate::replay::{fetch_range, ReplayedBatch};
use crate::seq::{SeqStep, SeqTracker};
use crate::writer::TraceWriter;

/// vLLM's default `KVEventsConfig.hwm`; the subscriber queues as much.
const RCV_HWM: i32 = 100_000;
/// Messages taken from one socket before looking at the others and the stop conditions.
const DRAIN_LIMIT: usize = 1024;

/// What to capture and when to stop.
#[derive(Clone, Debug)]
pub struct CaptureConfig {
    /// The publishers' endpoints (one source each).
    pub endpoints: Vec<EndpointSpec>,
    /// Replay endpoints: `NAME=URL` applies to the endpoint of that source name, a plain URL to
    /// the endpoint at the same position.
    pub replay_endpoints: Vec<EndpointSpec>,
    /// ZMQ subscription prefix (vLLM's `KVEventsConfig.topic`, default empty = everything).
    pub topic: String,
    /// Data-parallel ranks per endpoint (ports `PORT..PORT+N-1`), at least 1.
    pub data_parallel_size: u32,
    /// Keep the exact payload bytes (base64 `raw` key next to the decoded batch).
    pub raw: bool,
    /// Stop once this many batches were written. Checked between messages: a live message
    /// whose gap is being recovered writes its replayed batches and itself first, so the count
    /// can exceed the limit by one recovery (never leaving a recovered gap half-written).
    pub max_batches: Option<u64>,
    /// Stop after this long.
    pub duration: Option<Duration>,
    /// How long a replay request waits for each reply.
    pub replay_timeout: Duration,
    /// How often [`Observer::progress`] is called.
    pub progress_interval: Duration,
    /// After this long, report each publisher nothing was received from (once).
    pub silence_warning: Duration,
}

impl Default for CaptureConfig {
    fn default() -> Self {
        Self {
            endpoints: Vec::new(),
            replay_endpoints: Vec::new(),
            topic: String::new(),
            data_parallel_size: 1,
            raw: false,
            max_batches: None,
            duration: None,
            replay_timeout: Duration::from_secs(5),
            progress_interval: Duration::from_millis(250),
            silence_warning: Duration::from_secs(5),
        }
    }
}

/// Why a capture could not start or had to stop.
#[derive(Debug, thiserror::Error)]
pub enum CaptureError {
    /// The configuration is unusable.
    #[error("{0}")]
    Config(String),
    /// A bad endpoint.
    #[error(transparent)]
    Endpoint(#[from] EndpointError),
    /// A ZMQ call failed.
    #[error("{endpoint}: {op}: {source}")]
    Zmq {
        /// The endpoint concerned.
        endpoint: String,
        /// What was being done.
        op: &'static str,
        /// The ZMQ error.
        source: zmq::Error,
    },
    /// Writing the trace failed.
    #[error("writing the trace: {0}")]
    Io(#[from] io::Error),
}

/// Why the capture ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StopReason {
    /// `max_batches` reached.
    MaxBatches,
    /// `duration` elapsed.
    Duration,
    /// The stop flag was set (Ctrl-C).
    Interrupted,
}

impl StopReason {
    fn as_str(self) -> &'static str {
        match self {
            StopReason::MaxBatches => "max-batches",
            StopReason::Duration => "duration",
            StopReason::Interrupted => "interrupted",
        }
    }
}

/// Counters of a running or finished capture.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Stats {
    /// Batch records written (live and recovered).
    pub batches: u64,
    /// Events in those batches.
    pub events: u64,
    /// Batches recovered over a replay socket (included in `batches`).
    pub replayed: u64,
    /// Sequence gaps detected (resets not included).
    pub gaps: u64,
    /// Gaps whose batches were all recovered.
    pub gaps_recovered: u64,
    /// Batches that stayed missing.
    pub missing: u64,
    /// Publisher restarts (sequence number lower than expected).
    pub resets: u64,
    /// Messages or payloads rejected (wrong frames, bad sequence frame, undecodable payload).
    pub malformed: u64,
    /// Time since the capture started.
    pub elapsed: Duration,
    /// Why it ended, once it has.
    pub stop: Option<StopReason>,
}

impl Stats {
    /// One status line: counts and rates.
    pub fn status_line(&self) -> String {
        let secs = self.elapsed.as_secs_f64();
        let rate = |n: u64| if secs > 0.0 { n as f64 / secs } else { 0.0 };
        format!(
            "{} batches, {} events | gaps {} ({} recovered, {} batches missing), resets {}, \
             malformed {} | {:.1} batches/s, {:.1} events/s | {:.1} s",
            self.batches,
            self.events,
            self.gaps,
            self.gaps_recovered,
            self.missing,
            self.resets,
            self.malformed,
            rate(self.batches),
            rate(self.events),
            secs
        )
    }
}

/// Something the user should hear about while the capture runs (also recorded in the trace).
#[derive(Clone, Debug, PartialEq)]
pub enum Diagnostic {
    /// A message or payload was rejected and skipped.
    Malformed {
        /// The publisher's endpoint.
        endpoint: String,
        /// Its sequence number, if it had a valid one.
        seq: Option<u64>,
        /// What was wrong.
        reason: String,
    },
    /// A gap in sequence numbers.
    Gap {
        /// The gap as recorded.
        gap: SeqGap,
        /// Batches recovered over the replay socket.
        recovered: u64,
        /// Batches still missing.
        missing: u64,
    },
    /// The publisher restarted.
    Reset {
        /// The reset as recorded.
        gap: SeqGap,
    },
    /// The first message of a publisher had `seq > 0`: earlier batches predate the capture.
    JoinedMidStream {
        /// The publisher's endpoint.
        endpoint: String,
        /// The first sequence number seen.
        seq: u64,
    },
    /// Nothing arrived from a publisher within `silence_warning` of the start.
    Silent {
        /// The publisher's endpoint.
        endpoint: String,
        /// How long the capture has waited.
        after: Duration,
    },
    /// A replay request failed; the gap stays (partly) unrecovered.
    ReplayFailed {
        /// What went wrong.
        reason: String,
    },
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Diagnostic::Malformed {
                endpoint,
                seq: Some(s),
                reason,
            } => {
                write!(f, "{endpoint}: skipped message seq {s}: {reason}")
            }
            Diagnostic::Malformed {
                endpoint,
                seq: None,
                reason,
            } => {
                write!(f, "{endpoint}: skipped message: {reason}")
            }
            Diagnostic::Gap {
                gap,
                recovered,
                missing,
            } => write!(
                f,
                "{} (dp_rank {}): sequence gap: expected {}, received {}: \
                 {recovered} batches recovered, {missing} missing",
                gap.source,
                rank_str(gap.dp_rank),
                gap.expected_seq,
                gap.received_seq
            ),
            Diagnostic::Reset { gap } => write!(
                f,
                "{} (dp_rank {}): publisher restarted: expected seq {}, received {}",
                gap.source,
                rank_str(gap.dp_rank),
                gap.expected_seq,
                gap.received_seq
            ),
            Diagnostic::JoinedMidStream { endpoint, seq } => {
                write!(
                    f,
                    "{endpoint}: joined mid-stream at seq {seq} \
                     (earlier batches predate the capture)"
                )
            }
            Diagnostic::Silent { endpoint, after } => write!(
                f,
                "{endpoint}: nothing received after {:.1} s (is the engine publishing there? check \
                 its --kv-events-config endpoint, the port offset per DP rank, and --topic)",
                after.as_secs_f64()
            ),
            Diagnostic::ReplayFailed { reason } => write!(f, "replay failed: {reason}"),
        }
    }
}

fn rank_str(rank: Option<u32>) -> String {
    rank.map_or_else(|| "-".to_string(), |r| r.to_string())
}

/// Receives diagnostics and periodic progress while a capture runs.
pub trait Observer {
    /// A diagnostic (malformed message, gap, reset, ...).
    fn diagnostic(&mut self, diagnostic: &Diagnostic);
    /// Current counters, every `progress_interval` and once at the end.
    fn progress(&mut self, stats: &Stats);
}

/// An observer that ignores everything.
#[derive(Clone, Copy, Debug, Default)]
pub struct Quiet;

impl Observer for Quiet {
    fn diagnostic(&mut self, _: &Diagnostic) {}
    fn progress(&mut self, _: &Stats) {}
}

/// One subscribed publisher (an endpoint's DP rank).
#[derive(Debug)]
struct Publisher {
    source: String,
    url: String,
    port_rank: Option<u32>,
    replay_url: Option<String>,
    tracker: SeqTracker,
    last_rank: Option<u32>,
    heard: bool,
}

impl Publisher {
    fn rank_hint(&self, batch_rank: Option<u32>) -> Option<u32> {
        batch_rank.or(self.last_rank).or(self.port_rank)
    }
}

/// A connected capture. Create with [`Capture::connect`], then [`Capture::run`].
pub struct Capture {
    ctx: zmq::Context,
    config: CaptureConfig,
    pubs: Vec<Publisher>,
    socks: Vec<zmq::Socket>,
    stats: Stats,
}

impl fmt::Debug for Capture {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Capture")
            .field("pubs", &self.pubs)
            .field("stats", &self.stats)
            .finish_non_exhaustive()
    }
}

/// Expand the endpoints into publishers (one per DP rank) and attach replay endpoints.
fn plan(config: &CaptureConfig) -> Result<Vec<Publisher>, CaptureError> {
    if config.endpoints.is_empty() {
        return Err(CaptureError::Config("no --endpoint given".into()));
    }
    if config.data_parallel_size == 0 {
        return Err(CaptureError::Config(
            "--data-parallel-size must be at least 1".into(),
        ));
    }
    let mut replay: Vec<Option<&EndpointSpec>> = vec![None; config.endpoints.len()];
    for (i, r) in config.replay_endpoints.iter().enumerate() {
        let target = match &r.name {
            Some(name) => config.endpoints.iter().position(|e| e.source() == name).ok_or_else(|| {
                CaptureError::Config(format!("--replay-endpoint {r}: no --endpoint has the source name {name:?}"))
            })?,
            None if i < config.endpoints.len() => i,
            None => {
                return Err(CaptureError::Config(format!(
                    "--replay-endpoint {r}: more unnamed replay endpoints than endpoints; name it NAME=URL"
                )))
            }
        };
        if let Some(prev) = replay[target].replace(r) {
            return Err(CaptureError::Config(format!(
                "--replay-endpoint {r} and {prev} both apply to {}",
                config.endpoints[target].source()
            )));
        }
    }
    let mut pubs = Vec::new();
    for (i, ep) in config.endpoints.iter().enumerate() {
        if config.endpoints[..i]
            .iter()
            .any(|o| o.source() == ep.source())
        {
            return Err(CaptureError::Config(format!(
                "two --endpoint values have the source name {:?}; give each a distinct NAME=",
                ep.source()
            )));
        }
        for rank in 0..config.data_parallel_size {
            pubs.push(Publisher {
                source: ep.source().to_string(),
                url: ep.url_for_rank(rank)?,
                port_rank: (config.data_parallel_size > 1).then_some(rank),
                replay_url: replay[i].map(|r| r.url_for_rank(rank)).transpose()?,
                tracker: SeqTracker::new(),
                last_rank: None,
                heard: false,
            });
        }
    }
    Ok(pubs)
}

fn unix_now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

/// A non-batch line `{"kind": "note", "note": what, ...fields}`. It never has an `events` key,
/// so readers that do not know it skip it (DECISIONS.md, trace model).
fn note(what: &str, fields: Value) -> TraceRecord {
    let mut v = json!({ "kind": "note", "note": what });
    if let (Some(obj), Value::Object(extra)) = (v.as_object_mut(), fields) {
        obj.extend(extra);
    }
    TraceRecord::Other(v)
}

/// Write one record and flush it, so a killed capture loses at most the record in flight.
fn emit<W: Write>(out: &mut TraceWriter<W>, record: TraceRecord) -> io::Result<()> {
    out.write(&record)?;
    out.flush()
}

fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

impl Capture {
    /// Validate the configuration, create one SUB socket per publisher, subscribe to the topic
    /// and connect (ZMQ connects in the background and reconnects on its own).
    pub fn connect(config: CaptureConfig) -> Result<Self, CaptureError> {
        let pubs = plan(&config)?;
        let ctx = zmq::Context::new();
        let mut socks = Vec::with_capacity(pubs.len());
        for p in &pubs {
            let zerr = |op: &'static str| {
                let endpoint = p.url.clone();
                move |source| CaptureError::Zmq {
                    endpoint,
                    op,
                    source,
                }
            };
            let s = ctx.socket(zmq::SUB).map_err(zerr("create SUB socket"))?;
            s.set_rcvhwm(RCV_HWM)
                .map_err(zerr("set receive high-water mark"))?;
            s.set_linger(0).map_err(zerr("set linger"))?;
            s.set_subscribe(config.topic.as_bytes())
                .map_err(zerr("subscribe"))?;
            s.connect(&p.url).map_err(zerr("connect"))?;
            socks.push(s);
        }
        Ok(Self {
            ctx,
            config,
            pubs,
            socks,
            stats: Stats::default(),
        })
    }

    /// `(source, url)` of every subscribed publisher.
    pub fn publishers(&self) -> impl Iterator<Item = (&str, &str)> + '_ {
        self.pubs
            .iter()
            .map(|p| (p.source.as_str(), p.url.as_str()))
    }

    /// The trace header describing this capture.
    fn header(&self) -> TraceRecord {
        let pubs: Vec<Value> = self
            .pubs
            .iter()
            .map(|p| {
                json!({
                    "source": p.source,
                    "endpoint": p.url,
                    "port_rank": p.port_rank,
                    "replay_endpoint": p.replay_url,
                })
            })
            .collect();
        let mut meta = serde_json::Map::new();
        meta.insert(
            "capture".into(),
            json!({
                "publishers": pubs,
                "topic": self.config.topic,
                "data_parallel_size": self.config.data_parallel_size,
                "raw": self.config.raw,
                "started_unix": unix_now(),
            }),
        );
        TraceRecord::Header(TraceHeader {
            kvscope: 1,
            scenario: Some("capture".into()),
            meta,
        })
    }

    /// Capture until `max_batches`, `duration` or `stop` ends it; write the trace as it goes.
    pub fn run<W: Write>(
        &mut self,
        out: &mut TraceWriter<W>,
        stop: &AtomicBool,
        obs: &mut dyn Observer,
    ) -> Result<Stats, CaptureError> {
        let started = Instant::now();
        let deadline = self.config.duration.map(|d| started + d);
        emit(out, self.header())?;
        let mut next_progress = started + self.config.progress_interval;
        let mut silence_check = Some(started + self.config.silence_warning);
        let reason = 'run: loop {
            if let Some(r) = self.stop_reason(stop, deadline) {
                break r;
            }
            let now = Instant::now();
            let mut wait = next_progress
                .saturating_duration_since(now)
                .min(Duration::from_millis(100));
            if let Some(d) = deadline {
                wait = wait.min(d.saturating_duration_since(now));
            }
            let ready: Vec<usize> = {
                let mut items: Vec<zmq::PollItem<'_>> = self
                    .socks
                    .iter()
                    .map(|s| s.as_poll_item(zmq::POLLIN))
                    .collect();
                match zmq::poll(&mut items, i64::try_from(wait.as_millis()).unwrap_or(100)) {
                    Ok(_) => items
                        .iter()
                        .enumerate()
                        .filter(|(_, it)| it.is_readable())
                        .map(|(i, _)| i)
                        .collect(),
                    Err(zmq::Error::EINTR) => Vec::new(),
                    Err(source) => {
                        return Err(CaptureError::Zmq {
                            endpoint: "all".into(),
                            op: "poll",
                            source,
                        })
                    }
                }
            };
            for i in ready {
                for _ in 0..DRAIN_LIMIT {
                    if let Some(r) = self.stop_reason(stop, deadline) {
                        break 'run r;
                    }
                    let frames = match self.socks[i].recv_multipart(zmq::DONTWAIT) {
                        Ok(f) => f,
                        Err(zmq::Error::EAGAIN) | Err(zmq::Error::EINTR) => break,
                        Err(source) => {
                            return Err(CaptureError::Zmq {
                                endpoint: self.pubs[i].url.clone(),
                                op: "receive",
                                source,
                            })
                        }
                    };
                    self.pubs[i].heard = true;
                    self.handle(i, &frames, out, obs)?;
                }
            }
            if silence_check.is_some_and(|t| Instant::now() >= t) {
                silence_check = None;
                for p in self.pubs.iter().filter(|p| !p.heard) {
                    obs.diagnostic(&Diagnostic::Silent {
                        endpoint: p.url.clone(),
                        after: started.elapsed(),
                    });
                }
            }
            if Instant::now() >= next_progress {
                self.stats.elapsed = started.elapsed();
                obs.progress(&self.stats);
                next_progress = Instant::now() + self.config.progress_interval;
            }
        };
        self.stats.elapsed = started.elapsed();
        self.stats.stop = Some(reason);
        let s = &self.stats;
        emit(
            out,
            note(
                "capture-end",
                json!({
                    "reason": reason.as_str(),
                    "stats": {
                        "batches": s.batches,
                        "events": s.events,
                        "replayed": s.replayed,
                        "gaps": s.gaps,
                        "gaps_recovered": s.gaps_recovered,
                        "missing": s.missing,
                        "resets": s.resets,
                        "malformed": s.malformed,
                        "seconds": s.elapsed.as_secs_f64(),
                    },
                }),
            ),
        )?;
        obs.progress(&self.stats);
        Ok(self.stats.clone())
    }

    fn stop_reason(&self, stop: &AtomicBool, deadline: Option<Instant>) -> Option<StopReason> {
        if stop.load(Ordering::Relaxed) {
            Some(StopReason::Interrupted)
        } else if self
            .config
            .max_batches
            .is_some_and(|m| self.stats.batches >= m)
        {
            Some(StopReason::MaxBatches)
        } else if deadline.is_some_and(|d| Instant::now() >= d) {
            Some(StopReason::Duration)
        } else {
            None
        }
    }

    /// Handle one live message from publisher `i`.
    fn handle<W: Write>(
        &mut self,
        i: usize,
        frames: &[Vec<u8>],
        out: &mut TraceWriter<W>,
        obs: &mut dyn Observer,
    ) -> Result<(), CaptureError> {
        let msg = match parse_live(frames) {
            Ok(m) => m,
            Err(e) => {
                let p = &self.pubs[i];
                self.stats.malformed += 1;
                obs.diagnostic(&Diagnostic::Malformed {
                    endpoint: p.url.clone(),
                    seq: None,
                    reason: e.to_string(),
                });
                let sizes: Vec<usize> = frames.iter().map(Vec::len).collect();
                emit(
                    out,
                    note(
                        "malformed-message",
                        json!({ "source": p.source, "endpoint": p.url, "frame_sizes": sizes, "reason": e.to_string() }),
                    ),
                )?;
                return Ok(());
            }
        };
        let decoded = msgpack::decode_batch(msg.payload);
        let batch_rank = decoded.as_ref().ok().and_then(|b| b.data_parallel_rank);
        let rank = self.pubs[i].rank_hint(batch_rank);
        let step = self.pubs[i].tracker.observe(msg.seq);
        match step {
            SeqStep::InOrder | SeqStep::First { seq: 0 } => {}
            SeqStep::First { seq } => {
                let p = &self.pubs[i];
                obs.diagnostic(&Diagnostic::JoinedMidStream {
                    endpoint: p.url.clone(),
                    seq,
                });
                emit(
                    out,
                    note(
                        "joined-mid-stream",
                        json!({ "source": p.source, "dp_rank": rank, "endpoint": p.url, "first_seq": seq }),
                    ),
                )?;
            }
            SeqStep::Gap { expected, received } => {
                self.stats.gaps += 1;
                self.fill_gap(i, rank, expected, received, out, obs)?;
            }
            SeqStep::Reset { expected, received } => {
                self.stats.resets += 1;
                let gap = SeqGap {
                    source: self.pubs[i].source.clone(),
                    dp_rank: rank,
                    expected_seq: expected,
                    received_seq: received,
                    recovered: false,
                };
                obs.diagnostic(&Diagnostic::Reset { gap: gap.clone() });
                emit(out, TraceRecord::Gap(gap))?;
                if received > 0 {
                    // The restarted publisher's first batches were sent before we reconnected.
                    self.stats.gaps += 1;
                    self.fill_gap(i, rank, 0, received, out, obs)?;
                }
            }
        }
        self.write_payload(i, msg.seq, msg.payload, decoded, false, out, obs)
    }

    /// Record the missing range `start..end` of publisher `i`, recovering what its replay
    /// socket still has: each recovered run is a `recovered: true` gap record followed by its
    /// batches in order; each run still missing is a `recovered: false` gap record.
    fn fill_gap<W: Write>(
        &mut self,
        i: usize,
        rank: Option<u32>,
        start: u64,
        end: u64,
        out: &mut TraceWriter<W>,
        obs: &mut dyn Observer,
    ) -> Result<(), CaptureError> {
        let replayed: Vec<ReplayedBatch> = match &self.pubs[i].replay_url {
            None => Vec::new(),
            Some(url) => {
                match fetch_range(&self.ctx, url, start, end, self.config.replay_timeout) {
                    Ok(v) => v,
                    Err(e) => {
                        obs.diagnostic(&Diagnostic::ReplayFailed {
                            reason: e.to_string(),
                        });
                        emit(
                            out,
                            note(
                                "replay-failed",
                                json!({ "source": self.pubs[i].source, "dp_rank": rank, "from_seq": start, "to_seq": end, "reason": e.to_string() }),
                            ),
                        )?;
                        Vec::new()
                    }
                }
            }
        };
        let recovered = replayed.len() as u64;
        let missing = (end - start).saturating_sub(recovered);
        self.stats.missing += missing;
        if missing == 0 {
            self.stats.gaps_recovered += 1;
        }
        let source = self.pubs[i].source.clone();
        let gap = |expected_seq, received_seq, recovered| SeqGap {
            source: source.clone(),
            dp_rank: rank,
            expected_seq,
            received_seq,
            recovered,
        };
        obs.diagnostic(&Diagnostic::Gap {
            gap: gap(start, end, missing == 0),
            recovered,
            missing,
        });
        let mut cursor = start;
        let mut batches = replayed.into_iter().peekable();
        while cursor < end {
            let next_present = batches.peek().map_or(end, |b| b.seq);
            if next_present > cursor {
                emit(out, TraceRecord::Gap(gap(cursor, next_present, false)))?;
                cursor = next_present;
                continue;
            }
            let mut run = Vec::new();
            while let Some(b) = batches.next_if(|b| b.seq == cursor) {
                run.push(b);
                cursor += 1;
            }
            emit(
                out,
                TraceRecord::Gap(gap(run.first().map_or(cursor, |b| b.seq), cursor, true)),
            )?;
            for b in run {
                let decoded = msgpack::decode_batch(&b.payload);
                self.write_payload(i, b.seq, &b.payload, decoded, true, out, obs)?;
            }
        }
        Ok(())
    }

    /// Write one received payload: a batch record, or a note when it does not decode.
    #[allow(clippy::too_many_arguments)]
    fn write_payload<W: Write>(
        &mut self,
        i: usize,
        seq: u64,
        payload: &[u8],
        decoded: Result<KvEventBatch, WireError>,
        via_replay: bool,
        out: &mut TraceWriter<W>,
        obs: &mut dyn Observer,
    ) -> Result<(), CaptureError> {
        let p = &mut self.pubs[i];
        match decoded {
            Ok(b) => {
                if b.data_parallel_rank.is_some() {
                    p.last_rank = b.data_parallel_rank;
                }
                self.stats.batches += 1;
                self.stats.events += b.events.len() as u64;
                if via_replay {
                    self.stats.replayed += 1;
                }
                emit(
                    out,
                    TraceRecord::Batch(TraceBatch {
                        source: p.source.clone(),
                        dp_rank: b.data_parallel_rank.or(p.port_rank),
                        seq,
                        ts: b.ts,
                        events: b.events,
                        provenance: None,
                        raw: self.config.raw.then(|| payload.to_vec()),
                        origin: 0,
                    }),
                )?;
            }
            Err(e) => {
                self.stats.malformed += 1;
                let reason = format!("undecodable payload: {e}");
                obs.diagnostic(&Diagnostic::Malformed {
                    endpoint: p.url.clone(),
                    seq: Some(seq),
                    reason: reason.clone(),
                });
                emit(
                    out,
                    note(
                        "undecodable-payload",
                        json!({
                            "source": p.source,
                            "dp_rank": p.rank_hint(None),
                            "endpoint": p.url,
                            "seq": seq,
                            "replayed": via_replay,
                            "reason": reason,
                            "payload_base64": b64(payload),
                        }),
                    ),
                )?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ep(s: &str) -> EndpointSpec {
        s.parse().unwrap()
    }

    #[test]
    fn plan_expands_dp_ranks_and_replay() {
        let cfg = CaptureConfig {
            endpoints: vec![ep("a=tcp://h:5557"), ep("tcp://g:6000")],
            replay_endpoints: vec![ep("tcp://h:5600")],
            data_parallel_size: 2,
            ..CaptureConfig::default()
        };
        let p = plan(&cfg).unwrap();
        let got: Vec<_> = p
            .iter()
            .map(|p| {
                (
                    p.source.as_str(),
                    p.url.as_str(),
                    p.port_rank,
                    p.replay_url.as_deref(),
                )
            })
            .collect();
        assert_eq!(
            got,
            vec![
                ("a", "tcp://h:5557", Some(0), Some("tcp://h:5600")),
                ("a", "tcp://h:5558", Some(1), Some("tcp://h:5601")),
                ("tcp://g:6000", "tcp://g:6000", Some(0), None),
                ("tcp://g:6000", "tcp://g:6001", Some(1), None),
            ]
        );
    }

    #[test]
    fn plan_matches_named_replay_and_rejects_conflicts() {
        let cfg = CaptureConfig {
            endpoints: vec![ep("a=tcp://h:1"), ep("b=tcp://h:2")],
            replay_endpoints: vec![ep("b=tcp://h:12")],
            ..CaptureConfig::default()
        };
        let p = plan(&cfg).unwrap();
        assert_eq!(p[0].replay_url, None);
        assert_eq!(p[1].replay_url.as_deref(), Some("tcp://h:12"));
        assert_eq!(p[1].port_rank, None);

        let bad = |endpoints: Vec<EndpointSpec>, replay: Vec<EndpointSpec>, dp: u32| {
            plan(&CaptureConfig {
                endpoints,
                replay_endpoints: replay,
                data_parallel_size: dp,
                ..CaptureConfig::default()
            })
            .unwrap_err()
            .to_string()
        };
        assert!(bad(vec![], vec![], 1).contains("no --endpoint"));
        assert!(bad(vec![ep("tcp://h:1")], vec![], 0).contains("at least 1"));
        assert!(bad(vec![ep("a=tcp://h:1")], vec![ep("c=tcp://h:2")], 1).contains("\"c\""));
        assert!(bad(
            vec![ep("a=tcp://h:1")],
            vec![ep("tcp://h:2"), ep("tcp://h:3")],
            1
        )
        .contains("more unnamed"));
        assert!(bad(
            vec![ep("a=tcp://h:1")],
            vec![ep("tcp://h:2"), ep("a=tcp://h:3")],
            1
        )
        .contains("both apply"));
        assert!(bad(vec![ep("a=tcp://h:1"), ep("a=tcp://h:2")], vec![], 1).contains("distinct"));
        assert!(bad(vec![ep("ipc:///tmp/x")], vec![], 2).contains("tcp://"));
    }

    #[test]
    fn status_line_has_counts_and_rates() {
        let s = Stats {
            batches: 10,
            events: 40,
            gaps: 1,
            gaps_recovered: 1,
            elapsed: Duration::from_secs(2),
            ..Stats::default()
        };
        let line = s.status_line();
        assert!(
            line.contains(
                "10 batches, 40 events | gaps 1 (1 recovered, 0 batches missing), resets 0"
            ),
            "{line}"
        );
        assert!(line.contains("5.0 batches/s, 20.0 events/s"), "{line}");
    }

    #[test]
    fn notes_have_no_events_key() {
        let TraceRecord::Other(v) = note("x", json!({"a": 1})) else {
            panic!("not a note")
        };
        assert_eq!(v, json!({"kind": "note", "note": "x", "a": 1}));
        assert!(v.get("events").is_none());
    }
}
