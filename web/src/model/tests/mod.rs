//! Native tests of the view-model.

use super::*;
use kvscope_core::event::{label, BlockStored};
use kvscope_core::hash::BlockHash;

mod search;

fn stored(h: u64, parent: Option<u64>, medium: &str) -> KvEvent {
    KvEvent::BlockStored(BlockStored {
        block_hashes: vec![BlockHash::Int(h)].into(),
        parent_block_hash: parent.map(BlockHash::Int),
        token_ids: vec![1, 2],
        block_size: 2,
        lora_id: None,
        medium: Some(label(medium)),
        lora_name: None,
        extra_keys: None,
        group_idx: None,
        kv_cache_spec_kind: None,
        kv_cache_spec_sliding_window: None,
        locality: None,
        ownership: None,
    })
}

fn batch(seq: u64, events: Vec<KvEvent>) -> TraceRecord {
    TraceRecord::Batch(TraceBatch {
        source: "pod".into(),
        dp_rank: Some(0),
        seq,
        ts: seq as f64,
        events,
        provenance: None,
        raw: None,
        origin: seq + 1,
    })
}

fn model() -> Model {
    let trace = Trace {
        records: vec![
            batch(0, vec![stored(1, None, "GPU"), stored(2, Some(1), "GPU")]),
            batch(
                1,
                vec![
                    stored(2, Some(1), "CPU"),
                    stored(1, None, "CPU"),
                    stored(3, Some(2), "CPU"),
                ],
            ),
        ],
    };
    Model::from_trace("t", trace, LaneMode::Tier).unwrap()
}

/// Before the analysis the layout is complete (the child-first edge is drawn) but no finding
/// is listed: the page has no detector of its own. After it, the core's classified finding is
/// listed and navigated by the core's filter.
#[test]
fn layout_before_analysis() {
    let m = model_unanalysed();
    assert!(!m.is_analysed());
    assert!(m.replay().is_none());
    assert_eq!(m.len(), 5);
    assert_eq!(m.lanes.len(), 2);
    assert_eq!(m.edges.len(), 3);
    assert_eq!(m.with_trace(|t| t.event_count()), 5);
    assert!(m.violations().is_empty(), "{:?}", m.violations());
    assert_eq!(m.next_violation(None, None), None);
    m.analyse();
    assert!(m.is_analysed());
    assert!(m.replay().is_some());
    assert_eq!(m.with_trace(|t| t.event_count()), 5);
    let v: Vec<_> = m
        .violations()
        .iter()
        .filter(|v| rule_matches(v, None))
        .collect();
    assert_eq!(v.len(), 1, "{v:?}");
    assert_eq!(
        (v[0].event, v[0].rule, v[0].class, v[0].level, v[0].related),
        (
            2,
            "child-before-parent-in-job",
            Some("in-job"),
            "deny",
            Some(3)
        )
    );
    assert_eq!(m.next_violation(None, None), Some(2));
    assert_eq!(m.next_violation(Some(2), None), None);
    assert_eq!(m.prev_violation(4, None), Some(2));
    assert_eq!(m.prev_violation(2, None), None);
    assert_eq!(
        m.next_violation(None, Some("child-before-parent-in-job")),
        Some(2)
    );
    assert_eq!(m.next_violation(None, Some("no-such-rule")), None);
    // Idempotent.
    m.analyse();
    assert!(m.is_analysed());
}

/// Two KV groups store the same hashes: each child's edge goes to its own group's parent.
#[test]
fn edges_are_per_group() {
    let g = |e: KvEvent, group: u32| match e {
        KvEvent::BlockStored(mut s) => {
            s.group_idx = Some(group);
            KvEvent::BlockStored(s)
        }
        e => e,
    };
    let trace = Trace {
        records: vec![batch(
            0,
            vec![
                g(stored(1, None, "CPU"), 0),
                g(stored(2, Some(1), "CPU"), 0),
                g(stored(2, Some(1), "CPU"), 1),
                g(stored(1, None, "CPU"), 1),
            ],
        )],
    };
    let m = Model::from_trace("t", trace, LaneMode::Tier).unwrap();
    // Two KV groups: a lane per group, the events in their group's lane.
    let titles: Vec<String> = m.lanes.iter().map(Lane::title).collect();
    assert_eq!(titles, ["CPU · group 0", "CPU · group 1"]);
    assert_eq!(m.lane_of, [0, 0, 1, 1]);
    assert_eq!(
        m.edges,
        [
            Edge {
                parent: 0,
                child: 1,
                kind: EdgeKind::Forward
            },
            Edge {
                parent: 3,
                child: 2,
                kind: EdgeKind::ChildFirst
            },
        ]
    );
}

fn model_unanalysed() -> Model {
    let trace = Trace {
        records: vec![
            batch(0, vec![stored(1, None, "GPU"), stored(2, Some(1), "GPU")]),
            batch(
                1,
                vec![
                    stored(2, Some(1), "CPU"),
                    stored(1, None, "CPU"),
                    stored(3, Some(2), "CPU"),
                ],
            ),
        ],
    };
    Model::from_trace_timed("t", trace, LaneMode::Tier, &mut |_| {}).unwrap()
}

#[test]
fn lanes_edges_and_violations() {
    let m = model();
    assert_eq!(m.len(), 5);
    assert_eq!(
        m.lanes.iter().map(Lane::title).collect::<Vec<_>>(),
        ["GPU", "CPU"]
    );
    assert_eq!(m.lane_of, [0, 0, 1, 1, 1]);
    assert_eq!(
        m.edges,
        [
            Edge {
                parent: 0,
                child: 1,
                kind: EdgeKind::Forward
            },
            Edge {
                parent: 3,
                child: 2,
                kind: EdgeKind::ChildFirst
            },
            Edge {
                parent: 2,
                child: 4,
                kind: EdgeKind::Forward
            },
        ]
    );
    let reorders: Vec<_> = m
        .violations()
        .iter()
        .filter(|v| v.rule.starts_with("child-before-parent"))
        .collect();
    assert_eq!(reorders.len(), 1, "{:?}", m.violations());
    assert_eq!(reorders[0].event, 2);
    assert_eq!(reorders[0].rule, "child-before-parent-in-job");
    assert_eq!(reorders[0].related, Some(3));
    let rule = Some("child-before-parent-in-job");
    assert_eq!(m.next_violation(None, rule), Some(2));
    assert_eq!(m.next_violation(Some(2), rule), None);
    assert_eq!(m.prev_violation(4, rule), Some(2));
    assert_eq!(m.next_violation(None, Some("seq-gap")), None);
    assert_eq!(
        m.next_violation(None, None),
        Some(2),
        "consumer-loss findings are skipped by default"
    );
    assert!(m.is_violation(2) && !m.is_violation(0));
    let children = |i| m.children_of(i).map(|e| e.child).collect::<Vec<_>>();
    assert_eq!(children(3), [2]);
    assert_eq!(children(2), [4]);
    assert_eq!(children(0), [1]);
    assert!(children(4).is_empty());
}

/// A child whose parent is only stored in another lane gets a cross-lane edge from that
/// parent's first store; edges stay sorted by child with the others.
#[test]
fn cross_lane_edges() {
    let trace = Trace {
        records: vec![
            batch(0, vec![stored(1, None, "GPU"), stored(7, Some(9), "CPU")]),
            batch(1, vec![stored(5, Some(1), "CPU"), stored(1, None, "GPU")]),
            batch(2, vec![stored(9, None, "CPU"), stored(6, Some(5), "CPU")]),
        ],
    };
    let m = Model::from_trace("t", trace, LaneMode::Tier).unwrap();
    let e = |parent, child, kind| Edge {
        parent,
        child,
        kind,
    };
    assert_eq!(
        m.edges,
        [
            e(4, 1, EdgeKind::ChildFirst),
            e(0, 2, EdgeKind::CrossLane),
            e(2, 5, EdgeKind::Forward),
        ]
    );
    assert_eq!(m.children_of(0).map(|x| x.child).collect::<Vec<_>>(), [2]);
}

/// Edges indexed a slice at a time (one event per call, as the page does at a million
/// events) are the edges indexed at once: none before the index completes, then every one,
/// cross-lane and child-first included; a re-layout indexes them again.
#[test]
fn sliced_edges_match_one_pass() {
    let trace = Trace {
        records: vec![
            batch(0, vec![stored(1, None, "GPU"), stored(7, Some(9), "CPU")]),
            batch(1, vec![stored(5, Some(1), "CPU"), stored(1, None, "GPU")]),
            batch(2, vec![stored(9, None, "CPU"), stored(6, Some(5), "CPU")]),
            batch(
                3,
                vec![stored(2, Some(1), "GPU"), stored(8, Some(6), "CPU")],
            ),
        ],
    };
    let whole = Model::from_trace("t", trace.clone(), LaneMode::Tier).unwrap();
    let mut m = Model::flatten("t", trace).unwrap();
    m.layout_lanes(LaneMode::Tier);
    let mut calls = 0;
    while !m.index_edges_some(1) {
        assert!(!m.edges_indexed() && m.edges.is_empty());
        calls += 1;
    }
    // One event per call, then a call for the edges sorted by child, one for the low digit
    // of their parents; the next call sorts them by parent and completes the index.
    assert_eq!(
        calls,
        m.len() + 2,
        "one event per call, then the sort by child, then by the parent's low digit"
    );
    assert!(m.edges_indexed());
    assert_eq!(m.edges, whole.edges);
    assert_eq!(m.edges.len(), 5, "{:?}", m.edges);
    for i in 0..m.len() as u32 {
        let kids = |m: &Model| m.children_of(i).copied().collect::<Vec<_>>();
        assert_eq!(kids(&m), kids(&whole), "children of {i}");
    }
    m.layout_lanes(LaneMode::SourceTier);
    assert!(!m.edges_indexed());
    m.index_edges();
    assert_eq!(m.edges, whole.edges, "one source: the same lanes' edges");
}

/// The two radix passes order edge ids by (parent, child), parents past 16 bits and repeated
/// parents included, as a comparison sort does.
#[test]
fn edges_by_parent_in_two_digits_match_a_sort() {
    let parents = [70_000u32, 5, 65_541, 5, 0, 70_000, 131_077, 65_541, 3, 5];
    // Sorted by child, as the edge index is.
    let edges: Vec<Edge> = parents
        .iter()
        .enumerate()
        .map(|(c, &parent)| Edge {
            parent,
            child: 200_000 + c as u32,
            kind: EdgeKind::Forward,
        })
        .collect();
    let ids: Vec<u32> = (0..edges.len() as u32).collect();
    let low = super::edges::by_parent_digit(&edges, &ids, 0);
    let got = super::edges::by_parent_digit(&edges, &low, 16);
    let mut want = ids.clone();
    want.sort_by_key(|&k| (edges[k as usize].parent, edges[k as usize].child));
    assert_eq!(got, want);
    assert_ne!(low, want, "one pass is not enough here");
}

/// The timeline's red marks ([`Model::is_violation`], [`Model::order_events`]) are the events
/// with a finding of the default filter's rules, each once.
#[test]
fn order_events_are_the_default_filter() {
    let m = model();
    let expect: Vec<u32> = (0..m.len() as u32)
        .filter(|&i| m.violations_at(i).any(|v| rule_matches(v, None)))
        .collect();
    assert!(!expect.is_empty());
    assert_eq!(m.order_events(), expect);
    assert_eq!(
        m.order_events_in(0, 0).len(),
        usize::from(expect.contains(&0))
    );
    for i in 0..m.len() as u32 {
        assert_eq!(m.is_violation(i), expect.contains(&i));
    }
    for v in m.violations() {
        let rule: Rule = v.rule.parse().unwrap();
        assert_eq!(v.marks_order, ViolationFilter::for_rule(None).keeps(rule));
    }
}

/// What the page reads of all the findings (the default filter's rows and count, the count per
/// rule, the rule names) is counted as they are listed, a slice at a time: the same as going
/// over the whole list.
#[test]
fn the_listing_counts_what_a_pass_over_the_findings_finds() {
    let m = model_unanalysed();
    while m.analyse_some(1).is_some() {}
    let all = m.violations();
    let marked: Vec<u32> = (0..all.len() as u32)
        .filter(|&k| rule_matches(&all[k as usize], None))
        .collect();
    let mut rules: Vec<String> = all.iter().map(|v| v.rule.to_owned()).collect();
    rules.sort();
    rules.dedup();
    assert!(
        rules.len() >= 2 && !marked.is_empty() && marked.len() < all.len(),
        "{all:?}"
    );
    assert_eq!(m.marked_rows(), marked);
    assert_eq!(m.violation_count(None), marked.len());
    assert_eq!(m.rules(), rules);
    for r in &rules {
        let n = all.iter().filter(|v| rule_matches(v, Some(r))).count();
        assert_eq!(m.violation_count(Some(r)), n, "{r}");
    }
    assert_eq!(m.violation_count(Some("no-such-rule")), 0);
}

/// Zoomed far out the timeline bins whole blocks of events: the same marks as binning
/// event by event, each at most one column off.
#[test]
fn coarse_bins_match_fine_bins() {
    let n = 20_000u64;
    let records = (0..n / 10)
        .map(|b| {
            let evs = (0..10)
                .map(|j| {
                    let i = b * 10 + j;
                    let medium = ["GPU", "CPU", "GPU"][(i % 3) as usize];
                    if i % 97 == 0 {
                        removed(i, medium)
                    } else {
                        stored(i + 1_000_000, None, medium)
                    }
                })
                .collect();
            batch(b, evs)
        })
        .collect();
    let m = Model::from_trace_timed("t", Trace { records }, LaneMode::Tier, &mut |_| {}).unwrap();
    assert_eq!(m.lanes.len(), 2);
    for (lo, hi, start, per_px) in [
        (0u32, 19_999u32, 0.0, 128.0),
        (0, 19_999, -37.0, 150.0),
        (130, 17_001, 100.0, 200.0),
        (5_000, 5_100, 4_990.0, 130.0),
    ] {
        let cols = 200;
        let fine = m.bins_with(lo, hi, start, per_px, cols, false);
        let coarse = m.bins_with(lo, hi, start, per_px, cols, true);
        assert!(fine.iter().any(|b| *b != 0));
        for l in 0..2 {
            let row = |v: &[u8], c: usize| v.get(l * cols + c).copied().unwrap_or(0);
            for c in 0..cols {
                let near = |v: &[u8]| {
                    row(v, c) | row(v, c + 1) | c.checked_sub(1).map_or(0, |d| row(v, d))
                };
                assert_eq!(row(&fine, c) & !near(&coarse), 0, "lane {l} col {c}");
                assert_eq!(row(&coarse, c) & !near(&fine), 0, "lane {l} col {c}");
            }
        }
        // The removals (every 97th event) stay visible.
        assert!(coarse.iter().any(|b| b & 2 != 0));
    }
}

fn prov(tier: &str, job: Option<u64>) -> Provenance {
    Provenance {
        tier: tier.into(),
        kind: Default::default(),
        job_id: job,
        req_id: None,
        group_idx: None,
        chunk_idx: None,
        step: None,
    }
}

fn removed(h: u64, medium: &str) -> KvEvent {
    KvEvent::BlockRemoved(kvscope_core::event::BlockRemoved {
        block_hashes: vec![BlockHash::Int(h)].into(),
        medium: Some(label(medium)),
        group_idx: None,
        locality: None,
        ownership: None,
    })
}

/// Per-job lanes: two provenance jobs in CPU get a sub-lane each (in order of first
/// event), the GPU event and the CPU removal without a job stay in their tier's "no job"
/// lane; the same lanes before and after the analysis.
#[test]
fn lanes_per_job() {
    let mut jobs = batch(
        1,
        vec![
            stored(11, None, "CPU"),
            stored(12, Some(11), "CPU"),
            stored(21, None, "CPU"),
            removed(11, "CPU"),
        ],
    );
    if let TraceRecord::Batch(b) = &mut jobs {
        b.provenance = Some(vec![
            prov("CPU", Some(9)),
            prov("CPU", Some(9)),
            prov("CPU", Some(4)),
            prov("CPU", None),
        ]);
    }
    let trace = Trace {
        records: vec![batch(0, vec![stored(1, None, "GPU")]), jobs],
    };
    let mut m = Model::from_trace_timed("t", trace, LaneMode::TierJob, &mut |_| {}).unwrap();
    let titles = |m: &Model| m.lanes.iter().map(Lane::title).collect::<Vec<_>>();
    let expected = ["GPU · no job", "CPU · no job", "CPU · job 9", "CPU · job 4"];
    assert_eq!(titles(&m), expected);
    assert_eq!(m.lane_of, [0, 2, 2, 3, 1]);
    // Parent→child edges stay within the job's lane.
    assert_eq!(
        m.edges,
        [Edge {
            parent: 1,
            child: 2,
            kind: EdgeKind::Forward
        }]
    );
    m.analyse();
    m.layout(LaneMode::TierJob);
    assert_eq!(titles(&m), expected);
    assert_eq!(m.lane_of, [0, 2, 2, 3, 1]);
    m.layout(LaneMode::Tier);
    assert_eq!(titles(&m), ["GPU", "CPU"]);
    assert_eq!(m.lane_of, [0, 1, 1, 1, 1]);
}

/// Without provenance, jobs are the analysis' inferred ones (a batch's run of same-medium
/// connector events), labelled as inferred.
#[test]
fn lanes_per_inferred_job() {
    let mut m = model();
    m.layout(LaneMode::TierJob);
    assert_eq!(
        m.lanes.iter().map(Lane::title).collect::<Vec<_>>(),
        ["GPU · no job", "CPU · job ~0 (inferred)"]
    );
    assert_eq!(m.lane_of, [0, 0, 1, 1, 1]);
    assert_eq!(
        LaneMode::parse(LaneMode::TierJob.as_str()),
        LaneMode::TierJob
    );
    assert_eq!(LaneMode::parse("bogus"), LaneMode::Tier);
}

#[test]
fn u64_key_sort_is_stable() {
    let mut v: Vec<(u32, char)> = vec![(3, 'a'), (1, 'b'), (3, 'c'), (0, 'd'), (1, 'e')];
    sort_by_u64(&mut v, |x| u64::from(x.0));
    assert_eq!(v, [(0, 'd'), (1, 'b'), (1, 'e'), (3, 'a'), (3, 'c')]);
}

#[test]
fn an_event_described_in_one_line() {
    let m = model();
    // Small hashes: llm-d ignores this trace's batches (a decoding failure), the rest apply.
    assert_eq!(
        m.describe(2, None),
        "#2 BlockStored · CPU · block 2 · parent 1 · child-before-parent-in-job, consumer-loss · llmd ignored"
    );
    // The routing preconditions fire on this batch (the page builds the core with them).
    assert_eq!(
        m.describe(0, Some(kvscope_core::consumers::ConsumerKind::Dynamo)),
        "#0 BlockStored · GPU · block 1 · root block · consumer-loss, undecodable-batch, silent-source · dynamo applied"
    );
}

#[test]
fn the_axis_names_batches_and_time() {
    let m = model();
    assert_eq!(m.batch_ordinal(0), 0);
    assert_eq!(m.batch_ordinal(1), 0);
    assert_eq!(m.batch_ordinal(2), 1);
    assert_eq!(m.batch_ordinal(4), 1);
    assert_eq!(m.seconds_at(4), Some(1.0));
    assert_eq!(m.axis_label(1), "batch 0 · +0 ms");
    assert_eq!(m.axis_label(3), "batch 1 · +1.00 s");
    // About three significant digits, so a label stays short at any trace length.
    let at = |ts: &[f64]| {
        let records = ts
            .iter()
            .enumerate()
            .map(|(k, t)| {
                let mut b = batch(k as u64, vec![stored(k as u64 + 1, None, "GPU")]);
                if let TraceRecord::Batch(b) = &mut b {
                    b.ts = *t;
                }
                b
            })
            .collect();
        let m = Model::from_trace("t", Trace { records }, LaneMode::Tier).unwrap();
        (0..ts.len() as u32)
            .map(|i| m.axis_label(i))
            .collect::<Vec<_>>()
    };
    assert_eq!(
        at(&[100.0, 100.35, 162.5, 5100.0]),
        [
            "batch 0 · +0 ms",
            "batch 1 · +350 ms",
            "batch 2 · +62.5 s",
            "batch 3 · +5000 s"
        ]
    );
}

/// The loader gathers the default lanes while it reads (`Scan`, a batch at a time as records
/// arrive): the same lanes and per-event lanes as laying out the whole trace, with a cleared
/// event in lane 0 and the tiers in their order.
#[test]
fn lanes_gathered_while_reading_match_the_layout() {
    let records = vec![
        batch(0, vec![stored(1, None, "CPU"), stored(2, None, "GPU")]),
        TraceRecord::Header(TraceHeader::default()),
        batch(
            1,
            vec![KvEvent::AllBlocksCleared, stored(3, Some(1), "CPU")],
        ),
        batch(2, vec![stored(4, None, "DISK"), stored(5, Some(2), "GPU")]),
    ];
    let mut read = Vec::new();
    let mut scan = Scan::default();
    for r in records.clone() {
        if let TraceRecord::Batch(b) = &r {
            scan.batch(b);
        }
        read.push(r);
    }
    let mut streamed = Model::flatten("t", Trace { records: read }).unwrap();
    streamed.layout_scanned(&scan);
    let whole = Model::from_trace("t", Trace { records }, LaneMode::Tier).unwrap();
    let titles: Vec<String> = streamed.lanes.iter().map(Lane::title).collect();
    assert_eq!(titles, ["GPU", "CPU", "DISK"]);
    assert_eq!(streamed.lane_of, [1, 0, 0, 1, 2, 0]);
    assert_eq!(streamed.lanes, whole.lanes);
    assert_eq!(streamed.lane_of, whole.lane_of);
    assert_eq!(streamed.blocks, whole.blocks);
}

/// The loader shows the records read so far and extends the model as it reads on
/// (`Model::extend`): a model grown a record at a time, laid out from the scan, is the model of
/// the whole trace (events, kinds, batches, gaps, header, lanes, bins, edges).
#[test]
fn a_model_extended_while_reading_matches_the_whole_trace() {
    let records = vec![
        TraceRecord::Header(TraceHeader::default()),
        batch(0, vec![stored(1, None, "CPU"), stored(2, None, "GPU")]),
        batch(1, vec![]),
        batch(
            2,
            vec![KvEvent::AllBlocksCleared, stored(3, Some(1), "CPU")],
        ),
        batch(
            3,
            vec![stored(4, Some(2), "GPU"), stored(5, Some(4), "GPU")],
        ),
    ];
    let mut grown = Model::empty("t");
    let mut scan = Scan::default();
    for r in records.clone() {
        if let TraceRecord::Batch(b) = &r {
            scan.batch(b);
        }
        let mut fresh = vec![r];
        grown.extend(&mut fresh).unwrap();
        assert!(fresh.is_empty(), "moved into the model");
        grown.layout_scanned(&scan);
    }
    grown.index_edges();
    let whole = Model::from_trace("t", Trace { records }, LaneMode::Tier).unwrap();
    assert_eq!(grown.len(), 6);
    assert_eq!(grown.len(), whole.len());
    assert_eq!(grown.kinds, whole.kinds);
    assert_eq!(grown.batch_count, whole.batch_count);
    assert_eq!(grown.batch_starts, whole.batch_starts);
    assert_eq!(grown.gaps, whole.gaps);
    assert_eq!(grown.header, whole.header);
    assert_eq!(grown.events, whole.events);
    assert_eq!(grown.lanes, whole.lanes);
    assert_eq!(grown.lane_of, whole.lane_of);
    assert_eq!(grown.blocks, whole.blocks);
    assert_eq!(grown.edges, whole.edges);
    for i in 0..6 {
        let kids = |m: &Model| m.children_of(i).copied().collect::<Vec<_>>();
        assert_eq!(kids(&grown), kids(&whole));
    }
    grown.analyse();
    assert_eq!(grown.violations(), whole.violations());
}
