//! Property test: the replay engine's state at any cursor equals a replay from the start.

use proptest::prelude::*;

use super::*;
use crate::consumers::testkit::{batch, h, removed, stored, trace};
use crate::consumers::{AnyConsumer, Consumer, EventIds, Interner};
use crate::event::KvEvent;
use crate::trace::TraceRecord;

#[derive(Clone, Debug)]
enum Op {
    Store {
        source: u8,
        hashes: Vec<u64>,
        parent: Option<u64>,
        cpu: bool,
    },
    Remove {
        source: u8,
        hashes: Vec<u64>,
        cpu: bool,
    },
    Clear {
        source: u8,
    },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (0u8..2, prop::collection::vec(1u64..24, 1..4), prop::option::of(1u64..24), any::<bool>())
            .prop_map(|(source, hashes, parent, cpu)| Op::Store { source, hashes, parent, cpu }),
        2 => (0u8..2, prop::collection::vec(1u64..24, 1..3), any::<bool>())
            .prop_map(|(source, hashes, cpu)| Op::Remove { source, hashes, cpu }),
        1 => (0u8..2).prop_map(|source| Op::Clear { source }),
    ]
}

fn build(ops: &[Op], per_batch: usize) -> Trace {
    let mut records = Vec::new();
    let mut seqs = [0u64; 2];
    for chunk in ops.chunks(per_batch.max(1)) {
        // One batch per chunk, all from the chunk's first source.
        let source = match chunk.first() {
            Some(Op::Store { source, .. } | Op::Remove { source, .. } | Op::Clear { source }) => {
                *source
            }
            None => 0,
        };
        let events = chunk
            .iter()
            .map(|o| match o {
                Op::Store {
                    hashes,
                    parent,
                    cpu,
                    ..
                } => stored(hashes, *parent, Some(if *cpu { "CPU" } else { "GPU" }), 16),
                Op::Remove { hashes, cpu, .. } => {
                    removed(hashes, Some(if *cpu { "CPU" } else { "GPU" }))
                }
                Op::Clear { .. } => KvEvent::AllBlocksCleared,
            })
            .collect();
        let s = source as usize % 2;
        records.push(batch(if s == 0 { "a" } else { "b" }, seqs[s], events));
        seqs[s] += 1;
    }
    trace(records)
}

fn nonzero(lanes: &[LaneSnapshot]) -> Vec<LaneSnapshot> {
    lanes
        .iter()
        .filter(|l| l.counts != LaneCounts::default())
        .cloned()
        .collect()
}

/// Replay from the start with fresh consumers: lanes after `cursor` events and the verdicts of
/// event `cursor - 1`.
fn from_start(r: &Replay, cursor: usize) -> (Vec<Vec<LaneSnapshot>>, Vec<EventVerdict>) {
    let a = r.analysis();
    let mut consumers: Vec<AnyConsumer> = a
        .config
        .consumers
        .iter()
        .map(|k| {
            AnyConsumer::for_engines(*k, &a.config.consumer_config, &a.index.engine_block_sizes)
        })
        .collect();
    let mut last = Vec::new();
    let mut resolved = Vec::new();
    let (mut interner, mut ids) = (Interner::default(), EventIds::default());
    for i in 0..cursor {
        let (ctx, ev) = a.index.ctx(r.trace(), i).unwrap();
        ids.fill(&mut interner, ev);
        last = consumers
            .iter_mut()
            .map(|c| c.apply(&ctx, ev, &ids, &mut resolved))
            .collect();
    }
    let lanes = consumers
        .iter()
        .map(|c| {
            let mut v: Vec<LaneSnapshot> = c
                .lanes()
                .iter()
                .map(|(k, counts)| LaneSnapshot {
                    source: a.index.sources[k.source as usize].clone(),
                    tier: a.index.tiers[k.tier as usize].label(),
                    counts: *counts,
                })
                .collect();
            v.sort_by(|a, b| (&a.source, &a.tier).cmp(&(&b.source, &b.tier)));
            nonzero(&v)
        })
        .collect();
    (lanes, last)
}

fn lanes_of(s: &Snapshot) -> Vec<Vec<LaneSnapshot>> {
    s.consumers.iter().map(|c| nonzero(&c.lanes)).collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]
    #[test]
    fn seek_equals_replay_from_start(
        ops in prop::collection::vec(op(), 1..300), // crosses several lane checkpoints (every 32+ events)
        per_batch in 1usize..5,
        cursors in prop::collection::vec(0usize..310, 1..8),
    ) {
        let t = build(&ops, per_batch);
        let mut r = Replay::new(t, &AnalysisConfig::default());
        let n = r.len();
        for c in cursors {
            let c = c.min(n);
            r.seek(c);
            let snap = r.snapshot();
            // Per-cursor counts equal plain filters.
            let stored: std::collections::BTreeSet<u64> = (0..c)
                .filter_map(|i| r.analysis().index.event(r.trace(), i))
                .filter(|(_, e)| matches!(e, KvEvent::BlockStored(_)))
                .flat_map(|(_, e)| e.block_hashes().iter().map(|h| h.as_u64()).collect::<Vec<_>>())
                .collect();
            prop_assert_eq!(snap.blocks_seen, stored.len());
            prop_assert_eq!(snap.findings_so_far, r.finding_events.partition_point(|(e, _)| *e < c));
            let jobs = &r.analysis().index.jobs;
            let mut want: Vec<u32> = jobs.iter().filter(|j| j.first_event < c && j.last_event >= c).map(|j| j.id).collect();
            if let Some(j) = c.checked_sub(1).and_then(|e| r.analysis().index.events.get(e)).map(|l| l.job).filter(|j| *j != u32::MAX) {
                if !want.contains(&j) {
                    want.push(j);
                }
            }
            let got: Vec<u32> = snap.active_jobs.iter().map(|p| p.job.id).collect();
            prop_assert_eq!(got, want, "active jobs at cursor {}", c);
            let (lanes, last) = from_start(&r, c);
            prop_assert_eq!(lanes_of(&snap), lanes.clone(), "lanes at cursor {}", c);
            if c > 0 {
                let step = r.step_at(c - 1).unwrap();
                let got: Vec<EventVerdict> = step.verdicts.iter().map(|v| v.verdict.clone()).collect();
                prop_assert_eq!(got, last, "verdicts of event {}", c - 1);
            }
            // Stepping gives the same state as seeking.
            if c < n {
                r.step_forward();
                let (lanes_next, _) = from_start(&r, c + 1);
                prop_assert_eq!(lanes_of(&r.snapshot()), lanes_next);
                r.step_back();
                prop_assert_eq!(lanes_of(&r.snapshot()), lanes);
            }
        }
    }
}

#[test]
fn walk_forward_then_back_to_zero() {
    let t = trace(vec![
        batch("a", 0, vec![stored(&[1, 2], None, Some("GPU"), 16)]),
        batch(
            "a",
            1,
            vec![
                stored(&[4], Some(3), Some("CPU"), 16),
                stored(&[3], Some(2), Some("CPU"), 16),
                removed(&[1], Some("GPU")),
            ],
        ),
    ]);
    let mut r = Replay::new(t, &AnalysisConfig::default());
    let mut steps = Vec::new();
    while let Some(s) = r.step_forward() {
        steps.push(s);
    }
    assert_eq!(r.cursor(), 4);
    // The ideal consumer replays event 1 when event 2 arrives.
    let ideal = steps[2]
        .verdicts
        .iter()
        .find(|v| v.consumer == ConsumerKind::Ideal)
        .unwrap();
    assert_eq!(ideal.resolved.len(), 1);
    assert_eq!(ideal.resolved[0].event, 1);
    let ideal1 = steps[1]
        .verdicts
        .iter()
        .find(|v| v.consumer == ConsumerKind::Ideal)
        .unwrap();
    assert_eq!(ideal1.verdict.verdict, VerdictKind::Pending);
    assert_eq!(ideal1.final_verdict, Some(VerdictKind::Replayed));
    let rules: Vec<Rule> = steps[1].findings.iter().map(|f| f.rule).collect();
    assert!(rules.contains(&Rule::ChildBeforeParentInJob), "{rules:?}");
    assert!(
        rules.contains(&Rule::ConsumerLoss),
        "llm-d drops block 4: {rules:?}"
    );
    while r.step_back().is_some() {}
    assert_eq!(r.cursor(), 0);
    assert!(r
        .snapshot()
        .consumers
        .iter()
        .all(|c| c.total == LaneCounts::default()));
    // Navigation.
    let f = ViolationFilter::default();
    assert_eq!(r.next_violation(&f), Some(1));
    r.seek(4);
    assert_eq!(r.prev_violation(&f), Some(1));
    let lost = ViolationFilter {
        consumer: Some(ConsumerKind::Llmd),
        ..ViolationFilter::default()
    };
    r.seek(0);
    assert_eq!(r.next_violation(&lost), Some(1));
    let b = r.block(h(3));
    assert!(b.first_stored.is_none(), "not stored yet at cursor 0");
    r.seek(4);
    let b = r.block(h(3));
    assert_eq!(
        (b.parent, b.first_stored, b.children.clone()),
        (Some(h(2)), Some(2), vec![h(4)])
    );
    assert_eq!(r.snapshot().blocks_seen, 4);
    // Job progress: the inferred CPU job (events 1 and 2) is half delivered at cursor 2, with
    // its within-job violation counted.
    r.seek(2);
    let jobs = r.snapshot().active_jobs;
    assert_eq!(jobs.len(), 1);
    assert_eq!(
        (jobs[0].delivered, jobs[0].violations, jobs[0].job.events),
        (1, 1, 2)
    );
    assert!(jobs[0].job.inferred);
    r.seek(3);
    assert_eq!(
        r.snapshot().active_jobs[0].delivered,
        2,
        "current event's job is shown"
    );
    r.seek(4);
    assert!(r.snapshot().active_jobs.is_empty());
}

/// `build`, plus an empty batch and a gap record at random places and one batch's seq bumped
/// (exercises the sequence checks the builder does while indexing).
fn build_with_gaps(ops: &[Op], per_batch: usize, at: usize, bump_seq: usize) -> Trace {
    let mut t = build(ops, per_batch);
    let n = t.records.len();
    if let Some(TraceRecord::Batch(b)) = t.records.get_mut(bump_seq % n.max(1)) {
        b.seq += 2;
    }
    let at = at % (n + 1);
    t.records.insert(at, batch("b", 7, Vec::new()));
    t.records.insert(
        at / 2,
        TraceRecord::Gap(crate::trace::SeqGap {
            source: "a".into(),
            dp_rank: Some(0),
            expected_seq: 1,
            received_seq: 3,
            recovered: at.is_multiple_of(2),
        }),
    );
    trace(t.records)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]
    #[test]
    fn builder_in_slices_equals_replay_new(
        ops in prop::collection::vec(op(), 0..200),
        per_batch in 1usize..5,
        at in 0usize..100,
        bump_seq in 0usize..100,
        budgets in prop::collection::vec(1usize..40, 1..6),
        cursors in prop::collection::vec(0usize..210, 1..6),
    ) {
        let t = build_with_gaps(&ops, per_batch, at, bump_seq);
        let config = AnalysisConfig::default();
        let mut want = Replay::new(t.clone(), &config);
        let mut b = ReplayBuilder::new(t, &config);
        let mut last = b.progress();
        prop_assert_eq!(last.total, want.len());
        let mut k = 0usize;
        while !b.is_done() {
            let p = b.advance(budgets[k % budgets.len()]);
            k += 1;
            prop_assert!(p.done <= p.total);
            prop_assert!(p.phase >= last.phase);
            prop_assert!(p.fraction() >= last.fraction());
            last = p;
        }
        let mut got = b.finish();
        prop_assert_eq!(got.rendered_findings(), want.rendered_findings());
        // The replay renders the findings as `analyze` does.
        let whole = crate::analysis::analyze(got.trace(), &config);
        prop_assert_eq!(got.rendered_findings(), (whole.findings, whole.violations));
        let (a, w) = (got.analysis(), want.analysis());
        prop_assert_eq!(&a.verdict_kinds, &w.verdict_kinds);
        prop_assert_eq!(&a.losses, &w.losses);
        prop_assert_eq!(&a.index.jobs, &w.index.jobs);
        let n = want.len();
        for i in 0..n {
            prop_assert_eq!(got.step_at(i), want.step_at(i), "step {}", i);
        }
        for c in cursors {
            let c = c.min(n);
            got.seek(c);
            want.seek(c);
            prop_assert_eq!(got.snapshot(), want.snapshot(), "snapshot at {}", c);
            for h in 0u64..24 {
                prop_assert_eq!(got.block(h), want.block(h));
            }
        }
    }
}

/// Event `i` described from the trace itself (what `Replay::event_info` did before it kept
/// the display data in its rows).
fn event_info_from_trace(r: &Replay, i: usize) -> Option<EventInfo> {
    let index = &r.analysis().index;
    let loc = index.events.get(i)?;
    let (b, ev) = index.event(r.trace(), i)?;
    Some(EventInfo {
        index: i,
        line: b.origin,
        pos: loc.pos as usize,
        source: b.source.clone(),
        dp_rank: loc.dp_rank,
        seq: b.seq,
        tier: index
            .tiers
            .get(loc.tier as usize)
            .map(|t| t.label())
            .unwrap_or_default(),
        kind: ev.type_name().into(),
        hashes: ev.block_hashes().iter().map(|h| h.as_u64()).collect(),
        parent: match ev {
            KvEvent::BlockStored(e) => e.parent_block_hash.as_ref().map(|p| p.as_u64()),
            _ => None,
        },
        job: (loc.job != u32::MAX).then_some(loc.job),
    })
}

/// `build_with_gaps`, with some batches given explicit provenance jobs (several jobs per
/// batch, interleaved) and origins / dp ranks that differ from the defaults.
fn build_with_jobs(ops: &[Op], per_batch: usize, at: usize, jobs: &[u8]) -> Trace {
    let mut t = build_with_gaps(ops, per_batch, at, at / 3);
    let mut k = 0usize;
    for (ri, rec) in t.records.iter_mut().enumerate() {
        if let TraceRecord::Batch(b) = rec {
            b.origin = 100 + 3 * ri as u64;
            b.dp_rank = Some((ri % 3) as u32);
            let pick = jobs.get(ri % jobs.len().max(1)).copied().unwrap_or(0);
            if pick % 3 == 0 {
                let prov = b
                    .events
                    .iter()
                    .map(|_| {
                        k += 1;
                        crate::trace::Provenance {
                            kind: crate::trace::ProvenanceKind::OffloadStore,
                            tier: "CPU".into(),
                            job_id: Some((k as u64 + pick as u64) % 4),
                            ..Default::default()
                        }
                    })
                    .collect();
                b.provenance = Some(prov);
            }
        }
    }
    t
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]
    /// The display data kept in the rows (event info, active jobs and their progress) equals
    /// what the trace and the index say, at every event and every cursor.
    #[test]
    fn rows_describe_events_and_jobs_like_the_trace(
        ops in prop::collection::vec(op(), 0..160),
        per_batch in 1usize..6,
        at in 0usize..100,
        jobs in prop::collection::vec(any::<u8>(), 1..5),
    ) {
        let t = build_with_jobs(&ops, per_batch, at, &jobs);
        let mut r = Replay::new(t, &AnalysisConfig::default());
        let n = r.len();
        for i in 0..n {
            prop_assert_eq!(r.event_info(i), event_info_from_trace(&r, i), "event {}", i);
        }
        prop_assert_eq!(r.event_info(n), None);
        let index_jobs = r.analysis().index.jobs.clone();
        let in_job: Vec<(usize, u32)> = r
            .rendered_findings()
            .1
            .iter()
            .filter(|f| f.rule == Rule::ChildBeforeParentInJob)
            .map(|f| (f.event, r.analysis().index.events[f.event].job))
            .collect();
        for c in 0..=n {
            r.seek(c);
            let snap = r.snapshot();
            prop_assert_eq!(&snap.last_event, &c.checked_sub(1).and_then(|e| event_info_from_trace(&r, e)));
            for p in &snap.active_jobs {
                let j = &index_jobs[p.job.id as usize];
                prop_assert_eq!(&p.job, j);
                let delivered = (j.first_event..c.min(j.last_event + 1))
                    .filter(|e| r.analysis().index.events[*e].job == j.id)
                    .count();
                prop_assert_eq!(p.delivered, delivered, "job {} at cursor {}", j.id, c);
                let violations = in_job.iter().filter(|(e, job)| *job == j.id && *e < c).count();
                prop_assert_eq!(p.violations, violations, "job {} at cursor {}", j.id, c);
            }
        }
    }
}

/// The benchmark's shape (16-event batches: 8 GPU stores, then the same blocks offloaded to
/// CPU in one inferred job) at `n` events.
fn bench_shape(n: usize) -> Trace {
    let mut batches = Vec::new();
    let mut h = 1u64;
    while batches.len() * 16 < n {
        let first = h;
        let mut events = Vec::new();
        for tier in ["GPU", "CPU"] {
            for k in 0..8 {
                let b = first + k;
                let parent = (b % 64 != 1).then_some(b - 1);
                events.push(stored(&[b], parent, Some(tier), 16));
            }
        }
        h += 8;
        batches.push(batch("pod", batches.len() as u64, events));
    }
    trace(batches)
}

#[test]
fn seek_work_is_flat_in_trace_length() {
    let work = |n: usize| {
        let r = Replay::new(bench_shape(n), &AnalysisConfig::default());
        let w: Vec<usize> = (0..=r.len()).map(|c| r.seek_work(c)).collect();
        (
            r.len(),
            w.iter().sum::<usize>() as f64 / w.len() as f64,
            w.iter().max().copied().unwrap_or(0),
        )
    };
    let (n1, mean1, max1) = work(1_024);
    let (n2, mean2, max2) = work(32_768);
    assert_eq!((n1, n2), (1_024, 32_768));
    // Same checkpoint interval, same lanes: the same work at any cursor offset.
    assert_eq!(max1, max2);
    assert!((mean1 - mean2).abs() < 0.5, "{mean1} vs {mean2}");
    // Every consumer's 2 lanes checkpointed, then at most K - 1 events of one change per
    // consumer, plus one for `smg`, whose tier-blind map moves a block from the GPU lane to
    // the CPU lane when the CPU store re-announces it.
    let models = ConsumerKind::ALL.len();
    let k = (2 * 2 * models).next_power_of_two().max(8);
    assert!(max1 <= 2 * models + (k - 1) * (models + 1), "{max1}");
}

/// After the analysis, the replay's tables are built a budget at a time (at a million events
/// each table is a pass over a million rows, roots or findings): every call does at most its
/// budget of their work, and the replay is the one built in one go.
#[test]
fn the_tables_are_built_a_budget_at_a_time() {
    let t = bench_shape(4_096);
    let config = AnalysisConfig::default();
    let want = Replay::new(t.clone(), &config);
    let mut b = ReplayBuilder::new(t, &config);
    let (mut calls, mut last, mut total) = (0, 0, 0);
    while !b.is_done() {
        let p = b.advance(64);
        if p.phase == BuildPhase::Tables {
            assert!(p.done - last <= 64, "{} units in one call", p.done - last);
            (calls, last, total) = (calls + 1, p.done, p.total);
        }
    }
    // A row per event, a job row per job, and the findings.
    assert!(total >= 4_096, "{total}");
    assert!(calls >= total / 64, "{calls} calls for {total} units");
    let got = b.finish();
    assert_eq!(got.rendered_findings(), want.rendered_findings());
    assert_eq!(got.analysis().losses, want.analysis().losses);
}

#[test]
fn event_info_past_16_bit_positions_comes_from_the_index() {
    // One batch longer than `u16::MAX` events: positions past it do not fit in the row.
    let n = u16::MAX as usize + 40;
    let events = (0..n as u64)
        .map(|h| stored(&[h + 1], None, Some("GPU"), 16))
        .collect();
    let r = Replay::new(
        trace(vec![batch("a", 0, events)]),
        &AnalysisConfig::default(),
    );
    for i in [0, 1, u16::MAX as usize - 1, u16::MAX as usize, n - 1] {
        let info = r.event_info(i).unwrap();
        assert_eq!(info.pos, i);
        assert_eq!(Some(info), event_info_from_trace(&r, i));
    }
}

/// The viewer's navigation without a cursor move, its default filter, and the job-order view
/// (the analysis' job and classes, both orders).
#[test]
fn navigation_from_an_event_and_job_order() {
    use crate::analysis::ReorderClass;
    let t = trace(vec![batch(
        "a",
        0,
        vec![
            stored(&[1], None, Some("GPU"), 16),
            stored(&[3], Some(2), Some("CPU"), 16),
            stored(&[2], Some(1), Some("CPU"), 16),
        ],
    )]);
    let r = Replay::new(t, &AnalysisConfig::default());
    let ordering = ViolationFilter::for_rule(None);
    assert!(ordering.keeps(Rule::ChildBeforeParentInJob));
    assert!(!ordering.keeps(Rule::ConsumerLoss));
    assert!(!ordering.keeps(Rule::UndecodableBatch));
    assert!(ViolationFilter::default().keeps(Rule::ConsumerLoss));
    assert_eq!(r.next_violation_after(None, &ordering), Some(1));
    assert_eq!(r.next_violation_after(Some(1), &ordering), None);
    assert_eq!(r.prev_violation_before(2, &ordering), Some(1));
    assert_eq!(r.prev_violation_before(1, &ordering), None);
    let loss = ViolationFilter::for_rule(Some(Rule::ConsumerLoss));
    assert_eq!(r.next_violation_after(None, &loss), Some(1));
    // The listed findings are in event order and hold every rule.
    let listed: Vec<(usize, Rule)> = r.findings_by_event().map(|f| (f.event, f.rule)).collect();
    assert!(listed.windows(2).all(|w| w[0].0 <= w[1].0), "{listed:?}");
    assert!(listed.contains(&(1, Rule::ChildBeforeParentInJob)));
    assert!(listed.contains(&(1, Rule::ConsumerLoss)));

    assert!(r.job_order(0, 10).is_none(), "GPU events have no job");
    let o = r.job_order(2, 10).expect("the CPU job");
    let emitted: Vec<(usize, u32, Option<ReorderClass>)> = o
        .emitted
        .iter()
        .map(|x| (x.event, x.depth, x.violation))
        .collect();
    assert_eq!(emitted, [(1, 1, Some(ReorderClass::InJob)), (2, 0, None)]);
    assert_eq!(o.prefix.iter().map(|x| x.event).collect::<Vec<_>>(), [2, 1]);
    assert_eq!((o.in_job, o.other, o.truncated), (1, 0, false));
    assert_eq!(o.job.events, 2);
    let cut = r.job_order(1, 1).unwrap();
    assert!(cut.truncated && cut.emitted.len() == 1);
}
