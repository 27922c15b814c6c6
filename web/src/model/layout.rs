//! Layout of the view-model for drawing: lanes (tier, source, job), the timeline's coarse
//! bins and the parent→child edges.

use super::*;

/// An event without a lane while lanes are gathered (`AllBlocksCleared`: lane 0 in the end).
const NO_LANE: u16 = u16::MAX;

/// The lanes of lane mode [`LaneMode::Tier`] gathered a batch at a time ([`Scan::batch`]), as
/// the loader reads them: the batch's events are still in the cache then, where a pass over a
/// million decoded events afterwards spent about 100 ms waiting for memory (and was one long
/// task).
#[derive(Default)]
pub struct Scan {
    /// Per event so far, an index into `lanes` (or [`NO_LANE`]).
    ids: Vec<u16>,
    /// Each lane's first event (record, position), whose key (medium, ownership, provenance
    /// tier, KV group) later events are compared with: a handful of lanes, no hashing.
    firsts: Vec<(u32, u32)>,
    lanes: Vec<Lane>,
}

/// An event's lane by its tier, as [`Scan`] and [`Model::layout_lanes`] key it: medium,
/// ownership, provenance tier, KV group.
type ScanKey<'t> = (Option<&'t str>, Option<&'t str>, Option<&'t str>, u32);

/// Event `pos` of batch `b`'s lane key (`None`: no lane, `AllBlocksCleared`).
fn scan_key(b: &TraceBatch, pos: usize) -> Option<ScanKey<'_>> {
    let (medium, ownership, group) = match b.events.get(pos)? {
        KvEvent::BlockStored(e) => (e.medium.as_deref(), e.ownership.as_deref(), e.group_idx),
        KvEvent::BlockRemoved(e) => (e.medium.as_deref(), e.ownership.as_deref(), e.group_idx),
        KvEvent::AllBlocksCleared => return None,
    };
    let prov_tier = match (medium, ownership) {
        (Some("STORAGE" | "FS" | "OBJ"), None) => b
            .provenance
            .as_ref()
            .and_then(|p| p.get(pos))
            .map(|p| p.tier.as_str()),
        _ => None,
    };
    Some((medium, ownership, prov_tier, group.unwrap_or(0)))
}

impl Scan {
    /// Add the events of batch record `records[record]` (the batches in delivery order).
    pub fn batch(&mut self, records: &[TraceRecord], record: usize) {
        let Some(TraceRecord::Batch(b)) = records.get(record) else {
            return;
        };
        for pos in 0..b.events.len() {
            let Some(key) = scan_key(b, pos) else {
                self.ids.push(NO_LANE);
                continue;
            };
            let found = self
                .firsts
                .iter()
                .position(|&(r, p)| match records.get(r as usize) {
                    Some(TraceRecord::Batch(f)) => scan_key(f, p as usize) == Some(key),
                    _ => false,
                });
            let id = match found {
                Some(k) => k,
                None => {
                    let Some(lane) = lane_key(b, pos, key.3, false, None) else {
                        self.ids.push(NO_LANE);
                        continue;
                    };
                    self.lanes.push(lane);
                    self.firsts.push((record as u32, pos as u32));
                    self.firsts.len() - 1
                }
            };
            self.ids.push(id.min(usize::from(NO_LANE) - 1) as u16);
        }
    }
}

impl Model {
    /// Per event, its job's lane (lane mode [`LaneMode::TierJob`]), from the analysis'
    /// [`EventIndex`] once analysed, else from an index built here (same jobs: provenance
    /// job ids, or inferred from batch structure), so lanes do not move when the analysis lands.
    /// Jobs past [`MAX_JOB_LANES`] (in order of appearance) map to [`JobLane::More`].
    pub(super) fn job_lanes(&self) -> (Vec<u32>, Vec<JobLane>, bool) {
        let of = |idx: &EventIndex| -> (Vec<u32>, Vec<JobLane>, bool) {
            let lanes = idx
                .jobs
                .iter()
                .enumerate()
                .map(|(n, j): (usize, &Job)| {
                    if n >= MAX_JOB_LANES {
                        JobLane::More
                    } else {
                        JobLane::Job {
                            first_event: j.first_event.min(u32::MAX as usize) as u32,
                            id: if j.inferred {
                                u64::from(j.id)
                            } else {
                                j.job_id.unwrap_or(u64::from(j.id))
                            },
                            inferred: j.inferred,
                        }
                    }
                })
                .collect();
            (
                idx.events.iter().map(|e| e.job).collect(),
                lanes,
                idx.sources.len() > 1,
            )
        };
        if let Some(r) = self.replay() {
            return of(&r.analysis().index);
        }
        self.with_trace(|t| of(&EventIndex::build(t)))
    }

    /// Recompute lanes and edges for a lane mode. Lanes are interned by borrowed wire strings
    /// (no allocation per event), then sorted (GPU, CPU, STORAGE tiers, others; per job: the
    /// tier's "no job" lane, then jobs in order of appearance).
    pub fn layout(&mut self, mode: LaneMode) {
        self.layout_lanes(mode);
        self.index_edges();
    }

    /// The lanes part of [`Model::layout`]: each event's lane and the coarse bins.
    pub fn layout_lanes(&mut self, mode: LaneMode) {
        if mode == LaneMode::Tier {
            let mut scan = Scan::default();
            self.with_trace(|t| {
                for k in 0..t.records.len() {
                    scan.batch(&t.records, k);
                }
            });
            return self.layout_scanned(scan);
        }
        // (medium, ownership, provenance tier, group, source, dp_rank, job)
        type Key<'t> = (
            Option<&'t str>,
            Option<&'t str>,
            Option<&'t str>,
            u32,
            Option<&'t str>,
            Option<u32>,
            Option<u32>,
        );
        const NONE: u16 = NO_LANE;
        // Edges link events within a lane: index them again.
        self.edges_indexed = false;
        self.edge_build = None;
        let (event_jobs, job_lanes, many_sources) = match mode {
            LaneMode::TierJob => self.job_lanes(),
            _ => (Vec::new(), Vec::new(), false),
        };
        let (tmp_ids, tmp_lanes) = self.with_trace(|t| {
            let mut ids: HashMap<Key<'_>, u16> = HashMap::default();
            let mut lanes: Vec<Lane> = Vec::new();
            let mut out = Vec::with_capacity(self.events.len());
            // Batch by batch, in delivery order (the order of `self.events`).
            let batches = t.records.iter().filter_map(|r| match r {
                TraceRecord::Batch(b) => Some(b),
                _ => None,
            });
            for b in batches {
                for pos in 0..b.events.len() {
                    let ei = out.len();
                    let Some((medium, ownership, prov_tier, group)) = scan_key(b, pos) else {
                        out.push(NONE);
                        continue;
                    };
                    let job = match mode {
                        LaneMode::TierJob => {
                            let j = event_jobs.get(ei).copied().unwrap_or(u32::MAX);
                            // Jobs sharing the overflow lane share one key per tier.
                            match job_lanes.get(j as usize) {
                                Some(JobLane::More) => Some(u32::MAX - 1),
                                Some(_) => Some(j),
                                None => Some(u32::MAX),
                            }
                        }
                        _ => None,
                    };
                    let split_source = mode == LaneMode::SourceTier
                        || (many_sources && job.is_some_and(|j| j != u32::MAX));
                    let source = split_source.then_some(b.source.as_str());
                    let key = (
                        medium,
                        ownership,
                        prov_tier,
                        group,
                        source,
                        source.and(b.dp_rank),
                        job,
                    );
                    let id = match ids.get(&key) {
                        Some(id) => *id,
                        None => {
                            let id = lanes.len().min(NONE as usize - 1) as u16;
                            let job_lane = job.map(|j| match j {
                                u32::MAX => JobLane::NoJob,
                                _ => job_lanes.get(j as usize).cloned().unwrap_or(JobLane::More),
                            });
                            if let Some(l) = lane_key(b, pos, group, split_source, job_lane) {
                                lanes.push(l);
                            }
                            ids.insert(key, id);
                            id
                        }
                    };
                    out.push(id);
                }
            }
            (out, lanes)
        });
        self.set_lanes(&tmp_ids, tmp_lanes);
    }

    /// Lane mode [`LaneMode::Tier`] from a [`Scan`] of every batch (made while the trace was
    /// read: the first paint needs no second pass over the events).
    pub fn layout_scanned(&mut self, scan: Scan) {
        self.edges_indexed = false;
        self.edge_build = None;
        self.set_lanes(&scan.ids, scan.lanes);
    }

    /// Each event's lane from `tmp_ids` (an index into `tmp_lanes` per event, [`NO_LANE`] for
    /// none), with the lanes sorted and merged; then the coarse bins.
    fn set_lanes(&mut self, tmp_ids: &[u16], tmp_lanes: Vec<Lane>) {
        const NONE: u16 = NO_LANE;
        // A lane per KV group only when the trace has more than one.
        let mut tmp_lanes = tmp_lanes;
        let first_group = tmp_lanes.first().and_then(|l| l.group);
        if tmp_lanes.iter().all(|l| l.group == first_group) {
            for l in &mut tmp_lanes {
                l.group = None;
            }
        }
        let mut distinct: Vec<Lane> = tmp_lanes.clone();
        distinct.sort();
        distinct.dedup();
        if distinct.is_empty() {
            distinct.push(Lane {
                tier: Tier::Gpu,
                label: "GPU".into(),
                group: None,
                source: None,
                job: None,
            });
        }
        let remap: Vec<u16> = tmp_lanes
            .iter()
            .map(|l| {
                distinct
                    .binary_search(l)
                    .unwrap_or(0)
                    .min(NONE as usize - 1) as u16
            })
            .collect();
        self.lane_of = tmp_ids
            .iter()
            .map(|&i| {
                if i == NONE {
                    0
                } else {
                    remap.get(i as usize).copied().unwrap_or(0)
                }
            })
            .collect();
        self.lanes = distinct;
        self.index_blocks();
    }

    /// Fill [`Model::blocks`] from `lane_of` and `kinds`.
    pub(super) fn index_blocks(&mut self) {
        let lanes = self.lanes.len();
        let nblocks = self.events.len().div_ceil(BIN_BLOCK);
        self.blocks = vec![0u8; nblocks * lanes];
        for (i, (&l, &k)) in self.lane_of.iter().zip(&self.kinds).enumerate() {
            if let Some(slot) = self.blocks.get_mut(i / BIN_BLOCK * lanes + l as usize) {
                *slot |= k.bit();
            }
        }
    }

    /// The timeline's bins for events `lo..=hi`: `lanes × cols` bytes (lane-major), each the OR
    /// of the [`EventKind::bit`]s of the events of that lane whose index falls in the column
    /// (column `c` holds `start + c·per_px ..`). Far zoomed out (a column spans several
    /// [`BIN_BLOCK`]s) whole blocks are binned (a block may mark the column next to its own),
    /// so a frame costs O(visible events / BIN_BLOCK × lanes) instead of O(visible events).
    pub fn bins(&self, lo: u32, hi: u32, start: f64, per_px: f64, cols: usize) -> Vec<u8> {
        let coarse = per_px >= 2.0 * BIN_BLOCK as f64 && self.lanes.len() < BIN_BLOCK;
        self.bins_with(lo, hi, start, per_px, cols, coarse)
    }

    pub(super) fn bins_with(
        &self,
        lo: u32,
        hi: u32,
        start: f64,
        per_px: f64,
        cols: usize,
        coarse: bool,
    ) -> Vec<u8> {
        let lanes = self.lanes.len();
        let mut bins = vec![0u8; cols * lanes];
        let col = |i: usize| -> Option<usize> {
            let c = ((i as f64 - start) / per_px).floor();
            (c >= 0.0 && (c as usize) < cols).then_some(c as usize)
        };
        let one = |bins: &mut [u8], i: usize| {
            let (Some(&l), Some(&k)) = (self.lane_of.get(i), self.kinds.get(i)) else {
                return;
            };
            if let Some(slot) = col(i).and_then(|c| bins.get_mut(l as usize * cols + c)) {
                *slot |= k.bit();
            }
        };
        let (lo, hi) = (lo as usize, (hi as usize).min(self.len().saturating_sub(1)));
        if lo > hi {
            return bins;
        }
        if !coarse {
            for i in lo..=hi {
                one(&mut bins, i);
            }
            return bins;
        }
        // Partial blocks at both ends event by event, whole blocks in between.
        let first_full = lo.div_ceil(BIN_BLOCK);
        let end_full = (hi + 1) / BIN_BLOCK; // exclusive
        if first_full >= end_full {
            for i in lo..=hi {
                one(&mut bins, i);
            }
            return bins;
        }
        for i in lo..first_full * BIN_BLOCK {
            one(&mut bins, i);
        }
        for i in end_full * BIN_BLOCK..=hi {
            one(&mut bins, i);
        }
        for b in first_full..end_full {
            let row = self
                .blocks
                .get(b * lanes..(b + 1) * lanes)
                .unwrap_or_default();
            let c0 = col(b * BIN_BLOCK);
            let c1 = col(b * BIN_BLOCK + BIN_BLOCK - 1);
            for (l, &bits) in row.iter().enumerate() {
                if bits == 0 {
                    continue;
                }
                for c in [c0, c1].into_iter().flatten() {
                    if let Some(slot) = bins.get_mut(l * cols + c) {
                        *slot |= bits;
                    }
                }
            }
        }
        bins
    }
}

pub(super) fn lane_key(
    b: &TraceBatch,
    pos: usize,
    group: u32,
    split_source: bool,
    job: Option<JobLane>,
) -> Option<Lane> {
    let ev = b.events.get(pos)?;
    let tier = ev.tier()?;
    let prov = b.provenance.as_ref().and_then(|p| p.get(pos));
    let label = match (&tier, prov) {
        (Tier::Storage(None), Some(p)) if !p.tier.is_empty() => p.tier.clone(),
        _ => tier.label(),
    };
    let source = split_source.then(|| match b.dp_rank {
        Some(d) if d > 0 => format!("{}/dp{d}", b.source),
        _ => b.source.clone(),
    });
    Some(Lane {
        tier,
        label,
        group: Some(group),
        source,
        job,
    })
}
