//! Random vLLM event traces (proptest strategies).
//!
//! Hashes come from a small universe so that parents are often unknown, duplicated, reused
//! across workers and tiers, and removed mid-chain. Two canonical chains (`1→2→…→8` and the
//! branch `1→2→9→10→11`) give parent-linked stores that are then delivered in random order
//! (child before parent); free-form stores add unknown parents, duplicate and self-referencing
//! hashes. Block tokens are a function of the hash (`content`), with a few deliberate content
//! collisions (same tokens, different engine hash) and variants (same hash, other tokens).

use std::fmt::Write as _;

use kvscope_core::event::{BlockHashes, BlockRemoved, BlockStored, KvEvent, Label};
use kvscope_core::hash::BlockHash;
use proptest::collection::vec;
use proptest::prelude::*;

/// Dynamo's `kv_block_size` used by both sides.
pub const KV_BLOCK_SIZE: u32 = 16;

/// One published batch: the publishing worker, its DP rank, its events.
#[derive(Clone, Debug)]
pub struct GenBatch {
    /// Worker (kvscope source id, Dynamo `worker_id`).
    pub source: u32,
    /// `data_parallel_rank`.
    pub rank: u32,
    /// The events.
    pub events: Vec<KvEvent>,
}

/// A trace: batches in delivery order.
pub type GenTrace = Vec<GenBatch>;

/// Generator profile.
#[derive(Clone, Copy, Debug)]
pub struct Opts {
    /// Add (rarely) the wire features that make Dynamo drop an event or a whole batch before
    /// any index sees it: an `ownership` field, a bytes block hash.
    pub extras: bool,
    /// Only device-tier media (`nil`/`GPU`): denser device trees across workers.
    pub device_only: bool,
    /// Re-stores with other tokens (variant content) and `AllBlocksCleared` much more often:
    /// trees with several edges for the same hashes and clears over them (class F's ground).
    pub dense: bool,
}

const CHAIN_A: [u64; 8] = [1, 2, 3, 4, 5, 6, 7, 8];
const CHAIN_B: [u64; 5] = [1, 2, 9, 10, 11];

/// Token content class of a hash: equal classes => equal tokens => equal `LocalBlockHash`.
/// 12 and 13 collide with 3 and 4 on purpose.
fn content(h: u64) -> u64 {
    match h {
        12 => 3,
        13 => 4,
        other => other,
    }
}

fn tokens_for(h: u64, variant: bool, bs: u32) -> Vec<u32> {
    let base = (content(h) as u32).wrapping_mul(1000) + if variant { 500 } else { 0 };
    (0..bs).map(|i| base.wrapping_add(i)).collect()
}

fn hash() -> impl Strategy<Value = u64> {
    prop_oneof![
        12 => 1u64..=13,
        1 => Just(0u64),
        1 => Just(u64::MAX - 7),
    ]
}

fn medium(opts: Opts) -> impl Strategy<Value = Option<String>> {
    let lower = u32::from(!opts.device_only);
    prop_oneof![
        4 => Just(None),
        4 => Just(Some("GPU".to_string())),
        4 * lower => Just(Some("CPU".to_string())),
        2 * lower => Just(Some("STORAGE".to_string())),
        lower => Just(Some("CPU_TIER2".to_string())),
        lower => Just(Some("FS".to_string())),
    ]
}

fn locality() -> impl Strategy<Value = Option<String>> {
    prop_oneof![
        16 => Just(None),
        2 => Just(Some("LOCAL".to_string())),
        1 => Just(Some("REMOTE".to_string())),
    ]
}

fn ownership(opts: Opts) -> impl Strategy<Value = Option<String>> {
    let w = u32::from(opts.extras);
    prop_oneof![
        80 => Just(None),
        w => Just(Some("kvcr".to_string())),
        w => Just(Some("lmcache".to_string())),
    ]
}

/// `(parent, blocks)` of a store.
fn store_shape() -> impl Strategy<Value = (Option<u64>, Vec<u64>)> {
    let chain = (any::<bool>(), 0usize..8, 1usize..=4).prop_map(|(a, start, len)| {
        let c: &[u64] = if a { &CHAIN_A } else { &CHAIN_B };
        let start = start % c.len();
        let end = (start + len).min(c.len());
        let parent = if start == 0 { None } else { Some(c[start - 1]) };
        (parent, c[start..end].to_vec())
    });
    let free = (
        prop_oneof![1 => Just(None), 3 => hash().prop_map(Some)],
        vec(hash(), 0..=4),
    );
    prop_oneof![3 => chain, 2 => free]
}

#[derive(Clone, Debug)]
enum TokenShape {
    Exact,
    Short(usize),
    Long,
}

fn stored(opts: Opts) -> impl Strategy<Value = KvEvent> {
    (
        store_shape(),
        prop_oneof![20 => Just(KV_BLOCK_SIZE), 1 => Just(8u32), 1 => Just(32u32), 1 => Just(0u32)],
        prop_oneof![16 => Just(TokenShape::Exact), 2 => (1usize..24).prop_map(TokenShape::Short), 1 => Just(TokenShape::Long)],
        prop_oneof![12 => Just(false), 1 + 5 * u32::from(opts.dense) => Just(true)],
        medium(opts),
        locality(),
        ownership(opts),
        prop_oneof![12 => Just(None), 1 => Just(Some("lora-a".to_string()))],
        prop_oneof![150 => Just(None), u32::from(opts.extras) => (0usize..4).prop_map(Some)],
    )
        .prop_map(
            |((parent, blocks), bs, shape, variant, medium, locality, ownership, lora, bytes_at)| {
                let mut token_ids: Vec<u32> = blocks
                    .iter()
                    .flat_map(|h| tokens_for(*h, variant, bs))
                    .collect();
                match shape {
                    TokenShape::Exact => {}
                    TokenShape::Short(n) => {
                        let keep = token_ids.len().saturating_sub(n);
                        token_ids.truncate(keep);
                    }
                    TokenShape::Long => token_ids.extend([7, 7, 7]),
                }
                let mut block_hashes: BlockHashes =
                    blocks.iter().map(|h| BlockHash::Int(*h)).collect();
                if let Some(i) = bytes_at {
                    if let Some(slot) = block_hashes.get_mut(i) {
                        let v = slot.as_u64();
                        *slot = BlockHash::Bytes(v.to_be_bytes().to_vec().into_boxed_slice());
                    }
                }
                KvEvent::BlockStored(BlockStored {
                    block_hashes,
                    parent_block_hash: parent.map(BlockHash::Int),
                    token_ids,
                    block_size: bs,
                    lora_id: None,
                    medium: medium.map(Label::from),
                    lora_name: lora.map(Label::from),
                    extra_keys: None,
                    group_idx: None,
                    kv_cache_spec_kind: None,
                    kv_cache_spec_sliding_window: None,
                    locality: locality.map(Label::from),
                    ownership: ownership.map(Label::from),
                })
            },
        )
}

fn removed(opts: Opts) -> impl Strategy<Value = KvEvent> {
    let shape = prop_oneof![
        2 => (any::<bool>(), 0usize..8, 1usize..=3).prop_map(|(a, start, len)| {
            let c: &[u64] = if a { &CHAIN_A } else { &CHAIN_B };
            let start = start % c.len();
            let end = (start + len).min(c.len());
            c[start..end].to_vec()
        }),
        2 => vec(hash(), 0..=3),
    ];
    (shape, medium(opts), locality(), ownership(opts)).prop_map(
        |(hashes, medium, locality, ownership)| {
            KvEvent::BlockRemoved(BlockRemoved {
                block_hashes: hashes.into_iter().map(BlockHash::Int).collect(),
                medium: medium.map(Label::from),
                group_idx: None,
                locality: locality.map(Label::from),
                ownership: ownership.map(Label::from),
            })
        },
    )
}

fn event(opts: Opts) -> impl Strategy<Value = KvEvent> {
    prop_oneof![
        12 => stored(opts),
        5 => removed(opts),
        1 + 2 * u32::from(opts.dense) => Just(KvEvent::AllBlocksCleared),
    ]
}

/// A batch from one of `workers` workers with up to `ranks` DP ranks.
fn batch(workers: u32, ranks: u32, opts: Opts) -> impl Strategy<Value = GenBatch> {
    (0..workers, 0..ranks, vec(event(opts), 1..=3)).prop_map(|(source, rank, events)| GenBatch {
        source,
        rank,
        events,
    })
}

/// Traces of 1..=`max_batches` batches from `workers` workers × `ranks` ranks.
pub fn trace(
    workers: u32,
    ranks: u32,
    max_batches: usize,
    opts: Opts,
) -> impl Strategy<Value = GenTrace> {
    vec(batch(workers, ranks, opts), 1..=max_batches)
}

/// A compact one-line rendering of an event (for reports).
pub fn show_event(ev: &KvEvent) -> String {
    let h = |b: &BlockHash| match b {
        BlockHash::Int(v) if *v > 1 << 32 => format!("{v:#x}"),
        BlockHash::Int(v) => v.to_string(),
        BlockHash::Bytes(b) => format!("bytes:{}", hex_of(b)),
    };
    let mut s = String::new();
    match ev {
        KvEvent::BlockStored(e) => {
            let _ = write!(
                s,
                "Stored[{}]({}) medium={}",
                e.parent_block_hash.as_ref().map(h).unwrap_or("-".into()),
                e.block_hashes.iter().map(h).collect::<Vec<_>>().join(","),
                e.medium.as_deref().unwrap_or("nil")
            );
            let n = e.block_hashes.len();
            let bs = e.block_size as usize;
            if e.block_size != KV_BLOCK_SIZE || e.token_ids.len() != n * bs {
                let _ = write!(
                    s,
                    " block_size={} tokens={}",
                    e.block_size,
                    e.token_ids.len()
                );
            }
            // Token content classes per block (shows LocalBlockHash equality).
            if bs > 0 && e.token_ids.len() >= bs {
                let classes: Vec<String> = e
                    .token_ids
                    .chunks(bs)
                    .map(|c| format!("t{}", c[0]))
                    .collect();
                let _ = write!(s, " content=[{}]", classes.join(","));
            }
            if let Some(l) = &e.locality {
                let _ = write!(s, " locality={l}");
            }
            if let Some(o) = &e.ownership {
                let _ = write!(s, " ownership={o}");
            }
            if let Some(l) = &e.lora_name {
                let _ = write!(s, " lora={l}");
            }
        }
        KvEvent::BlockRemoved(e) => {
            let _ = write!(
                s,
                "Removed({}) medium={}",
                e.block_hashes.iter().map(h).collect::<Vec<_>>().join(","),
                e.medium.as_deref().unwrap_or("nil")
            );
            if let Some(l) = &e.locality {
                let _ = write!(s, " locality={l}");
            }
            if let Some(o) = &e.ownership {
                let _ = write!(s, " ownership={o}");
            }
        }
        KvEvent::AllBlocksCleared => s.push_str("AllBlocksCleared"),
    }
    s
}

fn hex_of(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// Render a trace, one batch per line.
pub fn show_trace(t: &GenTrace) -> String {
    let mut s = String::new();
    for b in t {
        let evs: Vec<String> = b.events.iter().map(show_event).collect();
        let _ = writeln!(s, "  w{} r{}: {}", b.source, b.rank, evs.join(" ; "));
    }
    s
}
