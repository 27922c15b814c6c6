//! The capture loop: SUB sockets → frame validation → sequence tracking → gap recovery over
//! the replay socket (`crate::gaps`) → JSON Lines trace, flushed after every record.
//!
//! One publisher per (endpoint, DP rank) (`crate::plan`). Sequence numbers are tracked per
//! publisher. A batch's `dp_rank` is its own `data_parallel_rank`, falling back to the port
//! offset when `--data-parallel-size` is given (`docs/capture.md`).

use std::fmt;
use std::io::{self, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use base64::Engine as _;
use kvscope_core::event::KvEventBatch;
use kvscope_core::trace::{SeqGap, TraceBatch, TraceHeader, TraceRecord};
use kvscope_core::wire::{msgpack, WireError};
use serde_json::{json, Value};

use crate::diag::{Diagnostic, Observer, Stats, StopReason};
use crate::endpoint::EndpointError;
use crate::frame::parse_live;
use crate::plan::{plan, CaptureConfig, Publisher};
use crate::seq::SeqStep;
use crate::writer::{emit, note, TraceWriter};

/// vLLM's default `KVEventsConfig.hwm`; the subscriber queues as much.
const RCV_HWM: i32 = 100_000;
/// Messages taken from one socket before looking at the others and the stop conditions.
const DRAIN_LIMIT: usize = 1024;

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

/// A connected capture. Create with [`Capture::connect`], then [`Capture::run`].
pub struct Capture {
    pub(crate) ctx: zmq::Context,
    pub(crate) config: CaptureConfig,
    pub(crate) pubs: Vec<Publisher>,
    socks: Vec<zmq::Socket>,
    pub(crate) stats: Stats,
}

impl fmt::Debug for Capture {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Capture")
            .field("pubs", &self.pubs)
            .field("stats", &self.stats)
            .finish_non_exhaustive()
    }
}

fn unix_now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
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

    /// The trace header describing this capture: `meta.world_size` (when known) and
    /// `meta.capture` (publishers, topic, options, start time).
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
        if let Some(n) = self.config.world_size {
            meta.insert("world_size".into(), n.into());
        }
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

    /// Write one received payload: a batch record, or a note when it does not decode.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn write_payload<W: Write>(
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
