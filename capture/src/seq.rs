//! Per-publisher sequence tracking.
//!
//! vLLM numbers each publisher's batches from 0, +1 per batch, per publisher lifetime (one
//! publisher per DP rank). PUB/SUB over one connection never reorders, so a number above the
//! expected one is a gap (batches dropped, e.g. at the high-water mark) and a number below it
//! is a publisher restart (the counter started again at 0). llm-d's subscriber
//! (`zmq_subscriber.go`, llm-d-router #1887) classifies the same way.

/// What one observed sequence number means.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SeqStep {
    /// The first message seen from this publisher (`seq > 0` means capture joined mid-stream).
    First {
        /// Its sequence number.
        seq: u64,
    },
    /// Exactly the expected number.
    InOrder,
    /// Higher than expected: `expected..received` are missing.
    Gap {
        /// The number expected.
        expected: u64,
        /// The number that arrived.
        received: u64,
    },
    /// Lower than expected: the publisher restarted (its counter began again at 0).
    Reset {
        /// The number expected.
        expected: u64,
        /// The number that arrived.
        received: u64,
    },
}

/// Tracks one publisher's sequence numbers.
#[derive(Clone, Debug, Default)]
pub struct SeqTracker {
    next: Option<u64>,
}

impl SeqTracker {
    /// A tracker that has seen nothing yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// The sequence number expected next, if any message was seen.
    pub fn expected(&self) -> Option<u64> {
        self.next
    }

    /// Classify `seq` and advance past it.
    pub fn observe(&mut self, seq: u64) -> SeqStep {
        let step = match self.next {
            None => SeqStep::First { seq },
            Some(e) if seq == e => SeqStep::InOrder,
            Some(e) if seq > e => SeqStep::Gap {
                expected: e,
                received: seq,
            },
            Some(e) => SeqStep::Reset {
                expected: e,
                received: seq,
            },
        };
        // After u64::MAX (never in practice) the next message starts tracking afresh.
        self.next = seq.checked_add(1);
        step
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classifies() {
        let mut t = SeqTracker::new();
        assert_eq!(t.expected(), None);
        assert_eq!(t.observe(0), SeqStep::First { seq: 0 });
        assert_eq!(t.observe(1), SeqStep::InOrder);
        assert_eq!(
            t.observe(4),
            SeqStep::Gap {
                expected: 2,
                received: 4
            }
        );
        assert_eq!(t.expected(), Some(5));
        assert_eq!(t.observe(5), SeqStep::InOrder);
        assert_eq!(
            t.observe(0),
            SeqStep::Reset {
                expected: 6,
                received: 0
            }
        );
        assert_eq!(t.observe(1), SeqStep::InOrder);
        assert_eq!(
            t.observe(1),
            SeqStep::Reset {
                expected: 2,
                received: 1
            }
        );
    }

    #[test]
    fn joins_mid_stream_and_survives_max() {
        let mut t = SeqTracker::new();
        assert_eq!(t.observe(41), SeqStep::First { seq: 41 });
        assert_eq!(t.observe(42), SeqStep::InOrder);
        assert_eq!(
            t.observe(u64::MAX),
            SeqStep::Gap {
                expected: 43,
                received: u64::MAX
            }
        );
        assert_eq!(t.observe(0), SeqStep::First { seq: 0 });
    }
}
