//! Property tests of every model over random traces: small hashes, groups with and without
//! kinds, mixed-case media and ownerships, multimodal extra keys, token-less updates, many
//! pods and tiers.

use proptest::prelude::*;

use super::*;
use crate::event::{label, BlockRemoved, BlockStored, ExtraValue, Label};
use crate::hash::BlockHash;

/// Media as producers write them (mixed case, other tiers, none).
const MEDIA: [Option<&str>; 7] = [
    None,
    Some("GPU"),
    Some("gpu"),
    Some("CPU"),
    Some("cpu"),
    Some("STORAGE"),
    Some("FS"),
];

fn hash() -> impl Strategy<Value = u64> {
    // Mostly ids mapped above 2^32 (a small pool, so chains and repeats happen), sometimes a
    // small integer (R1).
    prop_oneof![
        8 => (0u64..24).prop_map(|i| (1 << 32) + i),
        1 => 0u64..24,
    ]
}

fn event() -> impl Strategy<Value = KvEvent> {
    let store = (
        prop::collection::vec(hash(), 0..4),
        prop::option::of(hash()),
        0usize..MEDIA.len(),
        prop::option::of(0u32..3),
        prop::option::of(prop_oneof![Just("full_attention"), Just("sliding_window")]),
        prop::option::of(prop_oneof![Just(""), Just("adapter")]),
        0u8..4,
        any::<bool>(),
        prop::option::of(prop_oneof![Just("fs0"), Just("fs1")]),
    )
        .prop_map(
            |(hashes, parent, m, group, kind, lora, extra, tokenless, ownership)| {
                let bs = 4u32;
                let token_ids: Vec<u32> = if tokenless {
                    Vec::new()
                } else {
                    hashes
                        .iter()
                        .flat_map(|h| (0..bs).map(move |i| (*h as u32).wrapping_mul(7) + i))
                        .collect()
                };
                let extra_keys = match extra {
                    0 => None,
                    1 => Some(vec![None; hashes.len()]),
                    2 => Some(
                        hashes
                            .iter()
                            .map(|h| {
                                Some(ExtraValue::Array(vec![ExtraValue::Str(format!(
                                    "img{}",
                                    h % 3
                                ))]))
                            })
                            .collect(),
                    ),
                    _ => Some(vec![Some(ExtraValue::Str("salt".into()))]),
                };
                KvEvent::BlockStored(BlockStored {
                    block_hashes: hashes.into_iter().map(BlockHash::Int).collect(),
                    parent_block_hash: parent.map(BlockHash::Int),
                    block_size: if tokenless { 0 } else { bs },
                    token_ids,
                    lora_id: None,
                    medium: MEDIA[m].map(label),
                    lora_name: lora.map(label),
                    extra_keys,
                    group_idx: group,
                    kv_cache_spec_kind: kind.map(label),
                    ownership: ownership.map(label),
                    ..BlockStored::default()
                })
            },
        );
    let remove = (
        prop::collection::vec(hash(), 1..3),
        0usize..MEDIA.len(),
        prop::option::of(0u32..3),
    )
        .prop_map(|(hashes, m, group)| {
            KvEvent::BlockRemoved(BlockRemoved {
                block_hashes: hashes.into_iter().map(BlockHash::Int).collect(),
                medium: MEDIA[m].map(label),
                group_idx: group,
                locality: None,
                ownership: None,
            })
        });
    prop_oneof![6 => store, 3 => remove, 1 => Just(KvEvent::AllBlocksCleared)]
}

/// Batches of `(pod, events)`, up to 12 pods.
fn batches() -> impl Strategy<Value = Vec<(u32, Vec<KvEvent>)>> {
    prop::collection::vec((0u32..12, prop::collection::vec(event(), 1..4)), 1..40)
}

/// Every model's verdicts on `batches`, plus the models (for their lane counters).
fn run(batches: &[(u32, Vec<KvEvent>)]) -> (Vec<Vec<EventVerdict>>, Vec<AnyConsumer>) {
    let config = ConsumerConfig {
        llmd_canonical_block_size: Some(4),
        dynamo_kv_block_size: Some(4),
        ..ConsumerConfig::default()
    };
    let mut models: Vec<AnyConsumer> = ConsumerKind::ALL
        .iter()
        .map(|k| AnyConsumer::new(*k, &config))
        .collect();
    let (mut interner, mut ids) = (Interner::default(), EventIds::default());
    let mut tiers: Vec<Option<Label>> = Vec::new();
    let mut out = vec![Vec::new(); models.len()];
    let mut resolved = Vec::new();
    let mut index = 0;
    for (pod, events) in batches {
        for ev in events {
            let medium = match ev {
                KvEvent::BlockStored(s) => s.medium.clone(),
                KvEvent::BlockRemoved(r) => r.medium.clone(),
                KvEvent::AllBlocksCleared => None,
            };
            let tier = match tiers.iter().position(|t| *t == medium) {
                Some(i) => i as u32,
                None => {
                    tiers.push(medium);
                    tiers.len() as u32 - 1
                }
            };
            let ctx = EventCtx {
                index,
                source: *pod,
                dp_rank: 0,
                seq: index as u64,
                tier,
                provenance: None,
                batch: events,
            };
            index += 1;
            ids.fill(&mut interner, ev);
            for (m, o) in models.iter_mut().zip(out.iter_mut()) {
                o.push(m.apply(&ctx, ev, &ids, &mut resolved));
            }
        }
    }
    (out, models)
}

fn llmd_verdicts(batches: &[(u32, Vec<KvEvent>)]) -> Vec<EventVerdict> {
    let (mut out, _) = run(batches);
    let i = ConsumerKind::ALL
        .iter()
        .position(|k| *k == ConsumerKind::Llmd)
        .unwrap_or(0);
    out.swap_remove(i)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, failure_persistence: None, ..ProptestConfig::default() })]

    /// Every model answers every event with one block verdict per hash (Dynamo may add the
    /// blocks a removal took with its chain), and no lane counter goes negative.
    #[test]
    fn every_model_answers_every_block(b in batches()) {
        let (out, models) = run(&b);
        let events: Vec<&KvEvent> = b.iter().flat_map(|x| x.1.iter()).collect();
        for (k, (verdicts, model)) in ConsumerKind::ALL.iter().zip(out.iter().zip(&models)) {
            for (ev, v) in events.iter().zip(verdicts) {
                let n = ev.block_hashes().len();
                if *k == ConsumerKind::Dynamo {
                    prop_assert!(v.blocks.len() >= n, "{k:?} {v:?}");
                } else {
                    prop_assert_eq!(v.blocks.len(), n, "{:?} {:?}", k, v);
                }
            }
            for (lane, c) in model.lanes().iter() {
                prop_assert!(c.indexed >= 0 && c.unreachable >= 0 && c.pending >= 0, "{k:?} {lane:?} {c:?}");
            }
        }
    }

    /// llm-d loses exactly the batches `ParseMessage` rejects (R1, R1b), whole.
    #[test]
    fn llmd_drops_exactly_the_undecodable_batches(b in batches()) {
        let v = llmd_verdicts(&b);
        let mut i = 0;
        for (_, events) in &b {
            let bad = events.iter().any(|e| llmd::wire::undecodable(e).is_some());
            for _ in events {
                let lost = v[i].reason.as_deref() == Some("batch_decode_error");
                prop_assert_eq!(lost, bad, "event {}: {:?}", i, v[i]);
                i += 1;
            }
        }
    }

    /// llm-d reads neither the case of `medium` (R3) nor `ownership`, and an empty
    /// `lora_name` is no `lora_name` (R6).
    #[test]
    fn llmd_ignores_medium_case_ownership_and_empty_lora_names(b in batches()) {
        let mut same = b.clone();
        for (_, events) in &mut same {
            for ev in events {
                match ev {
                    KvEvent::BlockStored(s) => {
                        s.medium = s.medium.as_deref().map(|m| m.to_uppercase().into());
                        s.ownership = None;
                        if s.lora_name.as_deref() == Some("") {
                            s.lora_name = None;
                        }
                    }
                    KvEvent::BlockRemoved(r) => {
                        r.medium = r.medium.as_deref().map(|m| m.to_lowercase().into())
                    }
                    KvEvent::AllBlocksCleared => {}
                }
            }
        }
        prop_assert_eq!(llmd_verdicts(&b), llmd_verdicts(&same));
    }

    /// SMG never drops an orphan: it re-roots it.
    #[test]
    fn smg_never_drops_a_store(b in batches()) {
        let (out, _) = run(&b);
        let i = ConsumerKind::ALL.iter().position(|k| *k == ConsumerKind::Smg).unwrap_or(0);
        for v in &out[i] {
            prop_assert!(v.verdict != VerdictKind::DroppedOrphan && v.verdict != VerdictKind::Ignored, "{v:?}");
        }
    }
}
