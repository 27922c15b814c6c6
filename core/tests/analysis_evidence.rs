//! The diagnosis on the shapes vLLM's own code produces, without provenance (every real
//! capture): KV groups as part of a block's identity, and job inference from evidence
//! (GPU-tier events, else the batch structure against the worker count). `docs/rules.md`
//! walks through the same shapes.
//!
//! * a golden table: trace shape → findings (rule, event, related event, class, evidence,
//!   level), `tests/snapshots/analysis_evidence__golden_table.snap` (insta);
//! * property tests on simulated traces with provenance stripped: in fixed order with `W`
//!   workers and any number of groups, `workers = W` never gives an in-job finding; in
//!   CPython set order with one worker and one job per batch, every in-job inversion the
//!   provenance shows is found as in-job without it.

use kvscope_core::analysis::{analyze, AnalysisConfig, Level, ReorderClass, Rule};
use kvscope_core::scenario::Scenario;
use kvscope_core::sim::simulate;
use kvscope_core::trace::{Trace, TraceRecord};
use proptest::prelude::*;
use serde_json::{json, Value};

/// Simulate a scenario in `order` ("fixed", or "cpython" with PYTHONHASHSEED `seed`).
fn sim(mut scenario: Value, order: &str, seed: u64) -> Trace {
    scenario["order"] = match order {
        "fixed" => json!({"mode": "fixed"}),
        _ => json!({"mode": "cpython", "python_hash_seed": seed}),
    };
    let s = Scenario::from_json(&scenario.to_string()).expect("scenario");
    simulate(&s).expect("simulate")
}

/// The trace as a real capture sees it: no provenance; without `gpu`, no GPU-tier events.
fn capture(mut t: Trace, gpu: bool) -> Trace {
    for r in &mut t.records {
        if let TraceRecord::Batch(b) = r {
            b.provenance = None;
            if !gpu {
                b.events.retain(|e| e.medium() != Some("GPU"));
            }
        }
    }
    t
}

fn config(workers: u32) -> AnalysisConfig {
    AnalysisConfig {
        workers: Some(workers),
        ..AnalysisConfig::default()
    }
}

/// Block size 4, two full-attention groups, 8 CPU chunks, next-step completion: A (16 tokens)
/// is one store job of 8 keys (group-major); B (12 other tokens) evicts 6 of A's keys (one
/// `BlockRemoved` per group), then B's 6 `BlockStored`.
fn two_groups() -> Value {
    json!({
        "name": "two-groups", "seed": 1, "block_size": 4,
        "groups": [{"kind": "full_attention"}, {"kind": "full_attention"}],
        "cpu": {"capacity_chunks": 8},
        "completion": {"timing": "next_step"},
        "requests": [
            {"id": "A", "token_ids": (1..=16).collect::<Vec<u32>>()},
            {"id": "B", "token_ids": (101..=112).collect::<Vec<u32>>()}
        ],
        "steps": [{"schedule": {"A": 16}}, {}, {"schedule": {"B": 12}}, {}]
    })
}

/// One 32-token request prefilled in two chunks of 16 on two workers: job 0 (c0..c3) created
/// in step 0, job 1 (c4..c7) in step 1; with seed 2 rank 0 reports job 0 in step 1 and job 1
/// in step 2, rank 1 both in step 2, so step 2's batch carries c4..c7 then c0..c3.
fn two_jobs(gpu: bool) -> Value {
    json!({
        "name": "two-jobs", "seed": 2, "block_size": 4, "gpu_events": gpu,
        "completion": {"timing": "next_step", "workers": 2, "worker_lag_probability": 0.5},
        "requests": [{"id": "R", "token_ids": (1..=32).collect::<Vec<u32>>()}],
        "steps": [{"schedule": {"R": 16}}, {"schedule": {"R": 16}}, {}, {}]
    })
}

/// The scenario with the GPU block pool's events published too.
fn gpu(mut scenario: Value) -> Value {
    scenario["gpu_events"] = json!(true);
    scenario
}

/// One 32-token request stored as one job of 8 chunks (CPython seed 0: 3, 4, 0, 1, 5, 6, 7, 2).
fn one_job() -> Value {
    json!({
        "name": "one-job", "seed": 1, "block_size": 4,
        "requests": [{"id": "R", "token_ids": (1..=32).collect::<Vec<u32>>()}],
        "steps": [{"schedule": {"R": 32}}]
    })
}

/// The golden rows of one analysis: every finding but consumer losses.
fn rows(t: &Trace, workers: u32) -> String {
    let a = analyze(t, &config(workers));
    let mut out = String::new();
    for f in a.findings.iter().filter(|f| f.rule != Rule::ConsumerLoss) {
        out.push_str(&format!(
            "    {} event {} related {} class {} evidence {} {}\n",
            f.rule,
            f.event,
            f.related_event.map_or("-".into(), |e| e.to_string()),
            f.class.map_or("-", |c| c.name()),
            f.evidence.map_or("-", |e| e.name()),
            f.level.name(),
        ));
    }
    out.push_str(&format!(
        "    => check {}\n",
        if a.has_deny() { "fails" } else { "passes" }
    ));
    out
}

#[test]
fn golden_table() {
    let shapes: Vec<(&str, Trace, u32)> = vec![
        (
            "two groups, fixed",
            capture(sim(two_groups(), "fixed", 0), false),
            1,
        ),
        (
            "two groups, cpython 0",
            capture(sim(two_groups(), "cpython", 0), false),
            1,
        ),
        (
            "two groups, cpython 3",
            capture(sim(two_groups(), "cpython", 3), false),
            1,
        ),
        (
            "two groups, fixed, GPU events",
            capture(sim(gpu(two_groups()), "fixed", 0), true),
            1,
        ),
        (
            "two groups, fixed, with provenance",
            sim(two_groups(), "fixed", 0),
            1,
        ),
        (
            "two groups, cpython 0, W=2",
            capture(sim(two_groups(), "cpython", 0), false),
            2,
        ),
        (
            "two groups, cpython 0, GPU events",
            capture(sim(gpu(two_groups()), "cpython", 0), true),
            1,
        ),
        (
            "two groups, cpython 0, with provenance",
            sim(two_groups(), "cpython", 0),
            1,
        ),
        (
            "one job, cpython 0, W=1",
            capture(sim(one_job(), "cpython", 0), false),
            1,
        ),
        (
            "one job, cpython 0, GPU events",
            capture(sim(gpu(one_job()), "cpython", 0), true),
            1,
        ),
        (
            "one job, cpython 0, with provenance",
            sim(one_job(), "cpython", 0),
            1,
        ),
        (
            "one job, fixed, W=1",
            capture(sim(one_job(), "fixed", 0), false),
            1,
        ),
        (
            "one job, cpython 0, W=2",
            capture(sim(one_job(), "cpython", 0), false),
            2,
        ),
        (
            "two jobs, fixed, W=1",
            capture(sim(two_jobs(false), "fixed", 0), false),
            1,
        ),
        (
            "two jobs, fixed, W=2",
            capture(sim(two_jobs(false), "fixed", 0), false),
            2,
        ),
        (
            "two jobs, fixed, GPU events, W=1",
            capture(sim(two_jobs(true), "fixed", 0), true),
            1,
        ),
        (
            "two jobs, fixed, with provenance",
            sim(two_jobs(false), "fixed", 0),
            1,
        ),
        (
            "two jobs, cpython 0, W=2",
            capture(sim(two_jobs(false), "cpython", 0), false),
            2,
        ),
        (
            "two jobs, cpython 0, GPU events, W=2",
            capture(sim(two_jobs(true), "cpython", 0), true),
            2,
        ),
        (
            "two jobs, cpython 0, with provenance",
            sim(two_jobs(false), "cpython", 0),
            1,
        ),
    ];
    let mut table = String::new();
    for (name, t, w) in &shapes {
        table.push_str(&format!("{name}:\n{}", rows(t, *w)));
    }
    insta::assert_snapshot!(table);
}

#[test]
fn the_issue_shapes_pass_and_fail_as_they_should() {
    let fails = |t: &Trace, w: u32| analyze(t, &config(w)).has_deny();
    // Fixed order passes, including the two-group eviction (no false double-store or
    // remove-unknown) and the cross-job order of two workers with `workers = 2`.
    let tg = capture(sim(two_groups(), "fixed", 0), false);
    let a = analyze(&tg, &config(1));
    assert_eq!(a.count(Rule::DoubleStore), 0);
    assert_eq!(a.count(Rule::RemoveUnknown), 0);
    assert!(a.findings.is_empty(), "{:?}", a.findings);
    assert!(!fails(&capture(sim(two_jobs(false), "fixed", 0), false), 2));
    // Set order fails, on one worker or two.
    for w in [1, 2] {
        assert!(fails(&capture(sim(one_job(), "cpython", 0), false), w));
        assert!(fails(
            &capture(sim(two_jobs(false), "cpython", 0), false),
            w
        ));
    }
}

#[test]
fn two_group_inversions_pair_each_child_with_its_own_groups_parent() {
    // With provenance the simulator names every chunk; without it, each inversion must be
    // found with the same child and parent event (the group decides which parent).
    for seed in 0..4 {
        let with = analyze(&sim(two_groups(), "cpython", seed), &config(1));
        let without = analyze(
            &capture(sim(two_groups(), "cpython", seed), false),
            &config(1),
        );
        let pairs = |a: &kvscope_core::analysis::Analysis| -> Vec<(usize, Option<usize>)> {
            a.violations
                .iter()
                .map(|f| (f.event, f.related_event))
                .collect()
        };
        assert!(!with.violations.is_empty(), "seed {seed}");
        assert_eq!(pairs(&with), pairs(&without), "seed {seed}");
        assert!(without
            .violations
            .iter()
            .all(|f| f.class == Some(ReorderClass::InJob) && f.level == Level::Deny));
    }
}

/// One 32-token request behind vLLM's file-system tier (the tiering manager cascades each
/// completed CPU store job to it as one job of the same keys): prefilled in two chunks of 16
/// (`two_chunks`: CPU jobs 0 and 1 in two batches, whose cascades the tier finishes in one
/// batch, job 1's first), or in one (one CPU job of 8 chunks, and its cascade).
fn cascade(two_chunks: bool) -> Value {
    let mut s = json!({
        "name": "cascade", "seed": 1, "block_size": 4,
        "secondary_tiers": [{"name": "fs", "kind": "fs"}],
        "scheduler": {"max_num_batched_tokens": if two_chunks { 16 } else { 64 }},
        "requests": [{"id": "R", "token_ids": (1..=32).collect::<Vec<u32>>()}]
    });
    if two_chunks {
        s["secondary_tiers"][0]["io_finished"] = json!({"0": 5, "1": 5});
        s["secondary_tiers"][0]["io_release_order"] = json!({"5": [1, 0]});
    }
    s
}

/// A secondary tier's inversions without provenance or GPU events take their class from the
/// CPU-tier job the cascade copies (`docs/rules.md`, "Jobs and evidence", 4): the same classes
/// provenance gives, on CPython set order (one job, and two jobs on one worker), and
/// across-jobs (never in-job) on the fixed order whose cascades finish out of order.
#[test]
fn secondary_tier_inversions_take_the_class_of_the_cpu_job_they_copy() {
    let storage = |a: &kvscope_core::analysis::Analysis, t: &Trace| -> Vec<usize> {
        let index = kvscope_core::analysis::EventIndex::build(t);
        a.violations
            .iter()
            .map(|f| f.event)
            .filter(|e| {
                index
                    .event(t, *e)
                    .is_some_and(|(_, ev)| ev.medium() == Some("STORAGE"))
            })
            .collect()
    };
    let classes = |a: &kvscope_core::analysis::Analysis| -> Vec<(usize, Option<usize>, Option<ReorderClass>)> {
        a.violations
            .iter()
            .map(|f| (f.event, f.related_event, f.class))
            .collect()
    };
    for two_chunks in [false, true] {
        for seed in 0..4 {
            let with = sim(cascade(two_chunks), "cpython", seed);
            let truth = analyze(&with, &config(1));
            let t = capture(with, false);
            let found = analyze(&t, &config(1));
            let on_storage = storage(&found, &t);
            assert!(
                !on_storage.is_empty(),
                "two_chunks {two_chunks} seed {seed}: no secondary-tier inversion"
            );
            assert_eq!(
                classes(&truth),
                classes(&found),
                "two_chunks {two_chunks} seed {seed}"
            );
            for f in found
                .violations
                .iter()
                .filter(|f| on_storage.contains(&f.event))
            {
                assert_eq!(
                    f.evidence,
                    Some(kvscope_core::analysis::Evidence::Cascade),
                    "{f:?}"
                );
            }
        }
    }
    let t = capture(sim(cascade(true), "fixed", 0), false);
    let a = analyze(&t, &config(1));
    assert!(!a.has_deny(), "{:?}", a.findings);
    let v: Vec<_> = a.violations.iter().map(|f| (f.rule, f.evidence)).collect();
    assert_eq!(
        v,
        [(
            Rule::ChildBeforeParentAcrossJobs,
            Some(kvscope_core::analysis::Evidence::Cascade)
        )]
    );
}

/// A generated scenario: `requests` requests of random lengths, `groups` full-attention
/// groups, chunked prefill, next-step completion on `workers` workers.
fn generated(requests: &[u32], groups: usize, workers: u32, budget: u32, seed: u64) -> Value {
    let reqs: Vec<Value> = requests
        .iter()
        .enumerate()
        .map(|(i, n)| json!({"id": format!("r{i}"), "prompt_len": n, "arrival_step": i}))
        .collect();
    json!({
        "name": "generated", "seed": seed, "block_size": 4,
        "groups": vec![json!({"kind": "full_attention"}); groups],
        "completion": {"timing": "next_step", "workers": workers, "worker_lag_probability": 0.5},
        "scheduler": {"max_num_batched_tokens": budget},
        "requests": reqs
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    /// Fixed order, W workers, any groups, with or without a file-system tier behind the CPU
/// tier, no provenance: never an in-job finding.
    #[test]
    fn fixed_order_never_gives_an_in_job_finding_with_the_right_worker_count(
        requests in prop::collection::vec(4u32..48, 1..4),
        groups in 1usize..4,
        workers in 1u32..4,
        budget in prop::sample::select(vec![8u32, 12, 16, 64]),
        seed in 0u64..1000,
        gpu in any::<bool>(),
        fs in any::<bool>(),
    ) {
        let mut s = generated(&requests, groups, workers, budget, seed);
        s["gpu_events"] = json!(gpu);
        if fs {
            s["secondary_tiers"] = json!([{"name": "fs", "kind": "fs"}]);
        }
        let t = capture(sim(s, "fixed", 0), gpu);
        let a = analyze(&t, &config(workers));
        let in_job: Vec<_> = a.violations.iter()
            .filter(|f| f.class == Some(ReorderClass::InJob)).collect();
        prop_assert!(in_job.is_empty(), "{:?}", in_job);
        prop_assert!(!a.has_deny(), "{:?}", a.findings);
    }

    /// CPython set order, one worker, one job per batch (each request stored in one step and
    /// completed in it), no provenance: every inversion that provenance places within one job
    /// is an in-job deny.
    #[test]
    fn set_order_with_one_worker_always_gives_in_job_denies(
        requests in prop::collection::vec(8u32..48, 1..4),
        groups in 1usize..3,
        hash_seed in 0u64..4,
    ) {
        let reqs: Vec<Value> = requests.iter().enumerate()
            .map(|(i, n)| json!({"id": format!("r{i}"), "prompt_len": n}))
            .collect();
        let steps: Vec<Value> = (0..requests.len())
            .map(|i| json!({"schedule": {format!("r{i}"): 64}}))
            .collect();
        let s = json!({
            "name": "set-order", "seed": 1, "block_size": 4,
            "groups": vec![json!({"kind": "full_attention"}); groups],
            "requests": reqs, "steps": steps
        });
        let with = sim(s, "cpython", hash_seed);
        let truth = analyze(&with, &config(1));
        let found = analyze(&capture(with, false), &config(1));
        for f in truth.violations.iter().filter(|f| f.rule == Rule::ChildBeforeParentInJob) {
            let g = found.violations.iter().find(|g| g.event == f.event);
            prop_assert!(
                g.is_some_and(|g| g.rule == Rule::ChildBeforeParentInJob
                    && g.related_event == f.related_event
                    && g.level == Level::Deny),
                "{:?} vs {:?}", f, g
            );
        }
        prop_assert_eq!(truth.has_deny(), found.has_deny());
    }
}

/// The properties above are not vacuous: their generators do produce set-order inversions in
/// a job and multi-worker cross-job inversions in one batch.
#[test]
fn generators_produce_the_cases_the_properties_are_about() {
    let mut ambiguous = 0;
    for seed in 0..40 {
        let t = capture(sim(generated(&[32, 24], 2, 2, 8, seed), "fixed", 0), false);
        ambiguous += analyze(&t, &config(2)).count(Rule::ChildBeforeParentAmbiguous);
    }
    assert!(ambiguous > 0);
    // With a file-system tier, cascades finishing out of order invert pairs there.
    let mut cascade = 0;
    for seed in 0..40 {
        let mut s = generated(&[32, 24], 2, 2, 8, seed);
        s["secondary_tiers"] = json!([{"name": "fs", "kind": "fs"}]);
        let a = analyze(&capture(sim(s, "fixed", 0), false), &config(2));
        cascade += a
            .violations
            .iter()
            .filter(|f| f.evidence == Some(kvscope_core::analysis::Evidence::Cascade))
            .count();
    }
    assert!(cascade > 0);
    let s = json!({
        "name": "set-order", "seed": 1, "block_size": 4,
        "requests": [{"id": "r0", "prompt_len": 32}],
        "steps": [{"schedule": {"r0": 64}}]
    });
    assert!(analyze(&sim(s, "cpython", 0), &config(1)).count(Rule::ChildBeforeParentInJob) > 0);
}

#[test]
fn the_worker_count_defaults_to_the_headers_world_size_and_the_option_overrides_it() {
    let mut t = capture(sim(two_jobs(false), "fixed", 0), false);
    let header = t.records.iter_mut().find_map(|r| match r {
        TraceRecord::Header(h) => Some(h),
        _ => None,
    });
    header
        .expect("generated traces have a header")
        .meta
        .insert("world_size".into(), json!(2));
    let default = AnalysisConfig::default();
    assert_eq!(default.workers_for(&t), 2);
    assert!(!analyze(&t, &default).has_deny());
    assert_eq!(
        analyze(&t, &default).count(Rule::ChildBeforeParentAmbiguous),
        1
    );
    assert!(analyze(&t, &config(1)).has_deny());
}

#[test]
fn the_replay_topology_is_per_group() {
    use kvscope_core::event::KvEvent;
    use kvscope_core::replay::Replay;
    let t = capture(sim(two_groups(), "fixed", 0), false);
    // A's batch: group 0 chunks 0..3 (events 0..3), then group 1 chunks 0..3 (events 4..7).
    let stored: Vec<(u32, u64, Option<u64>)> = t
        .batches()
        .flat_map(|b| b.events.iter())
        .filter_map(|e| match e {
            KvEvent::BlockStored(s) => Some((
                s.group_idx.unwrap_or(0),
                s.block_hashes[0].as_u64(),
                s.parent_block_hash.as_ref().map(|p| p.as_u64()),
            )),
            _ => None,
        })
        .collect();
    let (g, c1, c0) = (stored[5].0, stored[5].1, stored[5].2);
    assert_eq!((g, Some(stored[4].1)), (1, c0));
    let mut r = Replay::new(t, &AnalysisConfig::default());
    r.seek(r.len());
    let b1 = r.block_in_group(1, c1);
    assert_eq!(b1.parent, c0);
    assert_eq!(
        b1.first_stored,
        Some(5),
        "group 1's own first store, not group 0's"
    );
    assert_eq!(r.block(c1).first_stored, Some(1));
}

/// `compare` matches violations by KV group too: set order in two groups inverts the same
/// chunk pair (same hashes) in group 0 and in group 1, and those are two violations that the
/// fixed order makes disappear, not one.
#[test]
fn compare_tells_the_groups_apart() {
    use kvscope_core::analysis::compare::compare;
    let set = analyze(&capture(sim(two_groups(), "cpython", 0), false), &config(1));
    let fixed = analyze(&capture(sim(two_groups(), "fixed", 0), false), &config(1));
    let d = compare(&set, &fixed);
    assert_eq!(
        d.disappeared.len(),
        set.violations.len(),
        "{:?}",
        d.disappeared
    );
    assert!(d.appeared.is_empty());
    let groups: std::collections::BTreeSet<u32> = d.disappeared.iter().map(|k| k.group).collect();
    assert_eq!(groups.into_iter().collect::<Vec<_>>(), [0, 1]);
    // The same (block, parent) pair in both groups.
    let pair = |g: u32| {
        d.disappeared
            .iter()
            .filter(|k| k.group == g)
            .map(|k| (k.block, k.parent))
            .collect::<std::collections::BTreeSet<_>>()
    };
    assert!(pair(0).intersection(&pair(1)).next().is_some());
}
