//! What a running capture reports: [`Stats`] counters, [`Diagnostic`]s (also recorded in the
//! trace as notes and gap records) and the [`Observer`] that receives them.

use std::fmt;
use std::time::Duration;

use kvscope_core::trace::SeqGap;

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
    pub(crate) fn as_str(self) -> &'static str {
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

#[cfg(test)]
mod tests {
    use super::*;

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
}
