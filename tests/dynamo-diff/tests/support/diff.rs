//! Event-by-event comparison of kvscope's `dynamo` model with the real crate.
//!
//! Mapping (real outcome → kvscope verdict):
//! * batch payload undecodable / filtered by the normalizer / dropped by `convert_event` /
//!   duplicate-or-self-referencing store (empty `Removed`) → `ignored` (every block `ignored`);
//!   normalizer filters must also carry the real label as `reason`;
//! * device store `ParentBlockNotFound` → `dropped_orphan` (`missing_parent` = the parent,
//!   status `parent_block_not_found`, every block `dropped_orphan`);
//! * store `Ok` → `applied` when every block is held, else `truncated` (held prefix `applied`,
//!   rest `truncated`), status `ok`; the held prefix is `create_stored_blocks`' output on the
//!   device tier and what `dump_events` shows on lower tiers (edge conflicts);
//! * device remove → status = the tree's label; `removed` if the lookup shrank, else
//!   `remove_unknown` if the status is `block_not_found`, else `ignored` (empty remove);
//! * lower-tier remove → per hash `removed` (owned) / `remove_unknown`; status `ok`;
//! * `AllBlocksCleared` → `cleared`, status `ok`.
//!
//! After every event the state is compared too: device lookup sizes per instance
//! (`RadixTree::current_size`) against kvscope's `device_has` over the trace's hash universe,
//! worker-side each rank's device tree (`dump_tree_as_events`: every covered block linked to
//! the root, with parent and local hash, so a node no lookup entry points to counts too)
//! against `device_tree_blocks`,
//! and the number of distinct lower-tier edges (per rank publisher in the worker-side mode)
//! against `lower_tier_edges()`.

use std::collections::{BTreeMap, BTreeSet};

use kvscope_core::consumers::dynamo::Dynamo;
use kvscope_core::consumers::{Consumer, EventCtx, EventVerdict, Standalone, VerdictKind};
use kvscope_core::event::{KvEvent, KvEventBatch};
use kvscope_core::wire::msgpack::encode_batch;
use kvscope_core::wire::EventEncoding;

use super::gen::{show_event, show_trace, GenTrace, KV_BLOCK_SIZE};
use super::real::{tier_code, Mode, Real, RealDynamo};

/// What kvscope should have said, derived from the real outcome.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Expected {
    /// Event verdict.
    pub verdict: VerdictKind,
    /// Status label (`None` = not compared).
    pub status: Option<&'static str>,
    /// Per-block verdicts (`None` = not compared).
    pub blocks: Option<Vec<VerdictKind>>,
    /// Required reason (`None` = not compared).
    pub reason: Option<&'static str>,
    /// Required missing parent (`None` = not compared).
    pub missing_parent: Option<Option<u64>>,
}

/// One disagreement.
#[derive(Clone, Debug)]
pub struct Mismatch {
    /// Stable class key (for grouping).
    pub class: String,
    /// Batch and event index.
    pub at: (usize, usize),
    /// Human-readable detail.
    pub detail: String,
}

fn n_blocks(ev: &KvEvent) -> usize {
    ev.block_hashes().len()
}

/// The verdict kvscope must give, from the real outcome.
pub fn expected(real: &Real, ev: &KvEvent) -> Expected {
    let n = n_blocks(ev);
    let uniform = |v: VerdictKind| Some(vec![v; n]);
    match real {
        Real::BatchUndecodable(_) | Real::ConvertDropped => Expected {
            verdict: VerdictKind::Ignored,
            status: None,
            blocks: uniform(VerdictKind::Ignored),
            reason: None,
            missing_parent: None,
        },
        Real::Filtered(label) => Expected {
            verdict: VerdictKind::Ignored,
            status: None,
            blocks: uniform(VerdictKind::Ignored),
            reason: Some(label),
            missing_parent: None,
        },
        Real::SelfRefNoop { status } => Expected {
            verdict: VerdictKind::Ignored,
            status: Some(status),
            blocks: uniform(VerdictKind::Ignored),
            reason: None,
            missing_parent: None,
        },
        Real::Store {
            status,
            total,
            stored,
            parent,
            ..
        } => match *status {
            "parent_block_not_found" => Expected {
                verdict: VerdictKind::DroppedOrphan,
                status: Some(status),
                blocks: uniform(VerdictKind::DroppedOrphan),
                reason: None,
                missing_parent: Some(*parent),
            },
            "ok" => {
                let mut blocks = vec![VerdictKind::Applied; *stored];
                blocks.resize(*total, VerdictKind::Truncated);
                Expected {
                    verdict: if stored == total {
                        VerdictKind::Applied
                    } else {
                        VerdictKind::Truncated
                    },
                    status: Some("ok"),
                    blocks: Some(blocks),
                    reason: None,
                    missing_parent: None,
                }
            }
            other => Expected {
                verdict: VerdictKind::Ignored,
                status: Some(other),
                blocks: None,
                reason: None,
                missing_parent: None,
            },
        },
        Real::Remove {
            tier,
            status,
            device_dropped,
            lower_known,
        } => {
            if tier_code(*tier) == 0 {
                let verdict = if *device_dropped > 0 {
                    VerdictKind::Removed
                } else if *status == "block_not_found" {
                    VerdictKind::RemoveUnknown
                } else {
                    VerdictKind::Ignored
                };
                Expected {
                    verdict,
                    status: Some(status),
                    blocks: None,
                    reason: None,
                    missing_parent: None,
                }
            } else {
                let blocks: Vec<VerdictKind> = lower_known
                    .iter()
                    .map(|k| {
                        if *k {
                            VerdictKind::Removed
                        } else {
                            VerdictKind::RemoveUnknown
                        }
                    })
                    .collect();
                let verdict = if lower_known.iter().any(|k| *k) {
                    VerdictKind::Removed
                } else if lower_known.is_empty() {
                    VerdictKind::Ignored
                } else {
                    VerdictKind::RemoveUnknown
                };
                Expected {
                    verdict,
                    status: Some(status),
                    blocks: Some(blocks),
                    reason: None,
                    missing_parent: None,
                }
            }
        }
        Real::Cleared { status } => Expected {
            verdict: VerdictKind::Cleared,
            status: Some(status),
            blocks: None,
            reason: None,
            missing_parent: None,
        },
    }
}

/// A short label of a real outcome (for class keys).
pub fn real_label(real: &Real) -> String {
    match real {
        Real::BatchUndecodable(_) => "batch_undecodable".into(),
        Real::Filtered(l) => format!("filtered:{l}"),
        Real::ConvertDropped => "convert_dropped".into(),
        Real::SelfRefNoop { .. } => "self_ref_noop".into(),
        Real::Store {
            tier,
            status,
            total,
            converted,
            stored,
            ..
        } => {
            let t = if tier_code(*tier) == 0 {
                "device"
            } else {
                "lower"
            };
            let shape = if *status != "ok" {
                if converted == total {
                    "all"
                } else {
                    "convert_stop"
                }
            } else if stored == total {
                "all"
            } else if stored < converted {
                "edge_stop"
            } else {
                "convert_stop"
            };
            format!("store:{t}:{status}:{shape}")
        }
        Real::Remove {
            tier,
            status,
            device_dropped,
            lower_known,
        } => {
            let t = if tier_code(*tier) == 0 {
                "device"
            } else {
                "lower"
            };
            let any = *device_dropped > 0 || lower_known.iter().any(|k| *k);
            format!("remove:{t}:{status}:{}", if any { "some" } else { "none" })
        }
        Real::Cleared { .. } => "cleared".into(),
    }
}

/// The class key of a disagreement: pre-index drops are grouped by the real reason only.
fn class_of(out: &Real, ev: &KvEvent, v: &EventVerdict, rl: &str) -> String {
    match out {
        Real::BatchUndecodable(_) | Real::Filtered(_) | Real::ConvertDropped => {
            let kv = if v.verdict == VerdictKind::Ignored {
                "ignored (other reason)"
            } else {
                "not ignored"
            };
            format!("real {rl} | kvscope {kv}")
        }
        _ => format!(
            "event {} | real {} | kvscope {}",
            ev.type_name(),
            rl,
            kv_label(v)
        ),
    }
}

fn kv_label(v: &EventVerdict) -> String {
    format!(
        "{}/{}",
        v.verdict.as_str(),
        v.status.as_deref().unwrap_or("-")
    )
}

/// Compare one event's verdict; `None` when they agree.
pub fn compare_event(real: &Real, ev: &KvEvent, kv: &EventVerdict) -> Option<String> {
    let exp = expected(real, ev);
    let mut diffs = Vec::new();
    if kv.verdict != exp.verdict {
        diffs.push(format!(
            "verdict: real⇒{} kvscope={}",
            exp.verdict.as_str(),
            kv.verdict.as_str()
        ));
    }
    if let Some(s) = exp.status {
        if kv.status.as_deref() != Some(s) {
            diffs.push(format!("status: real={s} kvscope={:?}", kv.status));
        }
    }
    if let Some(r) = exp.reason {
        if kv.reason.as_deref() != Some(r) {
            diffs.push(format!("reason: real={r} kvscope={:?}", kv.reason));
        }
    }
    if let Some(p) = exp.missing_parent {
        if kv.missing_parent != p {
            diffs.push(format!(
                "missing_parent: real={p:?} kvscope={:?}",
                kv.missing_parent
            ));
        }
    }
    if let Some(b) = &exp.blocks {
        let got: Vec<VerdictKind> = kv.blocks.iter().map(|b| b.verdict).collect();
        if &got != b {
            diffs.push(format!(
                "blocks: real⇒[{}] kvscope=[{}]",
                b.iter().map(|v| v.as_str()).collect::<Vec<_>>().join(","),
                got.iter().map(|v| v.as_str()).collect::<Vec<_>>().join(",")
            ));
        }
    }
    (!diffs.is_empty()).then(|| diffs.join("; "))
}

/// Dynamo tier code of an event for kvscope's `EventCtx::tier` (lanes).
fn ctx_tier(ev: &KvEvent) -> u32 {
    match ev.medium() {
        None | Some("GPU") | Some("DEVICE") => 0,
        Some("CPU") | Some("CPU_PINNED") | Some("CPU_TIER1") => 1,
        Some("CPU_TIER2") | Some("DISK") | Some("NVME") | Some("STORAGE") => 2,
        Some("EXTERNAL") | Some("NETWORK") | Some("REMOTE") | Some("SHARED") => 3,
        Some(_) => 4,
    }
}

/// Every hash named in the trace.
fn universe(t: &GenTrace) -> BTreeSet<u64> {
    let mut u = BTreeSet::new();
    for b in t {
        for ev in &b.events {
            u.extend(ev.block_hashes().iter().map(|h| h.as_u64()));
            if let KvEvent::BlockStored(s) = ev {
                u.extend(s.parent_block_hash.iter().map(|h| h.as_u64()));
            }
        }
    }
    u
}

/// Result of running one trace.
pub struct Run {
    /// Events compared.
    pub events: usize,
    /// Disagreements.
    pub mismatches: Vec<Mismatch>,
    /// Real outcome labels seen (coverage).
    pub real_labels: BTreeMap<String, usize>,
}

/// Run `trace` through the real crate (in `mode`) and kvscope's model; compare event by event
/// and the state after each event. Stops at the first divergence (verdict or state): later
/// differences are usually its consequences, and each trace then names one class.
pub fn run(trace: &GenTrace, mode: Mode) -> Run {
    let mut real = RealDynamo::new(mode, KV_BLOCK_SIZE);
    let mut kv = Standalone::new(Dynamo::new(KV_BLOCK_SIZE, false));
    let uni = universe(trace);
    let workers: BTreeSet<(u64, u32)> = trace
        .iter()
        .map(|b| (u64::from(b.source), b.rank))
        .collect();
    let mut mismatches = Vec::new();
    let mut real_labels = BTreeMap::new();
    let mut index = 0usize;
    let mut resolved = Vec::new();
    // kvscope's stand-in `LocalBlockHash` → the real one, learnt from every store both sides
    // converted (they must be a bijection: same tokens on one side ⇔ same on the other).
    let mut locals = Locals::default();
    'outer: for (bi, b) in trace.iter().enumerate() {
        let payload = encode_batch(
            &KvEventBatch {
                ts: 1_700_000_000.0 + bi as f64,
                events: b.events.clone(),
                data_parallel_rank: Some(b.rank),
            },
            EventEncoding::Map,
        );
        let mut decoded = real.decode(u64::from(b.source), &payload);
        if let Ok((_, _, raws)) = &decoded {
            assert_eq!(raws.len(), b.events.len(), "harness: decoded event count");
        }
        let batch_start = index;
        for (ei, ev) in b.events.iter().enumerate() {
            real.last_store_locals.clear();
            let out = match &mut decoded {
                Err(e) => Real::BatchUndecodable(e.clone()),
                Ok((w, id, raws)) => real.apply_raw(*w, *id, raws.remove(0)),
            };
            let out = &out;
            let ctx = EventCtx {
                index,
                source: b.source,
                dp_rank: b.rank,
                seq: bi as u64,
                tier: ctx_tier(ev),
                provenance: None,
                batch: &b.events,
                batch_start,
            };
            index += 1;
            let v = kv.apply(&ctx, ev, &mut resolved);
            let rl = real_label(out);
            *real_labels.entry(rl.clone()).or_insert(0) += 1;
            if let Some(d) = compare_event(out, ev, &v) {
                mismatches.push(Mismatch {
                    class: class_of(out, ev, &v, &rl),
                    at: (bi, ei),
                    detail: format!(
                        "event {}: real {:?} ; kvscope {:?} ; {d}",
                        show_event(ev),
                        out,
                        v
                    ),
                });
                break 'outer;
            }
            if let Err(d) = locals.learn(ev, &real.last_store_locals) {
                mismatches.push(Mismatch {
                    class: "local_hash_equivalence".into(),
                    at: (bi, ei),
                    detail: format!("event {}: {d}", show_event(ev)),
                });
                break 'outer;
            }
            if let Some((class, d)) = compare_state(&real, &kv, &uni, &workers, &locals, mode) {
                mismatches.push(Mismatch {
                    class: format!("state {class} after {} ({rl})", ev.type_name()),
                    at: (bi, ei),
                    detail: format!("after event {}: {d}", show_event(ev)),
                });
                break 'outer;
            }
        }
    }
    Run {
        events: index,
        mismatches,
        real_labels,
    }
}

/// kvscope local hash ↔ real `LocalBlockHash`, both ways.
#[derive(Default)]
struct Locals {
    to_real: BTreeMap<u64, u64>,
    to_kv: BTreeMap<u64, u64>,
}

impl Locals {
    /// Pair the blocks of a store with the real `tokens_hash`es it was converted to.
    fn learn(&mut self, ev: &KvEvent, real: &[u64]) -> Result<(), String> {
        let KvEvent::BlockStored(s) = ev else {
            return Ok(());
        };
        let bs = s.block_size as usize;
        for (i, r) in real.iter().enumerate() {
            let Some(tokens) = s.token_ids.get(i * bs..(i + 1) * bs) else {
                return Err(format!(
                    "real converted block {i}, kvscope has no tokens for it"
                ));
            };
            let k = Dynamo::local_hash(tokens, s.lora_name.as_deref());
            let a = *self.to_real.entry(k).or_insert(*r);
            let b = *self.to_kv.entry(*r).or_insert(k);
            if a != *r || b != k {
                return Err(format!(
                    "block {i}: kvscope local {k:#x} ↔ real {r:#x}, but earlier {k:#x} ↔ {a:#x} / \
                     {b:#x} ↔ {r:#x} (the two local hashes group tokens differently)"
                ));
            }
        }
        Ok(())
    }
}

/// Worker-side: each rank's device tree as the real `dump_tree_as_events` shows it (every
/// block the rank covers in a node linked to the root, lookup or not) against kvscope's
/// `device_tree_blocks`, local hashes translated through `locals`.
fn compare_trees(
    real: &RealDynamo,
    kv: &Dynamo,
    workers: &BTreeSet<(u64, u32)>,
    locals: &Locals,
) -> Option<String> {
    let trees = real.device_trees();
    for w in workers {
        let r: Vec<(Option<u64>, u64, Option<u64>)> = trees
            .get(w)
            .map(|v| v.iter().map(|(p, h, l)| (*p, *h, Some(*l))).collect())
            .unwrap_or_default();
        let mut k: Vec<(Option<u64>, u64, Option<u64>)> = kv
            .device_tree_blocks(w.0 as u32, w.1)
            .into_iter()
            .map(|(p, h, l)| (p, h, locals.to_real.get(&l).copied()))
            .collect();
        k.sort_unstable();
        if r != k {
            let show = |v: &[(Option<u64>, u64, Option<u64>)]| {
                v.iter()
                    .map(|(p, h, _)| match p {
                        Some(p) => format!("{p}->{h}"),
                        None => format!("-->{h}"),
                    })
                    .collect::<Vec<_>>()
                    .join(" ")
            };
            return Some(format!(
                "worker {w:?}: real tree covers [{}], kvscope [{}]",
                show(&r),
                show(&k)
            ));
        }
    }
    None
}

fn compare_state(
    real: &RealDynamo,
    driver: &Standalone<Dynamo>,
    uni: &BTreeSet<u64>,
    workers: &BTreeSet<(u64, u32)>,
    locals: &Locals,
    mode: Mode,
) -> Option<(&'static str, String)> {
    let kv = driver.model();
    let sizes = real.device_sizes();
    let kv_count = |w: Option<(u64, u32)>| -> usize {
        match w {
            Some((src, rank)) => uni
                .iter()
                .filter(|h| kv.device_has(driver.interner(), src as u32, rank, **h))
                .count(),
            None => 0,
        }
    };
    match mode {
        Mode::WorkerSide => {
            for (k, n) in &sizes {
                let got = kv_count(*k);
                if got != *n {
                    return Some((
                        "device_lookup_size",
                        format!("worker {k:?}: real lookup holds {n} hashes, kvscope {got}"),
                    ));
                }
            }
        }
        Mode::Shared => {
            // One shared tree: its lookups are still per (worker, rank), but only the total
            // is observable through the public API.
            let total: usize = sizes.values().sum();
            let got: usize = workers.iter().map(|w| kv_count(Some(*w))).sum();
            if got != total {
                return Some((
                    "device_lookup_size",
                    format!("shared tree: real lookups hold {total} hashes, kvscope {got}"),
                ));
            }
        }
    }
    if mode == Mode::WorkerSide {
        if let Some(d) = compare_trees(real, kv, workers, locals) {
            return Some(("device_tree", d));
        }
    }
    let lower = real.lower_state();
    let mut edges = BTreeSet::new();
    // Distinct edges per rank publisher (worker-side, each publisher has its own lower-tier
    // indexers); in the shared mode the registry is one, so edges are distinct over all.
    for (tier, ws) in &lower {
        for (w, m) in ws {
            let owner = match mode {
                Mode::WorkerSide => Some(*w),
                Mode::Shared => None,
            };
            for (p, l) in m.values() {
                edges.insert((*tier, owner, *p, *l));
            }
        }
    }
    // kvscope's per-(source, tier) lane counters (what the UI shows) against the real state:
    // lower tiers = blocks owned per worker (all ranks), device (worker-side) = lookup sizes.
    let mut real_lanes: BTreeMap<(u32, u32), i64> = BTreeMap::new();
    for (tier, ws) in &lower {
        for ((src, _), m) in ws {
            *real_lanes
                .entry((*src as u32, u32::from(*tier)))
                .or_insert(0) += m.len() as i64;
        }
    }
    if mode == Mode::WorkerSide {
        for (k, n) in &sizes {
            if let Some((src, _)) = k {
                *real_lanes.entry((*src as u32, 0)).or_insert(0) += *n as i64;
            }
        }
    }
    for (key, c) in kv.lanes().iter() {
        if mode == Mode::Shared && key.tier == 0 {
            continue;
        }
        let real_n = real_lanes.remove(&(key.source, key.tier)).unwrap_or(0);
        if c.indexed != real_n {
            return Some((
                "lane_indexed_count",
                format!(
                    "source {} tier {}: real holds {real_n} blocks, kvscope lane says {}",
                    key.source, key.tier, c.indexed
                ),
            ));
        }
    }
    if let Some(((src, tier), n)) = real_lanes.into_iter().find(|(_, n)| *n != 0) {
        return Some((
            "lane_indexed_count",
            format!("source {src} tier {tier}: real holds {n} blocks, kvscope has no lane"),
        ));
    }
    if edges.len() != kv.lower_tier_edges() {
        return Some((
            "lower_tier_edge_count",
            format!(
                "real lower tiers hold {} distinct edges, kvscope {}",
                edges.len(),
                kv.lower_tier_edges()
            ),
        ));
    }
    None
}

/// Greedy delta-debugging: the smallest sub-trace (batches, then events) that still shows
/// `class` in `mode`.
pub fn minimise(trace: &GenTrace, class: &str, mode: Mode) -> GenTrace {
    let has = |t: &GenTrace| run(t, mode).mismatches.iter().any(|m| m.class == class);
    let mut t = trace.clone();
    loop {
        let mut changed = false;
        let mut i = 0;
        while i < t.len() {
            let mut c = t.clone();
            c.remove(i);
            if !c.is_empty() && has(&c) {
                t = c;
                changed = true;
            } else {
                i += 1;
            }
        }
        for bi in 0..t.len() {
            let mut ei = 0;
            while ei < t[bi].events.len() {
                if t[bi].events.len() == 1 {
                    break;
                }
                let mut c = t.clone();
                c[bi].events.remove(ei);
                if has(&c) {
                    t = c;
                    changed = true;
                } else {
                    ei += 1;
                }
            }
        }
        if !changed {
            return t;
        }
    }
}

/// Render the mismatch report for a set of (class → first trace) findings.
pub fn report(found: &BTreeMap<String, GenTrace>, mode: Mode) -> String {
    let mut s = String::new();
    for (class, t) in found {
        let min = minimise(t, class, mode);
        let r = run(&min, mode);
        let m = r
            .mismatches
            .iter()
            .find(|m| &m.class == class)
            .map(|m| format!("at batch {} event {}: {}", m.at.0, m.at.1, m.detail))
            .unwrap_or_default();
        s.push_str(&format!("### {class}\n{}  {m}\n\n", show_trace(&min)));
    }
    s
}
