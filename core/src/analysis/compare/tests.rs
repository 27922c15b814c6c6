//! Tests of the event-by-event comparison: alignment by block, moved events, explanations.

use super::*;
use crate::analysis::{analyze, AnalysisConfig};
use crate::consumers::testkit::{batch, child_first_chain, h, removed, stored, trace};
use crate::consumers::VerdictKind;
use crate::event::KvEvent;

fn cmp(ta: &Trace, tb: &Trace) -> TraceComparison {
    let c = AnalysisConfig::default();
    compare_traces(ta, &analyze(ta, &c), tb, &analyze(tb, &c))
}

/// `child_first_chain` in prefix order: GPU 1, then CPU 2, 3, 4.
fn chain_in_order() -> Trace {
    trace(vec![batch(
        "pod-a",
        0,
        vec![
            stored(&[1], None, Some("GPU"), 16),
            stored(&[2], Some(1), Some("CPU"), 16),
            stored(&[3], Some(2), Some("CPU"), 16),
            stored(&[4], Some(3), Some("CPU"), 16),
        ],
    )])
}

/// A store of `ids` under `parent` in KV group `group`.
fn stored_in(group: u32, ids: &[u64], parent: Option<u64>) -> KvEvent {
    let mut ev = stored(ids, parent, Some("CPU"), 16);
    if let KvEvent::BlockStored(e) = &mut ev {
        e.group_idx = Some(group);
    }
    ev
}

#[test]
fn moved_is_the_fewest_events_off_one_longest_run() {
    let n = NONE_FOR_TESTS;
    assert_eq!(align::moved(&[0, 1, 2, 3]), Vec::<u32>::new());
    assert_eq!(align::moved(&[3, 0, 1, 2]), vec![0]);
    assert_eq!(align::moved(&[0, 2, 3, 1]), vec![3]);
    assert_eq!(align::moved(&[1, 0]).len(), 1);
    // Unaligned events are neither kept nor moved.
    assert_eq!(align::moved(&[n, 1, n, 0]).len(), 1);
    assert_eq!(align::moved(&[]), Vec::<u32>::new());
}

const NONE_FOR_TESTS: u32 = u32::MAX;

#[test]
fn a_child_before_its_parent_is_aligned_moved_and_explained() {
    let (a, b) = (child_first_chain(), chain_in_order());
    let c = cmp(&a, &b);
    assert_eq!((c.events_a, c.events_b, c.aligned), (4, 4, 4));
    assert_eq!((c.only_a, c.only_b, c.moved), (0, 0, 1));
    // A: 1, 3, 4, 2; B: 1, 2, 3, 4. Block 2 (A's #3) is B's #1.
    assert_eq!(c.alignment.partner_in_b(0), Some(0));
    assert_eq!(c.alignment.partner_in_b(1), Some(2));
    assert_eq!(c.alignment.partner_in_b(2), Some(3));
    assert_eq!(c.alignment.partner_in_b(3), Some(1));
    assert_eq!(c.alignment.partner_in_a(1), Some(3));
    assert!(c.alignment.is_moved(3) && !c.alignment.is_moved(1));
    // The differing events: 3 and 4 dropped by llm-d on A only, 2 moved.
    let rows: Vec<_> = c.events().map(|p| (p.a, p.b, p.moved)).collect();
    assert_eq!(
        rows,
        vec![
            (Some(1), Some(2), false),
            (Some(2), Some(3), false),
            (Some(3), Some(1), true)
        ]
    );
    let llmd = |p: &EventPair| {
        p.verdicts
            .iter()
            .find(|v| v.consumer == "llmd")
            .map(|v| (v.a, v.b))
    };
    assert_eq!(
        llmd(&c.events().next().unwrap()),
        Some((VerdictKind::DroppedOrphan, VerdictKind::Applied))
    );
    assert_eq!(
        c.events().next().unwrap().rule_a,
        Some(Rule::ChildBeforeParentInJob)
    );
    assert_eq!(c.events().next().unwrap().rule_b, None);
    // The explanations: the rule and llm-d's losses, each with the event that makes them.
    let get = |count: &str| {
        c.explanations
            .iter()
            .find(|e| e.count == count)
            .unwrap_or_else(|| panic!("no {count} in {:?}", c.explanations))
    };
    let (b3, b2) = (short_hash(h(3)), short_hash(h(2)));
    let rule = get("child-before-parent-in-job");
    assert_eq!((rule.a, rule.b), (1, 0));
    assert_eq!(
        rule.text,
        format!(
            "child-before-parent-in-job: 1 on A and 0 on B: on A, batch 0 delivers {b3} \
             before its parent {b2}; on B the parent comes first"
        )
    );
    let lost = get("llmd blocks lost");
    assert_eq!((lost.a, lost.b), (2, 0));
    assert_eq!(
        lost.text,
        format!(
            "llmd lost 2 blocks on A and 0 on B: on A, batch 0 delivers {b3} before its \
             parent {b2}; on B the parent comes first (1 event lost with it on A)"
        )
    );
    assert!(
        c.explanations.iter().all(|e| e.count != "events"),
        "same events on both sides"
    );
    // Swapped: the same facts said from B's side.
    let s = cmp(&b, &a);
    let rule = s
        .explanations
        .iter()
        .find(|e| e.count == "child-before-parent-in-job")
        .unwrap();
    assert_eq!((rule.a, rule.b), (0, 1));
    assert!(
        rule.text.contains(&format!(
            "on B, batch 0 delivers {b3} before its parent {b2}; on A the parent comes first"
        )),
        "{}",
        rule.text
    );
}

#[test]
fn two_groups_with_identical_hashes_align_within_their_group() {
    // Both groups store blocks 1 and 2 (same hashes); B delivers group 1's child first.
    let a = trace(vec![batch(
        "pod-a",
        0,
        vec![
            stored_in(0, &[1], None),
            stored_in(0, &[2], Some(1)),
            stored_in(1, &[1], None),
            stored_in(1, &[2], Some(1)),
        ],
    )]);
    let b = trace(vec![batch(
        "pod-a",
        0,
        vec![
            stored_in(1, &[2], Some(1)),
            stored_in(0, &[1], None),
            stored_in(0, &[2], Some(1)),
            stored_in(1, &[1], None),
        ],
    )]);
    let c = cmp(&a, &b);
    assert_eq!((c.aligned, c.only_a, c.only_b), (4, 0, 0));
    let partners: Vec<_> = (0..4).map(|i| c.alignment.partner_in_b(i)).collect();
    assert_eq!(partners, vec![Some(1), Some(2), Some(3), Some(0)]);
    // Group 1's child is B's only violation, and the explanation names it on B.
    let diff: Vec<_> = c
        .events()
        .filter(|p| p.rule_a != p.rule_b)
        .map(|p| (p.a, p.b))
        .collect();
    assert_eq!(diff, vec![(Some(3), Some(0))]);
    let e = c
        .explanations
        .iter()
        .find(|e| {
            Rule::ALL
                .iter()
                .any(|r| r.is_reorder() && r.name() == e.count)
        })
        .expect("an ordering rule differs");
    assert_eq!((e.a, e.b), (0, 1));
    assert!(
        e.text.contains(&format!(
            "on B, batch 0 delivers {} before its parent {}; on A the parent comes first",
            short_hash(h(2)),
            short_hash(h(1))
        )),
        "{}",
        e.text
    );
}

#[test]
fn traces_of_different_lengths_pair_what_they_share() {
    let a = trace(vec![batch(
        "pod-a",
        0,
        vec![
            stored(&[1], None, Some("CPU"), 16),
            stored(&[2], Some(1), Some("CPU"), 16),
        ],
    )]);
    // B stores the same, then evicts block 2 and stores block 3 (a later batch).
    let b = trace(vec![
        batch(
            "pod-a",
            0,
            vec![
                stored(&[1], None, Some("CPU"), 16),
                stored(&[2], Some(1), Some("CPU"), 16),
            ],
        ),
        batch(
            "pod-a",
            1,
            vec![
                removed(&[2], Some("CPU")),
                stored(&[3], Some(1), Some("CPU"), 16),
            ],
        ),
    ]);
    let c = cmp(&a, &b);
    assert_eq!((c.events_a, c.events_b), (2, 4));
    assert_eq!((c.aligned, c.only_a, c.only_b, c.moved), (2, 0, 2, 0));
    let rows: Vec<_> = c.events().map(|p| (p.a, p.b)).collect();
    assert_eq!(rows, vec![(None, Some(2)), (None, Some(3))]);
    let e = c.explanations.iter().find(|e| e.count == "events").unwrap();
    assert_eq!(
        e.text,
        format!(
            "events: 2 on A and 4 on B; 0 only on A, 2 only on B (first: B's #2 in batch 1, \
             BlockRemoved of {})",
            short_hash(h(2))
        )
    );
    // The other way round, and a trace against an empty one.
    let s = cmp(&b, &a);
    assert_eq!((s.only_a, s.only_b), (2, 0));
    assert_eq!(
        s.events().map(|p| (p.a, p.b)).collect::<Vec<_>>(),
        vec![(Some(2), None), (Some(3), None)]
    );
    let empty = cmp(&Trace::default(), &b);
    assert_eq!((empty.aligned, empty.only_b), (0, 4));
}

#[test]
fn an_event_only_in_b_sits_after_the_aligned_event_before_it() {
    let a = trace(vec![batch(
        "pod-a",
        0,
        vec![
            stored(&[1], None, Some("CPU"), 16),
            stored(&[2], Some(1), Some("CPU"), 16),
        ],
    )]);
    let b = trace(vec![batch(
        "pod-a",
        0,
        vec![
            stored(&[9], None, Some("CPU"), 16),
            stored(&[1], None, Some("CPU"), 16),
            stored(&[8], None, Some("CPU"), 16),
            stored(&[2], Some(1), Some("CPU"), 16),
        ],
    )]);
    let c = cmp(&a, &b);
    let rows: Vec<_> = c.events().map(|p| (p.a, p.b)).collect();
    assert_eq!(rows, vec![(None, Some(0)), (None, Some(2))]);
}

#[test]
fn repeated_blocks_pair_in_order_and_engines_count_only_when_both_name_them() {
    let ev = || {
        vec![
            stored(&[1], None, Some("CPU"), 16),
            removed(&[1], Some("CPU")),
            stored(&[1], None, Some("CPU"), 16),
        ]
    };
    let a = trace(vec![batch("pod-a", 0, ev())]);
    let c = cmp(&a, &a);
    assert_eq!((c.aligned, c.moved), (3, 0));
    assert!(c.differing() == 0 && c.explanations.is_empty());
    assert!(c.alignment.by_engine);
    // Another engine name: aligned without the engine.
    let b = trace(vec![batch("pod-b", 0, ev())]);
    let c = cmp(&a, &b);
    assert!(!c.alignment.by_engine);
    assert_eq!((c.aligned, c.moved), (3, 0));
    assert_eq!(c.alignment.partner_in_b(2), Some(2));
    // Another tier is another block.
    let gpu = trace(vec![batch(
        "pod-a",
        0,
        vec![stored(&[1], None, Some("GPU"), 16)],
    )]);
    assert_eq!(cmp(&a, &gpu).aligned, 0);
}
