//! The wire benchmark's trace (`benches/wire.rs`, `cargo bench --bench wire`), shared with
//! `examples/decode_anchor.rs` so that the msgspec comparison runs on the same bytes: 1M
//! single-block `BlockStored` events (16 tokens), a parent chain per 64-block request, every
//! 4th event on CPU, 16 events per batch.

use kvscope_core::event::{BlockStored, KvEvent, KvEventBatch};
use kvscope_core::hash::BlockHash;
use smallvec::smallvec;

use super::splitmix;

/// Events per batch.
pub const EVENTS_PER_BATCH: usize = 16;

/// The benchmark batches: a parent chain per request of 64 blocks; every 4th event on CPU.
pub fn batches(n: usize) -> Vec<KvEventBatch> {
    let mut out = Vec::with_capacity(n / EVENTS_PER_BATCH + 1);
    let mut events = Vec::with_capacity(EVENTS_PER_BATCH);
    for i in 0..n as u64 {
        let parent = if i % 64 == 0 {
            None
        } else {
            Some(BlockHash::Int(splitmix(i - 1)))
        };
        let base = (i % 64) as u32 * 16;
        events.push(KvEvent::BlockStored(BlockStored {
            block_hashes: smallvec![BlockHash::Int(splitmix(i))],
            parent_block_hash: parent,
            token_ids: (base..base + 16).collect(),
            block_size: 16,
            medium: Some(if i % 4 == 3 { "CPU" } else { "GPU" }.into()),
            group_idx: Some(0),
            kv_cache_spec_kind: Some("full_attention".into()),
            ..Default::default()
        }));
        if events.len() == EVENTS_PER_BATCH || i + 1 == n as u64 {
            let step = out.len() as f64;
            out.push(KvEventBatch {
                ts: 1_700_000_000.0 + step,
                events: std::mem::take(&mut events),
                data_parallel_rank: Some(0),
            });
        }
    }
    out
}
