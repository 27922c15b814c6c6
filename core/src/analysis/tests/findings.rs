//! Findings: job order (legacy against fixed vLLM), reorder classes, rule levels, block sizes
//! and sequence gaps.

use super::*;
use crate::analysis::compare::compare;
use crate::consumers::testkit::batch_with_jobs;
use crate::trace::ProvenanceKind;

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
