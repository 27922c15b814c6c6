//! The streaming analysis ([`Analyzer`], what `kvscope check` and `verdicts` run) against the
//! whole-trace one ([`analyze`], what the page and the replay run): fed the same records in
//! order, the findings (rendered), the loss summaries and every event's final verdicts are the
//! same, on every upstream fixture, every built-in scenario in both orders, and the same
//! traces cut into many batches, interleaved with gaps, and with provenance stripped.

mod common;

use kvscope_core::analysis::{analyze, AnalysisConfig, Analyzer, Rule};
use kvscope_core::consumers::ConsumerKind;
use kvscope_core::scenario::builtin::BUILTINS;
use kvscope_core::scenario::Scenario;
use kvscope_core::sim::simulate;
use kvscope_core::trace::{SeqGap, Trace, TraceRecord};

fn configs() -> Vec<AnalysisConfig> {
    let mut replay = AnalysisConfig::default();
    replay.consumer_config.llmd_replay = true;
    replay.consumer_config.ideal_pending_limit = 2;
    let mut strict = AnalysisConfig {
        workers: Some(2),
        ..AnalysisConfig::default()
    };
    strict.rules.apply_override("remove-unknown=deny").unwrap();
    strict.rules.apply_override("consumer-loss=allow").unwrap();
    vec![AnalysisConfig::default(), replay, strict]
}

/// Stream `trace` and compare with the whole-trace analysis; returns how many findings and
/// violations there were (so the callers know the comparison had something to compare).
fn same(name: &str, trace: &Trace) -> (usize, usize) {
    let mut seen = (0, 0);
    for config in configs() {
        let whole = analyze(trace, &config);
        let mut a = Analyzer::new(&config);
        for rec in &trace.records {
            a.push(rec);
        }
        assert_eq!(a.events(), whole.event_count(), "{name}: events");
        let report = a.finish();
        assert_eq!(report.events, whole.event_count(), "{name}: events");
        assert_eq!(report.jobs, whole.index.jobs.len(), "{name}: jobs");
        assert_eq!(report.sources, whole.index.sources, "{name}: sources");
        let findings: Vec<_> = report.findings.iter().map(|f| f.render()).collect();
        assert_eq!(findings, whole.findings, "{name}: findings");
        let violations: Vec<_> = report.findings.violations().map(|f| f.render()).collect();
        assert_eq!(violations, whole.violations, "{name}: violations");
        for rule in Rule::ALL {
            assert_eq!(
                report.findings.count(rule),
                whole.count(rule),
                "{name}: {rule}"
            );
        }
        assert_eq!(report.has_deny(), whole.has_deny(), "{name}: deny");
        // Everything but the lost hashes and the lost events, which only `analyze` keeps
        // (`compare` reads the hashes, the replay's lens the events).
        let mut want_losses = whole.losses.clone();
        for l in &mut want_losses {
            l.lost_hashes.clear();
            l.lost_events.clear();
        }
        let losses: Vec<_> = report.losses().map(|l| l.to_summary()).collect();
        assert_eq!(losses, want_losses, "{name}: losses");
        // The report's JSON form of the losses is the summaries'.
        assert_eq!(
            serde_json::to_string(&report.losses().collect::<Vec<_>>()).unwrap(),
            serde_json::to_string(&want_losses).unwrap(),
            "{name}: losses as JSON"
        );
        for kind in &config.consumers {
            for i in 0..whole.event_count() {
                assert_eq!(
                    report.verdict_kind(*kind, i),
                    whole.verdict_kind(*kind, i),
                    "{name}: verdict of event {i} for {kind:?}"
                );
            }
        }
        assert_eq!(report.verdict_kind(ConsumerKind::Ideal, usize::MAX), None);
        seen.0 += findings.len();
        seen.1 += violations.len();
    }
    seen
}

/// The same events, one batch per event (seq renumbered): a seq skipped after every seventh,
/// a gap record and an empty batch after every tenth, the seq going back (a restart) at the
/// 25th.
fn one_per_batch(trace: &Trace) -> Trace {
    let mut out = Trace {
        records: Vec::new(),
    };
    let mut seq = 0u64;
    for r in &trace.records {
        let TraceRecord::Batch(b) = r else {
            out.records.push(r.clone());
            continue;
        };
        for (i, ev) in b.events.iter().enumerate() {
            let mut one = b.clone();
            one.events = vec![ev.clone()];
            one.provenance = b
                .provenance
                .as_ref()
                .map(|p| p.get(i).cloned().into_iter().collect());
            one.seq = seq;
            seq += 1;
            let k = out.records.len();
            out.records.push(TraceRecord::Batch(one.clone()));
            if k % 7 == 6 {
                seq += 1;
            }
            if k == 25 {
                seq = 3;
            }
            if k % 10 == 9 {
                out.records.push(TraceRecord::Gap(SeqGap {
                    source: one.source.clone(),
                    dp_rank: one.dp_rank,
                    expected_seq: seq,
                    received_seq: seq + 2,
                    recovered: k % 20 == 9,
                }));
                one.events = Vec::new();
                one.provenance = None;
                one.seq = seq + 5;
                out.records.push(TraceRecord::Batch(one));
            }
        }
    }
    out
}

fn stripped(trace: &Trace) -> Trace {
    let mut t = trace.clone();
    for r in &mut t.records {
        if let TraceRecord::Batch(b) = r {
            b.provenance = None;
        }
    }
    t
}

#[test]
fn streaming_equals_whole_trace_on_upstream_fixtures() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/vllm");
    let mut n = 0;
    let mut seen = (0, 0);
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        let Some(ext) = path.extension().and_then(|e| e.to_str()) else {
            continue;
        };
        if !matches!(ext, "jsonl" | "msgpack") {
            continue;
        }
        let bytes = std::fs::read(&path).unwrap();
        let Ok(trace) = kvscope_core::wire::read_trace(&bytes, "fixture") else {
            continue;
        };
        let name = path.display().to_string();
        for t in [trace.clone(), one_per_batch(&trace)] {
            let (f, v) = same(&name, &t);
            seen = (seen.0 + f, seen.1 + v);
        }
        n += 1;
    }
    assert!(n >= 10, "only {n} fixtures read");
    assert!(
        seen.0 > 100 && seen.1 > 10,
        "too few findings compared: {seen:?}"
    );
    // The fixture list is read from the directory (see `common`).
    assert!(!common::fixture_names().is_empty());
}

#[test]
fn streaming_equals_whole_trace_on_builtin_scenarios() {
    let mut seen = (0, 0);
    for b in BUILTINS {
        let mut s: serde_json::Value = serde_json::from_str(b.json).unwrap();
        for order in [
            serde_json::json!({"mode": "fixed"}),
            serde_json::json!({"mode": "cpython", "python_hash_seed": 3}),
        ] {
            s["order"] = order.clone();
            let Ok(scenario) = Scenario::from_json(&s.to_string()) else {
                continue;
            };
            let trace = simulate(&scenario).unwrap();
            let name = format!("{} {order}", b.name);
            for t in [stripped(&trace), one_per_batch(&trace), trace] {
                let (f, v) = same(&name, &t);
                seen = (seen.0 + f, seen.1 + v);
            }
        }
    }
    assert!(
        seen.0 > 100 && seen.1 > 10,
        "too few findings compared: {seen:?}"
    );
}

/// A JSON Lines batch of `events` (each `(type, hashes, parent, medium)`).
fn batch(seq: u64, events: &[(&str, &[u64], Option<u64>, &str)]) -> String {
    let evs: Vec<String> = events
        .iter()
        .map(|(ty, hashes, parent, medium)| {
            let hashes = format!("{hashes:?}");
            if *ty == "BlockStored" {
                let parent = parent.map_or("null".to_string(), |p| p.to_string());
                let tokens = vec!["1"; 16 * hashes.matches(',').count() + 16].join(", ");
                format!(
                    "{{\"type\": \"BlockStored\", \"block_hashes\": {hashes}, \"parent_block_hash\": {parent}, \"token_ids\": [{tokens}], \"block_size\": 16, \"lora_id\": null, \"medium\": \"{medium}\"}}"
                )
            } else {
                format!("{{\"type\": \"BlockRemoved\", \"block_hashes\": {hashes}, \"medium\": \"{medium}\"}}")
            }
        })
        .collect();
    format!(
        "{{\"source\": \"a\", \"seq\": {seq}, \"ts\": {}.0, \"events\": [{}]}}\n",
        1_700_000_000 + seq,
        evs.join(", ")
    )
}

/// The streaming run gives back the ids of removed blocks nothing refers to and new hashes
/// take them (`analysis/run/recycle.rs`): with LRU churn whose evicted prefixes come back,
/// hashes named again after their release, and parents removed before their children come, it
/// still agrees with the whole-trace analysis.
#[test]
fn streaming_equals_whole_trace_when_block_ids_are_recycled() {
    // Churn: a CPU tier of 8 chunks, prompts of 8 blocks, every third request repeating an
    // earlier one's prompt (its hashes come back after they were evicted and released).
    let mut requests = Vec::new();
    for i in 0..60 {
        let r = if i % 3 == 2 {
            serde_json::json!({"id": format!("r{i}"), "arrival_step": i * 16,
                "shared_prefix": {"request": format!("r{}", i - 2), "len": 128}})
        } else {
            serde_json::json!({"id": format!("r{i}"), "prompt_len": 128, "arrival_step": i * 16})
        };
        requests.push(r);
    }
    let s = serde_json::json!({
        "name": "churn", "seed": 5, "block_size": 16,
        "cpu": {"capacity_chunks": 8},
        "scheduler": {"max_num_batched_tokens": 16, "max_num_seqs": 4},
        "gpu_prefix_cache": false,
        "requests": requests,
    });
    let trace = simulate(&Scenario::from_json(&s.to_string()).unwrap()).unwrap();
    let removed = trace
        .records
        .iter()
        .filter_map(|r| match r {
            TraceRecord::Batch(b) => Some(b),
            _ => None,
        })
        .flat_map(|b| &b.events)
        .filter(|e| matches!(e, kvscope_core::event::KvEvent::BlockRemoved(_)))
        .count();
    assert!(removed > 300, "too little churn: {removed} removals");
    for t in [stripped(&trace), one_per_batch(&trace), trace] {
        same("churn", &t);
    }

    // By hand: block 1 stored then removed, then named as a parent on the GPU tier; block 9
    // never stored (unknown-parent); block 2 removed while its child 3 waits, then 3 removed
    // too; 1 stored again.
    let lines = [
        batch(0, &[("BlockStored", &[1], None, "CPU")]),
        batch(1, &[("BlockRemoved", &[1], None, "CPU")]),
        batch(2, &[("BlockStored", &[5], Some(1), "GPU")]),
        batch(3, &[("BlockStored", &[6], Some(9), "CPU")]),
        batch(4, &[("BlockStored", &[3], Some(2), "CPU")]),
        batch(5, &[("BlockStored", &[2], None, "GPU")]),
        batch(
            6,
            &[
                ("BlockRemoved", &[2], None, "GPU"),
                ("BlockRemoved", &[3], None, "CPU"),
            ],
        ),
        batch(7, &[("BlockRemoved", &[7], None, "CPU")]),
        batch(
            8,
            &[
                ("BlockStored", &[1, 4], None, "CPU"),
                ("BlockStored", &[8], Some(4), "CPU"),
            ],
        ),
        batch(9, &[("BlockRemoved", &[4, 1, 8, 5, 6], None, "CPU")]),
        batch(10, &[("BlockStored", &[10], Some(2), "CPU")]),
    ]
    .concat();
    let trace = kvscope_core::wire::read_trace(lines.as_bytes(), "recycle.jsonl").unwrap();
    let (findings, _) = same("by hand", &trace);
    assert!(findings > 3, "{findings} findings");
    for t in [stripped(&trace), one_per_batch(&trace)] {
        same("by hand", &t);
    }
}

/// Blocks stored, then removed (the streaming run gives their ids back: `run/recycle.rs`),
/// then named as parents by children that come later, on another engine's CPU tier where the
/// parent is never stored. The whole-trace run remembers that each parent was once stored
/// (no `unknown-parent`); the streaming run must too, though the parent's id went to another
/// block in between and the parent comes back under a new id. And a source's blocks cleared
/// by `AllBlocksCleared` give their ids back the same way.
#[test]
fn a_parent_stored_then_removed_is_known_after_its_id_is_reused() {
    use kvscope_core::consumers::testkit::{batch, removed, stored, trace};
    use kvscope_core::event::KvEvent;
    let cpu = Some("CPU");
    let mut records = Vec::new();
    // Each source's seq counts up by one (no gap findings).
    let mut seqs = [0u64; 2];
    let mut next = |source: &str, events| {
        let seq = &mut seqs[usize::from(source == "b")];
        *seq += 1;
        batch(source, *seq, events)
    };
    for k in 0..40u64 {
        let p = 1000 + k;
        records.push(next("a", vec![stored(&[p], None, cpu, 4)]));
        if k % 4 == 3 {
            records.push(next("a", vec![KvEvent::AllBlocksCleared]));
        } else {
            records.push(next("a", vec![removed(&[p], cpu)]));
        }
        // New blocks that take the ids given back, then the child of the removed block.
        records.push(next("b", vec![stored(&[5000 + k], None, cpu, 4)]));
        records.push(next("b", vec![stored(&[2000 + k], Some(p), cpu, 4)]));
    }
    // A parent never stored anywhere: the one `unknown-parent`.
    records.push(next("b", vec![stored(&[3000], Some(4000), cpu, 4)]));
    let t = trace(records);
    same("removed parents", &t);
    let config = AnalysisConfig::default();
    let mut a = Analyzer::new(&config);
    for rec in &t.records {
        a.push(rec);
    }
    let report = a.finish();
    assert_eq!(report.findings.count(Rule::UnknownParent), 1);
    assert_eq!(report.findings.count(Rule::SeqGap), 0);
}

/// A trace seen with one KV group until a second one appears late (the streaming run then
/// names the ids given so far, released ones left out), with the same hashes in both groups:
/// an inversion and an unknown parent in each group.
#[test]
fn a_second_kv_group_appearing_late_streams_like_the_whole_trace() {
    use kvscope_core::consumers::testkit::{batch, removed, stored, trace};
    use kvscope_core::event::KvEvent;
    let cpu = Some("CPU");
    let in_group = |mut ev: KvEvent, g: u32| {
        match &mut ev {
            KvEvent::BlockStored(e) => e.group_idx = Some(g),
            KvEvent::BlockRemoved(e) => e.group_idx = Some(g),
            KvEvent::AllBlocksCleared => {}
        }
        ev
    };
    let mut records = Vec::new();
    let mut seq = 0;
    for (pass, g) in [0u32, 0, 1, 0].into_iter().enumerate() {
        for k in 0..20u64 {
            let mut events = vec![
                in_group(stored(&[k + 1], Some(k), cpu, 4), g),
                in_group(stored(&[k], None, cpu, 4), g),
                in_group(stored(&[500 + k], Some(900 + k), cpu, 4), g),
                in_group(removed(&[k + 1, k], cpu), g),
            ];
            // Blocks kept from before the second group appears, removed after it.
            match pass {
                0 => events.push(stored(&[7000 + k], None, cpu, 4)),
                3 => events.push(removed(&[7000 + k], cpu)),
                _ => {}
            }
            records.push(batch("a", seq, events));
            seq += 1;
        }
    }
    let (findings, violations) = same("late group", &trace(records));
    assert!(findings > 0 && violations > 0, "{findings} {violations}");
}
