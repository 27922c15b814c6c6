//! Client for vLLM's replay socket (`KVEventsConfig.replay_endpoint`, a ROUTER served by
//! `ZmqEventPublisher._service_replay`).
//!
//! A DEALER sends `("", start_seq)`; vLLM answers every buffered batch with `seq >= start_seq`
//! (its ring holds the last `buffer_steps` = 10 000 batches), then the end marker `seq = -1`.
//! A REQ socket would read only the first reply, so a DEALER is used (llm-d's replay consumer,
//! llm-d-router #1887, does the same; `docs/capture.md`). Each request uses a fresh socket, so a
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
    /// A reply's sequence number was below the request's start or not increasing.
    #[error("replay socket {url}: reply seq {seq} out of order (expected >= {expected_at_least})")]
    OutOfOrder {
        /// The replay endpoint.
        url: String,
        /// The sequence number received.
        seq: u64,
        /// The lowest acceptable one.
        expected_at_least: u64,
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
/// strictly increasing sequence order. Reading stops at the end marker, at the first batch at
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
            Ok(ReplayReply::Batch { seq, payload }) => {
                // vLLM answers from its ring in publish order, all `>= start`: anything else
                // is not vLLM's protocol, and stopping keeps a misbehaving peer from looping us.
                let floor = out.last().map_or(start, |last| last.seq + 1);
                if seq < floor {
                    return Err(ReplayError::OutOfOrder {
                        url: url.to_string(),
                        seq,
                        expected_at_least: floor,
                    });
                }
                out.push(ReplayedBatch {
                    seq,
                    payload: payload.to_vec(),
                });
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A ROUTER on `inproc://name` that answers one request with `replies` (each a list of
    /// frames after the client id), or with nothing.
    fn scripted_router(
        ctx: &zmq::Context,
        name: &str,
        replies: Vec<Vec<Vec<u8>>>,
    ) -> std::thread::JoinHandle<u64> {
        let router = ctx.socket(zmq::ROUTER).unwrap();
        router.bind(&format!("inproc://{name}")).unwrap();
        std::thread::spawn(move || {
            let req = router.recv_multipart(0).unwrap();
            let [id, delim, start] = &req[..] else {
                panic!("request frames: {req:?}")
            };
            assert!(delim.is_empty());
            for r in replies {
                let mut frames = vec![id.clone()];
                frames.extend(r);
                router.send_multipart(frames, 0).unwrap();
            }
            // Keep the socket open until the client gave up or finished.
            std::thread::sleep(Duration::from_millis(300));
            u64::from_be_bytes(start[..].try_into().unwrap())
        })
    }

    fn batch(seq: u64, payload: &[u8]) -> Vec<Vec<u8>> {
        vec![
            vec![],
            b"kv".to_vec(),
            seq.to_be_bytes().to_vec(),
            payload.to_vec(),
        ]
    }

    fn end() -> Vec<Vec<u8>> {
        vec![vec![], vec![], (-1i64).to_be_bytes().to_vec(), vec![]]
    }

    #[test]
    fn returns_the_requested_range_and_sends_the_start() {
        let ctx = zmq::Context::new();
        let srv = scripted_router(
            &ctx,
            "ok",
            vec![batch(3, b"a"), batch(4, b"b"), batch(5, b"c"), end()],
        );
        let got = fetch_range(&ctx, "inproc://ok", 3, 5, Duration::from_secs(5)).unwrap();
        assert_eq!(
            got,
            vec![
                ReplayedBatch {
                    seq: 3,
                    payload: b"a".to_vec()
                },
                ReplayedBatch {
                    seq: 4,
                    payload: b"b".to_vec()
                },
            ]
        );
        assert_eq!(srv.join().unwrap(), 3);
    }

    #[test]
    fn end_marker_before_the_range_is_complete_returns_what_exists() {
        let ctx = zmq::Context::new();
        let srv = scripted_router(&ctx, "short", vec![batch(7, b"x"), end()]);
        let got = fetch_range(&ctx, "inproc://short", 5, 9, Duration::from_secs(5)).unwrap();
        assert_eq!(
            got,
            vec![ReplayedBatch {
                seq: 7,
                payload: b"x".to_vec()
            }]
        );
        srv.join().unwrap();
    }

    #[test]
    fn out_of_order_malformed_and_silent_peers_are_errors() {
        let ctx = zmq::Context::new();
        let srv = scripted_router(&ctx, "ooo", vec![batch(4, b"a"), batch(4, b"a"), end()]);
        let e = fetch_range(&ctx, "inproc://ooo", 3, 9, Duration::from_secs(5)).unwrap_err();
        assert!(
            matches!(
                e,
                ReplayError::OutOfOrder {
                    seq: 4,
                    expected_at_least: 5,
                    ..
                }
            ),
            "{e}"
        );
        srv.join().unwrap();

        let srv = scripted_router(&ctx, "bad", vec![vec![vec![], b"only".to_vec()]]);
        let e = fetch_range(&ctx, "inproc://bad", 0, 9, Duration::from_secs(5)).unwrap_err();
        assert!(matches!(e, ReplayError::Malformed { .. }), "{e}");
        srv.join().unwrap();

        let srv = scripted_router(&ctx, "mute", vec![]);
        let e = fetch_range(&ctx, "inproc://mute", 0, 9, Duration::from_millis(100)).unwrap_err();
        assert!(matches!(e, ReplayError::Timeout { received: 0, .. }), "{e}");
        srv.join().unwrap();
    }
}
