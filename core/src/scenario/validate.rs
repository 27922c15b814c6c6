//! Scenario validation: cross-field constraints, and limits on every count and on the
//! scenario's total work, checked before anything is allocated or simulated, so a hostile
//! but well-formed file ends in an error naming the field and the limit instead of an
//! allocation failure or a run that never ends (limits in [`limits`], documented in
//! `docs/scenario-format.md`, "Limits").

use std::collections::{HashMap, HashSet};

use super::{GroupKind, Scenario, ScenarioError};

/// The limits. Each is well above what one real vLLM deployment reaches, and low enough that
/// the simulation of a scenario at every limit at once stays within a few GB and minutes.
pub mod limits {
    /// `block_size * blocks_per_chunk` (tokens per offloaded chunk).
    pub const MAX_TOKENS_PER_CHUNK: u64 = 1 << 20;
    /// Prompt tokens, and output tokens, of one request (vLLM's longest `max_model_len`s are
    /// a few million tokens).
    pub const MAX_REQUEST_TOKENS: u64 = 1 << 24;
    /// Prompt plus output tokens of all requests of all engines, times the KV groups: every
    /// token is hashed, offloaded and described once per group.
    pub const MAX_TOTAL_TOKENS: u64 = 1 << 26;
    /// Blocks of all requests (total tokens / `block_size`) times the KV groups: each block
    /// is one hash and, per group, at most one offload key with its tracker metadata.
    pub const MAX_TOTAL_BLOCKS: u64 = 1 << 22;
    /// Requests of all engines.
    pub const MAX_REQUESTS: u64 = 1 << 16;
    /// `completion.workers` (`parallel_config.world_size` of one engine).
    pub const MAX_WORKERS: u64 = 1024;
    /// Engines (pods times DP ranks).
    pub const MAX_ENGINES: u64 = 256;
    /// KV cache groups.
    pub const MAX_GROUPS: u64 = 32;
    /// Secondary tiers.
    pub const MAX_SECONDARY_TIERS: u64 = 16;
    /// `max_steps`, `num_steps`, explicit `steps`, `arrival_step`, `start_step`, tier
    /// latencies: about 48 days of 1-second engine steps.
    pub const MAX_STEPS: u64 = 1 << 22;
    /// `max_steps` times the number of engines (the simulation loop's iterations).
    pub const MAX_ENGINE_STEPS: u64 = 1 << 27;
    /// `first_step`: step numbers stay exact in an `f64` timestamp computation.
    pub const MAX_FIRST_STEP: u64 = 1 << 52;
    /// `cpu.capacity_chunks`.
    pub const MAX_CPU_CHUNKS: u64 = 1 << 32;
    /// `scheduler.max_num_seqs`.
    pub const MAX_NUM_SEQS: u64 = 1 << 12;
}

use limits::*;

fn bad<T>(m: String) -> Result<T, ScenarioError> {
    Err(ScenarioError::invalid(m))
}

/// `field = value` must be at most `limit`.
fn at_most(field: &str, value: u64, limit: u64, what: &str) -> Result<(), ScenarioError> {
    if value > limit {
        return bad(format!(
            "{field} = {value} is above the limit of {limit} ({what})"
        ));
    }
    Ok(())
}

impl Scenario {
    /// Check cross-field constraints and the [`limits`].
    pub fn validate(&self) -> Result<(), ScenarioError> {
        self.validate_config()?;
        self.validate_steps_and_timestamps()?;
        self.validate_engines()?;
        self.validate_reports()
    }

    /// `completion.reports`: a known worker and engine, each (engine, job, worker) once,
    /// within the steps the run can reach.
    fn validate_reports(&self) -> Result<(), ScenarioError> {
        let engines = self.engine_specs();
        let mut seen = HashSet::new();
        for (i, r) in self.completion.reports.iter().enumerate() {
            let at = format!("completion.reports[{i}]");
            if r.worker >= self.completion.workers {
                return bad(format!(
                    "{at}: worker {} is not below completion.workers = {}",
                    r.worker, self.completion.workers
                ));
            }
            let engine = match (&r.source, self.engines.is_empty()) {
                (None, true) => &engines[0],
                (None, false) => {
                    return bad(format!(
                        "{at}: the scenario has engines, so the report must name its source"
                    ))
                }
                (Some(src), _) => match engines
                    .iter()
                    .find(|e| &e.source == src && e.dp_rank == r.dp_rank)
                {
                    Some(e) => e,
                    None => {
                        return bad(format!(
                            "{at}: no engine publishes as source {src:?} dp_rank {}",
                            r.dp_rank
                        ))
                    }
                },
            };
            let first = self.first_step + engine.start_step;
            if r.step < first || r.step > self.first_step + self.max_steps {
                return bad(format!(
                    "{at}: step {} is outside the engine's steps {first} ..= {}",
                    r.step,
                    self.first_step + self.max_steps
                ));
            }
            if !seen.insert((engine.source.clone(), engine.dp_rank, r.job, r.worker)) {
                return bad(format!(
                    "{at}: worker {} reports job {} twice",
                    r.worker, r.job
                ));
            }
        }
        Ok(())
    }

    fn validate_config(&self) -> Result<(), ScenarioError> {
        if self.block_size == 0 {
            return bad("block_size must be positive".into());
        }
        if self.blocks_per_chunk == 0 {
            return bad("blocks_per_chunk must be positive".into());
        }
        if u64::from(self.block_size) * u64::from(self.blocks_per_chunk) > MAX_TOKENS_PER_CHUNK {
            return bad(format!(
                "block_size * blocks_per_chunk must be at most {MAX_TOKENS_PER_CHUNK}"
            ));
        }
        if self.groups.is_empty() {
            return bad("groups must not be empty".into());
        }
        at_most(
            "groups",
            self.groups.len() as u64,
            MAX_GROUPS,
            "KV cache groups",
        )?;
        if self.completion.workers == 0 {
            return bad("completion.workers must be positive".into());
        }
        at_most(
            "completion.workers",
            u64::from(self.completion.workers),
            MAX_WORKERS,
            "workers of one engine",
        )?;
        at_most(
            "cpu.capacity_chunks",
            self.cpu.capacity_chunks,
            MAX_CPU_CHUNKS,
            "CPU slots",
        )?;
        for p in [self.completion.worker_lag_probability]
            .into_iter()
            .chain(self.secondary_tiers.iter().map(|t| t.failure_probability))
        {
            if !(0.0..=1.0).contains(&p) {
                return bad(format!("probability {p} is outside [0, 1]"));
            }
        }
        if self.scheduler.max_num_batched_tokens == 0 || self.scheduler.max_num_seqs == 0 {
            return bad(
                "scheduler.max_num_batched_tokens and max_num_seqs must be positive".into(),
            );
        }
        at_most(
            "scheduler.max_num_seqs",
            u64::from(self.scheduler.max_num_seqs),
            MAX_NUM_SEQS,
            "running requests",
        )?;
        if self.scheduler.vocab_size == 0 {
            return bad("scheduler.vocab_size must be positive".into());
        }
        at_most(
            "secondary_tiers",
            self.secondary_tiers.len() as u64,
            MAX_SECONDARY_TIERS,
            "secondary tiers",
        )?;
        let mut tier_names = HashSet::new();
        for t in &self.secondary_tiers {
            if !tier_names.insert(t.name.as_str()) {
                return bad(format!("duplicate secondary tier name {:?}", t.name));
            }
            if t.min_latency_steps == 0 || t.max_latency_steps < t.min_latency_steps {
                return bad(format!(
                    "tier {:?}: need 1 <= min_latency_steps <= max_latency_steps",
                    t.name
                ));
            }
            at_most(
                &format!("secondary_tiers[{:?}].max_latency_steps", t.name),
                t.max_latency_steps,
                MAX_STEPS,
                "engine steps",
            )?;
            let finished = t.io_finished_jobs().map_err(ScenarioError::invalid)?;
            for (&job, &step) in &finished {
                at_most(
                    &format!("secondary_tiers[{:?}].io_finished[{job}]", t.name),
                    step,
                    MAX_STEPS,
                    "engine steps",
                )?;
            }
            for (step, jobs) in &t.io_release_order {
                let at: u64 = step
                    .parse()
                    .ok()
                    .filter(|a: &u64| a.to_string() == *step)
                    .ok_or_else(|| {
                        ScenarioError::invalid(format!(
                            "secondary_tiers[{:?}].io_release_order: key {step:?} is not a step",
                            t.name
                        ))
                    })?;
                let mut seen = HashSet::new();
                for j in jobs {
                    if finished.get(j) != Some(&at) || !seen.insert(j) {
                        return bad(format!(
                            "secondary_tiers[{:?}].io_release_order[{step}]: job {j} is listed \
                             twice or its io_finished is not step {step}",
                            t.name
                        ));
                    }
                }
            }
        }
        for g in &self.groups {
            if g.kind == GroupKind::SlidingWindow && g.sliding_window.unwrap_or(0) == 0 {
                return bad("sliding_window groups need a positive sliding_window".into());
            }
        }
        Ok(())
    }

    /// Step counts, and every timestamp the run can reach: batches are stamped
    /// `ts_start + step * ts_step` for steps `first_step ..= first_step + max_steps`.
    fn validate_steps_and_timestamps(&self) -> Result<(), ScenarioError> {
        if !self.ts_start.is_finite() {
            return bad(format!("ts_start = {:?} is not finite", self.ts_start));
        }
        if !self.ts_step.is_finite() {
            return bad(format!("ts_step = {:?} is not finite", self.ts_step));
        }
        at_most("max_steps", self.max_steps, MAX_STEPS, "engine steps")?;
        at_most(
            "first_step",
            self.first_step,
            MAX_FIRST_STEP,
            "step numbers",
        )?;
        let engines = self.engines.len().max(1) as u64;
        at_most("engines", engines, MAX_ENGINES, "engines")?;
        if self.max_steps * engines > MAX_ENGINE_STEPS {
            return bad(format!(
                "max_steps * engines = {} * {engines} is above the limit of {MAX_ENGINE_STEPS} \
                 (engine steps simulated)",
                self.max_steps
            ));
        }
        if let Some(n) = self.num_steps {
            if self.engine_specs().iter().any(|e| e.steps.is_some()) {
                return bad(
                    "num_steps runs generated scheduling; it cannot be combined with explicit steps"
                        .into(),
                );
            }
            let start = self.engines.iter().map(|e| e.start_step).max().unwrap_or(0);
            if n.saturating_add(start) > self.max_steps {
                return bad(format!(
                    "num_steps = {n} (plus the latest engine start_step {start}) is above \
                     max_steps = {}",
                    self.max_steps
                ));
            }
        }
        let last = self.first_step + self.max_steps;
        for step in [self.first_step, last] {
            let ts = self.ts_start + step as f64 * self.ts_step;
            if !ts.is_finite() {
                return bad(format!(
                    "ts_step = {:?}: the timestamp ts_start + ts_step * step is not finite at step \
                     {step} (steps run from first_step = {} to first_step + max_steps = {last})",
                    self.ts_step, self.first_step
                ));
            }
        }
        Ok(())
    }

    fn validate_engines(&self) -> Result<(), ScenarioError> {
        let mut publishers = HashSet::new();
        let (mut requests, mut tokens, mut blocks) = (0u64, 0u64, 0u64);
        let groups = self.groups.len() as u64;
        for engine in self.engine_specs() {
            if !publishers.insert((engine.source.clone(), engine.dp_rank)) {
                return bad(format!(
                    "two engines publish as source {:?} dp_rank {}",
                    engine.source, engine.dp_rank
                ));
            }
            at_most(
                &format!("engines[{:?}].start_step", engine.source),
                engine.start_step,
                MAX_STEPS,
                "engine steps",
            )?;
            let mut prompts: HashMap<&str, u64> = HashMap::new();
            for r in &engine.requests {
                if prompts.contains_key(r.id.as_str()) {
                    return bad(format!("duplicate request id {:?}", r.id));
                }
                let shared = match &r.shared_prefix {
                    None => 0,
                    Some(p) => match prompts.get(p.request.as_str()) {
                        Some(&other) => u64::from(p.len).min(other),
                        None => {
                            return bad(format!(
                                "request {:?}: shared_prefix names {:?}, which is not declared before it",
                                r.id, p.request
                            ))
                        }
                    },
                };
                let explicit_len = r.token_ids.as_ref().map_or(0, Vec::len) as u64;
                let prompt = match r.token_ids {
                    Some(_) => shared + explicit_len,
                    None => shared.max(u64::from(r.prompt_len.unwrap_or(0))),
                };
                let outputs = r
                    .output_token_ids
                    .as_ref()
                    .map_or(u64::from(r.max_tokens), |o| o.len() as u64)
                    .max(1);
                if prompt > MAX_REQUEST_TOKENS || outputs > MAX_REQUEST_TOKENS {
                    return bad(format!(
                        "request {:?}: prompts and outputs are limited to {MAX_REQUEST_TOKENS} tokens",
                        r.id
                    ));
                }
                if r.token_ids.is_none() && r.prompt_len.is_none() && r.shared_prefix.is_none() {
                    return bad(format!(
                        "request {:?} needs token_ids, prompt_len or shared_prefix",
                        r.id
                    ));
                }
                at_most(
                    &format!("request {:?}: arrival_step", r.id),
                    r.arrival_step,
                    MAX_STEPS,
                    "engine steps",
                )?;
                requests += 1;
                tokens += (prompt + outputs) * groups;
                blocks += (prompt + outputs) / u64::from(self.block_size) * groups;
                prompts.insert(&r.id, prompt);
            }
            if let Some(steps) = &engine.steps {
                at_most("steps", steps.len() as u64, MAX_STEPS, "engine steps")?;
                for (i, s) in steps.iter().enumerate() {
                    for id in s.schedule.keys().chain(s.finish.iter()) {
                        if !prompts.contains_key(id.as_str()) {
                            return bad(format!("steps[{i}] names unknown request {id:?}"));
                        }
                    }
                }
            }
        }
        at_most(
            "requests",
            requests,
            MAX_REQUESTS,
            "requests of all engines",
        )?;
        if tokens > MAX_TOTAL_TOKENS {
            return bad(format!(
                "the scenario's total work is too large: prompt and output tokens of all requests \
                 times groups = {tokens}, above the limit of {MAX_TOTAL_TOKENS}"
            ));
        }
        if blocks > MAX_TOTAL_BLOCKS {
            return bad(format!(
                "the scenario's total work is too large: blocks of all requests (tokens / \
                 block_size) times groups = {blocks}, above the limit of {MAX_TOTAL_BLOCKS}"
            ));
        }
        Ok(())
    }
}
