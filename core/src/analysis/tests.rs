//! Discriminating scenarios (traces on which the router models disagree, `docs/consumers.md`)
//! and ordering tests.

use super::*;
use crate::consumers::testkit::{batch, batch_with_jobs, h, removed, stored, trace};
use crate::consumers::ConsumerKind::{Dynamo, Ideal, Llmd, Sglang};
use crate::consumers::VerdictKind::*;
use crate::event::KvEvent;
use crate::trace::{ProvenanceKind, SeqGap, TraceRecord};

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

fn offload_trace(legacy: bool, with_provenance: bool) -> Trace {
    // Two requests, each a chain of 4 blocks stored on GPU then offloaded by one CPU job
    // each. Legacy order announces the job's blocks in a scrambled order.
    let mut records = Vec::new();
    let mut seq = 0;
    for r in 0..2u64 {
        let base = 100 * (r + 1);
        let chain: Vec<u64> = (0..4).map(|i| base + i).collect();
        let gpu: Vec<KvEvent> = vec![stored(&chain, None, GPU, 16)];
        records.push(batch("a", seq, gpu));
        seq += 1;
        let mut order: Vec<usize> = (0..4).collect();
        if legacy {
            order = vec![2, 0, 3, 1];
        }
        let events: Vec<KvEvent> = order
            .iter()
            .map(|&i| {
                stored(
                    &[chain[i]],
                    if i == 0 { None } else { Some(chain[i - 1]) },
                    CPU,
                    16,
                )
            })
            .collect();
        let jobs: Vec<(&str, ProvenanceKind, Option<u64>)> = order
            .iter()
            .map(|_| ("CPU", ProvenanceKind::OffloadStore, Some(r)))
            .collect();
        records.push(if with_provenance {
            batch_with_jobs("a", seq, events, &jobs)
        } else {
            batch("a", seq, events)
        });
        seq += 1;
    }
    trace(records)
}

#[test]
fn legacy_vs_fixed_within_job_order() {
    for prov in [false, true] {
        let fixed = run(&offload_trace(false, prov));
        let legacy = run(&offload_trace(true, prov));
        assert_eq!(fixed.count(Rule::ChildBeforeParentInJob), 0);
        assert!(fixed.violations.is_empty());
        assert!(!fixed.has_deny(), "a correct multi-tier trace passes");
        // Order [2,0,3,1]: 2 waits for 1 and 3 waits for 2? No: 3's parent 2 is present
        // when 3 arrives. Waiting: 2 (parent 1, arrives last). 1's parent 0 came before it.
        assert_eq!(
            legacy.count(Rule::ChildBeforeParentInJob),
            2,
            "one per request job"
        );
        assert!(legacy
            .findings
            .iter()
            .filter(|f| f.rule == Rule::ChildBeforeParentInJob)
            .all(|f| f.inferred != prov));
        let d = compare(&legacy, &fixed);
        assert_eq!(d.disappeared.len(), 2);
        assert!(d.appeared.is_empty());
        let rd = d
            .rules
            .iter()
            .find(|r| r.rule == Rule::ChildBeforeParentInJob)
            .unwrap();
        assert_eq!((rd.a, rd.b), (2, 0));
        // llm-d resolves every parent through the GPU mapping here, so nothing is lost.
        let ll = d.losses.iter().find(|l| l.consumer == "llmd").unwrap();
        assert_eq!((ll.a_blocks_lost, ll.b_blocks_lost), (0, 0));
    }
}

#[test]
fn legacy_loses_under_llmd_when_gpu_evicted_and_fixed_does_not() {
    let build = |legacy: bool| {
        let chain = [1u64, 2, 3];
        let mut order = vec![0usize, 1, 2];
        if legacy {
            order = vec![2, 1, 0];
        }
        let cpu: Vec<KvEvent> = order
            .iter()
            .map(|&i| {
                stored(
                    &[chain[i]],
                    if i == 0 { None } else { Some(chain[i - 1]) },
                    CPU,
                    16,
                )
            })
            .collect();
        trace(vec![
            batch("a", 0, vec![stored(&chain, None, GPU, 16)]),
            batch("a", 1, vec![removed(&chain, GPU)]),
            batch("a", 2, cpu),
        ])
    };
    let (legacy, fixed) = (run(&build(true)), run(&build(false)));
    assert_eq!(legacy.loss(Llmd).unwrap().blocks_lost, 2);
    assert_eq!(fixed.loss(Llmd).unwrap().blocks_lost, 0);
    let d = compare(&legacy, &fixed);
    let ll = d.losses.iter().find(|l| l.consumer == "llmd").unwrap();
    assert_eq!(ll.disappeared, vec![h(2), h(3)]);
    assert_eq!(legacy.count(Rule::ChildBeforeParentInJob), 2);
}

#[test]
fn cross_tier_cross_source_and_promotion_classes() {
    let t = trace(vec![
        // Child on CPU before its parent ever exists on this source: parent later on GPU.
        batch("a", 0, vec![stored(&[2], Some(1), CPU, 16)]),
        batch("a", 1, vec![stored(&[1], None, GPU, 16)]),
        // Child on pod b before the parent exists anywhere; parent later from pod c.
        batch("b", 0, vec![stored(&[6], Some(5), GPU, 16)]),
        batch("c", 0, vec![stored(&[5], None, GPU, 16)]),
    ]);
    let a = run(&t);
    assert_eq!(a.count(Rule::CrossTierReorder), 1);
    assert_eq!(a.count(Rule::CrossSourceReorder), 1);
    assert!(!a.has_deny());
    let t = trace(vec![
        batch_with_jobs(
            "a",
            0,
            vec![stored(&[2], Some(1), CPU, 16)],
            &[("CPU", ProvenanceKind::Promotion, Some(7))],
        ),
        batch_with_jobs(
            "a",
            1,
            vec![stored(&[1], None, CPU, 16)],
            &[("CPU", ProvenanceKind::OffloadStore, Some(8))],
        ),
    ]);
    assert_eq!(run(&t).count(Rule::PromotionReorder), 1);
}

#[test]
fn rule_levels_and_double_store_remove_unknown() {
    let t = trace(vec![batch(
        "a",
        0,
        vec![
            stored(&[1], None, GPU, 16),
            stored(&[1], None, GPU, 16),
            removed(&[5], GPU),
        ],
    )]);
    let a = run(&t);
    assert_eq!(a.count(Rule::DoubleStore), 1);
    assert_eq!(a.count(Rule::RemoveUnknown), 1);
    assert!(!a.has_deny());
    let mut config = AnalysisConfig::default();
    config.rules.apply_override("remove-unknown=deny").unwrap();
    config.rules.apply_override("double-store=allow").unwrap();
    let a = analyze(&t, &config);
    assert!(a.has_deny());
    assert_eq!(a.count(Rule::DoubleStore), 0);
    assert!(config.rules.apply_override("nope=deny").is_err());
    assert!(config.rules.apply_override("seq-gap=loud").is_err());
}

/// Children announced before their parent within the same provenance job (an independent
/// count from the trace alone).
fn expected_in_job(t: &Trace) -> usize {
    let mut count = 0;
    for b in t.batches() {
        let Some(prov) = &b.provenance else { continue };
        for (i, (e, p)) in b.events.iter().zip(prov).enumerate() {
            let (KvEvent::BlockStored(s), Some(job)) = (e, p.job_id) else {
                continue;
            };
            let Some(parent) = &s.parent_block_hash else {
                continue;
            };
            let later = b.events.iter().zip(prov).skip(i + 1).any(|(e2, p2)| {
                p2.job_id == Some(job)
                    && p2.tier == p.tier
                    && matches!(e2, KvEvent::BlockStored(s2) if s2.block_hashes.contains(parent))
            });
            if later {
                count += 1;
            }
        }
    }
    count
}

#[test]
fn builtin_scenarios_fixed_has_no_in_job_violations_and_legacy_the_expected_ones() {
    use crate::order::OrderMode;
    use crate::scenario::{builtin::BUILTINS, Scenario};
    let mut legacy_total = 0;
    for b in BUILTINS {
        let mut s = Scenario::from_json(b.json).unwrap();
        s.order = OrderMode::Fixed;
        let fixed = crate::sim::simulate(&s).unwrap();
        let a = run(&fixed);
        assert_eq!(a.count(Rule::ChildBeforeParentInJob), 0, "{}", b.name);
        assert_eq!(expected_in_job(&fixed), 0, "{}", b.name);
        assert!(
            !a.has_deny(),
            "{}: {:#?}",
            b.name,
            a.findings
                .iter()
                .filter(|f| f.level == Level::Deny)
                .collect::<Vec<_>>()
        );
        s.order = OrderMode::CPython {
            python_hash_seed: 0,
        };
        let legacy = crate::sim::simulate(&s).unwrap();
        let a = run(&legacy);
        let want = expected_in_job(&legacy);
        assert_eq!(a.count(Rule::ChildBeforeParentInJob), want, "{}", b.name);
        assert!(a
            .findings
            .iter()
            .filter(|f| f.rule == Rule::ChildBeforeParentInJob)
            .all(|f| !f.inferred));
        legacy_total += want;
    }
    assert!(
        legacy_total > 0,
        "some built-in scenario must reorder under the legacy order"
    );
}

/// Router block sizes default to `auto`: each source's engine block size (first
/// token-carrying `BlockStored`), so a correct trace with 4-token blocks loses nothing;
/// explicit settings override it, and sources with different engine sizes each get theirs.
#[test]
fn block_sizes_auto_follow_the_engine_per_source() {
    let t = trace(vec![
        batch(
            "a",
            0,
            vec![stored(&[1], None, GPU, 4), stored(&[2], Some(1), GPU, 4)],
        ),
        batch(
            "b",
            0,
            vec![stored(&[7], None, GPU, 8), stored(&[8], Some(7), GPU, 8)],
        ),
    ]);
    let config = AnalysisConfig::default();
    let a = analyze(&t, &config);
    assert_eq!(a.index.engine_block_sizes, vec![Some(4), Some(8)]);
    let all = verdicts(&t, &config);
    for i in 0..4 {
        assert_eq!(verdict_of(&all, i, Llmd).verdict, Applied, "llmd event {i}");
        assert_eq!(
            verdict_of(&all, i, Dynamo).verdict,
            Applied,
            "dynamo event {i}"
        );
    }
    // Fixed 16 (a router configured for another block size): llm-d ignores the sub-canonical
    // events and orphans their children, Dynamo truncates.
    let mut config = AnalysisConfig::default();
    config.consumer_config.llmd_canonical_block_size = Some(16);
    config.consumer_config.dynamo_kv_block_size = Some(16);
    let all = verdicts(&t, &config);
    assert_eq!(
        verdict_of(&all, 0, Llmd).reason.as_deref(),
        Some("sub_canonical")
    );
    assert_eq!(verdict_of(&all, 1, Llmd).verdict, DroppedOrphan);
    assert_eq!(
        verdict_of(&all, 2, Dynamo).reason.as_deref(),
        Some("block_size_mismatch")
    );
}

/// A gap that capture recovered over the replay socket (`recovered: true`, the batches follow
/// the record) is `seq-gap-recovered` (warn), not a deny-level `seq-gap`; an unrecovered gap
/// record and a restart stay `seq-gap` (deny).
#[test]
fn recovered_gap_is_not_deny() {
    let gap = |expected_seq, received_seq, recovered| {
        TraceRecord::Gap(SeqGap {
            source: "a".into(),
            dp_rank: Some(0),
            expected_seq,
            received_seq,
            recovered,
        })
    };
    // Capture's shape: live seq 0, live seq 3 arrives, batches 1..3 recovered and written
    // after a `recovered: true` record, then the live batch 3.
    let recovered = trace(vec![
        batch("a", 0, vec![stored(&[1], None, GPU, 16)]),
        gap(1, 3, true),
        batch("a", 1, vec![stored(&[2], Some(1), GPU, 16)]),
        batch("a", 2, vec![stored(&[3], Some(2), GPU, 16)]),
        batch("a", 3, vec![stored(&[4], Some(3), GPU, 16)]),
    ]);
    let a = run(&recovered);
    assert_eq!(a.count(Rule::SeqGap), 0);
    assert_eq!(a.count(Rule::SeqGapRecovered), 1);
    let f = a
        .findings
        .iter()
        .find(|f| f.rule == Rule::SeqGapRecovered)
        .unwrap();
    assert_eq!(f.level, Level::Warn);
    assert!(f.message.contains("(recovered)"), "{}", f.message);
    assert!(!a.has_deny());
    assert_eq!(Rule::SeqGapRecovered.default_level(), Level::Warn);
    assert_eq!(
        "seq-gap-recovered".parse::<Rule>(),
        Ok(Rule::SeqGapRecovered)
    );

    // The same with the record unrecovered (and the batches really missing): deny.
    let lost = trace(vec![
        batch("a", 0, vec![stored(&[1], None, GPU, 16)]),
        gap(1, 3, false),
        batch("a", 3, vec![stored(&[4], Some(3), GPU, 16)]),
    ]);
    let a = run(&lost);
    assert_eq!(a.count(Rule::SeqGapRecovered), 0);
    assert_eq!(a.count(Rule::SeqGap), 2, "the gap record and the seq hole");
    assert!(a.has_deny());

    // A restart (seq goes back) stays deny.
    let restart = trace(vec![
        batch("a", 5, vec![stored(&[1], None, GPU, 16)]),
        batch("a", 0, vec![stored(&[2], Some(1), GPU, 16)]),
    ]);
    let a = run(&restart);
    assert_eq!(a.count(Rule::SeqGap), 1);
    assert!(a.has_deny());
}

#[test]
fn gaps_between_empty_batches_are_seq_gaps() {
    // Regression: batches with seq 0, 2, 4, ... and no events hid their gaps (an empty batch
    // was checked only once an event followed, under that event's source).
    let t = trace((0..5).map(|k| batch("a", 2 * k, vec![])).collect());
    let a = run(&t);
    let gaps: Vec<&Finding> = a
        .findings
        .iter()
        .filter(|f| f.rule == Rule::SeqGap)
        .collect();
    assert_eq!(gaps.len(), 4, "{:?}", a.findings);
    assert!(gaps
        .iter()
        .all(|f| f.level == Level::Deny && f.source == "a"));
    assert_eq!(
        gaps[0].message,
        "dp_rank 0: expected seq 1, got 2 (1 batch(es) missing)"
    );
    assert!(a.has_deny());
    // An empty batch of one source followed by another source's events is checked under its
    // own source: "b" 0, 1 and "a" 0, 1 in order have no gap.
    let t = trace(vec![
        batch("b", 0, vec![]),
        batch("a", 0, vec![stored(&[1], None, GPU, 16)]),
        batch("b", 1, vec![]),
        batch("a", 1, vec![stored(&[2], Some(1), GPU, 16)]),
    ]);
    assert_eq!(run(&t).count(Rule::SeqGap), 0);
}

#[test]
fn gap_records_name_the_rank_as_a_number() {
    let mut records = vec![batch("a", 0, vec![stored(&[1], None, GPU, 16)])];
    records.push(TraceRecord::Gap(SeqGap {
        source: "a".into(),
        dp_rank: Some(3),
        expected_seq: 1,
        received_seq: 4,
        recovered: false,
    }));
    let a = run(&trace(records));
    let f = a.findings.iter().find(|f| f.rule == Rule::SeqGap).unwrap();
    assert_eq!(
        f.message,
        "gap record: dp_rank 3: expected seq 1, received 4 (not recovered)"
    );
}
