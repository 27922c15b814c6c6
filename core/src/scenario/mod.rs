//! The scenario file: a JSON description of engines, requests, schedules and offload tiers
//! that [`crate::sim`] turns into a trace. Every field is documented in
//! `docs/scenario-format.md`; unknown fields are errors (`deny_unknown_fields`), reported with
//! line and column.
//!
//! Names follow upstream vLLM where one exists (`block_size`, `blocks_per_chunk`,
//! `offload_prompt_only`, `num_scheduled_tokens`, `max_num_batched_tokens`, `lora_id`,
//! `lora_name`, `cache_salt`, `self_describing_kv_events`).

pub mod builtin;
mod overrides;
mod validate;

pub use overrides::{OrderChoice, Overrides};
pub use validate::limits;

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::event::TokenId;
use crate::hashing::DEFAULT_NONE_HASH_SEED;
use crate::order::OrderMode;

/// A whole scenario.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    /// Short name (shown in the trace header).
    #[serde(default)]
    pub name: String,
    /// One-line description.
    #[serde(default)]
    pub description: String,
    /// Seed for generated token ids, latencies, worker lag and legacy permutations.
    #[serde(default)]
    pub seed: u64,
    /// How a store job's keys are ordered at `complete_store`: `cpython` (what vLLM
    /// 0.28.0-0.33.0 do), `fixed` (prefix order: the proposed fix, upstream from 0.34.0) or
    /// `legacy` (a seeded stand-in for set order).
    #[serde(default = "default_order")]
    pub order: OrderMode,
    /// Block hashing options.
    #[serde(default)]
    pub hashing: HashingConfig,
    /// GPU block size in tokens (`cache_config.block_size`); also the hash block size.
    #[serde(default = "default_block_size")]
    pub block_size: u32,
    /// GPU blocks per offloaded chunk (`blocks_per_chunk`, vLLM #48878).
    #[serde(default = "one")]
    pub blocks_per_chunk: u32,
    /// KV cache groups in group-index order (default: one full-attention group).
    #[serde(default = "default_groups")]
    pub groups: Vec<GroupConfig>,
    /// Offload only prompt tokens (`offload_prompt_only`, upstream default `true`).
    #[serde(default = "yes")]
    pub offload_prompt_only: bool,
    /// `kv_connector_extra_config["self_describing_kv_events"]` (vLLM #43468). `false` gives
    /// placeholder events (`token_ids=[]`, `block_size=0`, parent `None`).
    #[serde(default = "yes")]
    pub self_describing_kv_events: bool,
    /// Also publish the GPU block pool's `BlockStored` events (first in each batch).
    #[serde(default)]
    pub gpu_events: bool,
    /// Model the GPU prefix cache: a new request starts computed at its longest cached
    /// prefix (full blocks, at most `num_tokens - 1` tokens). Unbounded capacity.
    #[serde(default = "yes")]
    pub gpu_prefix_cache: bool,
    /// The CPU (primary) offload tier.
    #[serde(default)]
    pub cpu: CpuConfig,
    /// Secondary tiers (medium `STORAGE`) in config order.
    #[serde(default)]
    pub secondary_tiers: Vec<SecondaryTierConfig>,
    /// When GPU→CPU transfer jobs complete.
    #[serde(default)]
    pub completion: CompletionConfig,
    /// Generated scheduling (used when an engine has no explicit `steps`).
    #[serde(default)]
    pub scheduler: SchedulerConfig,
    /// Timestamps: `ts = ts_start + step * ts_step`.
    #[serde(default = "default_ts_start")]
    pub ts_start: f64,
    /// Seconds per engine step.
    #[serde(default = "default_ts_step")]
    pub ts_step: f64,
    /// Number of the first engine step.
    #[serde(default)]
    pub first_step: u64,
    /// Requests of the default engine (used when `engines` is empty).
    #[serde(default)]
    pub requests: Vec<RequestSpec>,
    /// Explicit per-step schedule of the default engine (used when `engines` is empty).
    #[serde(default)]
    pub steps: Option<Vec<StepSpec>>,
    /// Several engines (pods / DP ranks), each with its own requests, tiers and publisher.
    #[serde(default)]
    pub engines: Vec<EngineSpec>,
    /// Safety limit on engine steps per engine.
    #[serde(default = "default_max_steps")]
    pub max_steps: u64,
    /// Run exactly this many engine steps per engine with generated scheduling (requests
    /// need not finish; jobs still in flight at the end publish nothing).
    #[serde(default)]
    pub num_steps: Option<u64>,
}

/// Block hashing options (`prefix_caching_hash_algo = sha256_cbor` only).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HashingConfig {
    /// Seed string for `NONE_HASH` (default `"vllm-none-hash"`, vLLM #51875). Independent
    /// of the set-order `python_hash_seed`.
    #[serde(default = "default_none_hash_seed")]
    pub none_hash_seed: String,
    /// Wire hash format.
    #[serde(default)]
    pub format: HashFormat,
}

impl Default for HashingConfig {
    fn default() -> Self {
        HashingConfig {
            none_hash_seed: default_none_hash_seed(),
            format: HashFormat::Int,
        }
    }
}

/// How hashes go on the wire (`VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HashFormat {
    /// Last 8 digest bytes, big-endian, as an unsigned int (vLLM default).
    #[default]
    Int,
    /// The raw 32 digest bytes.
    Bytes,
}

/// One KV cache group.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GroupConfig {
    /// Attention kind of the group.
    #[serde(default)]
    pub kind: GroupKind,
    /// Sliding window in tokens (`sliding_window` groups only).
    #[serde(default)]
    pub sliding_window: Option<u32>,
}

/// `KVCacheSpecKind` subset kvscope simulates.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GroupKind {
    /// Full attention: self-describing events.
    #[default]
    FullAttention,
    /// Sliding-window attention: placeholder events.
    SlidingWindow,
    /// Mamba / SSM: placeholder events.
    Mamba,
}

impl GroupKind {
    /// The `kv_cache_spec_kind` string.
    pub fn spec_kind(&self) -> &'static str {
        match self {
            GroupKind::FullAttention => "full_attention",
            GroupKind::SlidingWindow => "sliding_window",
            GroupKind::Mamba => "mamba",
        }
    }
}

/// The CPU tier (`CPUOffloadingManager` with the LRU policy).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CpuConfig {
    /// Capacity in offloaded chunks (`num_blocks` of the CPU manager).
    #[serde(default = "default_cpu_capacity")]
    pub capacity_chunks: u64,
    /// Whether the tier emits events at all.
    #[serde(default = "yes")]
    pub events: bool,
    /// Pop tracker metadata on CPU removal. Default `true`: vLLM 0.28.0 pops unconditionally
    /// and 0.29.0 pops when the last residency goes (`tests/fixtures/vllm/README.md`, finding
    /// 2). `false` models the ~2026-08-03 source whose `event.medium == MEDIUM_CPU` test never
    /// matched.
    #[serde(default = "yes")]
    pub pop_metadata_on_removal: bool,
}

impl Default for CpuConfig {
    fn default() -> Self {
        CpuConfig {
            capacity_chunks: default_cpu_capacity(),
            events: true,
            pop_metadata_on_removal: true,
        }
    }
}

/// A secondary tier (FS / OBJ style, medium `STORAGE`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SecondaryTierConfig {
    /// Tier name; provenance tier `STORAGE:<name>`.
    pub name: String,
    /// `ownership` written on its events (`None` by default: events say only `STORAGE`).
    #[serde(default)]
    pub ownership: Option<String>,
    /// `locality` written on its events (`"LOCAL"` / `"REMOTE"`).
    #[serde(default)]
    pub locality: Option<String>,
    /// Minimum job latency in engine steps (≥ 1: jobs are polled in the scheduling phase).
    #[serde(default = "one_u64")]
    pub min_latency_steps: u64,
    /// Maximum job latency in engine steps.
    #[serde(default = "two_u64")]
    pub max_latency_steps: u64,
    /// Probability that a store job fails (no event).
    #[serde(default)]
    pub failure_probability: f64,
    /// Serve lookups that miss the CPU tier (promotions).
    #[serde(default = "yes")]
    pub promotions: bool,
    /// `generic` (default: a seeded stand-in) or `fs`: vLLM's file-system tier behind the
    /// tiering manager, whose existence checks are asynchronous (a key's first lookup is
    /// RETRY; the verdict is known from the next step on; `docs/vllm-offloading.md` fact 18).
    #[serde(default)]
    pub kind: TierKind,
    /// `{"JOB": STEP}`: tiering job `JOB` (the tiering manager's own counter for this engine,
    /// from 0 in submission order, cascades and promotions alike) has finished its I/O before
    /// step `STEP` (it is reported by that step's first poll or later); overrides the seeded
    /// latency.
    #[serde(default)]
    pub io_finished: BTreeMap<String, u64>,
    /// `{"STEP": [JOB, ...]}`: the order in which jobs finishing before the same step are
    /// reported (the thread pool's completion order); unlisted jobs come first, by job id.
    #[serde(default)]
    pub io_release_order: BTreeMap<String, Vec<u64>>,
    /// Chunks already on the tier before step 0, written by another instance sharing its
    /// storage (a shared FS directory): lookups find them, but this instance's events tracker
    /// has never seen them (`docs/vllm-offloading.md` fact 24).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub preload: Vec<PreloadSpec>,
}

/// `secondary_tiers[].preload` entry: the chunks `chunks` (chunk indices, from 0) of request
/// `request`'s KV group `group` are on the tier before step 0. Only their keys are used (the
/// same tokens give the same keys in any request), so `request` may be one that is never
/// scheduled.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PreloadSpec {
    /// A request id of the same engine.
    pub request: String,
    /// KV group index (default 0).
    #[serde(default)]
    pub group: u32,
    /// Chunk indices of that request's offload keys in that group.
    pub chunks: Vec<usize>,
}

impl SecondaryTierConfig {
    /// `io_finished` with its job ids parsed (an error names the key that is not a job id).
    pub fn io_finished_jobs(&self) -> Result<BTreeMap<u64, u64>, String> {
        self.io_finished
            .iter()
            .map(|(k, &v)| {
                k.parse::<u64>().map(|j| (j, v)).map_err(|_| {
                    format!(
                        "secondary_tiers[{:?}].io_finished: key {k:?} is not a job id",
                        self.name
                    )
                })
            })
            .collect()
    }

    /// Where tiering job `job` stands in `io_release_order` of `step` (`None`: unlisted).
    pub fn io_release_rank(&self, step: u64, job: u64) -> Option<usize> {
        self.io_release_order
            .get(&step.to_string())
            .and_then(|jobs| jobs.iter().position(|&j| j == job))
    }
}

/// Which vLLM secondary tier a [`SecondaryTierConfig`] models.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TierKind {
    /// A seeded stand-in: synchronous existence checks, seeded job latency.
    #[default]
    Generic,
    /// `FileSystemTierManager` (`vllm/v1/kv_offload/tiering/fs/manager.py`).
    Fs,
}

/// GPU→CPU job completion timing.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CompletionConfig {
    /// `same_step` (the job completes in the step that created it) or `next_step` (the
    /// worker reports at the next step, `docs/vllm-offloading.md` fact 10).
    #[serde(default)]
    pub timing: CompletionTiming,
    /// Number of workers (`parallel_config.world_size`): each must report a job.
    #[serde(default = "one")]
    pub workers: u32,
    /// With `workers > 1`: probability that a worker reports a job one step late.
    #[serde(default = "half")]
    pub worker_lag_probability: f64,
    /// Explicit worker reports: worker W reports job J at global step S (the others keep
    /// the default timing).
    #[serde(default)]
    pub reports: Vec<WorkerReport>,
}

/// One worker's report of one job (`completion.reports[]`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorkerReport {
    /// The connector's job id (one counter for loads and stores, from 0 per engine).
    pub job: u64,
    /// 0-based worker index (not a DP rank), below `completion.workers`.
    pub worker: u32,
    /// Global step whose `update_connector_output` receives the report.
    pub step: u64,
    /// The engine's `source` (required when the scenario has `engines`).
    #[serde(default)]
    pub source: Option<String>,
    /// The engine's `dp_rank` (with `source`; default 0).
    #[serde(default)]
    pub dp_rank: u32,
}

impl Default for CompletionConfig {
    fn default() -> Self {
        CompletionConfig {
            timing: CompletionTiming::SameStep,
            workers: 1,
            worker_lag_probability: 0.5,
            reports: Vec::new(),
        }
    }
}

/// When a GPU→CPU job's worker report arrives.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CompletionTiming {
    /// In the `update_from_output` of the step that created the job.
    #[default]
    SameStep,
    /// One step later (real vLLM behaviour).
    NextStep,
}

/// Generated scheduling (vLLM v1 `Scheduler.schedule()`, simplified).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SchedulerConfig {
    /// Token budget per step (`max_num_batched_tokens`).
    #[serde(default = "default_budget")]
    pub max_num_batched_tokens: u32,
    /// Max running requests (`max_num_seqs`).
    #[serde(default = "default_max_seqs")]
    pub max_num_seqs: u32,
    /// Cap on prefill tokens per request per step (`long_prefill_token_threshold`; 0 = off).
    #[serde(default)]
    pub long_prefill_token_threshold: u32,
    /// Vocabulary size for generated tokens.
    #[serde(default = "default_vocab")]
    pub vocab_size: u32,
}

impl Default for SchedulerConfig {
    fn default() -> Self {
        SchedulerConfig {
            max_num_batched_tokens: default_budget(),
            max_num_seqs: default_max_seqs(),
            long_prefill_token_threshold: 0,
            vocab_size: default_vocab(),
        }
    }
}

/// One request.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RequestSpec {
    /// Request id (`request_id`).
    pub id: String,
    /// Explicit prompt token ids (appended after `shared_prefix`).
    #[serde(default)]
    pub token_ids: Option<Vec<TokenId>>,
    /// Total prompt length when tokens are generated.
    #[serde(default)]
    pub prompt_len: Option<u32>,
    /// Start the prompt with the first `len` prompt tokens of another request.
    #[serde(default)]
    pub shared_prefix: Option<SharedPrefix>,
    /// Output tokens to generate (the request finishes after them). Default 1.
    #[serde(default = "one")]
    pub max_tokens: u32,
    /// Explicit output token ids (overrides `max_tokens`).
    #[serde(default)]
    pub output_token_ids: Option<Vec<TokenId>>,
    /// Step at which the request arrives (generated scheduling).
    #[serde(default)]
    pub arrival_step: u64,
    /// LoRA adapter id (`lora_request.adapter_id`).
    #[serde(default)]
    pub lora_id: Option<i64>,
    /// LoRA adapter name (`lora_request.name`, hashed into every block).
    #[serde(default)]
    pub lora_name: Option<String>,
    /// Cache salt (hashed into block 0).
    #[serde(default)]
    pub cache_salt: Option<String>,
    /// `kv_transfer_params["max_offload_tokens"]`.
    #[serde(default)]
    pub max_offload_tokens: Option<u32>,
}

/// A prompt prefix copied from another request.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SharedPrefix {
    /// The other request's id (must be declared earlier).
    pub request: String,
    /// Number of its prompt tokens to copy.
    pub len: u32,
}

/// One explicit engine step.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StepSpec {
    /// `num_scheduled_tokens`: request id → tokens computed this step, in batch order.
    #[serde(default)]
    pub schedule: indexmap::IndexMap<String, u32>,
    /// Requests that finish at the end of this step (reported as `finished_req_ids` next
    /// step).
    #[serde(default)]
    pub finish: Vec<String>,
    /// Reset the prefix caches before this step (`reset_prefix_cache`).
    #[serde(default)]
    pub reset: bool,
}

/// One engine (a pod, or one DP rank of a pod).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EngineSpec {
    /// Trace `source` (the pod name).
    pub source: String,
    /// DP rank (`data_parallel_rank`).
    #[serde(default)]
    pub dp_rank: u32,
    /// Step offset of this engine's first step (interleaving).
    #[serde(default)]
    pub start_step: u64,
    /// Requests.
    #[serde(default)]
    pub requests: Vec<RequestSpec>,
    /// Explicit schedule (otherwise generated).
    #[serde(default)]
    pub steps: Option<Vec<StepSpec>>,
}

/// A scenario error with its position in the JSON text.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{}{message}", position.map(|(l, c)| format!("line {l}, column {c}: ")).unwrap_or_default())]
pub struct ScenarioError {
    /// 1-based (line, column) in the scenario file, when the error has one.
    pub position: Option<(u64, u64)>,
    /// What is wrong.
    pub message: String,
}

impl ScenarioError {
    pub(crate) fn invalid(message: impl Into<String>) -> Self {
        ScenarioError {
            position: None,
            message: message.into(),
        }
    }
}

impl Scenario {
    /// Parse and validate a scenario from JSON text.
    pub fn from_json(text: &str) -> Result<Scenario, ScenarioError> {
        // `from_slice`, not `from_str`: the JSON Lines reader parses with the slice reader too,
        // so wasm builds carry one copy of serde_json's parser instead of two.
        let scenario: Scenario = serde_json::from_slice(text.as_bytes()).map_err(|e| {
            let full = e.to_string();
            let suffix = format!(" at line {} column {}", e.line(), e.column());
            ScenarioError {
                position: Some((e.line() as u64, e.column() as u64)),
                message: full.strip_suffix(&suffix).unwrap_or(&full).to_owned(),
            }
        })?;
        scenario.validate()?;
        Ok(scenario)
    }

    /// The engines to run: `engines`, or one default engine from `requests` / `steps`.
    pub fn engine_specs(&self) -> Vec<EngineSpec> {
        if self.engines.is_empty() {
            vec![EngineSpec {
                source: if self.name.is_empty() {
                    "vllm".into()
                } else {
                    self.name.clone()
                },
                dp_rank: 0,
                start_step: 0,
                requests: self.requests.clone(),
                steps: self.steps.clone(),
            }]
        } else {
            self.engines.clone()
        }
    }
}

fn default_order() -> OrderMode {
    OrderMode::Fixed
}
fn default_block_size() -> u32 {
    16
}
fn one() -> u32 {
    1
}
fn one_u64() -> u64 {
    1
}
fn two_u64() -> u64 {
    2
}
fn half() -> f64 {
    0.5
}
fn yes() -> bool {
    true
}
fn default_groups() -> Vec<GroupConfig> {
    vec![GroupConfig {
        kind: GroupKind::FullAttention,
        sliding_window: None,
    }]
}
fn default_none_hash_seed() -> String {
    DEFAULT_NONE_HASH_SEED.to_owned()
}
fn default_cpu_capacity() -> u64 {
    1 << 20
}
fn default_budget() -> u32 {
    8192
}
fn default_max_seqs() -> u32 {
    256
}
fn default_vocab() -> u32 {
    32000
}
fn default_ts_start() -> f64 {
    1_700_000_000.0
}
fn default_ts_step() -> f64 {
    1.0
}
fn default_max_steps() -> u64 {
    100_000
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn minimal_scenario_gets_defaults() {
        let s = Scenario::from_json(r#"{"requests":[{"id":"r0","prompt_len":8}]}"#).unwrap();
        assert_eq!(s.block_size, 16);
        assert_eq!(s.order, OrderMode::Fixed);
        assert_eq!(s.hashing.none_hash_seed, "vllm-none-hash");
        assert!(s.offload_prompt_only);
        assert_eq!(s.engine_specs().len(), 1);
    }

    #[test]
    fn unknown_field_is_an_error_with_position() {
        let e = Scenario::from_json("{\n  \"blok_size\": 4\n}").unwrap_err();
        assert_eq!(e.position.map(|p| p.0), Some(2));
        assert!(e.message.contains("blok_size"), "{e}");
        assert!(e.to_string().starts_with("line 2, column"), "{e}");
    }

    #[test]
    fn validation_errors() {
        for (text, needle) in [
            (r#"{"block_size":0}"#, "block_size"),
            (r#"{"requests":[{"id":"a"}]}"#, "needs token_ids"),
            (
                r#"{"requests":[{"id":"a","prompt_len":4,"shared_prefix":{"request":"b","len":2}}]}"#,
                "not declared",
            ),
            (
                r#"{"requests":[{"id":"a","prompt_len":4}],"steps":[{"schedule":{"x":4}}]}"#,
                "unknown request",
            ),
            (r#"{"completion":{"workers":0}}"#, "workers"),
            (
                r#"{"requests":[{"id":"a","prompt_len":4000000000}]}"#,
                "limited",
            ),
            (
                r#"{"block_size":65536,"blocks_per_chunk":65536}"#,
                "at most",
            ),
        ] {
            let e = Scenario::from_json(text).unwrap_err();
            assert!(e.message.contains(needle), "{text}: {e}");
        }
    }
}
