//! One tiny hand-made trace per disagreement class found so far (see `MISMATCHES.md`). A, B
//! and C were model bugs, fixed: their traces must agree with the real crate. D and E are
//! differences between the worker-side index (what the model is, per `docs/consumers.md`) and a
//! router-side index shared by all workers: their traces must agree worker-side and are
//! asserted to DIFFER from the shared instantiation, so a change on either side is noticed.
//! The random tests in `differential.rs` find new classes.

mod f;

use kvscope_core::event::{label, BlockHashes, BlockRemoved, BlockStored, KvEvent};
use kvscope_core::hash::BlockHash;

use crate::support::diff::run;
use crate::support::gen::{show_trace, GenBatch, GenTrace, KV_BLOCK_SIZE};
use crate::support::real::Mode;

/// A one-block-per-hash store; `content[i]` picks block i's tokens (equal content = equal
/// Dynamo `LocalBlockHash`).
fn store(
    parent: Option<u64>,
    hashes: &[BlockHash],
    content: &[u32],
    medium: Option<&str>,
) -> KvEvent {
    KvEvent::BlockStored(BlockStored {
        block_hashes: hashes.into(),
        parent_block_hash: parent.map(BlockHash::Int),
        token_ids: content
            .iter()
            .flat_map(|c| (0..KV_BLOCK_SIZE).map(move |i| c * 1000 + i))
            .collect(),
        block_size: KV_BLOCK_SIZE,
        lora_id: None,
        medium: medium.map(label),
        lora_name: None,
        extra_keys: None,
        group_idx: None,
        kv_cache_spec_kind: None,
        kv_cache_spec_sliding_window: None,
        locality: None,
        ownership: None,
    })
}

fn ints(h: &[u64]) -> BlockHashes {
    h.iter().map(|v| BlockHash::Int(*v)).collect()
}

fn with_ownership(mut ev: KvEvent, owner: &str) -> KvEvent {
    if let KvEvent::BlockStored(s) = &mut ev {
        s.ownership = Some(label(owner));
    }
    ev
}

fn removed(hashes: &[u64], medium: Option<&str>) -> KvEvent {
    KvEvent::BlockRemoved(BlockRemoved {
        block_hashes: ints(hashes),
        medium: medium.map(label),
        group_idx: None,
        locality: None,
        ownership: None,
    })
}

fn b(source: u32, rank: u32, events: Vec<KvEvent>) -> GenBatch {
    GenBatch {
        source,
        rank,
        events,
    }
}

fn assert_agrees(t: GenTrace, mode: Mode) {
    let r = run(&t, mode);
    assert!(
        r.mismatches.is_empty(),
        "trace:\n{}{}",
        show_trace(&t),
        r.mismatches
            .iter()
            .map(|m| format!("{} at {:?}: {}", m.class, m.at, m.detail))
            .collect::<Vec<_>>()
            .join("\n")
    );
}

/// The model is the worker-side index: a trace of the shared-index classes must disagree with
/// the shared instantiation of the real crate.
fn assert_differs_from_shared(t: GenTrace) {
    let r = run(&t, Mode::Shared);
    assert!(
        !r.mismatches.is_empty(),
        "the shared index now agrees with the worker-side model on:\n{}",
        show_trace(&t)
    );
}

/// A1: vLLM's KVCR tier sets `ownership = "kvcr"`; `ZmqEventNormalizer::preprocess_with_reason`
/// filters it (`unsupported_ownership`) before any index.
#[test]
fn a1_ownership_kvcr_is_filtered() {
    let ev = with_ownership(store(None, &ints(&[1]), &[1], Some("STORAGE")), "kvcr");
    assert_agrees(vec![b(0, 0, vec![ev])], Mode::WorkerSide);
}

/// A2: any other `ownership` value is `unknown_ownership` (also filtered).
#[test]
fn a2_ownership_other_is_filtered() {
    let ev = with_ownership(store(None, &ints(&[1]), &[1], None), "custom");
    assert_agrees(vec![b(0, 0, vec![ev])], Mode::WorkerSide);
}

/// B: a bytes block hash makes `decode_event_batch` fail, and the listener drops the whole
/// batch, including the valid sibling events.
#[test]
fn b_bytes_hash_drops_whole_batch() {
    let ok = store(None, &ints(&[1]), &[1], Some("GPU"));
    let bad = store(
        Some(1),
        &[BlockHash::Bytes(
            2u64.to_be_bytes().to_vec().into_boxed_slice(),
        )],
        &[2],
        Some("GPU"),
    );
    assert_agrees(vec![b(0, 0, vec![ok, bad])], Mode::WorkerSide);
}

/// C: worker-side, each rank publisher's `LocalKvIndexer` has its own lower-tier indexers, so
/// another worker's (or rank's) edge `(parent, tokens) -> other hash` is no conflict.
#[test]
fn c_lower_tier_edges_are_per_publisher() {
    let t = vec![
        b(0, 0, vec![store(None, &ints(&[1]), &[1], Some("CPU"))]),
        b(1, 0, vec![store(None, &ints(&[2]), &[1], Some("CPU"))]),
    ];
    assert_agrees(t, Mode::WorkerSide);
}

/// C': the same across two DP ranks of one worker.
#[test]
fn c2_lower_tier_edges_are_per_rank() {
    let t = vec![
        b(0, 0, vec![store(None, &ints(&[1]), &[1], Some("CPU"))]),
        b(0, 1, vec![store(None, &ints(&[2]), &[1], Some("CPU"))]),
    ];
    assert_agrees(t, Mode::WorkerSide);
}

/// D (shared tree): worker 0 stores hash 12 with tokens T; worker 1 stores hash 3 with the
/// same tokens T at the root. The shared node keeps engine hash 12 in its `edge_index`, so
/// worker 1's child of 3 finds no parent position: `ParentBlockNotFound`.
#[test]
fn d_shared_node_keeps_first_engine_hash_not_modelled() {
    let t = vec![
        b(0, 0, vec![store(None, &ints(&[12]), &[3], Some("GPU"))]),
        b(1, 0, vec![store(None, &ints(&[3]), &[3], Some("GPU"))]),
        b(1, 0, vec![store(Some(3), &ints(&[4]), &[4], Some("GPU"))]),
    ];
    assert_agrees(t.clone(), Mode::WorkerSide);
    assert_differs_from_shared(t);
}

/// E (shared tree): worker 0's store splits the shared edge, so worker 1's removal of block 1
/// only uncovers its part of the split node; block 3 (in the child node) stays in worker 1's
/// lookup and still works as a parent.
#[test]
fn e_shared_split_limits_removal_cascade_not_modelled() {
    let t = vec![
        b(
            0,
            0,
            vec![store(None, &ints(&[1, 2, 9]), &[1, 2, 9], Some("GPU"))],
        ),
        b(
            1,
            0,
            vec![store(None, &ints(&[1, 2, 3]), &[1, 2, 3], Some("GPU"))],
        ),
        b(1, 0, vec![removed(&[1], Some("GPU"))]),
        b(1, 0, vec![store(Some(3), &ints(&[4]), &[4], Some("GPU"))]),
    ];
    assert_agrees(t.clone(), Mode::WorkerSide);
    assert_differs_from_shared(t);
}

/// F with identical content (no second node, so the clear reaches every node and leaves
/// nothing behind on either side). The content-dependent traces are in `f.rs`.
#[test]
fn f_double_store_clear_restore() {
    let t = vec![
        b(
            0,
            0,
            vec![store(None, &ints(&[1, 2, 3, 4]), &[1, 2, 3, 4], None)],
        ),
        b(
            0,
            0,
            vec![store(None, &ints(&[1, 2, 3, 4]), &[1, 2, 3, 4], None)],
        ),
        b(0, 0, vec![KvEvent::AllBlocksCleared]),
        b(0, 0, vec![store(None, &ints(&[1, 2, 9]), &[1, 2, 9], None)]),
    ];
    assert_agrees(t, Mode::WorkerSide);
}
