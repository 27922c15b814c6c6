//! Discriminating scenarios (traces on which the router models disagree, `docs/consumers.md`)
//! and ordering tests.

use super::*;
use crate::consumers::testkit::{batch, h, removed, stored, trace};
use crate::consumers::ConsumerKind::{Dynamo, Ideal, Llmd, Sglang};
use crate::consumers::VerdictKind::*;
use crate::event::KvEvent;
use crate::trace::{SeqGap, TraceRecord};

mod findings;

const CPU: Option<&str> = Some("CPU");
const GPU: Option<&str> = Some("GPU");

fn run(t: &Trace) -> Analysis {
    analyze(t, &AnalysisConfig::default())
}

fn v(a: &Analysis, k: ConsumerKind, i: usize) -> VerdictKind {
    a.verdict_kind(k, i).expect("event exists")
}

/// Every consumer's per-event verdicts, streamed.
fn verdicts(t: &Trace, config: &AnalysisConfig) -> Vec<(usize, ConsumerKind, EventVerdict)> {
    let mut out = Vec::new();
    analyze_with(t, config, &mut |i, k, v, _| out.push((i, k, v.clone())));
    out
}

fn verdict_of(
    all: &[(usize, ConsumerKind, EventVerdict)],
    i: usize,
    k: ConsumerKind,
) -> EventVerdict {
    all.iter()
        .find(|(e, c, _)| *e == i && *c == k)
        .map(|x| x.2.clone())
        .expect("verdict")
}

#[test]
fn scenario1_offload_child_first_parent_gpu_mapping_evicted() {
    // G, P stored on GPU; P evicted from GPU; one CPU job announces C before P; then D under C.
    let t = trace(vec![
        batch(
            "a",
            0,
            vec![
                stored(&[10], None, GPU, 16),
                stored(&[11], Some(10), GPU, 16),
            ],
        ),
        batch("a", 1, vec![removed(&[11], GPU)]),
        batch(
            "a",
            2,
            vec![
                stored(&[12], Some(11), CPU, 16),
                stored(&[11], Some(10), CPU, 16),
            ],
        ),
        batch("a", 3, vec![stored(&[13], Some(12), CPU, 16)]),
    ]);
    let a = run(&t);
    // llm-d: C dropped (its parent's mapping is gone), P re-mapped, D cascades.
    assert_eq!(v(&a, Llmd, 3), DroppedOrphan);
    assert_eq!(v(&a, Llmd, 4), Applied);
    assert_eq!(v(&a, Llmd, 5), DroppedOrphan);
    // Dynamo lower tier: order-insensitive edge store.
    assert_eq!(v(&a, Dynamo, 3), Applied);
    assert_eq!(v(&a, Dynamo, 4), Applied);
    assert_eq!(v(&a, Dynamo, 5), Applied);
    // Ideal: C held, then replayed when P arrives.
    assert_eq!(v(&a, Ideal, 3), Replayed);
    assert_eq!(v(&a, Ideal, 5), Applied);
    // SGLang: P's node was pruned on removal, so C attaches to the root.
    assert_eq!(v(&a, Sglang, 3), Misrooted);
    // One within-job violation (inferred job), deny by default; D's cascade under llm-d is 1.
    assert_eq!(a.count(Rule::ChildBeforeParentInJob), 1);
    let f = a
        .findings
        .iter()
        .find(|f| f.rule == Rule::ChildBeforeParentInJob)
        .unwrap();
    assert!(f.inferred);
    assert_eq!(
        (f.event, f.parent, f.related_event),
        (3, Some(h(11)), Some(4))
    );
    assert_eq!(f.cascade.get("llmd"), Some(&1));
    assert_eq!(f.cascade.get("dynamo"), Some(&0));
    assert!(a.has_deny());
    let l = a.loss(Llmd).unwrap();
    assert_eq!((l.events_lost, l.blocks_lost), (2, 2));
    assert_eq!(l.unreachable_prefixes.len(), 1);
    assert_eq!(l.unreachable_prefixes[0].events, 2);
    assert_eq!(a.loss(Ideal).unwrap().blocks_lost, 0);
    assert_eq!(a.loss(Dynamo).unwrap().blocks_lost, 0);
}

#[test]
fn scenario2_parent_mapping_still_present() {
    let t = trace(vec![
        batch(
            "a",
            0,
            vec![
                stored(&[10], None, GPU, 16),
                stored(&[11], Some(10), GPU, 16),
            ],
        ),
        batch(
            "a",
            1,
            vec![
                stored(&[12], Some(11), CPU, 16),
                stored(&[11], Some(10), CPU, 16),
            ],
        ),
    ]);
    let a = run(&t);
    assert_eq!(
        v(&a, Llmd, 2),
        Applied,
        "global map resolves P through its GPU mapping"
    );
    assert_eq!(v(&a, Dynamo, 2), Applied);
    assert_eq!(v(&a, Ideal, 2), Applied);
    assert_eq!(v(&a, Sglang, 2), Applied);
    // The order inside the CPU job is still wrong.
    assert_eq!(a.count(Rule::ChildBeforeParentInJob), 1);
}

#[test]
fn scenario3_parent_only_on_another_pod() {
    let t = trace(vec![
        batch("a", 0, vec![stored(&[10], None, GPU, 16)]),
        batch("b", 0, vec![stored(&[11], Some(10), GPU, 16)]),
    ]);
    let a = run(&t);
    assert_eq!(v(&a, Llmd, 1), Applied);
    assert_eq!(v(&a, Dynamo, 1), DroppedOrphan);
    let all = verdicts(&t, &AnalysisConfig::default());
    let d = verdict_of(&all, 1, Dynamo);
    assert_eq!(d.status.as_deref(), Some("parent_block_not_found"));
    assert_eq!(d.missing_parent, Some(h(10)));
    assert_eq!(v(&a, Sglang, 1), Applied, "attaches under A's node");
    assert_eq!(v(&a, Ideal, 1), Applied);
    // Not an ordering violation: the parent came first (from another pod).
    assert!(a.violations.is_empty());
    assert!(!a.has_deny());
}

#[test]
fn scenario4_child_of_cleared_block() {
    let t = trace(vec![
        batch("a", 0, vec![stored(&[10], None, GPU, 16)]),
        batch("a", 1, vec![KvEvent::AllBlocksCleared]),
        batch("a", 2, vec![stored(&[11], Some(10), GPU, 16)]),
    ]);
    let a = run(&t);
    assert_eq!(v(&a, Llmd, 1), Cleared);
    assert_eq!(
        v(&a, Llmd, 2),
        Applied,
        "llm-d keeps engine mappings across a clear"
    );
    assert_eq!(v(&a, Dynamo, 2), DroppedOrphan);
    assert_eq!(v(&a, Sglang, 2), Misrooted);
    assert_eq!(
        v(&a, Ideal, 2),
        Pending,
        "the ideal router holds it until 10 is stored again"
    );
}

#[test]
fn scenario5_router_joins_mid_stream() {
    // The engine had stored 10 before the router subscribed: the first batch seen is seq 5.
    let t = trace(vec![
        batch("a", 5, vec![stored(&[11], Some(10), GPU, 16)]),
        batch("a", 6, vec![stored(&[12], Some(11), GPU, 16)]),
    ]);
    let a = run(&t);
    for k in [Llmd, Dynamo] {
        assert_eq!(v(&a, k, 0), DroppedOrphan);
        assert_eq!(v(&a, k, 1), DroppedOrphan, "{k:?}: cascade");
        assert_eq!(
            a.loss(k).unwrap().unreachable_prefixes.len(),
            1,
            "{k:?} {:?}",
            a.loss(k)
        );
    }
    assert_eq!(v(&a, Ideal, 0), Pending);
    assert_eq!(
        a.loss(Ideal).unwrap().pending_at_end,
        2,
        "both wait (12 waits on the pending 11)"
    );
    assert_eq!(a.count(Rule::UnknownParent), 1);
    assert_eq!(
        a.count(Rule::SeqGap),
        0,
        "a stream joined mid-way is not a gap"
    );
    let f = a
        .findings
        .iter()
        .find(|f| f.rule == Rule::UnknownParent)
        .unwrap();
    assert_eq!(f.cascade.get("llmd"), Some(&1));
}

#[test]
fn scenario6_multi_block_unknown_parent() {
    let t = trace(vec![batch(
        "a",
        0,
        vec![stored(&[1, 2, 3], Some(99), GPU, 16)],
    )]);
    let all = verdicts(&t, &AnalysisConfig::default());
    for k in [Llmd, Dynamo] {
        let e = verdict_of(&all, 0, k);
        assert_eq!(e.verdict, DroppedOrphan);
        assert_eq!(e.missing_parent, Some(h(99)));
        assert_eq!(
            e.blocks.iter().map(|b| b.verdict).collect::<Vec<_>>(),
            vec![DroppedOrphan; 3]
        );
    }
    let s = verdict_of(&all, 0, Sglang);
    assert_eq!(s.verdict, Misrooted);
    assert_eq!(s.blocks.len(), 3);
    assert_eq!(verdict_of(&all, 0, Ideal).verdict, Pending);
    let a = run(&t);
    assert_eq!(a.loss(Llmd).unwrap().blocks_lost, 3);
    assert_eq!(a.loss(Sglang).unwrap().blocks_lost, 3);
}

#[test]
fn scenario7_engine_block_smaller_than_canonical() {
    let t = trace(vec![batch(
        "a",
        0,
        vec![
            stored(&[1], None, GPU, 16),
            stored(&[2], Some(1), GPU, 16),
            stored(&[3], Some(2), GPU, 16),
        ],
    )]);
    let mut config = AnalysisConfig::default();
    config.consumer_config.llmd_canonical_block_size = Some(64);
    let all = verdicts(&t, &config);
    let first = verdict_of(&all, 0, Llmd);
    assert_eq!(
        (first.verdict, first.reason.as_deref()),
        (Ignored, Some("sub_canonical"))
    );
    assert_eq!(verdict_of(&all, 1, Llmd).verdict, DroppedOrphan);
    assert_eq!(verdict_of(&all, 2, Llmd).verdict, DroppedOrphan);
    assert_eq!(
        verdict_of(&all, 1, Dynamo).verdict,
        Applied,
        "Dynamo's block size matches"
    );
    // Dynamo with a different kv_block_size truncates every block.
    config.consumer_config.dynamo_kv_block_size = Some(32);
    let all = verdicts(&t, &config);
    let d = verdict_of(&all, 0, Dynamo);
    assert_eq!(
        (d.verdict, d.reason.as_deref()),
        (Truncated, Some("block_size_mismatch"))
    );
    assert_eq!(d.blocks[0].verdict, Truncated);
    // ... after which the next store's parent is unknown.
    assert_eq!(verdict_of(&all, 1, Dynamo).verdict, DroppedOrphan);
}

#[test]
fn scenario8_seq_gap_and_gap_record() {
    let mut records = vec![
        batch("a", 0, vec![stored(&[1], None, GPU, 16)]),
        // seq 1 (storing 2 under 1) was lost.
        batch("a", 2, vec![stored(&[3], Some(2), GPU, 16)]),
    ];
    records.push(TraceRecord::Gap(SeqGap {
        source: "a".into(),
        dp_rank: Some(0),
        expected_seq: 3,
        received_seq: 5,
        recovered: false,
    }));
    records.push(batch("a", 5, vec![stored(&[4], Some(3), GPU, 16)]));
    let t = trace(records);
    let a = run(&t);
    assert_eq!(
        a.count(Rule::SeqGap),
        3,
        "two holes in seq numbers plus one gap record"
    );
    assert!(a
        .findings
        .iter()
        .filter(|f| f.rule == Rule::SeqGap)
        .all(|f| f.level == Level::Deny));
    assert!(a.has_deny());
    assert_eq!(v(&a, Llmd, 1), DroppedOrphan);
    assert_eq!(v(&a, Llmd, 2), DroppedOrphan);
    assert_eq!(v(&a, Dynamo, 1), DroppedOrphan);
}

#[test]
fn dynamo_removal_drops_later_blocks_of_the_chain_and_reports_unknown() {
    let t = trace(vec![
        batch("a", 0, vec![stored(&[1, 2, 3], None, GPU, 16)]),
        batch("a", 1, vec![removed(&[77, 2], GPU)]),
        batch("a", 2, vec![stored(&[4], Some(3), GPU, 16)]),
        batch("a", 3, vec![stored(&[5], Some(1), GPU, 16)]),
    ]);
    let all = verdicts(&t, &AnalysisConfig::default());
    let r = verdict_of(&all, 1, Dynamo);
    assert_eq!(r.status.as_deref(), Some("block_not_found"));
    assert_eq!(r.verdict, Removed, "the known hash is still removed");
    assert_eq!(r.blocks[0].verdict, RemoveUnknown);
    assert_eq!(r.blocks[1].verdict, Removed);
    assert!(r
        .blocks
        .iter()
        .any(|b| b.hash == h(3) && b.reason.as_deref() == Some("dropped_with_chain")));
    assert_eq!(
        verdict_of(&all, 2, Dynamo).verdict,
        DroppedOrphan,
        "3 went with 2"
    );
    assert_eq!(
        verdict_of(&all, 3, Dynamo).verdict,
        Applied,
        "1 is still covered"
    );
    // llm-d evicts per hash only: 3 keeps its mapping.
    assert_eq!(verdict_of(&all, 2, Llmd).verdict, Applied);
    assert_eq!(verdict_of(&all, 1, Llmd).blocks[0].verdict, RemoveUnknown);
}

#[test]
fn dynamo_duplicate_or_self_referencing_hashes_are_a_noop() {
    let t = trace(vec![batch(
        "a",
        0,
        vec![
            stored(&[1, 1], None, GPU, 16),
            stored(&[2], Some(2), GPU, 16),
            stored(&[3], Some(1), GPU, 16),
        ],
    )]);
    let all = verdicts(&t, &AnalysisConfig::default());
    assert_eq!(verdict_of(&all, 0, Dynamo).verdict, Ignored);
    assert_eq!(verdict_of(&all, 1, Dynamo).verdict, Ignored);
    assert_eq!(
        verdict_of(&all, 2, Dynamo).verdict,
        DroppedOrphan,
        "1 was never indexed"
    );
}

#[test]
fn dynamo_clear_scope_is_the_rank_unless_configured() {
    let mut b0 = batch("a", 0, vec![stored(&[1], None, GPU, 16)]);
    let mut b1 = batch("a", 0, vec![KvEvent::AllBlocksCleared]);
    let b2 = batch("a", 1, vec![stored(&[2], Some(1), GPU, 16)]);
    if let TraceRecord::Batch(b) = &mut b1 {
        b.dp_rank = Some(1);
    }
    if let TraceRecord::Batch(b) = &mut b0 {
        b.dp_rank = Some(0);
    }
    let t = trace(vec![b0, b1, b2]);
    let mut config = AnalysisConfig {
        consumers: vec![Dynamo],
        ..AnalysisConfig::default()
    };
    assert_eq!(analyze(&t, &config).verdict_kind(Dynamo, 2), Some(Applied));
    config.consumer_config.dynamo_clear_all_ranks = true;
    assert_eq!(
        analyze(&t, &config).verdict_kind(Dynamo, 2),
        Some(DroppedOrphan)
    );
}

#[test]
fn llmd_refcounted_removals_and_tier_updates() {
    let mut tokenless = stored(&[2], Some(1), CPU, 0);
    if let KvEvent::BlockStored(e) = &mut tokenless {
        e.token_ids.clear();
    }
    let t = trace(vec![batch(
        "a",
        0,
        vec![
            stored(&[1], None, GPU, 16),
            stored(&[1], None, GPU, 16),
            removed(&[1], GPU),
            stored(&[2], Some(1), GPU, 16),
            tokenless,
            stored(&[9], None, CPU, 0),
        ],
    )]);
    let all = verdicts(
        &t,
        &AnalysisConfig {
            consumers: vec![Llmd],
            ..AnalysisConfig::default()
        },
    );
    let r = verdict_of(&all, 2, Llmd);
    assert_eq!(
        r.blocks[0].verdict, Ignored,
        "one store still references it"
    );
    assert_eq!(verdict_of(&all, 3, Llmd).verdict, Applied);
    let tu = verdict_of(&all, 4, Llmd);
    assert_eq!(
        (tu.verdict, tu.reason.as_deref()),
        (Applied, Some("tier_update"))
    );
    let unknown = verdict_of(&all, 5, Llmd);
    assert_eq!(
        unknown.blocks[0].reason.as_deref(),
        Some("tier_update_unknown_key")
    );
}

#[test]
fn ideal_buffer_overflow_drops() {
    let t = trace(vec![batch(
        "a",
        0,
        vec![
            stored(&[2], Some(1), GPU, 16),
            stored(&[3], Some(1), GPU, 16),
            stored(&[1], None, GPU, 16),
        ],
    )]);
    let mut config = AnalysisConfig {
        consumers: vec![Ideal],
        ..AnalysisConfig::default()
    };
    config.consumer_config.ideal_pending_limit = 1;
    let a = analyze(&t, &config);
    assert_eq!(a.verdict_kind(Ideal, 0), Some(Replayed));
    assert_eq!(a.verdict_kind(Ideal, 1), Some(DroppedOrphan));
}
