//! The replay's state objects for JS: the event at a cursor and the consumer models' snapshot.

use kvscope_core::consumers as kc;
use kvscope_core::replay as kr;
use tsify::Tsify;
use wasm_bindgen::prelude::*;

use crate::js::{str_array, Obj, ToJs};
use crate::report::{hash_str, hash_strs, num, Job};

/// A delivered event, as the replay shows it (hashes u64-normalised, as routers key them).
#[derive(Debug, Tsify)]
#[tsify(large_number_types_as_bigints, missing_as_null)]
pub struct EventInfo {
    /// Global 0-based index.
    pub index: f64,
    /// 1-based JSONL line / msgpack batch number.
    pub line: f64,
    /// 0-based index in its batch.
    pub pos: f64,
    /// Source name.
    pub source: String,
    /// DP rank.
    pub dp_rank: u32,
    /// Publisher sequence number of its batch.
    pub seq: u64,
    /// Tier label (`GPU`, `CPU`, `STORAGE:fs0`, ...).
    pub tier: String,
    /// `BlockStored`, `BlockRemoved` or `AllBlocksCleared`.
    #[serde(rename = "type")]
    #[tsify(type = "\"BlockStored\" | \"BlockRemoved\" | \"AllBlocksCleared\"")]
    pub kind: String,
    /// Block hashes (decimal strings of the router-normalised u64).
    #[tsify(type = "BlockHashString[]")]
    pub hashes: Vec<String>,
    /// Parent (stores only).
    #[tsify(type = "BlockHashString | null")]
    pub parent: Option<String>,
    /// kvscope's job id, when the event belongs to a job (see `Analysis.jobs`).
    pub job: Option<u32>,
}

impl ToJs for EventInfo {
    fn to_js(&self) -> JsValue {
        let EventInfo {
            index,
            line,
            pos,
            source,
            dp_rank,
            seq,
            tier,
            kind,
            hashes,
            parent,
            job,
        } = self;
        let o = Obj::new();
        o.num("index", *index)
            .num("line", *line)
            .num("pos", *pos)
            .str("source", source)
            .num("dp_rank", f64::from(*dp_rank))
            .big("seq", *seq)
            .str("tier", tier)
            .str("type", kind)
            .val("hashes", &str_array(hashes))
            .opt_str("parent", parent.as_deref())
            .opt_num("job", job.map(f64::from));
        o.done()
    }
}

impl From<kr::EventInfo> for EventInfo {
    fn from(e: kr::EventInfo) -> Self {
        EventInfo {
            index: num(e.index),
            line: e.line as f64,
            pos: num(e.pos),
            source: e.source,
            dp_rank: e.dp_rank,
            seq: e.seq,
            tier: e.tier,
            kind: e.kind,
            hashes: hash_strs(&e.hashes),
            parent: e.parent.map(hash_str),
            job: e.job,
        }
    }
}

/// A lane's block counters (one consumer, one source, one tier).
#[derive(Debug, Tsify)]
pub struct LaneCounts {
    /// Blocks currently indexed (reachable or not).
    pub indexed: f64,
    /// Blocks currently held pending.
    pub pending: f64,
    /// Blocks dropped so far (cumulative).
    pub dropped: f64,
    /// Blocks indexed but unreachable (misrooted), currently.
    pub unreachable: f64,
}

impl ToJs for LaneCounts {
    fn to_js(&self) -> JsValue {
        let LaneCounts {
            indexed,
            pending,
            dropped,
            unreachable,
        } = self;
        let o = Obj::new();
        o.num("indexed", *indexed)
            .num("pending", *pending)
            .num("dropped", *dropped)
            .num("unreachable", *unreachable);
        o.done()
    }
}

impl From<&kc::LaneCounts> for LaneCounts {
    fn from(c: &kc::LaneCounts) -> Self {
        LaneCounts {
            indexed: c.indexed as f64,
            pending: c.pending as f64,
            dropped: c.dropped as f64,
            unreachable: c.unreachable as f64,
        }
    }
}

/// One lane's counters at the cursor.
#[derive(Debug, Tsify)]
pub struct LaneSnapshot {
    /// Source name.
    pub source: String,
    /// Tier label.
    pub tier: String,
    /// Counters.
    pub counts: LaneCounts,
}

impl ToJs for LaneSnapshot {
    fn to_js(&self) -> JsValue {
        let LaneSnapshot {
            source,
            tier,
            counts,
        } = self;
        let o = Obj::new();
        o.str("source", source)
            .str("tier", tier)
            .to("counts", counts);
        o.done()
    }
}

/// One consumer's state at the cursor.
#[derive(Debug, Tsify)]
pub struct ConsumerSnapshot {
    /// The model.
    #[tsify(type = "ConsumerName")]
    pub consumer: &'static str,
    /// Per lane (source × tier), sorted by source then tier.
    pub lanes: Vec<LaneSnapshot>,
    /// Sum over lanes.
    pub total: LaneCounts,
}

impl ToJs for ConsumerSnapshot {
    fn to_js(&self) -> JsValue {
        let ConsumerSnapshot {
            consumer,
            lanes,
            total,
        } = self;
        let o = Obj::new();
        o.str("consumer", consumer)
            .to("lanes", lanes)
            .to("total", total);
        o.done()
    }
}

/// A job's progress at the cursor.
#[derive(Debug, Tsify)]
#[tsify(large_number_types_as_bigints, missing_as_null)]
pub struct JobProgress {
    /// The job.
    pub job: Job,
    /// Events of the job delivered so far.
    pub delivered: f64,
    /// Child-before-parent-in-job violations in it so far.
    pub violations: f64,
}

impl ToJs for JobProgress {
    fn to_js(&self) -> JsValue {
        let JobProgress {
            job,
            delivered,
            violations,
        } = self;
        let o = Obj::new();
        o.to("job", job)
            .num("delivered", *delivered)
            .num("violations", *violations);
        o.done()
    }
}

/// The state at the cursor.
#[derive(Debug, Tsify)]
#[tsify(large_number_types_as_bigints, missing_as_null)]
pub struct Snapshot {
    /// Number of applied events.
    pub cursor: f64,
    /// Total number of events.
    pub total: f64,
    /// The event at the cursor (`cursor - 1`), if any.
    pub last_event: Option<EventInfo>,
    /// Per consumer state.
    pub consumers: Vec<ConsumerSnapshot>,
    /// Jobs started but not finished at the cursor, plus the current event's job.
    pub active_jobs: Vec<JobProgress>,
    /// Distinct blocks stored so far (by any source, any tier).
    pub blocks_seen: f64,
    /// Findings (all levels) at events before the cursor.
    pub findings_so_far: f64,
}

impl ToJs for Snapshot {
    fn to_js(&self) -> JsValue {
        let Snapshot {
            cursor,
            total,
            last_event,
            consumers,
            active_jobs,
            blocks_seen,
            findings_so_far,
        } = self;
        let o = Obj::new();
        o.num("cursor", *cursor)
            .num("total", *total)
            .to("last_event", last_event)
            .to("consumers", consumers)
            .to("active_jobs", active_jobs)
            .num("blocks_seen", *blocks_seen)
            .num("findings_so_far", *findings_so_far);
        o.done()
    }
}

impl From<kr::Snapshot> for Snapshot {
    fn from(s: kr::Snapshot) -> Self {
        Snapshot {
            cursor: num(s.cursor),
            total: num(s.total),
            last_event: s.last_event.map(EventInfo::from),
            consumers: s
                .consumers
                .iter()
                .map(|c| ConsumerSnapshot {
                    consumer: c.consumer.as_str(),
                    lanes: c
                        .lanes
                        .iter()
                        .map(|l| LaneSnapshot {
                            source: l.source.clone(),
                            tier: l.tier.clone(),
                            counts: LaneCounts::from(&l.counts),
                        })
                        .collect(),
                    total: LaneCounts::from(&c.total),
                })
                .collect(),
            active_jobs: s
                .active_jobs
                .iter()
                .map(|j| JobProgress {
                    job: Job::from(&j.job),
                    delivered: num(j.delivered),
                    violations: num(j.violations),
                })
                .collect(),
            blocks_seen: num(s.blocks_seen),
            findings_so_far: num(s.findings_so_far),
        }
    }
}
