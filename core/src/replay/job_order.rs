//! A transfer job's events in emitted (delivery) order and in prefix order, with the analysis'
//! child-before-parent findings marked: what a viewer's "job order" view shows. The job, its
//! boundaries and the inversions are the analysis' (`analysis::index` infers jobs from
//! evidence; `analysis::run` classifies each inversion), never recomputed by the viewer.

use serde::{Deserialize, Serialize};

use super::Replay;
use crate::analysis::{Job, ReorderClass};
use crate::event::KvEvent;

type HashMap<K, V> = hashbrown::HashMap<K, V, rustc_hash::FxBuildHasher>;

/// One event of a job in [`JobOrder`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobOrderRow {
    /// Global index of the event.
    pub event: usize,
    /// Its first block hash (0 when it names none).
    pub hash: u64,
    /// Its KV cache group (`group_idx`, 0 when absent).
    pub group: u32,
    /// Depth of its parent chain inside the job (0: its parent is not in the job).
    pub depth: u32,
    /// The class of the child-before-parent finding at this event, when the analysis reports
    /// one (the event is the child delivered first).
    pub violation: Option<ReorderClass>,
}

/// A job's events in both orders (see the module docs).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobOrder {
    /// The job.
    pub job: Job,
    /// Its events in delivery order (at most the `limit` given).
    pub emitted: Vec<JobOrderRow>,
    /// The same events in prefix order: by group, then depth, then delivery.
    pub prefix: Vec<JobOrderRow>,
    /// Child-before-parent findings at the listed events, by class: within the job.
    pub in_job: usize,
    /// ... and of any other class (across jobs, ambiguous, cross-tier, ...).
    pub other: usize,
    /// The job has more events than were listed.
    pub truncated: bool,
}

impl Replay {
    /// The job of event `event` in emitted and prefix order, listing at most `limit` of its
    /// events; `None` when the event belongs to no job (GPU events, removals without one).
    pub fn job_order(&self, event: usize, limit: usize) -> Option<JobOrder> {
        let index = &self.analysis.index;
        let j = index.events.get(event)?.job;
        if j == u32::MAX {
            return None;
        }
        let job = self.job(j)?;
        let all = (job.first_event..=job.last_event)
            .filter(|i| index.events.get(*i).is_some_and(|l| l.job == j));
        let events: Vec<usize> = all.clone().take(limit).collect();
        let truncated = all.count() > events.len();
        // (group, hash, parent) of each listed event.
        let blocks: Vec<(u32, u64, Option<u64>)> = events
            .iter()
            .map(|&i| match index.event(&self.trace, i).map(|(_, e)| e) {
                Some(KvEvent::BlockStored(s)) => (
                    s.group_idx.unwrap_or(0),
                    s.block_hashes.first().map_or(0, |h| h.as_u64()),
                    s.parent_block_hash.as_ref().map(|p| p.as_u64()),
                ),
                Some(KvEvent::BlockRemoved(r)) => (
                    r.group_idx.unwrap_or(0),
                    r.block_hashes.first().map_or(0, |h| h.as_u64()),
                    None,
                ),
                _ => (0, 0, None),
            })
            .collect();
        // The event storing each (group, last hash) of the job: an event's parent link.
        let mut by_block: HashMap<(u32, u64), usize> = HashMap::default();
        for (k, &i) in events.iter().enumerate() {
            if let Some(KvEvent::BlockStored(s)) = index.event(&self.trace, i).map(|(_, e)| e) {
                if let (Some(last), Some((g, _, _))) = (s.block_hashes.last(), blocks.get(k)) {
                    by_block.insert((*g, last.as_u64()), k);
                }
            }
        }
        let depth = |mut k: usize| -> u32 {
            let mut d = 0u32;
            while let Some(&(g, _, Some(p))) = blocks.get(k) {
                match by_block.get(&(g, p)) {
                    Some(&pk) if (d as usize) < events.len() => {
                        d += 1;
                        k = pk;
                    }
                    _ => break,
                }
            }
            d
        };
        let lent = self.lent();
        let emitted: Vec<JobOrderRow> = events
            .iter()
            .zip(&blocks)
            .enumerate()
            .map(|(k, (&i, &(group, hash, _)))| {
                let at = self.finding_events.partition_point(|f| f.0 < i);
                // The event's first child-before-parent finding (they come first at an event).
                let violation = self
                    .finding_events
                    .get(at)
                    .filter(|f| f.0 == i)
                    .and_then(|f| lent.get(f.1))
                    .filter(|f| f.rule.is_reorder())
                    .and_then(|f| f.class());
                JobOrderRow {
                    event: i,
                    hash,
                    group,
                    depth: depth(k),
                    violation,
                }
            })
            .collect();
        // Prefix order through the crate's one sort (`crate::sort`): key group, depth, position.
        let mut keyed: Vec<(u64, u32)> = emitted
            .iter()
            .enumerate()
            .map(|(k, r)| ((u64::from(r.group) << 32) | u64::from(r.depth), k as u32))
            .collect();
        crate::sort::sort_keyed(&mut keyed);
        let prefix = crate::sort::permute(emitted.clone(), keyed.into_iter().map(|(_, k)| k));
        let in_job = emitted
            .iter()
            .filter(|r| r.violation == Some(ReorderClass::InJob))
            .count();
        let other = emitted.iter().filter(|r| r.violation.is_some()).count() - in_job;
        Some(JobOrder {
            job,
            emitted,
            prefix,
            in_job,
            other,
            truncated,
        })
    }
}
