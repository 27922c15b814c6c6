//! What the UI shows at the cursor: event descriptions, step diffs, snapshots, block topology.

use super::record::{unpack, verdict_key, Change, Compact, JobRow, Row};
use super::{
    BlockInfo, ConsumerSnapshot, ConsumerStep, EventInfo, JobProgress, LaneChange, LaneSnapshot,
    Replay, Snapshot, Step,
};
use crate::consumers::{push_block, BlockVerdict, Blocks, EventVerdict, LaneCounts, VerdictKind};
use crate::trace::TraceRecord;

impl Replay {
    /// Describe event `i`, from its row and its batch's (the trace itself only for the hashes
    /// of events naming more than one block).
    pub fn event_info(&self, i: usize) -> Option<EventInfo> {
        if i >= self.len() {
            return None;
        }
        let row = self.rec.rows.get(i)?;
        let index = &self.analysis.index;
        let (tier, source, dp_rank, pos) = if row.flags & Row::WIDE != 0 {
            let l = index.events.get(i)?;
            (l.tier, l.source, l.dp_rank, l.pos)
        } else {
            (
                row.tier as u32,
                row.source as u32,
                row.dp_rank as u32,
                row.pos as u32,
            )
        };
        let hashes = if row.flags & Row::ONE_HASH != 0 {
            vec![row.hash]
        } else if row.flags & Row::MORE_HASHES != 0 {
            let (_, ev) = index.event(&self.trace, i)?;
            let mut v = Vec::with_capacity(ev.block_hashes().len());
            for h in ev.block_hashes() {
                v.push(h.as_u64());
            }
            v
        } else {
            Vec::new()
        };
        Some(EventInfo {
            index: i,
            line: row.origin,
            pos: pos as usize,
            source: index
                .sources
                .get(source as usize)
                .cloned()
                .unwrap_or_default(),
            dp_rank,
            seq: row.seq,
            tier: index
                .tiers
                .get(tier as usize)
                .map(|t| t.label())
                .unwrap_or_default(),
            kind: row.kind_name().into(),
            hashes,
            parent: (row.flags & Row::PARENT != 0).then_some(row.parent),
            job: (row.job != u32::MAX).then_some(row.job),
        })
    }

    /// Consumer `c`'s verdict on event `i`, as produced at delivery.
    fn verdict(&self, c: usize, i: usize, hashes: &[u64]) -> Option<EventVerdict> {
        let cv = self.rec.verdicts.get(c)?.get(i)?;
        let key = verdict_key(c, i);
        let blocks_at = self.rec.blocks.binary_search_by_key(&key, |e| e.0).ok();
        let stored = blocks_at.and_then(|k| self.rec.blocks.get(k));
        let mut blocks = Blocks::with_capacity(stored.map_or(hashes.len(), |(_, b)| b.len()));
        match stored {
            Some((_, b)) => {
                for bv in b.iter() {
                    blocks.push(bv.clone());
                }
            }
            None => {
                for &h in hashes {
                    push_block(&mut blocks, h, cv.kind, None);
                }
            }
        }
        Some(EventVerdict {
            verdict: cv.kind,
            missing_parent: self
                .rec
                .missing
                .binary_search_by_key(&key, |e| e.0)
                .ok()
                .and_then(|k| self.rec.missing.get(k))
                .map(|e| e.1),
            reason: self.rec.string(cv.reason),
            status: self.rec.string(cv.status as u16),
            blocks: if matches!(cv.kind, VerdictKind::Cleared) {
                Blocks::new()
            } else {
                blocks
            },
        })
    }

    fn lane_names(&self, lane: u16) -> (String, String) {
        let k = self
            .rec
            .lane_keys
            .get(lane as usize)
            .copied()
            .unwrap_or_default();
        (
            self.analysis
                .index
                .sources
                .get(k.source as usize)
                .cloned()
                .unwrap_or_default(),
            self.analysis
                .index
                .tiers
                .get(k.tier as usize)
                .map(|t| t.label())
                .unwrap_or_default(),
        )
    }

    /// What applying event `i` changed (the diff between cursors `i` and `i + 1`).
    pub fn step_at(&self, i: usize) -> Option<Step> {
        let event = self.event_info(i)?;
        let start = self.rec.resolutions.partition_point(|r| (r.0 as usize) < i);
        let mut verdicts = Vec::new();
        for (c, kind) in self.analysis.config.consumers.iter().enumerate() {
            let verdict = self.verdict(c, i, &event.hashes)?;
            let final_kind = self.analysis.verdict_kind(*kind, i);
            let mut resolved = Vec::new();
            for r in self.rec.resolutions.get(start..).unwrap_or(&[]) {
                if r.0 as usize != i {
                    break;
                }
                if r.1 as usize == c {
                    resolved.push(r.2.clone());
                }
            }
            let a = self.rec.changes_begin(i);
            let mut lanes = Vec::new();
            for (k, ch) in self.changes_of(i).iter().enumerate() {
                if ch.consumer as usize != c {
                    continue;
                }
                let (source, tier) = self.lane_names(ch.lane);
                lanes.push(LaneChange {
                    source,
                    tier,
                    before: unpack(self.before_change(a + k as u32)),
                    after: unpack(ch.counts),
                });
            }
            verdicts.push(ConsumerStep {
                consumer: *kind,
                final_verdict: final_kind.filter(|k| *k != verdict.verdict),
                verdict,
                resolved,
                lanes,
            });
        }
        let from = self.finding_events.partition_point(|(e, _)| *e < i);
        let mut findings = Vec::new();
        for &(e, k) in self.finding_events.get(from..).unwrap_or(&[]) {
            if e != i {
                break;
            }
            findings.extend(self.finding(k));
        }
        Some(Step {
            event,
            verdicts,
            findings,
        })
    }

    /// The full state at the cursor.
    pub fn snapshot(&self) -> Snapshot {
        let consumers = self
            .analysis
            .config
            .consumers
            .iter()
            .enumerate()
            .map(|(c, kind)| {
                let mut lanes: Vec<LaneSnapshot> = self
                    .lanes_now
                    .get(c)
                    .map(|m| {
                        m.iter()
                            .enumerate()
                            .filter_map(|(lane, counts)| {
                                let counts = (*counts)?;
                                let (source, tier) = self.lane_names(lane as u16);
                                Some(LaneSnapshot {
                                    source,
                                    tier,
                                    counts: unpack(counts),
                                })
                            })
                            .collect()
                    })
                    .unwrap_or_default();
                crate::sort::insertion_sort_by(&mut lanes, |a, b| {
                    (&a.source, &a.tier) < (&b.source, &b.tier)
                });
                let mut total = LaneCounts::default();
                for l in &lanes {
                    total.indexed += l.counts.indexed;
                    total.pending += l.counts.pending;
                    total.dropped += l.counts.dropped;
                    total.unreachable += l.counts.unreachable;
                }
                ConsumerSnapshot {
                    consumer: *kind,
                    lanes,
                    total,
                }
            })
            .collect();
        let c = self.cursor;
        let current = c.checked_sub(1).and_then(|e| self.rec.rows.get(e));
        let current_job = current.map(|r| r.job).filter(|j| *j != u32::MAX);
        // Jobs are interned in order of their first event: only jobs starting within the
        // longest job span before the cursor can still be active (walked back from the last
        // job started, in the compact job table).
        let row = current.copied().unwrap_or_default();
        let lo = c.saturating_sub(self.max_job_span);
        let scan = if current.is_some_and(|r| r.flags & Row::OTHER_JOBS != 0) {
            0..row.jobs
        } else {
            0..0
        };
        let mut active: Vec<u32> = Vec::new();
        for j in scan.rev() {
            let Some(r) = self.job_rows.get(j as usize) else {
                break;
            };
            if (r.first_event as usize) < lo {
                break;
            }
            if r.last_event as usize >= c {
                active.push(j);
            }
        }
        active.reverse();
        if let Some(j) = current_job.filter(|j| (*j as usize) < self.job_rows.len()) {
            if !active.contains(&j) {
                active.push(j);
            }
        }
        let mut active_jobs = Vec::new();
        for j in active.into_iter().take(256) {
            let Some(job) = self.job(j) else {
                continue;
            };
            active_jobs.push(JobProgress {
                job,
                // The current event's job: its position in the job says it (no list
                // lookup).
                delivered: match current.filter(|r| r.job == j).and_then(Row::ordinal) {
                    Some(o) => o + 1,
                    None => self
                        .rec
                        .job_events
                        .get(j as usize)
                        .map_or(0, |l| l.partition_point(|e| (*e as usize) < c)),
                },
                violations: self.job_violations_before(j, c),
            });
        }
        Snapshot {
            cursor: c,
            total: self.len(),
            last_event: c.checked_sub(1).and_then(|e| self.event_info(e)),
            consumers,
            active_jobs,
            blocks_seen: row.first_stores as usize,
            findings_so_far: row.findings as usize,
        }
    }

    /// Topology and per-consumer outcome of one block, as of the cursor.
    pub fn block(&self, hash: u64) -> BlockInfo {
        self.block_in_group(0, hash)
    }

    /// Topology and per-consumer outcome of block `hash` of KV cache group `group` (a block's
    /// identity is its group and hash: two full-attention groups store the same hashes), as of
    /// the cursor. [`Replay::block`] is group 0 (every block of a single-group trace).
    pub fn block_in_group(&self, group: u32, hash: u64) -> BlockInfo {
        let c = self.cursor;
        let tables = &self.rec.blocks_seen;
        let first = tables.first_store(group, hash).filter(|(e, _)| *e < c);
        let children = tables
            .children(group, hash)
            .filter(|h| tables.first_store(group, *h).is_some_and(|(e, _)| e < c))
            .collect();
        let mut last_outcome = Vec::new();
        if let Some(e) = tables.touches(group, hash).take_while(|e| *e < c).last() {
            let hashes = self.event_info(e).map(|x| x.hashes).unwrap_or_default();
            for (ci, kind) in self.analysis.config.consumers.iter().enumerate() {
                if let Some(v) = self.verdict(ci, e, &hashes) {
                    let k = v
                        .blocks
                        .iter()
                        .find(|b| b.hash == hash)
                        .map_or(v.verdict, |b| b.verdict);
                    let k = match self.analysis.verdict_kind(*kind, e) {
                        Some(VerdictKind::Replayed) => VerdictKind::Replayed,
                        _ => k,
                    };
                    last_outcome.push((*kind, e, k));
                }
            }
        }
        BlockInfo {
            hash,
            parent: first.and_then(|(_, p)| p),
            first_stored: first.map(|(e, _)| e),
            children,
            last_outcome,
        }
    }

    /// Approximate heap bytes held by the replay index (not counting the trace itself).
    pub fn index_bytes(&self) -> usize {
        let n = self.len();
        n * std::mem::size_of::<crate::analysis::EventLoc>()
            + self
                .rec
                .verdicts
                .iter()
                .map(|v| v.capacity() * std::mem::size_of::<Compact>())
                .sum::<usize>()
            + self
                .analysis
                .verdict_kinds
                .iter()
                .map(|v| v.capacity())
                .sum::<usize>()
            + self.rec.changes.capacity() * std::mem::size_of::<Change>()
            + self.rec.last_change.capacity() * 4
            + self.rec.rows.capacity() * std::mem::size_of::<Row>()
            + self.rec.checkpoint_at.capacity() * 4
            + self.job_rows.capacity() * std::mem::size_of::<JobRow>()
            + (self.job_violation_at.capacity() + self.job_violations.capacity()) * 4
            + self.rec.blocks_seen.bytes()
            + self
                .rec
                .job_events
                .iter()
                .map(|v| 24 + v.capacity() * 4)
                .sum::<usize>()
            + self.rec.missing.capacity() * 16
            + self
                .rec
                .blocks
                .iter()
                .map(|b| 24 + b.1.len() * std::mem::size_of::<BlockVerdict>())
                .sum::<usize>()
    }

    /// Records of the trace that are not batches (header, gaps), for display.
    pub fn non_batch_records(&self) -> impl Iterator<Item = &TraceRecord> + '_ {
        self.trace
            .records
            .iter()
            .filter(|r| !matches!(r, TraceRecord::Batch(_)))
    }
}
