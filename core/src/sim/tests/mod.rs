//! Simulation tests: numbered scenarios (one job, subsets, duplicates, two groups, chunks,
//! placeholders, several jobs, eviction, tiering, reset, wire, legacy), the facts of
//! `docs/vllm-offloading.md`, and property tests over random scenarios.

use std::collections::{HashMap, HashSet};

use proptest::prelude::*;

use super::simulate;
use crate::event::{BlockStored, KvEvent};
use crate::hash::BlockHash;
use crate::order::OrderMode;
use crate::scenario::Scenario;
use crate::trace::{ProvenanceKind, Trace, TraceBatch};

mod features;

const H0: u64 = 9561501211280363793;
const H1: u64 = 15292913576410714033;
const H2: u64 = 16642949654738151050;
const H3: u64 = 15930164532976791386;

fn run(json: &str) -> Trace {
    let s = Scenario::from_json(json).unwrap_or_else(|e| panic!("{e}\n{json}"));
    simulate(&s).unwrap()
}

fn batches(t: &Trace) -> Vec<&TraceBatch> {
    t.batches().collect()
}

fn stored(e: &KvEvent) -> Option<&BlockStored> {
    match e {
        KvEvent::BlockStored(s) => Some(s),
        _ => None,
    }
}

fn ints(h: &[BlockHash]) -> Vec<u64> {
    h.iter().map(|x| x.as_u64()).collect()
}

fn tokens(n: u32) -> String {
    let v: Vec<String> = (1..=n).map(|i| i.to_string()).collect();
    v.join(",")
}

/// Per store job (provenance job id, tier), the events' chunk indices in event order.
fn chunk_orders(t: &Trace) -> Vec<Vec<u32>> {
    let mut jobs: HashMap<(u64, String, u32), Vec<u32>> = HashMap::new();
    let mut keys = Vec::new();
    for b in t.batches() {
        let prov = b.provenance.as_ref().unwrap();
        for (e, p) in b.events.iter().zip(prov) {
            if matches!(e, KvEvent::BlockStored(_))
                && matches!(
                    p.kind,
                    ProvenanceKind::OffloadStore | ProvenanceKind::SecondaryStore
                )
            {
                let k = (p.job_id.unwrap(), p.tier.clone(), p.group_idx.unwrap());
                if !jobs.contains_key(&k) {
                    keys.push(k.clone());
                }
                jobs.entry(k).or_default().push(p.chunk_idx.unwrap());
            }
        }
    }
    keys.into_iter().map(|k| jobs.remove(&k).unwrap()).collect()
}

// Worked example: two one-block CPU chunks of tokens 1..8, block_size 4 (hash vectors in
// docs/vllm-offloading.md, fact 2).
#[test]
fn worked_example_values() {
    let t = run(&format!(
        r#"{{"block_size":4,"requests":[{{"id":"r","token_ids":[{}]}}]}}"#,
        tokens(8)
    ));
    let bs = batches(&t);
    assert_eq!(bs.len(), 1);
    let b = bs[0];
    assert_eq!(b.ts, 1700000000.0);
    assert_eq!(b.dp_rank, Some(0));
    assert_eq!(b.seq, 0);
    assert_eq!(b.events.len(), 2);
    let e0 = stored(&b.events[0]).unwrap();
    let e1 = stored(&b.events[1]).unwrap();
    assert_eq!(ints(&e0.block_hashes), vec![H0]);
    assert_eq!(e0.parent_block_hash, None);
    assert_eq!(e0.token_ids, vec![1, 2, 3, 4]);
    assert_eq!(e0.block_size, 4);
    assert_eq!(e0.lora_id, None);
    assert_eq!(e0.medium.as_deref(), Some("CPU"));
    assert_eq!(e0.group_idx, Some(0));
    assert_eq!(e0.kv_cache_spec_kind.as_deref(), Some("full_attention"));
    assert_eq!(e0.extra_keys, None);
    assert_eq!(e0.locality, None);
    assert_eq!(ints(&e1.block_hashes), vec![H1]);
    assert_eq!(e1.parent_block_hash, Some(BlockHash::Int(H0)));
    assert_eq!(e1.token_ids, vec![5, 6, 7, 8]);
}

// 1. One job, N chunks, one group: chunk indices 0..N-1, parent(i) == last_hash(i-1).
#[test]
fn s1_one_job_chunks_in_prefix_order() {
    let t = run(&format!(
        r#"{{"block_size":4,"requests":[{{"id":"r","token_ids":[{}]}}]}}"#,
        tokens(32)
    ));
    assert_eq!(chunk_orders(&t), vec![(0..8).collect::<Vec<u32>>()]);
    let evs = &batches(&t)[0].events;
    for w in evs.windows(2) {
        let (a, b) = (stored(&w[0]).unwrap(), stored(&w[1]).unwrap());
        assert_eq!(b.parent_block_hash.as_ref(), a.block_hashes.last());
    }
}

// 2. prepare_store returns a subset: order of the rest preserved.
#[test]
fn s2_present_keys_filtered_subset_order_preserved() {
    let t = run(&format!(
        r#"{{"block_size":4,"requests":[
            {{"id":"a","token_ids":[{}]}},
            {{"id":"b","shared_prefix":{{"request":"a","len":8}},"token_ids":[100,101,102,103,104,105,106,107,108,109,110,111],"arrival_step":1}}]}}"#,
        tokens(16)
    ));
    let orders = chunk_orders(&t);
    assert_eq!(orders, vec![vec![0, 1, 2, 3], vec![2, 3, 4]]);
}

// 3. Duplicate keys: first occurrence kept, one event.
#[test]
fn s3_duplicates_dropped_in_fixed_job_keys() {
    use crate::hashing::Digest;
    use crate::keys::OffloadKey;
    let k = |b| OffloadKey::new(Digest([b; 32]), 0);
    let keys = [k(1), k(2), k(1), k(3)];
    assert_eq!(OrderMode::Fixed.order(&keys, 0), vec![k(1), k(2), k(3)]);
    let mut m = super::cpu::CpuManager::new(8, true);
    let out = m.prepare_store(&keys).unwrap();
    let stored = m.complete_store(&OrderMode::Fixed.order(&out.keys_to_store, 0));
    assert_eq!(stored, vec![k(1), k(2), k(3)]);
    assert_eq!(m.take_events().len(), 1);
}

// 4. Two groups: group-major; per group parent-first; mixed-group removal → one per group.
#[test]
fn s4_two_groups_group_major_and_removal_per_group() {
    let t = run(&format!(
        r#"{{"block_size":4,"groups":[{{}},{{}}],"cpu":{{"capacity_chunks":5}},"requests":[
            {{"id":"a","token_ids":[{}]}},
            {{"id":"b","token_ids":[50,51,52,53,54,55,56,57],"arrival_step":1}}]}}"#,
        tokens(8)
    ));
    let bs = batches(&t);
    let groups: Vec<u32> = bs[0]
        .events
        .iter()
        .map(|e| stored(e).unwrap().group_idx.unwrap())
        .collect();
    assert_eq!(groups, vec![0, 0, 1, 1]);
    // b needs 4 slots, 1 is free: LRU (= a's job order, group-major) evicts g0c0, g0c1, g1c0
    // → one BlockRemoved per group, first-seen group order
    let removed: Vec<(u32, Vec<u64>)> = bs[1]
        .events
        .iter()
        .filter_map(|e| match e {
            KvEvent::BlockRemoved(r) => Some((r.group_idx.unwrap(), ints(&r.block_hashes))),
            _ => None,
        })
        .collect();
    assert_eq!(removed, vec![(0, vec![H0, H1]), (1, vec![H0])]);
    assert!(matches!(bs[1].events[0], KvEvent::BlockRemoved(_)));
    assert!(matches!(bs[1].events[2], KvEvent::BlockStored(_)));
}

// 5. bpc > 1: bpc hashes per event; parent = previous chunk's last constituent; removal
// fans out to all constituent hashes.
#[test]
fn s5_chunks_carry_constituent_hashes() {
    let t = run(&format!(
        r#"{{"block_size":4,"blocks_per_chunk":2,"cpu":{{"capacity_chunks":2}},"requests":[
            {{"id":"a","token_ids":[{}]}},
            {{"id":"b","token_ids":[90,91,92,93,94,95,96,97],"arrival_step":1}}]}}"#,
        tokens(16)
    ));
    let bs = batches(&t);
    let e0 = stored(&bs[0].events[0]).unwrap();
    let e1 = stored(&bs[0].events[1]).unwrap();
    assert_eq!(ints(&e0.block_hashes), vec![H0, H1]);
    assert_eq!(e0.block_size, 4);
    assert_eq!(e0.token_ids, (1..=8).collect::<Vec<u32>>());
    assert_eq!(ints(&e1.block_hashes), vec![H2, H3]);
    assert_eq!(e1.parent_block_hash, Some(BlockHash::Int(H1)));
    assert_eq!(e1.token_ids, (9..=16).collect::<Vec<u32>>());
    match &bs[1].events[0] {
        KvEvent::BlockRemoved(r) => assert_eq!(ints(&r.block_hashes), vec![H0, H1]),
        other => panic!("expected removal first, got {other:?}"),
    }
}

// 6. Placeholders: opt-out, SWA/SSM groups.
#[test]
fn s6_placeholders() {
    let check = |e: &BlockStored, hash: u64| {
        assert_eq!(ints(&e.block_hashes), vec![hash]);
        assert_eq!(e.parent_block_hash, None);
        assert!(e.token_ids.is_empty());
        assert_eq!(e.block_size, 0);
        assert_eq!(e.kv_cache_spec_kind, None);
    };
    let t = run(&format!(
        r#"{{"block_size":4,"self_describing_kv_events":false,"requests":[{{"id":"a","token_ids":[{}]}}]}}"#,
        tokens(8)
    ));
    let b = batches(&t)[0];
    check(stored(&b.events[0]).unwrap(), H0);
    check(stored(&b.events[1]).unwrap(), H1);
    let t = run(&format!(
        r#"{{"block_size":4,"groups":[{{}},{{"kind":"sliding_window","sliding_window":8}},{{"kind":"mamba"}}],
            "requests":[{{"id":"a","token_ids":[{}]}}]}}"#,
        tokens(4)
    ));
    let b = batches(&t)[0];
    assert_eq!(b.events.len(), 3);
    assert!(stored(&b.events[0]).unwrap().kv_cache_spec_kind.is_some());
    for (i, g) in [(1usize, 1u32), (2, 2)] {
        let e = stored(&b.events[i]).unwrap();
        check(e, H0);
        assert_eq!(e.group_idx, Some(g));
    }
}

// 7. Several jobs in one step: with one worker cross-job FIFO; with two workers the merged
// completion map can put the later job first (docs/vllm-offloading.md, fact 11).
#[test]
fn s7_multi_worker_merge_can_reverse_jobs() {
    let scenario = |workers: u32, seed: u64| {
        format!(
            r#"{{"seed":{seed},"block_size":4,"scheduler":{{"max_num_batched_tokens":4}},
                "completion":{{"timing":"next_step","workers":{workers}}},
                "requests":[{{"id":"a","prompt_len":24}}]}}"#
        )
    };
    let reversed = |t: &Trace| {
        t.batches().any(|b| {
            let ids: Vec<u64> = b
                .provenance
                .as_ref()
                .unwrap()
                .iter()
                .filter_map(|p| p.job_id)
                .collect();
            ids.windows(2).any(|w| w[1] < w[0])
        })
    };
    for seed in 0..20 {
        assert!(!reversed(&run(&scenario(1, seed))), "one worker is FIFO");
    }
    let hits = (0..40).filter(|&s| reversed(&run(&scenario(2, s)))).count();
    assert!(hits > 0, "two workers never reversed two jobs");
    // within each job the fix still holds
    for seed in 0..40 {
        for order in chunk_orders(&run(&scenario(2, seed))) {
            assert!(order.windows(2).all(|w| w[0] < w[1]));
        }
    }
}

// 8. Eviction: removal precedes the store reusing capacity; LRU order = completion order.
#[test]
fn s8_eviction_precedes_store_and_follows_job_order() {
    let json = |order: &str| {
        format!(
            r#"{{"block_size":4,"order":{order},"cpu":{{"capacity_chunks":8}},"requests":[
            {{"id":"a","token_ids":[{}]}},
            {{"id":"b","token_ids":[90,91,92,93],"arrival_step":1}}]}}"#,
            tokens(32)
        )
    };
    let t = run(&json(r#"{"mode":"fixed"}"#));
    let b = batches(&t)[1];
    match &b.events[0] {
        // the root chunk (first in the job) is the LRU victim with the fix
        KvEvent::BlockRemoved(r) => assert_eq!(ints(&r.block_hashes), vec![H0]),
        e => panic!("{e:?}"),
    }
    assert!(matches!(b.events[1], KvEvent::BlockStored(_)));
    // legacy (CPython, PYTHONHASHSEED=0): the first key in set order is chunk 3 (docs/vllm-offloading.md, fact 4)
    let t = run(&json(r#"{"mode":"cpython","python_hash_seed":0}"#));
    let b = batches(&t)[1];
    let prov = b.provenance.as_ref().unwrap();
    assert!(matches!(b.events[0], KvEvent::BlockRemoved(_)));
    assert_eq!(prov[0].kind, ProvenanceKind::Evict);
    let first = stored(&batches(&t)[0].events[0]).unwrap();
    match &b.events[0] {
        KvEvent::BlockRemoved(r) => assert_eq!(r.block_hashes, first.block_hashes),
        e => panic!("{e:?}"),
    }
}

// docs/vllm-offloading.md, fact 4: PYTHONHASHSEED=0, 32 tokens, block_size 4 → chunk order [3,4,0,1,5,6,7,2].
#[test]
fn cpython_seed0_order_child_before_parent() {
    let t = run(&format!(
        r#"{{"block_size":4,"order":{{"mode":"cpython","python_hash_seed":0}},
            "requests":[{{"id":"r","token_ids":[{}]}}]}}"#,
        tokens(32)
    ));
    assert_eq!(chunk_orders(&t), vec![vec![3, 4, 0, 1, 5, 6, 7, 2]]);
}

// 12. Legacy seeded permutation reproduces a within-job child-before-parent.
#[test]
fn s12_legacy_mode_inverts_within_a_job() {
    let t = run(&format!(
        r#"{{"block_size":4,"order":{{"mode":"legacy","seed":1}},
            "requests":[{{"id":"r","token_ids":[{}]}}]}}"#,
        tokens(32)
    ));
    let orders = chunk_orders(&t);
    assert!(orders[0].windows(2).any(|w| w[1] < w[0]), "{orders:?}");
}

// 9. Tiering: CPU then STORAGE per batch; STORAGE job keeps the CPU job's order; failed job
// emits nothing; promotions emit CPU stored events.
#[test]
fn s9_tiers_grouped_by_tier_and_same_key_order() {
    let json = |fail: f64, order: &str| {
        format!(
            r#"{{"seed":5,"block_size":4,"order":{order},
              "secondary_tiers":[{{"name":"fs0","min_latency_steps":1,"max_latency_steps":3,"failure_probability":{fail}}}],
              "requests":[{{"id":"a","token_ids":[{}]}},{{"id":"b","prompt_len":12,"arrival_step":1}},
                          {{"id":"c","prompt_len":20,"arrival_step":1}}]}}"#,
            tokens(32)
        )
    };
    for order in [
        r#"{"mode":"fixed"}"#,
        r#"{"mode":"cpython","python_hash_seed":0}"#,
    ] {
        let t = run(&json(0.0, order));
        let mut cpu_jobs: HashMap<u64, Vec<u32>> = HashMap::new();
        let mut fs_seen = 0;
        for b in t.batches() {
            let prov = b.provenance.as_ref().unwrap();
            let tiers: Vec<&str> = prov.iter().map(|p| p.tier.as_str()).collect();
            let first_storage = tiers.iter().position(|t| t.starts_with("STORAGE"));
            if let Some(i) = first_storage {
                assert!(
                    tiers[i..].iter().all(|t| t.starts_with("STORAGE")),
                    "{tiers:?}"
                );
            }
            for (e, p) in b.events.iter().zip(prov) {
                if p.kind == ProvenanceKind::OffloadStore {
                    cpu_jobs
                        .entry(p.job_id.unwrap())
                        .or_default()
                        .push(p.chunk_idx.unwrap());
                }
                if p.tier == "STORAGE:fs0" {
                    assert_eq!(e.medium(), Some("STORAGE"));
                    fs_seen += 1;
                }
            }
        }
        // every STORAGE job repeats a CPU job's chunk order exactly
        let cpu_orders: HashSet<Vec<u32>> = cpu_jobs.into_values().collect();
        let orders = chunk_orders(&t);
        let mut storage_jobs = 0;
        for o in &orders {
            assert!(cpu_orders.contains(o), "{o:?} not a CPU job order");
            storage_jobs += 1;
        }
        assert!(storage_jobs >= 2 * 3, "{orders:?}");
        assert_eq!(fs_seen, 8 + 3 + 5);
    }
    let t = run(&json(1.0, r#"{"mode":"fixed"}"#));
    assert!(t
        .batches()
        .all(|b| b.events.iter().all(|e| e.medium() != Some("STORAGE"))));
}

#[test]
fn s9_promotion_after_cpu_eviction() {
    // a's chunks go to CPU and fs0; b evicts them from CPU; c re-reads a's prefix:
    // lookups miss CPU, hit fs0 → promotion job → CPU stored events in lookup order.
    let t = run(&format!(
        r#"{{"block_size":4,"cpu":{{"capacity_chunks":4}},"gpu_prefix_cache":false,
            "secondary_tiers":[{{"name":"fs0","min_latency_steps":1,"max_latency_steps":1}}],
            "requests":[{{"id":"a","token_ids":[{}]}},
                        {{"id":"b","token_ids":[{}],"arrival_step":3}},
                        {{"id":"c","shared_prefix":{{"request":"a","len":16}},"token_ids":[7,7,7,7],"arrival_step":6}}]}}"#,
        tokens(16),
        (101..=116)
            .map(|i: u32| i.to_string())
            .collect::<Vec<_>>()
            .join(",")
    ));
    let promos: Vec<(u32, Vec<u64>)> = t
        .batches()
        .flat_map(|b| b.events.iter().zip(b.provenance.as_ref().unwrap()))
        .filter(|(_, p)| p.kind == ProvenanceKind::Promotion)
        .map(|(e, p)| (p.chunk_idx.unwrap_or(99), ints(e.block_hashes())))
        .collect();
    assert!(!promos.is_empty(), "no promotion happened");
    let idx: Vec<u32> = promos.iter().map(|p| p.0).collect();
    let mut sorted = idx.clone();
    sorted.sort();
    assert_eq!(idx, sorted, "promotions follow lookup (ascending) order");
    assert_eq!(promos[0].1, vec![H0]);
}

// 10. Reset: stale completions ignored, tracker cleared, AllBlocksCleared, no pre-reset events.
#[test]
fn s10_reset_drops_in_flight_jobs() {
    let t = run(&format!(
        r#"{{"block_size":4,"completion":{{"timing":"next_step"}},
            "requests":[{{"id":"a","token_ids":[{}]}}],
            "steps":[{{"schedule":{{"a":8}}}},{{"reset":true}},{{}}]}}"#,
        tokens(8)
    ));
    let all: Vec<&KvEvent> = t.batches().flat_map(|b| b.events.iter()).collect();
    assert_eq!(all, vec![&KvEvent::AllBlocksCleared]);
}
