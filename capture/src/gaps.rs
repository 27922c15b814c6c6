//! Gap recovery: a missing sequence range of one publisher is fetched over its replay socket
//! (`crate::replay`) and written as gap records around the recovered batches.

use std::io::Write;

use kvscope_core::trace::{SeqGap, TraceRecord};
use kvscope_core::wire::msgpack;
use serde_json::json;

use crate::diag::{Diagnostic, Observer};
use crate::replay::{fetch_range, ReplayedBatch};
use crate::session::{Capture, CaptureError};
use crate::writer::{emit, note, TraceWriter};

impl Capture {
    /// Record the missing range `start..end` of publisher `i`, recovering what its replay
    /// socket still has: each recovered run is a `recovered: true` gap record followed by its
    /// batches in order; each run still missing is a `recovered: false` gap record.
    pub(crate) fn fill_gap<W: Write>(
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
}
