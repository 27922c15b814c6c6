//! Generate throughput (events/s) of the offload simulation on a large scenario.
//!
//! Scenario: 2000 requests of 512 prompt tokens (block_size 16, one-block chunks) that share
//! 128-token prefixes in groups of 8, arriving 20 per step, an LRU CPU tier of 8000 chunks
//! (so evictions happen), same-step completion. Baseline in the same run: the same scenario
//! without evictions (huge CPU tier) and in CPython order, so ratios can be compared.
//!
//! `prompt_len`: generate time of one request of 2^16 .. 2^24 tokens (default scheduler,
//! budget 8192 tokens per step). vLLM touches all of the request's keys at every store job
//! (quadratic); kvscope gets the same LRU order from what changed since the last touch
//! (`sim/touch.rs`), so the time per token should stay about flat across sizes: compare the
//! throughputs. (Before the linked-slab LRU, 2^22 tokens took 20x the time of 2^20; before
//! `sim/touch.rs`, 2^22 took about 22 s.)

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use kvscope_core::order::OrderMode;
use kvscope_core::scenario::Scenario;
use kvscope_core::sim::simulate;

fn scenario(capacity: u64, order: OrderMode) -> Scenario {
    let mut reqs = Vec::new();
    for i in 0..2000u32 {
        let mut r = serde_json::json!({
            "id": format!("r{i}"), "prompt_len": 512, "arrival_step": i / 20,
        });
        if i % 8 != 0 {
            r["shared_prefix"] =
                serde_json::json!({"request": format!("r{}", i - i % 8), "len": 128});
        }
        reqs.push(r);
    }
    let mut s: Scenario = serde_json::from_value(serde_json::json!({
        "name": "bench", "seed": 1, "block_size": 16,
        "cpu": {"capacity_chunks": capacity},
        "scheduler": {"max_num_batched_tokens": 16384},
        "requests": reqs,
    }))
    .expect("bench scenario");
    s.order = order;
    s
}

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("generate");
    g.sample_size(10);
    for (name, cap, order) in [
        ("lru_fixed", 8000, OrderMode::Fixed),
        (
            "lru_cpython",
            8000,
            OrderMode::CPython {
                python_hash_seed: 0,
            },
        ),
        ("no_evictions_fixed", 1 << 30, OrderMode::Fixed),
    ] {
        let s = scenario(cap, order);
        let events = simulate(&s).expect("simulate").event_count() as u64;
        eprintln!("{name}: {events} events per run");
        g.throughput(Throughput::Elements(events));
        g.bench_function(name, |b| b.iter(|| simulate(&s).expect("simulate")));
    }
    g.finish();

    let mut g = c.benchmark_group("generate_prompt_len");
    g.sample_size(10);
    for log2 in [16u32, 18, 20, 22, 24] {
        let s: Scenario = serde_json::from_value(serde_json::json!({
            "name": "long", "requests": [{"id": "r0", "prompt_len": 1u64 << log2}],
        }))
        .expect("long-prompt scenario");
        g.throughput(Throughput::Elements(1 << log2));
        g.bench_function(format!("2^{log2}"), |b| {
            b.iter(|| simulate(&s).expect("simulate"))
        });
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
