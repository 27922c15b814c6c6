//! vLLM-faithful offload simulation: turns a [`Scenario`] into a [`Trace`] of `KVEventBatch`es
//! with per-event [`crate::trace::Provenance`].
//!
//! Modelled from upstream vLLM 0.28.0 (the release of late August 2026; see
//! `docs/scenario-format.md` for the list of behaviours and simplifications, and
//! `docs/vllm-offloading.md` for each fact's source):
//! * [`cpu`] — `vllm/v1/kv_offload/cpu/manager.py`, with `lru` — `cpu/policies/lru.py`;
//! * [`tracker`] — `vllm/distributed/kv_transfer/kv_connector/v1/offloading/events.py`;
//! * [`engine`] — one engine's state and its step (`vllm/v1/core/sched/scheduler.py`: batch
//!   order, one batch per step, GPU events first), split by upstream class into `scheduler`
//!   (`Scheduler.schedule`), `block_pool` (GPU prefix cache, `BlockPool` events), `connector`
//!   (`.../offloading/scheduler.py`: `_build_store_jobs`, `_touch`, `_lookup`,
//!   `update_state_after_alloc`, `update_connector_output`, `reset_cache`; worker reports
//!   merged as `.../offloading/common.py` `OffloadingWorkerMetadata.aggregate`) and `tiering`
//!   (`vllm/v1/kv_offload/tiering/manager.py`: cascade, promotions, the poll gate,
//!   `take_events` by tier; the file-system tier's asynchronous existence checks from
//!   `tiering/fs/manager.py` and `tiering/async_lookup.py`).
//!
//! Deterministic: the same scenario (including its seed) gives the same trace.

mod block_pool;
mod connector;
pub mod cpu;
pub mod engine;
mod lru;
pub mod request;
mod scheduler;
mod tiering;
mod touch;
pub mod tracker;

use crate::scenario::{HashFormat, Scenario};
use crate::trace::{Trace, TraceBatch, TraceHeader, TraceRecord};

use engine::Engine;

/// A simulation failure (bad scenario content found while running, or the step limit).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("simulation: {0}")]
pub struct SimError(pub String);

/// Run a scenario to completion.
pub fn simulate(scenario: &Scenario) -> Result<Trace, SimError> {
    simulate_with_progress(scenario, &mut |_, _| {})
}

/// Run a scenario, calling `progress(steps_done, events_so_far)` after every global step.
pub fn simulate_with_progress(
    scenario: &Scenario,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<Trace, SimError> {
    scenario
        .validate()
        .map_err(|e| SimError(format!("invalid scenario: {e}")))?;
    let specs = scenario.engine_specs();
    let mut engines = Vec::with_capacity(specs.len());
    for (i, spec) in specs.into_iter().enumerate() {
        engines.push(Engine::new(scenario, spec, i as u64)?);
    }
    let mut records = vec![TraceRecord::Header(header(scenario))];
    let mut seqs = vec![0u64; engines.len()];
    let mut events_total = 0u64;
    let mut steps_done = 0u64;
    let mut global = scenario.first_step;
    let limit = scenario.max_steps;
    loop {
        if engines.iter().all(|e| e.is_done()) {
            break;
        }
        for (i, e) in engines.iter_mut().enumerate() {
            if e.is_done() || e.next_global_step() != global {
                continue;
            }
            let out = e.step();
            if let Some(err) = e.take_error() {
                return Err(err);
            }
            if out.events.is_empty() {
                continue;
            }
            let (source, dp_rank) = e.source();
            events_total += out.events.len() as u64;
            records.push(TraceRecord::Batch(TraceBatch {
                source: source.to_owned(),
                dp_rank: Some(dp_rank),
                seq: seqs[i],
                ts: scenario.ts_start + out.step as f64 * scenario.ts_step,
                events: out.events,
                provenance: Some(out.provenance),
                raw: None,
                origin: 0,
            }));
            seqs[i] += 1;
        }
        global += 1;
        steps_done += 1;
        progress(steps_done, events_total);
        if steps_done > limit {
            return Err(SimError(format!(
                "did not finish within max_steps = {limit} steps (a request never completes?)"
            )));
        }
    }
    for e in &engines {
        if let Some((job, worker)) = e.unused_reports().first() {
            let (source, dp_rank) = e.source();
            return Err(SimError(format!(
                "completion.reports: worker {worker} reports job {job} of engine {source:?} \
                 dp_rank {dp_rank}, which never ran"
            )));
        }
    }
    Ok(Trace { records })
}

fn header(s: &Scenario) -> TraceHeader {
    let mut meta = serde_json::Map::new();
    meta.insert("generator".into(), "kvscope generate".into());
    if !s.description.is_empty() {
        meta.insert("description".into(), s.description.clone().into());
    }
    meta.insert("order".into(), s.order.to_json());
    meta.insert("seed".into(), s.seed.into());
    meta.insert(
        "none_hash_seed".into(),
        s.hashing.none_hash_seed.clone().into(),
    );
    meta.insert(
        "hash_format".into(),
        match s.hashing.format {
            HashFormat::Int => "int",
            HashFormat::Bytes => "bytes",
        }
        .into(),
    );
    TraceHeader {
        kvscope: 1,
        scenario: Some(s.name.clone()),
        meta,
    }
}

#[cfg(test)]
mod tests;
