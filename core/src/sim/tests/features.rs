//! Simulation tests of single features: explicit schedules, LoRA, GPU events, hash formats,
//! built-ins, offload limits, loads, provenance, wire round trips and properties.

use super::*;

// Explicit schedules: chunked prefill over steps, one job per step, ts = start + step.
#[test]
fn explicit_schedule_jobs_per_step() {
    let t = run(&format!(
        r#"{{"block_size":4,"requests":[{{"id":"a","token_ids":[{}]}}],
            "steps":[{{"schedule":{{"a":10}}}},{{"schedule":{{"a":6}}}},{{"schedule":{{"a":1}},"finish":["a"]}}]}}"#,
        tokens(16)
    ));
    let bs = batches(&t);
    assert_eq!(bs.len(), 2);
    assert_eq!(
        (bs[0].ts, bs[0].seq, bs[0].events.len()),
        (1700000000.0, 0, 2)
    );
    assert_eq!(
        (bs[1].ts, bs[1].seq, bs[1].events.len()),
        (1700000001.0, 1, 2)
    );
    assert_eq!(
        stored(&bs[1].events[0]).unwrap().parent_block_hash,
        Some(BlockHash::Int(H1))
    );
}

// LoRA: lora_id / lora_name on offload events, extra_keys omitted, hashes include the name.
#[test]
fn lora_fields_on_offload_events() {
    let t = run(&format!(
        r#"{{"block_size":4,"requests":[{{"id":"a","token_ids":[{}],"lora_id":3,"lora_name":"ad"}}]}}"#,
        tokens(4)
    ));
    let e = stored(&batches(&t)[0].events[0]).unwrap();
    assert_eq!(e.lora_id, Some(3));
    assert_eq!(e.lora_name.as_deref(), Some("ad"));
    assert_eq!(e.extra_keys, None);
    assert_ne!(ints(&e.block_hashes), vec![H0]);
}

// GPU events first in the batch; offload_prompt_only false stores decode blocks.
#[test]
fn gpu_events_come_first() {
    let t = run(&format!(
        r#"{{"block_size":4,"gpu_events":true,"offload_prompt_only":false,
            "requests":[{{"id":"a","token_ids":[{}],"max_tokens":5}}]}}"#,
        tokens(8)
    ));
    let b = batches(&t)[0];
    let media: Vec<&str> = b.events.iter().map(|e| e.medium().unwrap()).collect();
    assert_eq!(media, vec!["GPU", "CPU", "CPU"]);
    let g = stored(&b.events[0]).unwrap();
    assert_eq!(ints(&g.block_hashes), vec![H0, H1]);
    assert_eq!(g.extra_keys, Some(vec![None, None]));
    // decode fills block 2 (tokens 9..12) and it is offloaded too
    let cpu_chunks: usize = t
        .batches()
        .flat_map(|b| b.events.iter())
        .filter(|e| e.medium() == Some("CPU"))
        .count();
    assert_eq!(cpu_chunks, 3);
}

#[test]
fn hash_format_bytes_and_two_pods() {
    let t = run(&format!(
        r#"{{"block_size":4,"hashing":{{"format":"bytes"}},"requests":[{{"id":"a","token_ids":[{}]}}]}}"#,
        tokens(4)
    ));
    let e = stored(&batches(&t)[0].events[0]).unwrap();
    assert!(matches!(&e.block_hashes[0], BlockHash::Bytes(b) if b.len() == 32));
    assert_eq!(e.block_hashes[0].as_u64(), H0);
    let s = crate::scenario::builtin::load("two-pods-dp")
        .unwrap()
        .unwrap();
    let t = simulate(&s).unwrap();
    let mut seqs: HashMap<(String, Option<u32>), u64> = HashMap::new();
    let mut last_ts = f64::MIN;
    for b in t.batches() {
        let next = seqs.entry((b.source.clone(), b.dp_rank)).or_insert(0);
        assert_eq!(b.seq, *next);
        *next += 1;
        assert!(b.ts >= last_ts);
        last_ts = b.ts;
    }
    assert_eq!(seqs.len(), 3);
}

#[test]
fn every_builtin_simulates() {
    for b in crate::scenario::builtin::BUILTINS {
        let s = Scenario::from_json(b.json).unwrap();
        let t = simulate(&s).unwrap();
        assert!(t.event_count() > 0, "{}", b.name);
        for order in [
            OrderMode::Fixed,
            OrderMode::CPython {
                python_hash_seed: 0,
            },
        ] {
            let mut s2 = s.clone();
            s2.order = order;
            // order changes which chunks are evicted (docs/vllm-offloading.md, fact 5), so counts may differ
            assert!(simulate(&s2).unwrap().event_count() > 0, "{}", b.name);
        }
    }
}

#[test]
fn offload_prompt_only_and_max_offload_tokens() {
    let t = run(&format!(
        r#"{{"block_size":4,"requests":[{{"id":"a","token_ids":[{}],"max_tokens":9}}]}}"#,
        tokens(8)
    ));
    assert_eq!(
        t.event_count(),
        2,
        "decode blocks are not offloaded by default"
    );
    let t = run(&format!(
        r#"{{"block_size":4,"requests":[{{"id":"a","token_ids":[{}],"max_offload_tokens":9}}]}}"#,
        tokens(16)
    ));
    assert_eq!(chunk_orders(&t), vec![vec![0, 1]]);
}

#[test]
fn cpu_hit_loads_then_stores_only_new_chunks() {
    // no GPU prefix cache: b's shared 16 tokens hit the CPU tier → load job; b waits for the
    // load (same-step completion) and is scheduled the next step from the loaded tokens.
    let t = run(&format!(
        r#"{{"block_size":4,"gpu_prefix_cache":false,"requests":[
            {{"id":"a","token_ids":[{}]}},
            {{"id":"b","shared_prefix":{{"request":"a","len":16}},"token_ids":[50,51,52,53,54,55,56,57],"arrival_step":2}}]}}"#,
        tokens(16)
    ));
    let bs = batches(&t);
    assert_eq!(bs.len(), 2);
    assert_eq!(bs[1].ts, 1700000003.0, "b runs one step after its load");
    assert_eq!(chunk_orders(&t), vec![vec![0, 1, 2, 3], vec![4, 5]]);
}

#[test]
fn every_event_has_provenance_with_step() {
    for b in crate::scenario::builtin::BUILTINS {
        let t = simulate(&Scenario::from_json(b.json).unwrap()).unwrap();
        for bt in t.batches() {
            let p = bt.provenance.as_ref().unwrap();
            assert_eq!(p.len(), bt.events.len());
            for (e, p) in bt.events.iter().zip(p) {
                let step = p.step.unwrap() as f64;
                assert_eq!(bt.ts, s_ts(step));
                if let KvEvent::BlockStored(_) = e {
                    assert!(p.req_id.is_some(), "{}: {p:?}", b.name);
                }
            }
        }
    }
}

fn s_ts(step: f64) -> f64 {
    1700000000.0 + step
}

// 11. Wire round trip of generated traces (map and legacy array), and byte-identical JSONL.
#[test]
fn generated_traces_round_trip_and_are_byte_identical() {
    use crate::wire::{jsonl, msgpack, EventEncoding};
    for b in crate::scenario::builtin::BUILTINS {
        let s = Scenario::from_json(b.json).unwrap();
        let t = simulate(&s).unwrap();
        let text = jsonl::write_trace(&t);
        assert_eq!(
            text,
            jsonl::write_trace(&simulate(&s).unwrap()),
            "{}",
            b.name
        );
        let back = jsonl::read_trace(text.as_bytes()).unwrap();
        let (x, y): (Vec<_>, Vec<_>) = (t.batches().collect(), back.batches().collect());
        assert_eq!(x.len(), y.len());
        for (a, c) in x.iter().zip(&y) {
            assert_eq!(
                (&a.source, a.dp_rank, a.seq, a.ts, &a.events, &a.provenance),
                (&c.source, c.dp_rank, c.seq, c.ts, &c.events, &c.provenance),
                "{}",
                b.name
            );
            for enc in [EventEncoding::Map, EventEncoding::Array] {
                let bytes = msgpack::encode_batch(&a.to_wire(), enc);
                assert_eq!(
                    msgpack::decode_batch(&bytes).unwrap(),
                    a.to_wire(),
                    "{}",
                    b.name
                );
            }
        }
    }
}

// ----- property tests -----

fn scenario_strategy() -> impl Strategy<Value = Scenario> {
    (
        any::<u64>(),
        1u32..=3,
        1u32..=3,
        prop::collection::vec((1u32..40, 0u64..5, 0u32..3, any::<bool>()), 1..6),
        prop_oneof![Just(4u64), Just(6), Just(10), Just(1000)],
        1u32..=2,
        any::<bool>(),
        prop_oneof![Just(0u32), Just(8), Just(12)],
        0usize..=2,
    )
        .prop_map(
            |(seed, bs, bpc, reqs, cap, workers, next_step, budget, tiers)| {
                let mut json = serde_json::json!({
                    "seed": seed,
                    "block_size": bs * 2,
                    "blocks_per_chunk": bpc,
                    "cpu": {"capacity_chunks": cap},
                    "completion": {"workers": workers,
                                   "timing": if next_step {"next_step"} else {"same_step"}},
                    "scheduler": {"max_num_batched_tokens": if budget == 0 {8192} else {budget}},
                    "secondary_tiers": (0..tiers).map(|i| serde_json::json!({"name": format!("t{i}")})).collect::<Vec<_>>(),
                });
                let mut rs = Vec::new();
                for (i, (len, arrival, outs, share)) in reqs.into_iter().enumerate() {
                    let mut r = serde_json::json!({"id": format!("r{i}"), "prompt_len": len,
                        "arrival_step": arrival, "max_tokens": outs + 1});
                    if share && i > 0 {
                        r["shared_prefix"] = serde_json::json!({"request": "r0", "len": 16});
                    }
                    rs.push(r);
                }
                json["requests"] = serde_json::Value::Array(rs);
                serde_json::from_value(json).unwrap()
            },
        )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn fixed_mode_invariants(s in scenario_strategy()) {
        let t = simulate(&s).unwrap();
        // I1 + I2: per job (and tier) and group, chunks strictly increase; parents chain.
        let mut per_job: HashMap<(u64, String, u32), Vec<&BlockStored>> = HashMap::new();
        let mut chunk_of: HashMap<(u64, String, u32), Vec<u32>> = HashMap::new();
        for b in t.batches() {
            for (e, p) in b.events.iter().zip(b.provenance.as_ref().unwrap()) {
                // A STORAGE event can be a placeholder (no chunk): its chunk's metadata was
                // popped by a CPU removal translated earlier in the same batch (upstream
                // behaviour, vLLM #57453). I1 is about self-describing chunk events.
                if let (KvEvent::BlockStored(st), ProvenanceKind::OffloadStore | ProvenanceKind::SecondaryStore, Some(c)) = (e, p.kind, p.chunk_idx) {
                    let k = (p.job_id.unwrap(), p.tier.clone(), p.group_idx.unwrap());
                    per_job.entry(k.clone()).or_default().push(st);
                    chunk_of.entry(k).or_default().push(c);
                }
            }
        }
        for (k, chunks) in &chunk_of {
            prop_assert!(chunks.windows(2).all(|w| w[0] < w[1]), "{k:?}: {chunks:?}");
            let evs = &per_job[k];
            for (w, c) in evs.windows(2).zip(chunks.windows(2)) {
                if c[1] == c[0] + 1 {
                    prop_assert_eq!(w[1].parent_block_hash.as_ref(), w[0].block_hashes.last());
                }
            }
            let mut seen = HashSet::new();
            for e in evs {
                prop_assert!(seen.insert(e.block_hashes.last().cloned()), "duplicate key in job");
            }
        }
        // I3: replaying CPU events, residency never exceeds capacity.
        let cap = s.cpu.capacity_chunks as usize;
        let mut resident: HashSet<(u32, BlockHash)> = HashSet::new();
        for b in t.batches() {
            for e in &b.events {
                match e {
                    KvEvent::BlockStored(st) if st.medium.as_deref() == Some("CPU") => {
                        resident.insert((st.group_idx.unwrap(), st.block_hashes.last().unwrap().clone()));
                    }
                    KvEvent::BlockRemoved(r) if r.medium.as_deref() == Some("CPU") => {
                        // a chunk is resident under its last constituent hash (its key); interior
                        // hashes never collide with keys (chunks are aligned from token 0)
                        let g = r.group_idx.unwrap();
                        let removed = r.block_hashes.iter().filter(|h| resident.remove(&(g, (*h).clone()))).count();
                        prop_assert!(removed >= 1, "removal of non-resident chunks");
                    }
                    _ => {}
                }
                prop_assert!(resident.len() <= cap, "capacity exceeded: {} > {cap}", resident.len());
            }
        }
        // determinism
        prop_assert_eq!(simulate(&s).unwrap(), t);
    }
}

#[test]
fn builtin_multi_worker_reorder_shows_a_reversal() {
    let s = crate::scenario::builtin::load("multi-worker-reorder")
        .unwrap()
        .unwrap();
    let t = simulate(&s).unwrap();
    let reversed = t.batches().any(|b| {
        let ids: Vec<u64> = b
            .provenance
            .as_ref()
            .unwrap()
            .iter()
            .filter_map(|p| p.job_id)
            .collect();
        ids.windows(2).any(|w| w[1] < w[0])
    });
    assert!(reversed);
}

// Explicit schedules honour a deferred lookup: a request whose lookup starts a promotion
// (RETRY) is not scheduled in that step, and runs when the schedule lists it again.
#[test]
fn explicit_schedule_waits_on_a_deferred_lookup() {
    let t = run(&format!(
        r#"{{"block_size":4,"cpu":{{"capacity_chunks":3}},"gpu_prefix_cache":false,
            "secondary_tiers":[{{"name":"fs0","min_latency_steps":1,"max_latency_steps":1}}],
            "requests":[{{"id":"a","token_ids":[{}]}},
                        {{"id":"b","token_ids":[101,102,103,104,105,106,107,108]}},
                        {{"id":"c","token_ids":[1,2,3,4,5,6,7,8,301,302,303,304]}}],
            "steps":[{{"schedule":{{"a":8}}}},{{"schedule":{{"b":8}}}},{{"schedule":{{}}}},
                     {{"schedule":{{"c":12}}}},{{"schedule":{{"c":12}}}},{{"schedule":{{"c":12}}}}]}}"#,
        tokens(8)
    ));
    // (step, kind, request) of every event
    let evs: Vec<(u64, ProvenanceKind, Option<String>)> = t
        .batches()
        .flat_map(|b| b.provenance.as_ref().unwrap().iter())
        .map(|p| (p.step.unwrap(), p.kind, p.req_id.clone()))
        .collect();
    let promo_steps: Vec<u64> = evs
        .iter()
        .filter(|e| e.1 == ProvenanceKind::Promotion)
        .map(|e| e.0)
        .collect();
    assert!(!promo_steps.is_empty(), "no promotion: {evs:?}");
    let c_store_steps: Vec<u64> = evs
        .iter()
        .filter(|e| e.1 == ProvenanceKind::OffloadStore && e.2.as_deref() == Some("c"))
        .map(|e| e.0)
        .collect();
    // c's lookup at step 3 promotes and defers it: its only new chunk (301..304) is stored
    // when it runs, after the promotion, never in step 3.
    assert_eq!(c_store_steps.len(), 1, "{evs:?}");
    assert!(c_store_steps[0] > 3, "{evs:?}");
    assert!(
        promo_steps.iter().all(|&s| s <= c_store_steps[0]),
        "{evs:?}"
    );
}

// `secondary_tiers[].io_finished` / `io_release_order`: keys must be job ids / steps, and a
// released job must finish before that step; errors name the field.
#[test]
fn io_finished_and_release_order_are_validated() {
    let with = |tier: &str| {
        let json = format!(
            r#"{{"block_size":4,"secondary_tiers":[{tier}],
                "requests":[{{"id":"a","token_ids":[1,2,3,4]}}]}}"#
        );
        Scenario::from_json(&json).and_then(|s| s.validate().map(|_| s))
    };
    let ok =
        with(r#"{"name":"fs","kind":"fs","io_finished":{"0":3},"io_release_order":{"3":[0]}}"#);
    assert!(ok.is_ok(), "{ok:?}");
    for (tier, needle) in [
        (
            r#"{"name":"fs","io_finished":{"x":3}}"#,
            "io_finished: key \"x\"",
        ),
        (
            r#"{"name":"fs","io_finished":{"0":3},"io_release_order":{"4":[0]}}"#,
            "io_release_order[4]",
        ),
        (
            r#"{"name":"fs","io_release_order":{"03":[]}}"#,
            "key \"03\" is not a step",
        ),
        (r#"{"name":"fs","kind":"disk"}"#, "disk"),
    ] {
        let e = with(tier).expect_err(tier).to_string();
        assert!(e.contains(needle), "{tier}: {e}");
    }
}

// `secondary_tiers[].preload`: the preloaded chunks are found by the FS probe (a promotion,
// so a CPU `BlockStored` with the request's metadata, and no GPU->CPU store of them); a
// preload naming an unknown request or a chunk the request does not have is an error that
// names the tier and the field.
#[test]
fn preload_is_found_by_the_fs_probe_and_validated() {
    let run = |preload: &str| {
        let json = format!(
            r#"{{"block_size":4,"cpu":{{"capacity_chunks":16}},
                "secondary_tiers":[{{"name":"fs","kind":"fs","io_finished":{{"0":3}},
                                     "preload":{preload}}}],
                "requests":[{{"id":"a","token_ids":[1,2,3,4,5,6,7,8,9,10,11,12]}}],
                "steps":[{{"schedule":{{"a":12}}}},{{"schedule":{{"a":12}}}},
                         {{"schedule":{{"a":12}}}},{{"schedule":{{"a":12}}}},
                         {{"schedule":{{"a":12}}}}]}}"#
        );
        let sc = Scenario::from_json(&json).expect("scenario parses");
        crate::sim::simulate(&sc)
    };
    let trace = run(r#"[{"request":"a","chunks":[0,1]}]"#).expect("simulates");
    let batches: Vec<_> = trace
        .records
        .iter()
        .filter_map(|r| match r {
            crate::TraceRecord::Batch(b) => Some(b.to_wire()),
            _ => None,
        })
        .collect();
    // step 3: the promotion's CPU BlockStored of chunks 0, 1 (self-describing: tokens 1..8)
    let first = &batches[0];
    assert_eq!(first.ts, 1_700_000_003.0, "{batches:?}");
    let stored: Vec<_> = first
        .events
        .iter()
        .filter_map(|e| match e {
            crate::KvEvent::BlockStored(s) => Some(s),
            _ => None,
        })
        .collect();
    assert_eq!(stored.len(), 2, "{batches:?}");
    assert_eq!(stored[0].token_ids, vec![1, 2, 3, 4]);
    assert_eq!(stored[1].token_ids, vec![5, 6, 7, 8]);
    // without the preload: no promotion, chunks 0-2 stored from the GPU in step 1
    let plain = run("[]").expect("simulates");
    assert_ne!(plain.records, trace.records);
    for (preload, needle) in [
        (
            r#"[{"request":"zz","chunks":[0]}]"#,
            "unknown request \"zz\"",
        ),
        (r#"[{"request":"a","chunks":[3]}]"#, "no chunk 3"),
        (r#"[{"request":"a","group":1,"chunks":[0]}]"#, "no group 1"),
    ] {
        let e = run(preload).expect_err(preload).to_string();
        assert!(
            e.contains("preload") && e.contains(needle),
            "{preload}: {e}"
        );
    }
}
