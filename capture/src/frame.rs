//! Validation of ZMQ messages from vLLM's publisher.
//!
//! Live (PUB) messages are exactly 3 frames `(topic, seq, payload)` with `seq` an unsigned
//! 8-byte big-endian integer (`ZmqEventPublisher._publisher_thread`); llm-d's subscriber
//! (`pkg/kvevents/zmq_subscriber.go`) likewise requires exactly 3 frames.
//!
//! Replay replies, as a DEALER receives them from vLLM's ROUTER, are
//! `("", topic, seq, payload)` per buffered batch and `("", "", END_SEQ, "")` at the end, with
//! `END_SEQ` = -1 as a signed 8-byte big-endian integer. Before vLLM #45177 (bug #45174) the
//! topic frame was missing: `("", seq, payload)` and `("", END_SEQ, "")`; both are accepted.

use std::fmt;

/// Why a message was rejected.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    /// Not the expected number of frames.
    #[error("expected {expected} frames, got {found} (frame sizes {sizes:?})")]
    FrameCount {
        /// What was expected, in words (e.g. `"3"`).
        expected: &'static str,
        /// Frames received.
        found: usize,
        /// Byte length of each frame.
        sizes: Vec<usize>,
    },
    /// The sequence frame is not 8 bytes.
    #[error("sequence frame is {found} bytes, expected 8 (big-endian u64)")]
    SeqSize {
        /// Its length.
        found: usize,
    },
    /// A replay reply did not start with the empty delimiter frame.
    #[error("replay reply does not start with an empty delimiter frame ({found} bytes)")]
    Delimiter {
        /// Length of the first frame.
        found: usize,
    },
    /// A replay reply carried a negative sequence number other than the end marker.
    #[error("replay reply has sequence number {0}, expected >= 0 or the end marker -1")]
    NegativeSeq(i64),
}

/// A validated live message (borrowing the frames).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LiveMessage<'a> {
    /// The topic frame (vLLM's `KVEventsConfig.topic`, default empty).
    pub topic: &'a [u8],
    /// The publisher's sequence number.
    pub seq: u64,
    /// The msgpack `KVEventBatch` payload.
    pub payload: &'a [u8],
}

/// Frame sizes, for error messages.
fn sizes(frames: &[Vec<u8>]) -> Vec<usize> {
    frames.iter().map(Vec::len).collect()
}

fn seq_bytes(frame: &[u8]) -> Result<[u8; 8], FrameError> {
    <[u8; 8]>::try_from(frame).map_err(|_| FrameError::SeqSize { found: frame.len() })
}

/// Validate a live message: exactly 3 frames, an 8-byte sequence frame.
pub fn parse_live(frames: &[Vec<u8>]) -> Result<LiveMessage<'_>, FrameError> {
    let [topic, seq, payload] = frames else {
        return Err(FrameError::FrameCount {
            expected: "3",
            found: frames.len(),
            sizes: sizes(frames),
        });
    };
    Ok(LiveMessage {
        topic,
        seq: u64::from_be_bytes(seq_bytes(seq)?),
        payload,
    })
}

/// One replay reply.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReplayReply<'a> {
    /// A buffered batch.
    Batch {
        /// Its sequence number.
        seq: u64,
        /// Its payload.
        payload: &'a [u8],
    },
    /// The end marker (`seq = -1`).
    End,
}

impl fmt::Display for ReplayReply<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ReplayReply::Batch { seq, payload } => {
                write!(f, "batch seq {seq} ({} bytes)", payload.len())
            }
            ReplayReply::End => f.write_str("end marker"),
        }
    }
}

/// Validate a replay reply as received on a DEALER socket (current and pre-#45177 forms).
pub fn parse_replay(frames: &[Vec<u8>]) -> Result<ReplayReply<'_>, FrameError> {
    let (delim, seq, payload) = match frames {
        [delim, _topic, seq, payload] => (delim, seq, payload),
        [delim, seq, payload] => (delim, seq, payload),
        _ => {
            return Err(FrameError::FrameCount {
                expected: "4 (or 3 before vLLM #45177)",
                found: frames.len(),
                sizes: sizes(frames),
            })
        }
    };
    if !delim.is_empty() {
        return Err(FrameError::Delimiter { found: delim.len() });
    }
    let seq = i64::from_be_bytes(seq_bytes(seq)?);
    match seq {
        -1 => Ok(ReplayReply::End),
        s if s < 0 => Err(FrameError::NegativeSeq(s)),
        // Non-negative by the guard above.
        s => Ok(ReplayReply::Batch {
            seq: s.unsigned_abs(),
            payload,
        }),
    }
}

/// The replay request a DEALER sends: `("", start_seq as 8-byte big-endian)`.
pub fn replay_request(start_seq: u64) -> [Vec<u8>; 2] {
    [Vec::new(), start_seq.to_be_bytes().to_vec()]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(frames: &[&[u8]]) -> Vec<Vec<u8>> {
        frames.iter().map(|f| f.to_vec()).collect()
    }

    #[test]
    fn live_message_ok() {
        let f = v(&[b"kv@a", &7u64.to_be_bytes(), b"\x93"]);
        let m = parse_live(&f).unwrap();
        assert_eq!((m.topic, m.seq, m.payload), (&b"kv@a"[..], 7, &b"\x93"[..]));
        let f = v(&[b"", &u64::MAX.to_be_bytes(), b""]);
        assert_eq!(parse_live(&f).unwrap().seq, u64::MAX);
    }

    #[test]
    fn live_message_errors() {
        let f = v(&[b"", b"\x93"]);
        assert_eq!(
            parse_live(&f),
            Err(FrameError::FrameCount {
                expected: "3",
                found: 2,
                sizes: vec![0, 1]
            })
        );
        let f = v(&[b"", &[0, 0, 0, 1], b"\x93"]);
        assert_eq!(parse_live(&f), Err(FrameError::SeqSize { found: 4 }));
        assert!(parse_live(&[]).is_err());
        let f = v(&[b"", &1u64.to_be_bytes(), b"", b""]);
        assert!(parse_live(&f).unwrap_err().to_string().contains("got 4"));
    }

    #[test]
    fn replay_current_and_legacy_forms() {
        let f = v(&[b"", b"t", &3u64.to_be_bytes(), b"p"]);
        assert_eq!(
            parse_replay(&f),
            Ok(ReplayReply::Batch {
                seq: 3,
                payload: b"p"
            })
        );
        let f = v(&[b"", &3u64.to_be_bytes(), b"p"]);
        assert_eq!(
            parse_replay(&f),
            Ok(ReplayReply::Batch {
                seq: 3,
                payload: b"p"
            })
        );
        let f = v(&[b"", b"", &(-1i64).to_be_bytes(), b""]);
        assert_eq!(parse_replay(&f), Ok(ReplayReply::End));
        let f = v(&[b"", &(-1i64).to_be_bytes(), b""]);
        assert_eq!(parse_replay(&f), Ok(ReplayReply::End));
    }

    #[test]
    fn replay_errors() {
        let f = v(&[b"x", b"t", &3u64.to_be_bytes(), b"p"]);
        assert_eq!(parse_replay(&f), Err(FrameError::Delimiter { found: 1 }));
        let f = v(&[b"", b"t", &(-2i64).to_be_bytes(), b""]);
        assert_eq!(parse_replay(&f), Err(FrameError::NegativeSeq(-2)));
        let f = v(&[b"", b"t", b"short", b""]);
        assert_eq!(parse_replay(&f), Err(FrameError::SeqSize { found: 5 }));
        assert!(matches!(
            parse_replay(&v(&[b""])),
            Err(FrameError::FrameCount { found: 1, .. })
        ));
    }

    #[test]
    fn request_frames() {
        assert_eq!(replay_request(258), [vec![], vec![0, 0, 0, 0, 0, 0, 1, 2]]);
    }
}
