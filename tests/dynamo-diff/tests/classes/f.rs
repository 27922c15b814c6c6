//! Class F (MISMATCHES.md): `AllBlocksCleared` does not reach a node the rank still covers when
//! no lookup entry points to it. `RadixTree::remove_worker_dp_rank` (`indexer/radix_tree.rs`
//! l. 741–759) visits only the nodes the rank's lookup points to. Re-storing hashes with other
//! content (`LocalBlockHash`) builds a second node and moves the lookup entries to it
//! (`update_lookup_for_blocks`, l. 581–597), so the first node keeps the rank in
//! `full_edge_workers` through the clear. A later store whose tokens walk into that node picks
//! its coverage up again: `split_node` re-inserts the suffix's hashes for every full worker
//! (l. 564–570).

use dynamo_kv_router::indexer::RadixTree;
use dynamo_kv_router::protocols::{
    ExternalSequenceBlockHash, KvCacheEvent, KvCacheEventData, KvCacheStoreData,
    KvCacheStoredBlockData, LocalBlockHash, RouterEvent,
};
use kvscope_core::event::KvEvent;

use super::{assert_agrees, b, ints, removed, store};
use crate::support::real::Mode;

/// Offset of a second content class: `store`'s block content `c` and `c + V` have different
/// tokens, so different `LocalBlockHash`es (the generator's "variant" tokens, `t1500`).
const V: u32 = 500;

fn real_event(id: u64, data: KvCacheEventData) -> RouterEvent {
    RouterEvent::new(
        0,
        KvCacheEvent {
            event_id: id,
            data,
            dp_rank: 0,
        },
    )
}

fn real_store(blocks: &[(u64, u64)]) -> KvCacheEventData {
    KvCacheEventData::Stored(KvCacheStoreData {
        parent_hash: None,
        start_position: None,
        blocks: blocks
            .iter()
            .map(|&(h, t)| KvCacheStoredBlockData {
                block_hash: ExternalSequenceBlockHash(h),
                tokens_hash: LocalBlockHash(t),
                mm_extra_info: None,
            })
            .collect(),
    })
}

/// A dumped edge: `(parent, [(block hash, tokens hash)])`.
type Edge = (Option<u64>, Vec<(u64, u64)>);

/// The real tree's dump as edges of worker 0.
fn real_edges(t: &RadixTree) -> Vec<Edge> {
    let mut out: Vec<_> = t
        .dump_tree_as_events()
        .into_iter()
        .filter_map(|e| match e.event.data {
            KvCacheEventData::Stored(s) => Some((
                s.parent_hash.map(|p| p.0),
                s.blocks
                    .iter()
                    .map(|b| (b.block_hash.0, b.tokens_hash.0))
                    .collect(),
            )),
            _ => None,
        })
        .collect();
    out.sort();
    out
}

/// The mechanism, on the real `RadixTree` alone (no kvscope): the first edge survives the
/// clear, still covered by the worker, and the store that splits it brings 3 and 4 back into
/// the lookup. If a later crate fixes this, this test fails and the model must follow.
#[test]
fn f_real_clear_misses_a_node_no_lookup_entry_points_to() {
    let mut t = RadixTree::new();
    let first = [(1, 10), (2, 20), (3, 30), (4, 40)];
    let steps = [
        real_store(&first),
        real_store(&[(1, 15), (2, 25), (3, 35), (4, 45)]),
    ];
    for (i, d) in steps.into_iter().enumerate() {
        t.apply_event(real_event(i as u64, d)).expect("store");
    }
    assert_eq!(t.current_size(), 4, "the lookup moved to the second edge");
    t.apply_event(real_event(2, KvCacheEventData::Cleared))
        .expect("clear");
    eprintln!("after the clear: {:?}", real_edges(&t));
    assert_eq!(t.current_size(), 0, "the clear empties the lookup");
    assert_eq!(
        real_edges(&t),
        vec![(None, first.to_vec())],
        "the first edge is still in the tree, covered by worker 0"
    );
    t.apply_event(real_event(3, real_store(&[(1, 10), (2, 20), (9, 90)])))
        .expect("store");
    eprintln!("after store [1,2,9]: {:?}", real_edges(&t));
    assert_eq!(
        t.current_size(),
        5,
        "1, 2, 9 stored; 3, 4 back from the split"
    );
}

/// The first shrunk trace: store [1,2,3,4] (variant content), store [1,2,3,4], clear, store
/// [1,2,9] (variant): real and kvscope lookups hold 5 hashes (1, 2, 9 and 3, 4 of the edge
/// the clear missed).
#[test]
fn f1_restore_other_content_clear_share_prefix() {
    for (first, second) in [(V, 0), (0, V)] {
        let t = vec![
            b(
                0,
                0,
                vec![store(
                    None,
                    &ints(&[1, 2, 3, 4]),
                    &[1 + first, 2 + first, 3 + first, 4 + first],
                    None,
                )],
            ),
            b(
                0,
                0,
                vec![store(
                    None,
                    &ints(&[1, 2, 3, 4]),
                    &[1 + second, 2 + second, 3 + second, 4 + second],
                    None,
                )],
            ),
            b(0, 0, vec![KvEvent::AllBlocksCleared]),
            b(
                0,
                0,
                vec![store(
                    None,
                    &ints(&[1, 2, 9]),
                    &[1 + first, 2 + first, 9],
                    Some("GPU"),
                )],
            ),
        ];
        assert_agrees(t, Mode::WorkerSide);
    }
}

/// The second shrunk trace: store [1,2,9] twice with different content, then one batch
/// `[AllBlocksCleared, store [1,2,3,4] (content of the first store)]`: 5 hashes (9 is back).
#[test]
fn f2_clear_and_restore_in_one_batch() {
    let t = vec![
        b(
            0,
            0,
            vec![store(None, &ints(&[1, 2, 9]), &[1 + V, 2 + V, 9 + V], None)],
        ),
        b(0, 0, vec![store(None, &ints(&[1, 2, 9]), &[1, 2, 9], None)]),
        b(
            0,
            0,
            vec![
                KvEvent::AllBlocksCleared,
                store(None, &ints(&[1, 2, 3, 4]), &[1 + V, 2 + V, 3, 4], None),
            ],
        ),
        // 9 is back in the lookup: a child of it is applied on both sides.
        b(0, 0, vec![store(Some(9), &ints(&[10]), &[10], None)]),
    ];
    assert_agrees(t, Mode::WorkerSide);
}

/// Variants: only the first block's content differs (the whole first edge is unreferenced),
/// only the last one differs (the stale suffix hangs under a node the clear visits, so it is
/// unlinked with it: nothing survives), a store whose parent lies inside the stale edge (split
/// at the parent), a removal instead of the clear, and another rank of the same worker.
#[test]
fn f3_variants() {
    let chain = ints(&[1, 2, 3, 4]);
    let traces = vec![
        // First block only: [v1,2,3,4] then [1,2,3,4]; clear; [1,2,9].
        vec![
            b(0, 0, vec![store(None, &chain, &[1 + V, 2, 3, 4], None)]),
            b(0, 0, vec![store(None, &chain, &[1, 2, 3, 4], None)]),
            b(0, 0, vec![KvEvent::AllBlocksCleared]),
            b(
                0,
                0,
                vec![store(None, &ints(&[1, 2, 9]), &[1 + V, 2, 9], None)],
            ),
            b(0, 0, vec![store(Some(4), &ints(&[5]), &[5], None)]),
        ],
        // Last block only: the stale [4] is a child of a visited node.
        vec![
            b(0, 0, vec![store(None, &chain, &[1, 2, 3, 4], None)]),
            b(0, 0, vec![store(None, &chain, &[1, 2, 3, 4 + V], None)]),
            b(0, 0, vec![KvEvent::AllBlocksCleared]),
            b(0, 0, vec![store(None, &ints(&[1, 2, 3]), &[1, 2, 3], None)]),
            b(0, 0, vec![store(Some(3), &ints(&[9]), &[9], None)]),
            b(0, 0, vec![store(Some(4), &ints(&[5]), &[5], None)]),
        ],
        // After the clear, a prefix of the stale edge (`cover_prefix_for_worker` is a no-op:
        // the rank is still full), then a child of 1: the parent lies inside the stale edge,
        // `apply_stored` splits there (l. 364–366) and 2, 3, 4 are back.
        vec![
            b(0, 0, vec![store(None, &chain, &[1, 2, 3, 4], None)]),
            b(0, 0, vec![store(None, &chain, &[1 + V, 2, 3, 4], None)]),
            b(0, 0, vec![KvEvent::AllBlocksCleared]),
            b(0, 0, vec![store(None, &ints(&[1]), &[1], None)]),
            b(0, 0, vec![store(Some(4), &ints(&[5]), &[5], None)]),
            b(0, 0, vec![store(Some(1), &ints(&[5]), &[5], None)]),
            b(0, 0, vec![store(Some(4), &ints(&[6]), &[6], None)]),
            b(0, 0, vec![store(None, &chain, &[1, 2, 3, 4], None)]),
        ],
        // Without a clear: a removal also reaches only the lookup's node.
        vec![
            b(0, 0, vec![store(None, &chain, &[1, 2, 3, 4], None)]),
            b(0, 0, vec![store(None, &chain, &[1 + V, 2, 3, 4], None)]),
            b(0, 0, vec![removed(&[1, 2, 3, 4], None)]),
            b(0, 0, vec![store(None, &ints(&[1, 2, 9]), &[1, 2, 9], None)]),
            b(0, 0, vec![store(Some(4), &ints(&[5]), &[5], None)]),
        ],
        // Two ranks: rank 1's clear leaves rank 0's tree alone; rank 0's clear misses its
        // stale edge.
        vec![
            b(0, 0, vec![store(None, &chain, &[1, 2, 3, 4], None)]),
            b(0, 1, vec![store(None, &chain, &[1, 2, 3, 4], None)]),
            b(0, 0, vec![store(None, &chain, &[1 + V, 2, 3, 4], None)]),
            b(0, 1, vec![KvEvent::AllBlocksCleared]),
            b(0, 0, vec![KvEvent::AllBlocksCleared]),
            b(0, 0, vec![store(None, &ints(&[1, 2, 9]), &[1, 2, 9], None)]),
            b(0, 1, vec![store(None, &ints(&[1, 2, 9]), &[1, 2, 9], None)]),
            b(0, 0, vec![store(Some(4), &ints(&[5]), &[5], None)]),
        ],
    ];
    for t in traces {
        assert_agrees(t, Mode::WorkerSide);
    }
}
