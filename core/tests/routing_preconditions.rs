//! The routing-precondition rules (`docs/rules.md`, "Routing preconditions"):
//!
//! * a data-driven table of small hand traces: each rule fires on the traces that have its
//!   condition (exactly the expected set of precondition rules, with one aggregated finding
//!   per condition) and on none that lack it;
//! * a property test: no precondition rule fires on fixed-order single-source simulator traces
//!   of the built-in scenarios, whatever their seed.

use kvscope_core::analysis::{analyze, Analysis, AnalysisConfig, Finding, Rule};
use kvscope_core::consumers::testkit::{batch, h, removed, stored, stored_raw, trace};
use kvscope_core::event::{label, ExtraValue, KvEvent};
use kvscope_core::hash::BlockHash;
use kvscope_core::order::OrderMode;
use kvscope_core::scenario::{builtin::BUILTINS, Scenario};
use kvscope_core::sim::simulate;
use kvscope_core::trace::{Trace, TraceRecord};
use proptest::prelude::*;
use smallvec::smallvec;

use Rule::{
    HashSeedMismatch, MissingSpecKind, PodEntryOverflow, RouterBlockSizeMismatch, SilentSource,
    StaleAfterRestart, UndecodableBatch,
};

const GPU: Option<&str> = Some("GPU");
const CPU: Option<&str> = Some("CPU");

/// Edit the `BlockStored` `ev`.
fn with(mut ev: KvEvent, f: impl FnOnce(&mut kvscope_core::event::BlockStored)) -> KvEvent {
    if let KvEvent::BlockStored(e) = &mut ev {
        f(e);
    }
    ev
}

/// A root store of `hash` carrying the tokens of test block `tokens_of` (so two sources can
/// store the same tokens under different hashes).
fn root_as(hash: u64, tokens_of: u64) -> KvEvent {
    let tokens = match stored(&[tokens_of], None, GPU, 16) {
        KvEvent::BlockStored(e) => e.token_ids,
        _ => unreachable!(),
    };
    with(stored_raw(&[hash], None, GPU, 16), |e| e.token_ids = tokens)
}

/// A batch at `ts` seconds after the testkit's epoch (`seq` as given).
fn at_ts(source: &str, seq: u64, ts: f64, events: Vec<KvEvent>) -> TraceRecord {
    let mut r = batch(source, seq, events);
    if let TraceRecord::Batch(b) = &mut r {
        b.ts = 1_700_000_000.0 + ts;
    }
    r
}

fn precondition_findings(a: &Analysis) -> Vec<&Finding> {
    a.findings
        .iter()
        .filter(|f| f.rule.is_routing_precondition())
        .collect()
}

/// One row: a trace, its config, and the precondition findings expected as
/// `(rule, count, substrings of the first one's message)`.
struct Case {
    name: &'static str,
    trace: Trace,
    config: AnalysisConfig,
    expect: Vec<(Rule, usize, Vec<&'static str>)>,
}

fn case(name: &'static str, trace: Trace, expect: Vec<(Rule, usize, Vec<&'static str>)>) -> Case {
    Case {
        name,
        trace,
        config: AnalysisConfig::default(),
        expect,
    }
}

fn cases() -> Vec<Case> {
    let mut out = Vec::new();

    // A clean two-source trace: same tokens, same hashes, one block size.
    out.push(case(
        "clean two sources",
        trace(vec![
            batch(
                "a",
                0,
                vec![stored(&[1], None, GPU, 16), stored(&[2], Some(1), GPU, 16)],
            ),
            batch(
                "b",
                0,
                vec![stored(&[1], None, GPU, 16), stored(&[3], Some(1), GPU, 16)],
            ),
            batch("a", 1, vec![removed(&[2], GPU)]),
        ]),
        vec![],
    ));

    // undecodable-batch, llm-d R1: 50 batches each holding a hash below 2^32 (parent 0 too),
    // one finding with the counts; the source's other batch decodes.
    let mut records = vec![batch("a", 0, vec![stored(&[1], None, GPU, 16)])];
    for s in 1..=50u64 {
        records.push(batch(
            "a",
            s,
            vec![
                stored(&[100 + s], Some(1), GPU, 16),
                stored_raw(&[s], Some(0), GPU, 16),
            ],
        ));
    }
    out.push(case(
        "llm-d small integer hashes",
        trace(records),
        vec![(
            UndecodableBatch,
            1,
            vec!["llmd:", "50 batches", "small_int_hash", "all 100 events"],
        )],
    ));

    // undecodable-batch, llm-d R1b: an extra_keys entry that is not an array.
    out.push(case(
        "llm-d extra_keys entry not an array",
        trace(vec![
            batch("a", 0, vec![stored(&[1], None, GPU, 16)]),
            batch(
                "a",
                1,
                vec![
                    with(stored(&[2], Some(1), GPU, 16), |e| {
                        e.extra_keys = Some(vec![Some(ExtraValue::UInt(7))])
                    }),
                    stored(&[3], Some(2), GPU, 16),
                ],
            ),
        ]),
        vec![(
            UndecodableBatch,
            1,
            vec!["llmd:", "extra_keys_entry_not_array", "all 2 events"],
        )],
    ));

    // undecodable-batch, llm-d: a map key that is not a string inside extra_keys (msgpack v5
    // decodes maps as map[string]any).
    out.push(case(
        "llm-d extra_keys map key not a string",
        trace(vec![
            batch("a", 0, vec![stored(&[1], None, GPU, 16)]),
            batch(
                "a",
                1,
                vec![with(stored(&[2], Some(1), GPU, 16), |e| {
                    e.extra_keys = Some(vec![Some(ExtraValue::Array(vec![ExtraValue::Map(vec![
                        (ExtraValue::UInt(1), ExtraValue::Str("x".into())),
                    ])]))])
                })],
            ),
        ]),
        vec![(
            UndecodableBatch,
            1,
            vec!["llmd:", "extra_keys_map_key_not_string", "all 1 event"],
        )],
    ));

    // undecodable-batch, Dynamo: a bytes hash (llm-d reads bytes).
    let mut bytes = [0u8; 32];
    bytes[24..].copy_from_slice(&h(9).to_be_bytes());
    out.push(case(
        "dynamo bytes hash",
        trace(vec![
            batch("a", 0, vec![stored(&[1], None, GPU, 16)]),
            batch(
                "a",
                1,
                vec![
                    with(stored(&[9], Some(1), GPU, 16), |e| {
                        e.block_hashes = smallvec![BlockHash::Bytes(Box::new(bytes))]
                    }),
                    removed(&[1], GPU),
                ],
            ),
        ]),
        vec![(
            UndecodableBatch,
            1,
            vec!["dynamo:", "bytes_hash", "all 2 events", "1 stored block"],
        )],
    ));

    // missing-spec-kind: grouped stores without a kind and a grouped removal.
    let grouped = |ev: KvEvent, kind: Option<&str>| {
        with(ev, |e| {
            e.group_idx = Some(1);
            e.kv_cache_spec_kind = kind.map(label);
        })
    };
    let mut grouped_removal = removed(&[5], CPU);
    if let KvEvent::BlockRemoved(r) = &mut grouped_removal {
        r.group_idx = Some(1);
    }
    out.push(case(
        "grouped events without kind",
        trace(vec![batch(
            "a",
            0,
            vec![
                stored(&[1], None, GPU, 16),
                grouped(stored(&[5], None, CPU, 16), None),
                grouped(stored(&[6], Some(5), CPU, 16), None),
                grouped_removal.clone(),
            ],
        )]),
        vec![(
            MissingSpecKind,
            1,
            vec!["2 grouped stores", "group 1", "1 grouped removal"],
        )],
    ));
    // ... but once a store names the group's kind, llm-d knows it: nothing to report.
    out.push(case(
        "grouped events, kind learnt",
        trace(vec![batch(
            "a",
            0,
            vec![
                grouped(stored(&[5], None, CPU, 16), Some("full_attention")),
                grouped(stored(&[6], Some(5), CPU, 16), None),
                grouped_removal,
            ],
        )]),
        vec![],
    ));

    // hash-seed-mismatch: the same root tokens under different hashes, no extra_keys (so the
    // message names a cache salt as well); many roots, one finding per pair of sources.
    out.push(case(
        "two sources, other hash seeds",
        trace(vec![
            batch("a", 0, vec![root_as(h(1), 1), root_as(h(2), 2)]),
            batch("b", 0, vec![root_as(h(1001), 1), root_as(h(1002), 2)]),
        ]),
        vec![(
            HashSeedMismatch,
            1,
            vec![
                "sources \"a\" and \"b\"",
                "2 root blocks",
                "NONE_HASH",
                "cache salt",
            ],
        )],
    ));
    // Three sources, two agreeing: one finding per pair that disagrees.
    out.push(case(
        "three sources, one with another seed",
        trace(vec![
            batch("a", 0, vec![root_as(h(1), 1)]),
            batch("b", 0, vec![root_as(h(1), 1)]),
            batch("c", 0, vec![root_as(h(1001), 1)]),
            batch("a", 1, vec![root_as(h(1), 1)]),
        ]),
        vec![(HashSeedMismatch, 2, vec!["sources \"a\" and \"c\""])],
    ));
    // Equal extra_keys on both sides: the salt is the same, so it is not named.
    let nil_extra = |ev: KvEvent| with(ev, |e| e.extra_keys = Some(vec![None]));
    out.push(case(
        "two sources, other hash seeds, equal extra keys",
        trace(vec![
            batch("a", 0, vec![nil_extra(root_as(h(1), 1))]),
            batch("b", 0, vec![nil_extra(root_as(h(1001), 1))]),
        ]),
        vec![(HashSeedMismatch, 1, vec!["1 root block"])],
    ));
    // Other extra keys, another LoRA, another block size, or a non-root block: not the same
    // leading tokens as vLLM hashes them.
    let mm = |ev: KvEvent, m: &str| {
        with(ev, |e| {
            e.extra_keys = Some(vec![Some(ExtraValue::Array(vec![ExtraValue::Str(
                m.into(),
            )]))])
        })
    };
    out.push(case(
        "different hash inputs",
        trace(vec![
            batch(
                "a",
                0,
                vec![
                    mm(root_as(h(1), 1), "img-a"),
                    with(root_as(h(2), 2), |e| e.lora_name = Some("sql".into())),
                    stored(&[3], Some(1), GPU, 16),
                ],
            ),
            batch(
                "b",
                0,
                vec![
                    mm(root_as(h(1001), 1), "img-b"),
                    root_as(h(1002), 2),
                    stored_raw(&[h(1003)], Some(h(1001)), GPU, 16),
                ],
            ),
        ]),
        vec![],
    ));

    // router-block-size-mismatch: llm-d configured for 32-token blocks, the engine writes 16.
    // llm-d then ignores the root (sub_canonical) and drops its child as an orphan.
    let mut c = case(
        "llm-d block size too large",
        trace(vec![batch(
            "a",
            0,
            vec![stored(&[1], None, GPU, 16), stored(&[2], Some(1), GPU, 16)],
        )]),
        vec![(
            RouterBlockSizeMismatch,
            1,
            vec!["llmd:", "--llmd-block-size 32 (configured)", "2 stores"],
        )],
    );
    c.config.consumer_config.llmd_canonical_block_size = Some(32);
    out.push(c);
    // A divisor fits llm-d (each engine block is two canonical blocks); Dynamo auto fits.
    let mut c = case(
        "llm-d block size a divisor",
        trace(vec![batch(
            "a",
            0,
            vec![stored(&[1], None, GPU, 16), stored(&[2], Some(1), GPU, 16)],
        )]),
        vec![],
    );
    c.config.consumer_config.llmd_canonical_block_size = Some(8);
    out.push(c);
    // One source mixing 16 and 8: auto takes 16; neither router fits the 8s.
    out.push(case(
        "one source mixing block sizes",
        trace(vec![batch(
            "a",
            0,
            vec![
                stored(&[1], None, GPU, 16),
                stored(&[2], Some(1), GPU, 16),
                stored(&[3], None, GPU, 8),
            ],
        )]),
        vec![(
            RouterBlockSizeMismatch,
            2,
            vec!["llmd:", "(auto", "mixes block sizes", "at most 8"],
        )],
    ));
    // Two sources with different (consistent) sizes: auto is per source, all fit.
    out.push(case(
        "two sources, two block sizes",
        trace(vec![
            batch("a", 0, vec![stored(&[1], None, GPU, 16)]),
            batch("b", 0, vec![stored(&[7], None, GPU, 8)]),
        ]),
        vec![],
    ));

    // silent-source: Dynamo (and SGLang) ignore a source that only writes to an `FS` tier.
    out.push(case(
        "a source dynamo ignores entirely",
        trace(vec![
            batch("a", 0, vec![stored(&[1], None, GPU, 16)]),
            batch(
                "b",
                0,
                vec![
                    stored(&[1], None, Some("FS"), 16),
                    stored(&[2], Some(1), Some("FS"), 16),
                ],
            ),
        ]),
        vec![(
            SilentSource,
            2,
            vec!["dynamo:", "2 stores", "unknown_medium"],
        )],
    ));
    // silent-source: `a` publishes every second, then nothing for 36 s while `b` goes on.
    let silent = || {
        let mut records = Vec::new();
        for s in 0..4u64 {
            records.push(at_ts(
                "a",
                s,
                s as f64,
                vec![stored(&[10 + s], None, GPU, 16)],
            ));
        }
        for s in 0..40u64 {
            records.push(at_ts(
                "b",
                s,
                s as f64,
                vec![stored(&[100 + s], None, GPU, 16)],
            ));
        }
        records.sort_by(|x, y| match (x, y) {
            (TraceRecord::Batch(x), TraceRecord::Batch(y)) => x.ts.total_cmp(&y.ts),
            _ => std::cmp::Ordering::Equal,
        });
        trace(records)
    };
    out.push(case(
        "a source falls silent",
        silent(),
        vec![(
            SilentSource,
            1,
            vec![
                "36.000 s",
                "36x its median interval of 1.000 s",
                "until the end",
            ],
        )],
    ));
    // The factor is configurable.
    let mut c = case("a source falls silent, factor 50", silent(), vec![]);
    c.config.silent_source_factor = 50;
    out.push(c);

    // pod-entry-overflow: 11 pods store the same root block: one llm-d request key with 11
    // (pod, tier, group) entries; so do 4 pods x 3 tiers.
    let pods: Vec<TraceRecord> = (0..11)
        .map(|p| batch(&format!("pod-{p}"), 0, vec![stored(&[1], None, GPU, 16)]))
        .collect();
    out.push(case(
        "11 pods, one request key",
        trace(pods),
        vec![(PodEntryOverflow, 1, vec!["1 store", "evicted 1 older"])],
    ));
    let tiers: Vec<TraceRecord> = (0..4)
        .map(|p| {
            batch(
                &format!("pod-{p}"),
                0,
                vec![
                    stored(&[1], None, GPU, 16),
                    stored(&[1], None, CPU, 16),
                    stored(&[1], None, Some("STORAGE"), 16),
                ],
            )
        })
        .collect();
    out.push(case(
        "4 pods x 3 tiers",
        trace(tiers),
        vec![(PodEntryOverflow, 1, vec!["2 stores", "evicted 2 older"])],
    ));
    let ten: Vec<TraceRecord> = (0..10)
        .map(|p| batch(&format!("pod-{p}"), 0, vec![stored(&[1], None, GPU, 16)]))
        .collect();
    out.push(case("10 pods", trace(ten), vec![]));

    // stale-after-restart: `a` restarts (seq 2 → 0) and re-announces block 1 only.
    let restart = || {
        trace(vec![
            batch(
                "a",
                0,
                vec![stored(&[1], None, GPU, 16), stored(&[2], Some(1), GPU, 16)],
            ),
            batch("a", 1, vec![stored(&[3], Some(2), GPU, 16)]),
            batch("a", 2, vec![stored(&[4], None, GPU, 16)]),
            batch("a", 0, vec![stored(&[1], None, GPU, 16)]),
        ])
    };
    out.push(case(
        "restart, replay off",
        restart(),
        vec![(
            StaleAfterRestart,
            1,
            vec!["from 2 to 0", "3 blocks", "never re-announced"],
        )],
    ));
    let mut c = case("restart, replay on", restart(), vec![]);
    c.config.consumer_config.llmd_replay = true;
    out.push(c);
    out
}

#[test]
fn each_precondition_fires_on_its_condition_and_on_no_other_trace() {
    let mut fired = std::collections::BTreeSet::new();
    for c in cases() {
        let a = analyze(&c.trace, &c.config);
        let found = precondition_findings(&a);
        let mut got: Vec<(Rule, usize)> = Vec::new();
        for f in &found {
            match got.iter_mut().find(|(r, _)| *r == f.rule) {
                Some(g) => g.1 += 1,
                None => got.push((f.rule, 1)),
            }
        }
        got.sort();
        let mut want: Vec<(Rule, usize)> = c.expect.iter().map(|(r, n, _)| (*r, *n)).collect();
        want.sort();
        assert_eq!(got, want, "{}: {:#?}", c.name, found);
        for (rule, _, needles) in &c.expect {
            let f = found.iter().find(|f| f.rule == *rule).unwrap();
            for n in needles {
                assert!(
                    f.message.contains(n),
                    "{}: {n:?} not in {:?}",
                    c.name,
                    f.message
                );
            }
            assert!(f.line > 0, "{}: {rule} points at a batch", c.name);
            assert_eq!(f.level, kvscope_core::analysis::Level::Warn, "{}", c.name);
            fired.insert(*rule);
        }
    }
    let all: Vec<Rule> = Rule::ALL
        .into_iter()
        .filter(|r| r.is_routing_precondition())
        .collect();
    assert_eq!(
        fired.into_iter().collect::<Vec<_>>(),
        all,
        "every rule has a row"
    );
}

#[test]
fn stale_after_restart_lists_the_stale_blocks() {
    let t = trace(vec![
        batch(
            "a",
            0,
            vec![stored(&[1], None, GPU, 16), stored(&[2], Some(1), GPU, 16)],
        ),
        batch("a", 1, vec![stored(&[1], None, GPU, 16)]),
        batch("a", 0, vec![stored(&[1], None, GPU, 16)]),
    ]);
    let a = analyze(&t, &AnalysisConfig::default());
    let f: Vec<&Finding> = a
        .findings
        .iter()
        .filter(|f| f.rule == StaleAfterRestart)
        .collect();
    assert_eq!(f.len(), 1);
    assert_eq!(f[0].hashes, vec![h(2)]);
    assert_eq!(f[0].event, 3, "the new incarnation's first event");
}

/// The built-in scenarios with one source.
fn single_source() -> Vec<Scenario> {
    BUILTINS
        .iter()
        .map(|b| Scenario::from_json(b.json).expect("builtin"))
        .filter(|s| {
            let mut sources: Vec<&str> = s.engines.iter().map(|e| e.source.as_str()).collect();
            sources.dedup();
            sources.len() <= 1
        })
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    #[test]
    fn no_precondition_fires_on_fixed_order_single_source_simulations(
        pick in 0usize..64,
        seed in any::<u64>(),
    ) {
        let scenarios = single_source();
        prop_assume!(!scenarios.is_empty());
        let mut s = scenarios[pick % scenarios.len()].clone();
        s.order = OrderMode::Fixed;
        s.seed = seed;
        let t = simulate(&s).expect("simulate");
        let a = analyze(&t, &AnalysisConfig::default());
        let found = precondition_findings(&a);
        prop_assert!(found.is_empty(), "{}: {:#?}", s.name, found);
    }
}

#[test]
fn hash_seed_mismatch_names_a_cache_salt_only_when_extra_keys_are_absent() {
    let nil = |ev: KvEvent| with(ev, |e| e.extra_keys = Some(vec![None]));
    let message = |t: Trace| {
        let a = analyze(&t, &AnalysisConfig::default());
        let f: Vec<&Finding> = a
            .findings
            .iter()
            .filter(|f| f.rule == HashSeedMismatch)
            .collect();
        assert_eq!(f.len(), 1);
        f[0].message.clone()
    };
    let both = message(trace(vec![
        batch("a", 0, vec![nil(root_as(h(1), 1))]),
        batch("b", 0, vec![nil(root_as(h(1001), 1))]),
    ]));
    assert!(!both.contains("cache salt"), "{both}");
    let one = message(trace(vec![
        batch("a", 0, vec![nil(root_as(h(1), 1))]),
        batch("b", 0, vec![root_as(h(1001), 1)]),
    ]));
    assert!(one.contains("cache salt"), "{one}");
}
