//! The index stage: interning records, checking sequence numbers, gap records.

use super::Run;
use crate::analysis::Finding;
use crate::analysis::Rule;
use crate::trace::{Trace, TraceRecord};

impl Run {
    /// Index whole records (and check their sequence numbers) until about `budget` events are
    /// done; at least one record per call. Returns the work done.
    pub(super) fn index_records(&mut self, trace: &Trace, budget: usize) -> usize {
        let mut spent = 0usize;
        while spent < budget {
            let ri = self.next_record;
            let Some(rec) = trace.records.get(ri) else {
                break;
            };
            self.next_record += 1;
            let gi = self.index.idx.events.len();
            match rec {
                TraceRecord::Gap(_) => {
                    self.gap_records.push((gi, ri));
                    spent += 1;
                }
                TraceRecord::Batch(b) => {
                    // Every batch is checked under its own source, empty or not: a missing
                    // seq is a lost batch whatever the batches around it carried.
                    let sid = self.index.batch(ri, b);
                    self.check_seq(b, gi, sid);
                    spent += b.events.len().max(1);
                }
                _ => spent += 1,
            }
        }
        spent
    }

    /// A `seq-gap` finding when batch `b` (first event `gi`, source id `sid`) does not follow
    /// the previous batch of its (source, rank).
    pub(super) fn check_seq(&mut self, b: &crate::trace::TraceBatch, gi: usize, sid: u32) {
        let key = (sid, b.dp_rank.unwrap_or(0));
        let last = self.last_seq.entry((key.0 as u64) << 32 | key.1 as u64);
        let Some(prev) = last.replace(b.seq) else {
            return;
        };
        if b.seq == prev.wrapping_add(1) {
            return;
        }
        let message = if b.seq > prev {
            format!(
                "dp_rank {}: expected seq {}, got {} ({} batch(es) missing)",
                key.1,
                prev + 1,
                b.seq,
                b.seq - prev - 1
            )
        } else {
            format!(
                "dp_rank {}: seq went back from {} to {} (publisher restart or duplicate)",
                key.1, prev, b.seq
            )
        };
        self.raw.push(
            Finding::new(Rule::SeqGap, gi, message)
                .at(b.origin, 0)
                .source(&b.source),
        );
    }

    /// Findings for gap records (after every sequence finding, as before slicing).
    pub(super) fn gap_findings(&mut self, trace: &Trace) {
        let index = &self.index.idx;
        for (at, ri) in std::mem::take(&mut self.gap_records) {
            let Some(TraceRecord::Gap(g)) = trace.records.get(ri) else {
                continue;
            };
            let line =
                index
                    .events
                    .get(at)
                    .and_then(|l| match trace.records.get(l.record as usize) {
                        Some(TraceRecord::Batch(b)) => Some(b.origin),
                        _ => None,
                    });
            // "dp_rank 3", or "no dp_rank" when the record names none.
            let (rank_word, rank): (&str, &dyn std::fmt::Display) = match &g.dp_rank {
                Some(r) => ("dp_rank ", r),
                None => ("no dp_rank", &""),
            };
            self.raw.push(
                Finding::new(
                    if g.recovered {
                        Rule::SeqGapRecovered
                    } else {
                        Rule::SeqGap
                    },
                    at,
                    format!(
                        "gap record: {rank_word}{rank}: expected seq {}, received {}{}",
                        g.expected_seq,
                        g.received_seq,
                        if g.recovered {
                            " (recovered)"
                        } else {
                            " (not recovered)"
                        }
                    ),
                )
                .at(line.unwrap_or(0), 0)
                .source(&g.source),
            );
        }
    }
}
