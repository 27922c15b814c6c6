//! The index stage: interning records, checking sequence numbers, gap records.

use super::Run;
use crate::analysis::findings::Rec;
use crate::analysis::{Finding, Rule};
use crate::trace::{SeqGap, Trace, TraceBatch, TraceRecord};

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
            spent += self.index_record(ri, rec);
        }
        spent
    }

    /// Index record `ri` (its events get the next global indices). Returns the work done.
    pub(super) fn index_record(&mut self, ri: usize, rec: &TraceRecord) -> usize {
        let gi = self.index.event_count();
        match rec {
            TraceRecord::Gap(g) => {
                self.gap_record(gi, g);
                1
            }
            TraceRecord::Batch(b) => {
                // Every batch is checked under its own source, empty or not: a missing
                // seq is a lost batch whatever the batches around it carried.
                let sid = self.index.batch(ri, b);
                self.check_seq(b, gi, sid);
                if !b.events.is_empty() {
                    self.resolve_gaps(b.origin);
                }
                b.events.len().max(1)
            }
            TraceRecord::Header(h) => {
                if self.config.workers.is_none() && !self.header_workers {
                    if let Some(w) = super::super::header_workers(h) {
                        self.workers = w.max(1);
                        self.header_workers = true;
                    }
                }
                1
            }
            _ => 1,
        }
    }

    /// A `seq-gap` finding when batch `b` (first event `gi`, source id `sid`) does not follow
    /// the previous batch of its (source, rank).
    pub(super) fn check_seq(&mut self, b: &TraceBatch, gi: usize, sid: u32) {
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
        self.raw.push(Rec::full(
            Finding::new(Rule::SeqGap, gi, message)
                .at(b.origin, 0)
                .source(&b.source),
        ));
    }

    /// The finding of gap record `g` (at event `at`: the first event after it); it gets the
    /// line of that event's batch when the batch comes ([`Run::resolve_gaps`]).
    fn gap_record(&mut self, at: usize, g: &SeqGap) {
        // "dp_rank 3", or "no dp_rank" when the record names none.
        let (rank_word, rank): (&str, &dyn std::fmt::Display) = match &g.dp_rank {
            Some(r) => ("dp_rank ", r),
            None => ("no dp_rank", &""),
        };
        self.pending_gaps.push(
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
            .source(&g.source),
        );
    }

    /// The gap records waiting for an event get line `line` (0: no event follows them). They
    /// come after every sequence finding of their event, as when gaps were listed last.
    pub(super) fn resolve_gaps(&mut self, line: u64) {
        for f in self.pending_gaps.drain(..) {
            self.raw.push(Rec::full(f.at(line, 0)));
        }
    }
}
