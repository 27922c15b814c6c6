//! A simulated `Request`: tokens, incremental block hashes (`get_request_block_hasher`) and
//! the connector's per-request offload state (`RequestOffloadState`, `RequestGroupState`).

use rand::Rng;
use rand_chacha::ChaCha8Rng;

use crate::event::TokenId;
use crate::hashing::{hash_block_tokens, Digest, ExtraKeyInputs};
use crate::keys::OffloadKey;

/// Scheduler-visible state.
#[derive(Clone, Debug, PartialEq)]
pub enum ReqState {
    /// Not yet scheduled (or deferred by the connector).
    Waiting,
    /// `WAITING_FOR_REMOTE_KVS`: a load job is in flight; `ready` once it completed.
    WaitingForLoad {
        /// Load finished (reported as `finished_recving`).
        ready: bool,
        /// Tokens computed once loaded.
        cached_tokens: usize,
    },
    /// In the running queue.
    Running,
    /// Finished.
    Finished,
}

/// One simulated request.
#[derive(Clone, Debug)]
pub struct SimRequest {
    /// `request_id`.
    pub id: String,
    /// `all_token_ids` (prompt then appended outputs).
    pub tokens: Vec<TokenId>,
    /// Prompt length.
    pub num_prompt_tokens: usize,
    /// Explicit output tokens still to append.
    pub planned_outputs: std::collections::VecDeque<TokenId>,
    /// Finish after this many outputs (generated scheduling); `None` = only when told.
    pub max_tokens: Option<usize>,
    /// Outputs appended so far.
    pub num_outputs: usize,
    /// `Request.block_hashes` (full blocks only).
    pub block_hashes: Vec<Digest>,
    /// Extra-key inputs (LoRA name, cache salt).
    pub extra: ExtraKeyInputs,
    /// `lora_request.adapter_id`.
    pub lora_id: Option<i64>,
    /// `lora_request.name`.
    pub lora_name: Option<String>,
    /// `num_computed_tokens`.
    pub num_computed: usize,
    /// GPU blocks allocated so far (`ceil(max(computed + scheduled) / block_size)`).
    pub num_allocated_blocks: usize,
    /// GPU blocks already announced by the block pool (`num_cached_blocks`).
    pub gpu_cached_blocks: usize,
    /// Scheduler state.
    pub state: ReqState,
    /// Arrival step (generated scheduling).
    pub arrival_step: u64,
    /// `max_offload_tokens`.
    pub max_offload_tokens: Option<usize>,
    /// The connector holds a `RequestOffloadState` for it.
    pub tracked: bool,
    /// Per group: `next_stored_chunk_idx`.
    pub next_stored: Vec<usize>,
    /// Per group: `num_hit_chunks`.
    pub num_hit_chunks: Vec<usize>,
    /// In-flight job ids.
    pub transfer_jobs: rustc_hash::FxHashSet<u64>,
    /// `on_request_finished` was signalled.
    pub finished_signaled: bool,
    /// Token generator for outputs beyond the explicit ones.
    pub rng: ChaCha8Rng,
    /// Vocabulary size for generated outputs.
    pub vocab: u32,
}

impl SimRequest {
    /// Total tokens (`num_tokens`).
    pub fn num_tokens(&self) -> usize {
        self.tokens.len()
    }

    /// Extend `block_hashes` over newly full blocks.
    pub fn update_hashes(&mut self, none_hash: &Digest, block_size: usize) {
        while (self.block_hashes.len() + 1) * block_size <= self.tokens.len() {
            let i = self.block_hashes.len();
            let start = i * block_size;
            let keys = self.extra.for_block(start);
            let d = hash_block_tokens(
                none_hash,
                self.block_hashes.last(),
                &self.tokens[start..start + block_size],
                keys.as_deref(),
            );
            self.block_hashes.push(d);
        }
    }

    /// Append one sampled output token.
    pub fn append_output(&mut self, none_hash: &Digest, block_size: usize) {
        let t = match self.planned_outputs.pop_front() {
            Some(t) => t,
            None => self.rng.gen_range(0..self.vocab),
        };
        self.tokens.push(t);
        self.num_outputs += 1;
        self.update_hashes(none_hash, block_size);
    }

    /// Number of offload keys per group (`len(group_state.offload_keys)`).
    pub fn num_keys(&self, blocks_per_chunk: usize) -> usize {
        self.block_hashes.len() / blocks_per_chunk
    }

    /// `make_offload_key(block_hashes[c*hpc + hpc - 1], group)`.
    pub fn key(&self, group: u32, chunk: usize, blocks_per_chunk: usize) -> OffloadKey {
        OffloadKey::new(
            self.block_hashes[chunk * blocks_per_chunk + blocks_per_chunk - 1],
            group,
        )
    }

    /// All offload keys of a group from chunk `from`.
    pub fn keys_from(&self, group: u32, from: usize, blocks_per_chunk: usize) -> Vec<OffloadKey> {
        (from..self.num_keys(blocks_per_chunk))
            .map(|c| self.key(group, c, blocks_per_chunk))
            .collect()
    }
}
