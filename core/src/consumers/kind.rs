//! The models by name ([`ConsumerKind`]) and their settings ([`ConsumerConfig`], [`BlockSizes`]).

use serde::{Deserialize, Serialize};

/// The consumer models kvscope knows, by name.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ConsumerKind {
    /// [`llmd::Llmd`].
    Llmd,
    /// [`dynamo::Dynamo`].
    Dynamo,
    /// [`smg::Smg`].
    Smg,
    /// [`sglang::Sglang`].
    Sglang,
    /// [`ideal::Ideal`].
    Ideal,
}

impl ConsumerKind {
    /// All models, in report order.
    pub const ALL: [ConsumerKind; 5] = [
        ConsumerKind::Llmd,
        ConsumerKind::Dynamo,
        ConsumerKind::Smg,
        ConsumerKind::Sglang,
        ConsumerKind::Ideal,
    ];

    /// The model's name.
    pub fn as_str(self) -> &'static str {
        match self {
            ConsumerKind::Llmd => "llmd",
            ConsumerKind::Dynamo => "dynamo",
            ConsumerKind::Smg => "smg",
            ConsumerKind::Sglang => "sglang",
            ConsumerKind::Ideal => "ideal",
        }
    }

    /// Parse a model name (`llmd`/`llm-d`, `dynamo`, `smg`, `sglang`, `ideal`).
    pub fn parse(name: &str) -> Option<ConsumerKind> {
        match name.to_ascii_lowercase().as_str() {
            "llmd" | "llm-d" | "llm_d" => Some(ConsumerKind::Llmd),
            "dynamo" => Some(ConsumerKind::Dynamo),
            "smg" | "sgl-model-gateway" => Some(ConsumerKind::Smg),
            "sglang" | "sgl-router" => Some(ConsumerKind::Sglang),
            "ideal" => Some(ConsumerKind::Ideal),
            _ => None,
        }
    }
}

/// Configuration of all models.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct ConsumerConfig {
    /// llm-d's `blockSizeTokens` (canonical block size); `None` (the default) = `auto`: the
    /// engine block size the trace shows (see [`BlockSizes`]).
    pub llmd_canonical_block_size: Option<u32>,
    /// Dynamo's `kv_block_size`; `None` (the default) = `auto` (see [`BlockSizes`]).
    pub dynamo_kv_block_size: Option<u32>,
    /// Dynamo: clear every DP rank of the worker on `AllBlocksCleared` (`clear_all_blocks`)
    /// instead of only the emitting rank (what `RadixTree::apply_event` does in 1.6.1).
    pub dynamo_clear_all_ranks: bool,
    /// llm-d's ZMQ subscriber replay (`replaySocketPort > 0`); off by default, as in llm-d.
    /// Off, a publisher restart (its `seq` going back) is not noticed and the restarted
    /// engine's blocks stay credited; on, it clears the pod (`Pool.resetForSource`).
    pub llmd_replay: bool,
    /// Ideal consumer: how many orphan events may be held pending at once; default 1024.
    pub ideal_pending_limit: usize,
}

impl Default for ConsumerConfig {
    fn default() -> Self {
        ConsumerConfig {
            llmd_canonical_block_size: None,
            dynamo_kv_block_size: None,
            dynamo_clear_all_ranks: false,
            llmd_replay: false,
            ideal_pending_limit: 1024,
        }
    }
}

/// A router's block-size setting resolved for one trace: a fixed value for every source, or
/// `auto` = each source's engine block size (the `block_size` of its first `BlockStored` that
/// carries tokens), falling back to the first engine block size of the trace, then to
/// [`BlockSizes::FALLBACK`]. A real deployment configures the router with the engines' block
/// size; `auto` reproduces that instead of assuming 16.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BlockSizes {
    per_source: std::sync::Arc<[u32]>,
    fallback: u32,
}

impl BlockSizes {
    /// The size used when neither a setting nor the trace gives one (vLLM's default
    /// `block_size`, llm-d's default `blockSizeTokens`).
    pub const FALLBACK: u32 = 16;

    /// One size for every source (0 is treated as 1).
    pub fn fixed(size: u32) -> Self {
        BlockSizes {
            per_source: std::sync::Arc::from([]),
            fallback: size.max(1),
        }
    }

    /// `setting` if given, else `auto` from `engine` (per interned source id: the engine block
    /// size, when the source stored tokens).
    pub fn resolve(setting: Option<u32>, engine: &[Option<u32>]) -> Self {
        if let Some(s) = setting {
            return BlockSizes::fixed(s);
        }
        let fallback = engine
            .iter()
            .flatten()
            .copied()
            .find(|s| *s > 0)
            .unwrap_or(Self::FALLBACK);
        // A loop into a vector, then one copy into the `Arc` (no `Arc` `FromIterator` code).
        let mut per_source = Vec::with_capacity(engine.len());
        for s in engine {
            per_source.push(s.filter(|v| *v > 0).unwrap_or(fallback));
        }
        BlockSizes {
            per_source: per_source.into(),
            fallback,
        }
    }

    /// The size for interned source `source`.
    pub fn for_source(&self, source: u32) -> u32 {
        self.per_source
            .get(source as usize)
            .copied()
            .unwrap_or(self.fallback)
    }
}
