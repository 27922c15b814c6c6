//! The replay's step and block objects for JS: per-event verdicts, what a step changed, and a
//! block's history.

use kvscope_core::consumers as kc;
use kvscope_core::replay as kr;
use tsify::Tsify;
use wasm_bindgen::prelude::*;

use super::snapshot::{EventInfo, LaneCounts};
use crate::js::{str_array, Obj, ToJs};
use crate::report::{hash_str, hash_strs, num, Finding};

/// The outcome for one block of an event.
#[derive(Debug, Tsify)]
#[tsify(missing_as_null)]
pub struct BlockVerdict {
    /// The block hash.
    #[tsify(type = "BlockHashString")]
    pub hash: String,
    /// What happened to it.
    #[tsify(type = "VerdictKind")]
    pub verdict: &'static str,
    /// Why, for drops and skips.
    pub reason: Option<String>,
}

impl ToJs for BlockVerdict {
    fn to_js(&self) -> JsValue {
        let BlockVerdict {
            hash,
            verdict,
            reason,
        } = self;
        let o = Obj::new();
        o.str("hash", hash)
            .str("verdict", verdict)
            .opt_str("reason", reason.as_deref());
        o.done()
    }
}

/// A consumer's verdict on one event.
#[derive(Debug, Tsify)]
#[tsify(missing_as_null)]
pub struct EventVerdict {
    /// The event-level outcome.
    #[tsify(type = "VerdictKind")]
    pub verdict: &'static str,
    /// For `dropped_orphan` / `misrooted` / `pending`: the parent that was not found.
    #[tsify(type = "BlockHashString | null")]
    pub missing_parent: Option<String>,
    /// Why, for `ignored` / `truncated` and other non-obvious outcomes.
    pub reason: Option<String>,
    /// The consumer's own status name, when it has one (Dynamo's `parent_block_not_found`...).
    pub status: Option<String>,
    /// Per-block outcomes, in the event's block order.
    pub blocks: Vec<BlockVerdict>,
}

impl ToJs for EventVerdict {
    fn to_js(&self) -> JsValue {
        let EventVerdict {
            verdict,
            missing_parent,
            reason,
            status,
            blocks,
        } = self;
        let o = Obj::new();
        o.str("verdict", verdict)
            .opt_str("missing_parent", missing_parent.as_deref())
            .opt_str("reason", reason.as_deref())
            .opt_str("status", status.as_deref())
            .to("blocks", blocks);
        o.done()
    }
}

impl From<&kc::EventVerdict> for EventVerdict {
    fn from(v: &kc::EventVerdict) -> Self {
        EventVerdict {
            verdict: v.verdict.as_str(),
            missing_parent: v.missing_parent.map(hash_str),
            reason: v.reason.as_ref().map(|r| r.to_string()),
            status: v.status.as_ref().map(|r| r.to_string()),
            blocks: v
                .blocks
                .iter()
                .map(|b| BlockVerdict {
                    hash: hash_str(b.hash),
                    verdict: b.verdict.as_str(),
                    reason: b.reason.as_ref().map(|r| r.to_string()),
                })
                .collect(),
        }
    }
}

/// A later outcome for an earlier (pending) event.
#[derive(Debug, Tsify)]
pub struct Resolution {
    /// Global index of the earlier event.
    pub event: f64,
    /// Its final outcome (`replayed` or `dropped_orphan`).
    #[tsify(type = "VerdictKind")]
    pub verdict: &'static str,
    /// The blocks it concerned.
    #[tsify(type = "BlockHashString[]")]
    pub hashes: Vec<String>,
}

impl ToJs for Resolution {
    fn to_js(&self) -> JsValue {
        let Resolution {
            event,
            verdict,
            hashes,
        } = self;
        let o = Obj::new();
        o.num("event", *event)
            .str("verdict", verdict)
            .val("hashes", &str_array(hashes));
        o.done()
    }
}

/// A lane whose counters an event changed.
#[derive(Debug, Tsify)]
pub struct LaneChange {
    /// Source name.
    pub source: String,
    /// Tier label.
    pub tier: String,
    /// Before the event.
    pub before: LaneCounts,
    /// After the event.
    pub after: LaneCounts,
}

impl ToJs for LaneChange {
    fn to_js(&self) -> JsValue {
        let LaneChange {
            source,
            tier,
            before,
            after,
        } = self;
        let o = Obj::new();
        o.str("source", source)
            .str("tier", tier)
            .to("before", before)
            .to("after", after);
        o.done()
    }
}

/// What one consumer did with one event.
#[derive(Debug, Tsify)]
#[tsify(missing_as_null)]
pub struct ConsumerStep {
    /// The model.
    #[tsify(type = "ConsumerName")]
    pub consumer: &'static str,
    /// Its verdict, as produced at delivery.
    pub verdict: EventVerdict,
    /// The final verdict when a later event changed it (a pending event replayed).
    #[tsify(type = "VerdictKind | null")]
    pub final_verdict: Option<&'static str>,
    /// Earlier events this one resolved (replayed orphans).
    pub resolved: Vec<Resolution>,
    /// Lanes whose counters changed.
    pub lanes: Vec<LaneChange>,
}

impl ToJs for ConsumerStep {
    fn to_js(&self) -> JsValue {
        let ConsumerStep {
            consumer,
            verdict,
            final_verdict,
            resolved,
            lanes,
        } = self;
        let o = Obj::new();
        o.str("consumer", consumer)
            .to("verdict", verdict)
            .opt_str("final_verdict", *final_verdict)
            .to("resolved", resolved)
            .to("lanes", lanes);
        o.done()
    }
}

/// The diff of one step: what applying one event changed.
#[derive(Debug, Tsify)]
#[tsify(large_number_types_as_bigints, missing_as_null)]
pub struct Step {
    /// The event.
    pub event: EventInfo,
    /// Per consumer outcome.
    pub verdicts: Vec<ConsumerStep>,
    /// Findings at this event (all levels).
    pub findings: Vec<Finding>,
}

impl ToJs for Step {
    fn to_js(&self) -> JsValue {
        let Step {
            event,
            verdicts,
            findings,
        } = self;
        let o = Obj::new();
        o.to("event", event)
            .to("verdicts", verdicts)
            .to("findings", findings);
        o.done()
    }
}

impl From<kr::Step> for Step {
    fn from(s: kr::Step) -> Self {
        Step {
            event: EventInfo::from(s.event),
            verdicts: s
                .verdicts
                .iter()
                .map(|c| ConsumerStep {
                    consumer: c.consumer.as_str(),
                    verdict: EventVerdict::from(&c.verdict),
                    final_verdict: c.final_verdict.map(|v| v.as_str()),
                    resolved: c
                        .resolved
                        .iter()
                        .map(|r| Resolution {
                            event: num(r.event),
                            verdict: r.verdict.as_str(),
                            hashes: hash_strs(&r.hashes),
                        })
                        .collect(),
                    lanes: c
                        .lanes
                        .iter()
                        .map(|l| LaneChange {
                            source: l.source.clone(),
                            tier: l.tier.clone(),
                            before: LaneCounts::from(&l.before),
                            after: LaneCounts::from(&l.after),
                        })
                        .collect(),
                })
                .collect(),
            findings: s.findings.iter().map(Finding::from).collect(),
        }
    }
}

/// A consumer's last outcome for a block.
#[derive(Debug, Tsify)]
pub struct BlockOutcome {
    /// The model.
    #[tsify(type = "ConsumerName")]
    pub consumer: &'static str,
    /// The last event before the cursor that named the block.
    pub event: f64,
    /// The outcome for the block there.
    #[tsify(type = "VerdictKind")]
    pub verdict: &'static str,
}

impl ToJs for BlockOutcome {
    fn to_js(&self) -> JsValue {
        let BlockOutcome {
            consumer,
            event,
            verdict,
        } = self;
        let o = Obj::new();
        o.str("consumer", consumer)
            .num("event", *event)
            .str("verdict", verdict);
        o.done()
    }
}

/// What is known about one block at the cursor.
#[derive(Debug, Tsify)]
#[tsify(missing_as_null)]
pub struct BlockInfo {
    /// The hash (router-normalised u64, decimal).
    #[tsify(type = "BlockHashString")]
    pub hash: String,
    /// Parent named by its first store (if stored before the cursor).
    #[tsify(type = "BlockHashString | null")]
    pub parent: Option<String>,
    /// Event of its first store, if before the cursor.
    pub first_stored: Option<f64>,
    /// Children first stored before the cursor.
    #[tsify(type = "BlockHashString[]")]
    pub children: Vec<String>,
    /// Per consumer: the outcome at the last event before the cursor that named the block.
    pub last_outcome: Vec<BlockOutcome>,
}

impl ToJs for BlockInfo {
    fn to_js(&self) -> JsValue {
        let BlockInfo {
            hash,
            parent,
            first_stored,
            children,
            last_outcome,
        } = self;
        let o = Obj::new();
        o.str("hash", hash)
            .opt_str("parent", parent.as_deref())
            .opt_num("first_stored", *first_stored)
            .val("children", &str_array(children))
            .to("last_outcome", last_outcome);
        o.done()
    }
}

impl From<kr::BlockInfo> for BlockInfo {
    fn from(b: kr::BlockInfo) -> Self {
        BlockInfo {
            hash: hash_str(b.hash),
            parent: b.parent.map(hash_str),
            first_stored: b.first_stored.map(num),
            children: hash_strs(&b.children),
            last_outcome: b
                .last_outcome
                .iter()
                .map(|(c, e, v)| BlockOutcome {
                    consumer: c.as_str(),
                    event: num(*e),
                    verdict: v.as_str(),
                })
                .collect(),
        }
    }
}
