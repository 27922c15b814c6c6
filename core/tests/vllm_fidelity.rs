//! kvscope against golden traces produced by upstream vLLM 0.28.0's own offloading code
//! (`tests/fixtures/vllm/`, see its README: real `OffloadingConnectorScheduler`,
//! `CPUOffloadingManager` + LRU, `OffloadingEventsTracker`, msgspec encoding).
//!
//! Checked here against kvscope's hashing (`sha256_cbor`, `NONE_HASH` from `"vllm-none-hash"`,
//! LoRA extra keys) and job-key ordering (`OrderMode::Fixed` and
//! `OrderMode::CPython { python_hash_seed: 0 }` = upstream's `set(set(keys_to_store))`):
//! every hash, parent, token slice and LoRA field of every upstream `BlockStored`, and the exact
//! order in which upstream's `complete_store` iterated each store job's keys.

use std::collections::HashMap;
use std::path::PathBuf;

use kvscope_core::event::TokenId;
use kvscope_core::hashing::{
    none_hash, request_block_hashes, Digest, ExtraKeyInputs, DEFAULT_NONE_HASH_SEED,
};
use kvscope_core::keys::OffloadKey;
use kvscope_core::order::OrderMode;
use serde_json::Value;
use sha2::{Digest as _, Sha256};

mod common;
use common::fixture_names;
const MODES: &[&str] = &["fixed", "legacy"];

fn fixture_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/vllm")
}

fn load_json(name: &str) -> Value {
    let path = fixture_dir().join(format!("{name}.json"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path:?}: {e}"));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{path:?}: {e}"))
}

fn load_msgpack(name: &str, mode: &str) -> Vec<u8> {
    let path = fixture_dir().join(format!("{name}.{mode}.msgpack"));
    std::fs::read(&path).unwrap_or_else(|e| panic!("{path:?}: {e}"))
}

fn u64_of(v: &Value, what: &str) -> u64 {
    v.as_u64()
        .unwrap_or_else(|| panic!("{what}: not a u64: {v}"))
}

/// One request's inputs and its kvscope-computed block digests.
struct Req {
    tokens: Vec<TokenId>,
    lora_id: Option<u64>,
    lora_name: Option<String>,
    digests: Vec<Digest>,
}

struct Scenario {
    block_size: usize,
    blocks_per_chunk: usize,
    reqs: HashMap<String, Req>,
    /// wire u64 → digest, over every block of every request.
    by_wire: HashMap<u64, Digest>,
}

fn scenario(name: &str, json: &Value) -> Scenario {
    let inputs = &json["inputs"];
    let block_size = u64_of(&inputs["block_size"], "block_size") as usize;
    let blocks_per_chunk = u64_of(&inputs["blocks_per_chunk"], "blocks_per_chunk") as usize;
    let nh = none_hash(DEFAULT_NONE_HASH_SEED);
    assert_eq!(
        nh.to_hex(),
        json["settings"]["none_hash"].as_str().expect("none_hash"),
        "{name}: NONE_HASH"
    );
    let mut reqs = HashMap::new();
    let mut by_wire = HashMap::new();
    for (rid, r) in inputs["requests"].as_object().expect("requests") {
        let tokens: Vec<TokenId> = r["tokens"]
            .as_array()
            .expect("tokens")
            .iter()
            .map(|t| u64_of(t, "token") as TokenId)
            .collect();
        let lora_name = r["lora_name"].as_str().map(str::to_owned);
        let extra = ExtraKeyInputs {
            lora_name: lora_name.clone(),
            cache_salt: None,
        };
        let digests = request_block_hashes(&nh, &tokens, block_size, &extra);
        for d in &digests {
            by_wire.insert(d.wire_u64(), *d);
        }
        reqs.insert(
            rid.clone(),
            Req {
                tokens,
                lora_id: r["lora_id"].as_u64(),
                lora_name,
                digests,
            },
        );
    }
    Scenario {
        block_size,
        blocks_per_chunk,
        reqs,
        by_wire,
    }
}

#[test]
fn fixture_streams_are_whole_and_untampered() {
    for name in &fixture_names() {
        let json = load_json(name);
        for mode in MODES {
            let bytes = load_msgpack(name, mode);
            let m = &json[*mode];
            assert_eq!(
                hex::encode(Sha256::digest(&bytes)),
                m["sha256"].as_str().expect("sha256"),
                "{name}.{mode}"
            );
            let mut pos = 0u64;
            for b in m["batches"].as_array().expect("batches") {
                assert_eq!(u64_of(&b["offset"], "offset"), pos, "{name}.{mode}");
                // Every payload starts with a 3-array and a float64 ts = 1700000000.0 + step.
                let start = pos as usize;
                assert_eq!(&bytes[start..start + 2], &[0x93, 0xcb], "{name}.{mode}");
                let mut ts = [0u8; 8];
                ts.copy_from_slice(&bytes[start + 2..start + 10]);
                let step = u64_of(&b["step"], "step") as f64;
                assert_eq!(
                    f64::from_be_bytes(ts),
                    1_700_000_000.0 + step,
                    "{name}.{mode}"
                );
                pos += u64_of(&b["length"], "length");
            }
            assert_eq!(
                pos,
                bytes.len() as u64,
                "{name}.{mode}: batches cover the stream"
            );
        }
    }
}

/// Every upstream `BlockStored` is the chunk kvscope's hashing describes: constituent hashes,
/// parent = previous block's hash, the chunk's tokens, `block_size`, LoRA fields; every
/// `BlockRemoved` names hashes kvscope computes.
#[test]
fn upstream_events_match_kvscope_hashing() {
    for name in &fixture_names() {
        let json = load_json(name);
        let sc = scenario(name, &json);
        // hash → (request, block index); the first request owning a block wins, as upstream's
        // tracker keeps the first request's metadata for shared chunks.
        let mut owner: HashMap<u64, (&str, usize)> = HashMap::new();
        let mut rids: Vec<&String> = sc.reqs.keys().collect();
        rids.sort();
        for rid in rids {
            for (i, d) in sc.reqs[rid].digests.iter().enumerate() {
                owner.entry(d.wire_u64()).or_insert((rid.as_str(), i));
            }
        }
        let bpc = sc.blocks_per_chunk;
        for mode in MODES {
            let mut stored = 0;
            for b in json[*mode]["batches"].as_array().expect("batches") {
                for e in b["events"].as_array().expect("events") {
                    let ctx = format!("{name}.{mode} step {} {e}", b["step"]);
                    let hashes: Vec<u64> = e["block_hashes"]
                        .as_array()
                        .expect("block_hashes")
                        .iter()
                        .map(|h| u64_of(h, "hash"))
                        .collect();
                    match e["type"].as_str() {
                        Some("BlockRemoved") => {
                            for h in &hashes {
                                assert!(sc.by_wire.contains_key(h), "{ctx}: unknown hash");
                            }
                            assert_eq!(hashes.len() % bpc, 0, "{ctx}: whole chunks");
                        }
                        Some("BlockStored") => {
                            stored += 1;
                            assert_eq!(hashes.len(), bpc, "{ctx}");
                            let last = hashes[bpc - 1];
                            let &(rid, last_idx) = owner.get(&last).expect("owned hash");
                            let req = &sc.reqs[rid];
                            assert_eq!((last_idx + 1) % bpc, 0, "{ctx}: key at chunk end");
                            let first = last_idx + 1 - bpc;
                            let want: Vec<u64> = req.digests[first..=last_idx]
                                .iter()
                                .map(Digest::wire_u64)
                                .collect();
                            assert_eq!(hashes, want, "{ctx}: block_hashes");
                            let parent = e["parent_block_hash"].as_u64();
                            let want_parent =
                                first.checked_sub(1).map(|p| req.digests[p].wire_u64());
                            assert_eq!(parent, want_parent, "{ctx}: parent");
                            let toks: Vec<u64> = e["token_ids"]
                                .as_array()
                                .expect("token_ids")
                                .iter()
                                .map(|t| u64_of(t, "token"))
                                .collect();
                            let bs = sc.block_size;
                            let want_toks: Vec<u64> = req.tokens[first * bs..(last_idx + 1) * bs]
                                .iter()
                                .map(|t| u64::from(*t))
                                .collect();
                            assert_eq!(toks, want_toks, "{ctx}: token_ids");
                            assert_eq!(u64_of(&e["block_size"], "block_size"), bs as u64, "{ctx}");
                            assert_eq!(e["lora_id"].as_u64(), req.lora_id, "{ctx}: lora_id");
                            assert_eq!(
                                e["lora_name"].as_str(),
                                req.lora_name.as_deref(),
                                "{ctx}: lora_name"
                            );
                            assert_eq!(e["medium"], "CPU", "{ctx}");
                            assert_eq!(e["group_idx"], 0, "{ctx}");
                            assert_eq!(e["kv_cache_spec_kind"], "full_attention", "{ctx}");
                        }
                        other => panic!("{ctx}: unexpected event type {other:?}"),
                    }
                }
            }
            assert!(stored > 0, "{name}.{mode}: no BlockStored");
        }
    }
}

fn keys_of(list: &Value, sc: &Scenario, ctx: &str) -> Vec<OffloadKey> {
    list.as_array()
        .unwrap_or_else(|| panic!("{ctx}: not a key list"))
        .iter()
        .map(|k| {
            let w = u64_of(&k["hash"], "key hash");
            let d = sc
                .by_wire
                .get(&w)
                .unwrap_or_else(|| panic!("{ctx}: unknown key {w}"));
            OffloadKey::new(*d, 0)
        })
        .collect()
}

/// Upstream's `complete_store` iterated each job's keys exactly as kvscope's `OrderMode`
/// orders `prepare_store`'s `keys_to_store`: `Fixed` for the patched scheduler,
/// `CPython { python_hash_seed: 0 }` for the unpatched one under `PYTHONHASHSEED=0`.
#[test]
fn job_key_order_matches_upstream_complete_store() {
    let mut jobs_checked = 0;
    let mut legacy_differs = 0;
    for name in &fixture_names() {
        let json = load_json(name);
        let sc = scenario(name, &json);
        for mode in MODES {
            let order = match *mode {
                "fixed" => OrderMode::Fixed,
                _ => OrderMode::CPython {
                    python_hash_seed: 0,
                },
            };
            for step in json[*mode]["upstream_calls"].as_array().expect("calls") {
                let calls = step["manager_calls"].as_array().expect("manager_calls");
                let prepares: Vec<&Value> = calls
                    .iter()
                    .filter(|c| c["call"] == "prepare_store")
                    .collect();
                let completes: Vec<&Value> = calls
                    .iter()
                    .filter(|c| c["call"] == "complete_store")
                    .collect();
                let jobs = step["store_jobs"].as_array().expect("store_jobs");
                // Single worker, same-step completion: one prepare and one complete per job.
                assert_eq!(prepares.len(), jobs.len(), "{name}.{mode}");
                assert_eq!(completes.len(), jobs.len(), "{name}.{mode}");
                for ((job, prep), done) in jobs.iter().zip(&prepares).zip(&completes) {
                    let ctx = format!("{name}.{mode} job {}", job["job_id"]);
                    let to_store = keys_of(&prep["keys_to_store"], &sc, &ctx);
                    let upstream = keys_of(&job["keys_iteration_order"], &sc, &ctx);
                    let completed = keys_of(&done["keys"], &sc, &ctx);
                    assert_eq!(
                        completed, upstream,
                        "{ctx}: complete_store saw the job's keys"
                    );
                    let job_id = u64_of(&job["job_id"], "job_id");
                    assert_eq!(order.order(&to_store, job_id), upstream, "{ctx}: order");
                    if upstream != to_store {
                        legacy_differs += 1;
                    }
                    jobs_checked += 1;
                }
            }
        }
    }
    assert!(jobs_checked >= 20, "only {jobs_checked} jobs checked");
    assert!(
        legacy_differs > 0,
        "legacy order never differed from prefix order"
    );
}

/// kvscope's msgpack codec decodes every upstream payload and re-encodes it (map form) to
/// exactly msgspec's bytes.
#[test]
fn wire_codec_round_trips_upstream_payloads_byte_for_byte() {
    use kvscope_core::wire::msgpack::{decode_batch, encode_batch, split_stream};
    use kvscope_core::wire::EventEncoding;
    for name in &fixture_names() {
        let json = load_json(name);
        for mode in MODES {
            let bytes = load_msgpack(name, mode);
            let ranges = split_stream(&bytes).unwrap_or_else(|e| panic!("{name}.{mode}: {e:?}"));
            let batches = json[*mode]["batches"].as_array().expect("batches");
            assert_eq!(ranges.len(), batches.len(), "{name}.{mode}: batch count");
            for (range, b) in ranges.into_iter().zip(batches) {
                let payload = &bytes[range];
                let batch =
                    decode_batch(payload).unwrap_or_else(|e| panic!("{name}.{mode}: {e:?}"));
                assert_eq!(batch.data_parallel_rank, Some(0), "{name}.{mode}");
                assert_eq!(
                    batch.events.len(),
                    b["events"].as_array().expect("events").len(),
                    "{name}.{mode}"
                );
                assert_eq!(
                    encode_batch(&batch, EventEncoding::Map),
                    payload,
                    "{name}.{mode} step {}: re-encoded bytes differ",
                    b["step"]
                );
            }
        }
    }
}

/// Describe the first difference between kvscope's batches and upstream's (for the failure
/// message): batch count, then per batch `ts`, rank, event count and the first differing event.
fn first_difference(
    ours: &[kvscope_core::KvEventBatch],
    theirs: &[kvscope_core::KvEventBatch],
) -> String {
    for (i, (a, b)) in ours.iter().zip(theirs).enumerate() {
        if a.ts.to_bits() != b.ts.to_bits() {
            return format!("batch {i}: ts {} (kvscope) vs {} (vLLM)", a.ts, b.ts);
        }
        if a.data_parallel_rank != b.data_parallel_rank {
            return format!(
                "batch {i}: data_parallel_rank {:?} vs {:?}",
                a.data_parallel_rank, b.data_parallel_rank
            );
        }
        for (j, (ea, eb)) in a.events.iter().zip(&b.events).enumerate() {
            if ea != eb {
                return format!(
                    "batch {i} (ts {}) event {j}:\n kvscope {ea:?}\n vLLM    {eb:?}",
                    a.ts
                );
            }
        }
        if a.events.len() != b.events.len() {
            return format!(
                "batch {i} (ts {}): {} events (kvscope) vs {} (vLLM)",
                a.ts,
                a.events.len(),
                b.events.len()
            );
        }
    }
    format!(
        "{} batches (kvscope) vs {} (vLLM); equal where both exist (difference is in encoding)",
        ours.len(),
        theirs.len()
    )
}

/// The simulator, given each fixture's inputs as a kvscope scenario
/// (`tests/fixtures/vllm/kvscope/<name>.json`), produces upstream's msgpack stream byte for
/// byte: `order: fixed` against `<name>.fixed.msgpack`, `order: cpython, python_hash_seed 0`
/// against `<name>.legacy.msgpack`.
#[test]
fn simulator_reproduces_upstream_streams_byte_for_byte() {
    use kvscope_core::scenario::Scenario;
    use kvscope_core::sim::simulate;
    use kvscope_core::wire::msgpack::{decode_stream, encode_batch};
    use kvscope_core::wire::EventEncoding;
    use kvscope_core::TraceRecord;

    let mut failures = Vec::new();
    for name in &fixture_names() {
        let path = fixture_dir().join(format!("kvscope/{name}.json"));
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path:?}: {e}"));
        for mode in MODES {
            let mut sc = Scenario::from_json(&text).unwrap_or_else(|e| panic!("{path:?}: {e:?}"));
            sc.order = match *mode {
                "fixed" => OrderMode::Fixed,
                _ => OrderMode::CPython {
                    python_hash_seed: 0,
                },
            };
            let trace = simulate(&sc).unwrap_or_else(|e| panic!("{name}.{mode}: {e:?}"));
            let ours: Vec<kvscope_core::KvEventBatch> = trace
                .records
                .iter()
                .filter_map(|r| match r {
                    TraceRecord::Batch(b) => Some(b.to_wire()),
                    _ => None,
                })
                .collect();
            let bytes: Vec<u8> = ours
                .iter()
                .flat_map(|b| encode_batch(b, EventEncoding::Map))
                .collect();
            let upstream = load_msgpack(name, mode);
            if bytes != upstream {
                let theirs: Vec<kvscope_core::KvEventBatch> = decode_stream(&upstream, name)
                    .expect("upstream stream decodes")
                    .records
                    .iter()
                    .filter_map(|r| match r {
                        TraceRecord::Batch(b) => Some(b.to_wire()),
                        _ => None,
                    })
                    .collect();
                failures.push(format!(
                    "{name}.{mode}: {}",
                    first_difference(&ours, &theirs)
                ));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "kvscope's simulation differs from upstream vLLM:\n{}",
        failures.join("\n")
    );
}

/// vLLM 0.28.0 tiering fixtures (`tests/fixtures/vllm/tiering/`, made by
/// `tools/vllm-driver/scenarios.py` from vLLM's real classes): CPU + file-system tier behind the
/// tiering manager, and two workers. Checked here: the streams are whole (sha256, batch
/// offsets), kvscope's codec decodes every payload and re-encodes it to the same bytes, every
/// `BlockStored` (CPU or STORAGE) is the chunk kvscope's hashing describes, and the simulator
/// given each fixture's kvscope scenario (`tiering/kvscope/<name>.json`) writes the same
/// stream byte for byte in both orders.
mod tiering {
    use super::*;

    const TIERING_MODES: &[&str] = &["fixed", "cpython"];

    fn dir() -> PathBuf {
        fixture_dir().join("tiering")
    }

    fn names() -> Vec<String> {
        super::common::fixture_names_in("tiering", 4)
    }

    fn load(name: &str) -> Value {
        let path = dir().join(format!("{name}.json"));
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path:?}: {e}"));
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{path:?}: {e}"))
    }

    #[test]
    fn tiering_streams_are_whole_and_round_trip() {
        use kvscope_core::wire::msgpack::{decode_batch, encode_batch, split_stream};
        use kvscope_core::wire::EventEncoding;
        for name in &names() {
            let json = load(name);
            assert_eq!(json["vllm_version"], "0.28.0", "{name}");
            let mut streams = Vec::new();
            for mode in TIERING_MODES {
                let ctx = format!("{name}.{mode}");
                let path = dir().join(format!("{name}.{mode}.msgpack"));
                let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{path:?}: {e}"));
                let m = &json["modes"][*mode];
                assert_eq!(
                    hex::encode(Sha256::digest(&bytes)),
                    m["sha256"].as_str().expect("sha256"),
                    "{ctx}"
                );
                let ranges = split_stream(&bytes).unwrap_or_else(|e| panic!("{ctx}: {e:?}"));
                let batches = m["batches"].as_array().expect("batches");
                assert_eq!(ranges.len(), batches.len(), "{ctx}: batch count");
                for (range, b) in ranges.into_iter().zip(batches) {
                    assert_eq!(range.start as u64, u64_of(&b["offset"], "offset"), "{ctx}");
                    let payload = &bytes[range];
                    let batch = decode_batch(payload).unwrap_or_else(|e| panic!("{ctx}: {e:?}"));
                    assert_eq!(batch.data_parallel_rank, Some(0), "{ctx}");
                    let ours = encode_batch(&batch, EventEncoding::Map);
                    assert_eq!(
                        ours, payload,
                        "{ctx} step {}: re-encoded bytes differ",
                        b["step"]
                    );
                    assert_eq!(payload[10], 0x90 | batch.events.len() as u8, "{ctx}");
                    // first event: a BlockStored (fixmap of 10 keys in 0.28.0; 0.34.0 writes a
                    // map16 header, `docs/vllm-offloading.md` fact 25) or a BlockRemoved
                    assert!(matches!(payload[11], 0x8a | 0x84), "{ctx}: fixmap header");
                }
                streams.push(bytes);
            }
            assert_ne!(streams[0], streams[1], "{name}: set order changed nothing");
        }
    }

    #[test]
    fn tiering_events_match_kvscope_hashing() {
        let nh = none_hash(DEFAULT_NONE_HASH_SEED);
        for name in &names() {
            let json = load(name);
            for mode in TIERING_MODES {
                let m = &json["modes"][*mode];
                let inputs = &m["inputs"];
                let bs = u64_of(&inputs["block_size"], "block_size") as usize;
                assert_eq!(u64_of(&inputs["blocks_per_chunk"], "bpc"), 1, "{name}");
                // wire hash → (parent wire hash, the block's tokens)
                let mut blocks: HashMap<u64, (Option<u64>, Vec<u64>)> = HashMap::new();
                for r in inputs["requests"].as_object().expect("requests").values() {
                    let tokens: Vec<TokenId> = r["tokens"]
                        .as_array()
                        .expect("tokens")
                        .iter()
                        .map(|t| u64_of(t, "token") as TokenId)
                        .collect();
                    let ds = request_block_hashes(&nh, &tokens, bs, &ExtraKeyInputs::default());
                    for (i, d) in ds.iter().enumerate() {
                        let toks = tokens[i * bs..(i + 1) * bs]
                            .iter()
                            .map(|t| u64::from(*t))
                            .collect();
                        let parent = i.checked_sub(1).map(|p| ds[p].wire_u64());
                        blocks.insert(d.wire_u64(), (parent, toks));
                    }
                }
                let mut media = std::collections::BTreeSet::new();
                let mut placeholders = 0;
                for b in m["batches"].as_array().expect("batches") {
                    for e in b["events"].as_array().expect("events") {
                        let ctx = format!("{name}.{mode} step {} {e}", b["step"]);
                        let hashes: Vec<u64> = e["block_hashes"]
                            .as_array()
                            .expect("block_hashes")
                            .iter()
                            .map(|h| u64_of(h, "hash"))
                            .collect();
                        for h in &hashes {
                            assert!(blocks.contains_key(h), "{ctx}: unknown hash");
                        }
                        media.insert(e["medium"].as_str().expect("medium").to_owned());
                        if e["type"] == "BlockStored" && e["block_size"] == 0 {
                            // a placeholder: its chunk's metadata was popped by a CPU removal
                            // translated earlier in the same batch (0.28.0's tracker)
                            assert_eq!(e["parent_block_hash"], Value::Null, "{ctx}");
                            assert_eq!(e["token_ids"], serde_json::json!([]), "{ctx}");
                            placeholders += 1;
                        } else if e["type"] == "BlockStored" {
                            let (parent, toks) = &blocks[&hashes[0]];
                            assert_eq!(e["parent_block_hash"].as_u64(), *parent, "{ctx}");
                            let got: Vec<u64> = e["token_ids"]
                                .as_array()
                                .expect("token_ids")
                                .iter()
                                .map(|t| u64_of(t, "token"))
                                .collect();
                            assert_eq!(&got, toks, "{ctx}: token_ids");
                        }
                    }
                }
                // fs_* scenarios: both tiers publish; the others are CPU only
                let tiers: &[&str] = if name.starts_with("fs_") {
                    &["CPU", "STORAGE"]
                } else {
                    &["CPU"]
                };
                let want: std::collections::BTreeSet<String> =
                    tiers.iter().map(|s| s.to_string()).collect();
                assert_eq!(media, want, "{name}.{mode}: media");
                // only these evict a chunk in the step its cascade is reported
                let evicts_reported = ["fs_next_step", "fs_two_groups"].contains(&name.as_str());
                assert_eq!(placeholders > 0, evicts_reported, "{name}.{mode}");
            }
        }
    }

    /// The simulator, given each tiering fixture's inputs as a kvscope scenario
    /// (`tiering/kvscope/<name>.json`), writes upstream's stream byte for byte in both orders
    /// (whole msgpack payloads, `ts` included).
    #[test]
    fn simulator_reproduces_tiering_streams_byte_for_byte() {
        use kvscope_core::scenario::Scenario;
        use kvscope_core::sim::simulate;
        use kvscope_core::wire::msgpack::{decode_stream, encode_batch};
        use kvscope_core::wire::EventEncoding;
        use kvscope_core::TraceRecord;

        let wire = |records: &[TraceRecord]| -> Vec<kvscope_core::KvEventBatch> {
            records
                .iter()
                .filter_map(|r| match r {
                    TraceRecord::Batch(b) => Some(b.to_wire()),
                    _ => None,
                })
                .collect()
        };
        let mut failures = Vec::new();
        for name in &names() {
            let path = dir().join(format!("kvscope/{name}.json"));
            let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path:?}: {e}"));
            for mode in TIERING_MODES {
                let mut sc =
                    Scenario::from_json(&text).unwrap_or_else(|e| panic!("{path:?}: {e:?}"));
                sc.order = match *mode {
                    "fixed" => OrderMode::Fixed,
                    _ => OrderMode::CPython {
                        python_hash_seed: 0,
                    },
                };
                let trace = simulate(&sc).unwrap_or_else(|e| panic!("{name}.{mode}: {e:?}"));
                let ours = wire(&trace.records);
                let bytes: Vec<u8> = ours
                    .iter()
                    .flat_map(|b| encode_batch(b, EventEncoding::Map))
                    .collect();
                let upath = dir().join(format!("{name}.{mode}.msgpack"));
                let upstream = std::fs::read(&upath).unwrap_or_else(|e| panic!("{upath:?}: {e}"));
                if bytes != upstream {
                    let theirs = wire(
                        &decode_stream(&upstream, name)
                            .expect("upstream stream decodes")
                            .records,
                    );
                    failures.push(format!(
                        "{name}.{mode}: {}",
                        first_difference(&ours, &theirs)
                    ));
                }
            }
        }
        assert!(
            failures.is_empty(),
            "kvscope's simulation differs from vLLM 0.28.0:\n{}",
            failures.join("\n")
        );
    }
}
