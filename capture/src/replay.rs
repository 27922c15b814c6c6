//! Client for vLLM's replay socket (`KVEventsConfig.replay_endpoint`, a ROUTER served by
//! `ZmqEventPublisher._service_replay`).
//!
//! A DEALER sends `("", start_seq)`; vLLM answers every buffered batch with `seq >= start_seq`
//! (its ring holds the last `buffer_steps` = 10 000 batches), then the end marker `seq = -1`.
//! A REQ socket would read only the first reply, so a DEALER is used (DECISIONS.md; llm-d's
//! replay consumer, llm-d-router #1887, does the same). Each request uses a fresh socket, so a
//! late answer to a timed-out request can never be mistaken for the next one.

use std::time::{Duration, Instant};

use crate::frame::{parse_replay, replay_request, FrameError, ReplayReply};

/// Why a replay request failed.
#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    /// A ZMQ call failed.
    #[error("replay socket {url}: {op}: {source}")]
    Zmq {
        /// The replay endpoint.
        url: String,
        /// What was being done.
        op: &'static str,
        /// The ZMQ error.
        source: zmq::Error,
    },
    /// No (further) reply within the timeout.
    #[error("replay socket {url}: no reply within {timeout:?} (after {received} batches)")]
    Timeout {
        /// The replay endpoint.
        url: String,
        /// The timeout that elapsed.
        timeout: Duration,
        /// Batches received before the timeout.
        received: usize,
    },
    /// A reply did not have the expected frames.
    #[error("replay socket {url}: malformed reply: {source}")]
    Malformed {
        /// The replay endpoint.
        url: String,
        /// What was wrong.
        source: FrameError,
    },
}

/// One batch recovered over the replay socket.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReplayedBatch {
    /// Its sequence number.
    pub seq: u64,
    /// Its exact payload bytes.
    pub payload: Vec<u8>,
}

/// Ask `url` for the batches `start..end` (end exclusive) and return those it still has, in
/// sequence order without duplicates. Reading stops at the end marker, at the first batch at
/// or after `end`, or with [`ReplayError::Timeout`] when no reply comes within `timeout`.
pub fn fetch_range(
    ctx: &zmq::Context,
    url: &str,
    start: u64,
    end: u64,
    timeout: Duration,
) -> Result<Vec<ReplayedBatch>, ReplayError> {
    let zerr = |op: &'static str| {
        move |source| ReplayError::Zmq {
            url: url.to_string(),
            op,
            source,
        }
    };
    let sock = ctx.socket(zmq::DEALER).map_err(zerr("create DEALER"))?;
    sock.set_linger(0).map_err(zerr("set linger"))?;
    sock.connect(url).map_err(zerr("connect"))?;
    sock.send_multipart(replay_request(start), 0)
        .map_err(zerr("send request"))?;

    let mut out: Vec<ReplayedBatch> = Vec::new();
    loop {
        let deadline = Instant::now() + timeout;
        let ready = loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let ms = i64::try_from(left.as_millis()).unwrap_or(i64::MAX);
            match zmq::poll(&mut [sock.as_poll_item(zmq::POLLIN)], ms) {
                Ok(n) => break n > 0,
                Err(zmq::Error::EINTR) if !left.is_zero() => continue,
                Err(e) => return Err(zerr("poll")(e)),
            }
        };
        if !ready {
            return Err(ReplayError::Timeout {
                url: url.to_string(),
                timeout,
                received: out.len(),
            });
        }
        let frames = sock.recv_multipart(0).map_err(zerr("receive"))?;
        match parse_replay(&frames) {
            Err(source) => {
                return Err(ReplayError::Malformed {
                    url: url.to_string(),
                    source,
                })
            }
            Ok(ReplayReply::End) => break,
            Ok(ReplayReply::Batch { seq, .. }) if seq >= end => break,
            Ok(ReplayReply::Batch { seq, .. }) if seq < start => continue,
            Ok(ReplayReply::Batch { seq, payload }) => {
                if out.last().is_none_or(|last| seq > last.seq) {
                    out.push(ReplayedBatch {
                        seq,
                        payload: payload.to_vec(),
                    });
                }
            }
        }
    }
    Ok(out)
}
