//! One table per llm-d behaviour (`docs/consumers.md` R1–R7): a small hand trace and the
//! verdict expected for every event and block, as llm-d-router `ebab6879` gives them.

use super::*;
use crate::consumers::testkit::{h, removed, removed_raw, stored, stored_raw};
use crate::consumers::Standalone;
use crate::event::{label, ExtraValue, Label};
use crate::hash::BlockHash;
use smallvec::smallvec;
use VerdictKind::*;

const GPU: Option<&str> = Some("GPU");

/// One delivered batch: pod, events.
type Batch = (u32, Vec<KvEvent>);

/// What one event must get: verdict, event reason (`None`: not checked), per-block verdicts
/// and, when given, the reason every block with a reason must carry.
#[derive(Debug)]
struct Want {
    verdict: VerdictKind,
    reason: Option<&'static str>,
    blocks: &'static [VerdictKind],
    block_reason: Option<&'static str>,
}

fn want(
    verdict: VerdictKind,
    reason: Option<&'static str>,
    blocks: &'static [VerdictKind],
) -> Want {
    Want {
        verdict,
        reason,
        blocks,
        block_reason: None,
    }
}

fn want_block(verdict: VerdictKind, blocks: &'static [VerdictKind], reason: &'static str) -> Want {
    Want {
        verdict,
        reason: None,
        blocks,
        block_reason: Some(reason),
    }
}

/// The analysis' tier id of an event: one per `(medium, ownership)` (the analysis tells
/// ownerships apart; llm-d does not).
fn lane_tier(ev: &KvEvent, tiers: &mut Vec<(Option<Label>, Option<Label>)>) -> u32 {
    let key = match ev {
        KvEvent::BlockStored(s) => (s.medium.clone(), s.ownership.clone()),
        KvEvent::BlockRemoved(r) => (r.medium.clone(), r.ownership.clone()),
        KvEvent::AllBlocksCleared => (None, None),
    };
    match tiers.iter().position(|t| *t == key) {
        Some(i) => i as u32,
        None => {
            tiers.push(key);
            tiers.len() as u32 - 1
        }
    }
}

/// Run `batches` through a fresh model (canonical block size 4) and check every event.
fn check(name: &str, batches: &[Batch], wants: &[Want]) -> Standalone<Llmd> {
    let mut m = Standalone::new(Llmd::new(4));
    let mut tiers = Vec::new();
    let mut resolved = Vec::new();
    let mut got = Vec::new();
    let mut index = 0;
    for (pod, events) in batches {
        for ev in events {
            let ctx = EventCtx {
                index,
                source: *pod,
                dp_rank: 0,
                seq: index as u64,
                tier: lane_tier(ev, &mut tiers),
                provenance: None,
                batch: events,
            };
            index += 1;
            got.push(m.apply(&ctx, ev, &mut resolved));
        }
    }
    assert_eq!(got.len(), wants.len(), "{name}: one expectation per event");
    for (i, (g, w)) in got.iter().zip(wants).enumerate() {
        let blocks: Vec<VerdictKind> = g.blocks.iter().map(|b| b.verdict).collect();
        assert_eq!(
            (g.verdict, blocks.as_slice()),
            (w.verdict, w.blocks),
            "{name}: event {i}: {g:?}"
        );
        if let Some(r) = w.reason {
            assert_eq!(g.reason.as_deref(), Some(r), "{name}: event {i}: {g:?}");
        }
        if let Some(r) = w.block_reason {
            assert!(
                g.blocks.iter().any(|b| b.reason.as_deref() == Some(r)),
                "{name}: event {i}: no block says {r}: {g:?}"
            );
        }
    }
    m
}

/// `ev` (a `BlockStored`) changed by `f`.
fn with(mut ev: KvEvent, f: impl FnOnce(&mut BlockStored)) -> KvEvent {
    if let KvEvent::BlockStored(s) = &mut ev {
        f(s);
    }
    ev
}

fn grouped(ev: KvEvent, group: u32, kind: Option<&str>) -> KvEvent {
    with(ev, |s| {
        s.group_idx = Some(group);
        s.kv_cache_spec_kind = kind.map(label);
    })
}

fn removed_group(ids: &[u64], group: u32) -> KvEvent {
    let mut ev = removed(ids, GPU);
    if let KvEvent::BlockRemoved(r) = &mut ev {
        r.group_idx = Some(group);
    }
    ev
}

fn tokenless(ids: &[u64], medium: &str) -> KvEvent {
    with(stored(ids, None, Some(medium), 4), |s| {
        s.token_ids.clear();
        s.block_size = 0;
    })
}

fn extra(ev: KvEvent, mm: &str) -> KvEvent {
    with(ev, |s| {
        s.extra_keys = Some(vec![Some(ExtraValue::Array(vec![ExtraValue::Str(
            mm.into(),
        )]))]);
    })
}

#[test]
fn r1_small_integer_hashes_drop_the_whole_batch() {
    let dropped = want(Ignored, Some("batch_decode_error"), &[Ignored]);
    let m = check(
        "R1",
        &[
            // A hash below 2^32 takes its batch's other events with it.
            (
                0,
                vec![stored_raw(&[5], None, GPU, 4), stored(&[1], None, GPU, 4)],
            ),
            // A parent of 0 is a small integer too.
            (0, vec![stored_raw(&[h(2)], Some(0), GPU, 4)]),
            // 2^32 - 1 is the largest uint32; 2^32 is a uint64.
            (0, vec![stored_raw(&[(1 << 32) - 1], None, GPU, 4)]),
            (0, vec![stored_raw(&[1 << 32], None, GPU, 4)]),
            // A small hash in a removal drops the store next to it.
            (0, vec![removed_raw(&[7], GPU), stored(&[3], None, GPU, 4)]),
            // The next batch decodes.
            (0, vec![stored(&[1], None, GPU, 4)]),
        ],
        &[
            dropped,
            want(Ignored, Some("batch_decode_error"), &[Ignored]),
            want(Ignored, Some("batch_decode_error"), &[Ignored]),
            want(Ignored, Some("batch_decode_error"), &[Ignored]),
            want(Applied, None, &[Applied]),
            want(Ignored, Some("batch_decode_error"), &[Ignored]),
            want(Ignored, Some("batch_decode_error"), &[Ignored]),
            want(Applied, None, &[Applied]),
        ],
    );
    assert_eq!(m.model().mapped_engine_keys(), 2);
}

#[test]
fn r1_empty_bytes_hash_drops_the_batch_and_long_bytes_keep_the_last_eight() {
    let bytes = |b: &[u8]| {
        with(stored(&[1], None, GPU, 4), |s| {
            s.block_hashes = smallvec![BlockHash::Bytes(b.into())];
        })
    };
    check(
        "R1 bytes",
        &[(0, vec![bytes(&[])]), (0, vec![bytes(&[9; 32])])],
        &[
            want(Ignored, Some("batch_decode_error"), &[Ignored]),
            want(Applied, None, &[Applied]),
        ],
    );
}

#[test]
fn r1b_an_extra_keys_entry_that_is_not_an_array_drops_the_batch() {
    let entry =
        |e: Option<ExtraValue>| with(stored(&[1], None, GPU, 4), |s| s.extra_keys = Some(vec![e]));
    check(
        "R1b",
        &[
            (
                0,
                vec![
                    entry(Some(ExtraValue::Str("salt".into()))),
                    stored(&[9], None, GPU, 4),
                ],
            ),
            (0, vec![entry(None)]),
            (0, vec![entry(Some(ExtraValue::Array(vec![])))]),
            // msgpack v5 decodes maps as `map[string]any`: a map key that is not a string,
            // bytes or nil fails the event at any depth, and the batch with it.
            (0, vec![entry(Some(arr(vec![map(ExtraValue::UInt(1))])))]),
            (
                0,
                vec![entry(Some(arr(vec![arr(vec![
                    str("mm"),
                    map(ExtraValue::Bool(true)),
                ])])))],
            ),
            (0, vec![entry(Some(arr(vec![map(ExtraValue::Float(1.5))])))]),
            // String, bytes and nil keys decode.
            (0, vec![entry(Some(arr(vec![map(str("k"))])))]),
            (
                0,
                vec![entry(Some(arr(vec![map(ExtraValue::Bytes(vec![0]))])))],
            ),
            (0, vec![entry(Some(arr(vec![map(ExtraValue::Nil)])))]),
        ],
        &[
            want(Ignored, Some("batch_decode_error"), &[Ignored]),
            want(Ignored, Some("batch_decode_error"), &[Ignored]),
            want(Applied, None, &[Applied]),
            want(Applied, None, &[Applied]),
            want(Ignored, Some("batch_decode_error"), &[Ignored]),
            want(Ignored, Some("batch_decode_error"), &[Ignored]),
            want(Ignored, Some("batch_decode_error"), &[Ignored]),
            want(Applied, None, &[Applied]),
            want(Applied, None, &[Applied]),
            want(Applied, None, &[Applied]),
        ],
    );
}

fn arr(items: Vec<ExtraValue>) -> ExtraValue {
    ExtraValue::Array(items)
}

fn str(s: &str) -> ExtraValue {
    ExtraValue::Str(s.into())
}

/// A one-entry map with key `key`.
fn map(key: ExtraValue) -> ExtraValue {
    ExtraValue::Map(vec![(key, ExtraValue::UInt(1))])
}

#[test]
fn a_hash_repeated_in_one_store_maps_to_the_keys_of_all_its_positions() {
    // `engineToRequestMapping` gives hash 1 both request keys of the store [1, 1]; block 3,
    // stored at the root with the first position's tokens, shares the first key. Evicting
    // hash 1 empties both keys, so block 3's removal then finds nothing.
    let first_tokens = match stored(&[1], None, GPU, 4) {
        KvEvent::BlockStored(s) => s.token_ids,
        _ => unreachable!(),
    };
    check(
        "repeated hash",
        &[(
            0,
            vec![
                stored(&[1, 1], None, GPU, 4),
                with(stored(&[3], None, GPU, 4), |s| s.token_ids = first_tokens),
                removed(&[1, 1], GPU),
                removed(&[3], GPU),
            ],
        )],
        &[
            want(Applied, None, &[Applied, Applied]),
            want(Applied, None, &[Applied]),
            want(Removed, None, &[Ignored, Removed]),
            want_block(RemoveUnknown, &[RemoveUnknown], "evict_removed_nothing"),
        ],
    );
}

#[test]
fn r2_groups_without_a_kind_use_the_catalogue_or_are_skipped() {
    check(
        "R2",
        &[(
            0,
            vec![
                grouped(stored(&[1], None, GPU, 4), 0, Some("full_attention")),
                // Group 0's kind is known: indexed.
                grouped(stored(&[2], Some(1), GPU, 4), 0, None),
                // Group 1 never named a kind: unsupported, and it teaches nothing.
                grouped(stored(&[3], None, GPU, 4), 1, None),
                removed_group(&[3], 1),
                // Group 2 named an unsupported kind.
                grouped(stored(&[4], None, GPU, 4), 2, Some("sliding_window")),
                removed_group(&[4], 2),
                removed_group(&[2], 0),
            ],
        )],
        &[
            want(Applied, None, &[Applied]),
            want(Applied, None, &[Applied]),
            want(Ignored, Some("unsupported_cache_kind"), &[Ignored]),
            want(Ignored, Some("removals_skipped_unknown_group"), &[Ignored]),
            want(Ignored, Some("unsupported_cache_kind"), &[Ignored]),
            want(
                Ignored,
                Some("removals_skipped_unsupported_cache_kind"),
                &[Ignored],
            ),
            want(Removed, None, &[Removed]),
        ],
    );
}

#[test]
fn r3_media_are_lower_cased_and_ownership_is_not_read() {
    let owned = |ev: KvEvent, o: &str| with(ev, |s| s.ownership = Some(label(o)));
    let removed_owned = |ids: &[u64], o: &str| {
        let mut ev = removed(ids, Some("STORAGE"));
        if let KvEvent::BlockRemoved(r) = &mut ev {
            r.ownership = Some(label(o));
        }
        ev
    };
    check(
        "R3",
        &[(
            0,
            vec![
                stored(&[1], None, GPU, 4),
                stored(&[1], None, Some("CPU"), 4),
                stored(&[1], None, Some("cpu"), 4),
                // One tier, one refcount of 2.
                removed(&[1], Some("CPU")),
                removed(&[1], Some("cpu")),
                // Two STORAGE ownerships share one pod entry and one refcount.
                owned(stored(&[2], None, Some("STORAGE"), 4), "fs0"),
                owned(stored(&[2], None, Some("STORAGE"), 4), "fs1"),
                removed_owned(&[2], "fs0"),
                // FS is another tier than STORAGE: known hash, nothing to remove.
                removed(&[2], Some("FS")),
                removed_owned(&[2], "fs1"),
            ],
        )],
        &[
            want(Applied, None, &[Applied]),
            want(Applied, None, &[Applied]),
            want(Applied, None, &[Applied]),
            want(Ignored, None, &[Ignored]),
            want(Removed, None, &[Removed]),
            want(Applied, None, &[Applied]),
            want(Applied, None, &[Applied]),
            want(Ignored, None, &[Ignored]),
            want_block(RemoveUnknown, &[RemoveUnknown], "evict_removed_nothing"),
            want(Removed, None, &[Removed]),
        ],
    );
}

#[test]
fn r4_multimodal_extra_keys_change_the_request_keys() {
    // Pod 1 stores the same hash and tokens with another image: its request key replaces
    // pod 0's in the engine mapping, so pod 0's removal finds nothing to evict.
    check(
        "R4 differ",
        &[
            (0, vec![extra(stored(&[1], None, GPU, 4), "img-a")]),
            (1, vec![extra(stored(&[1], None, GPU, 4), "img-b")]),
            (0, vec![removed(&[1], GPU)]),
        ],
        &[
            want(Applied, None, &[Applied]),
            want(Applied, None, &[Applied]),
            want_block(RemoveUnknown, &[RemoveUnknown], "evict_removed_nothing"),
        ],
    );
    // The same image: one request key, both pods on it.
    check(
        "R4 same",
        &[
            (0, vec![extra(stored(&[1], None, GPU, 4), "img-a")]),
            (1, vec![extra(stored(&[1], None, GPU, 4), "img-a")]),
            (0, vec![removed(&[1], GPU)]),
        ],
        &[
            want(Applied, None, &[Applied]),
            want(Applied, None, &[Applied]),
            want(Removed, None, &[Removed]),
        ],
    );
}

#[test]
fn r5_token_less_updates_refcount_every_hash_once_one_resolves() {
    check(
        "R5",
        &[(
            0,
            vec![
                stored(&[1], None, GPU, 4),
                tokenless(&[1, 2], "CPU"),
                tokenless(&[1, 2], "CPU"),
                // Block 2 never resolved, yet its CPU removals are refcounted.
                removed(&[2], Some("CPU")),
                removed(&[2], Some("CPU")),
                // Nothing resolves: nothing is tracked.
                tokenless(&[3], "CPU"),
                removed(&[3], Some("CPU")),
            ],
        )],
        &[
            want(Applied, None, &[Applied]),
            want(Applied, Some("tier_update"), &[Applied, Ignored]),
            want(Applied, Some("tier_update"), &[Applied, Ignored]),
            want(Ignored, None, &[Ignored]),
            want(RemoveUnknown, None, &[RemoveUnknown]),
            want(Ignored, Some("tier_update"), &[Ignored]),
            want(RemoveUnknown, None, &[RemoveUnknown]),
        ],
    );
}

#[test]
fn r6_an_empty_lora_name_is_the_base_model() {
    let lora = |ev: KvEvent, name: Option<&str>| with(ev, |s| s.lora_name = name.map(label));
    for (name, second, want_removal) in [
        ("R6 empty", Some(""), want(Removed, None, &[Removed])),
        (
            "R6 adapter",
            Some("adapter"),
            want_block(RemoveUnknown, &[RemoveUnknown], "evict_removed_nothing"),
        ),
    ] {
        check(
            name,
            &[
                (0, vec![lora(stored(&[1], None, GPU, 4), second)]),
                (1, vec![lora(stored(&[1], None, GPU, 4), None)]),
                (0, vec![removed(&[1], GPU)]),
            ],
            &[
                want(Applied, None, &[Applied]),
                want(Applied, None, &[Applied]),
                want_removal,
            ],
        );
    }
}

#[test]
fn r7_a_request_key_keeps_ten_pod_entries() {
    // Eleven pods store the same root block: pod 0's entry is evicted by the LRU.
    let mut batches: Vec<Batch> = (0..11)
        .map(|p| (p, vec![stored(&[1], None, GPU, 4)]))
        .collect();
    let mut wants: Vec<Want> = (0..11).map(|_| want(Applied, None, &[Applied])).collect();
    // Pods 1..=10 remove it: the request key empties and the engine mapping goes.
    for p in 1..11 {
        batches.push((p, vec![removed(&[1], GPU)]));
        wants.push(want(Removed, None, &[Removed]));
    }
    // Pod 0 still holds block 1, but llm-d lost it: its child is dropped, its removal evicts
    // nothing (the mapping is gone).
    batches.push((0, vec![stored(&[2], Some(1), GPU, 4)]));
    wants.push(want(DroppedOrphan, None, &[DroppedOrphan]));
    batches.push((0, vec![removed(&[1], GPU)]));
    wants.push(want(RemoveUnknown, None, &[RemoveUnknown]));
    check("R7 pods", &batches, &wants);

    // Four pods times three tiers are twelve entries: the two oldest go.
    let media = ["GPU", "CPU", "DISK"];
    let mut batches: Vec<Batch> = Vec::new();
    let mut wants: Vec<Want> = Vec::new();
    for p in 0..4 {
        for m in media {
            batches.push((p, vec![stored(&[1], None, Some(m), 4)]));
            wants.push(want(Applied, None, &[Applied]));
        }
    }
    batches.push((0, vec![removed(&[1], GPU)]));
    wants.push(want_block(
        RemoveUnknown,
        &[RemoveUnknown],
        "evict_removed_nothing",
    ));
    batches.push((0, vec![removed(&[1], Some("DISK"))]));
    wants.push(want(Removed, None, &[Removed]));
    let m = check("R7 tiers", &batches, &wants);
    let rk = m
        .model()
        .request_key_of(m.interner(), h(1))
        .expect("mapped");
    assert_eq!(m.model().pods_of(rk).len(), 9);
}

/// `(seq, events)` batches of pod 0 through a model with replay `on`; the verdicts.
fn run_seq(on: bool, batches: &[(u64, Vec<KvEvent>)]) -> (Standalone<Llmd>, Vec<EventVerdict>) {
    let mut m = Standalone::new(Llmd::new(4).with_replay(on));
    let mut out = Vec::new();
    for (seq, events) in batches {
        for ev in events {
            let ctx = EventCtx {
                index: out.len(),
                source: 0,
                dp_rank: 0,
                seq: *seq,
                tier: 0,
                provenance: None,
                batch: events,
            };
            out.push(m.apply(&ctx, ev, &mut Vec::new()));
        }
    }
    (m, out)
}

#[test]
fn a_restart_goes_unnoticed_without_replay_and_clears_the_pod_with_it() {
    let batches = vec![
        (
            0,
            vec![stored(&[1], None, GPU, 4), stored(&[2], Some(1), GPU, 4)],
        ),
        (1, vec![stored(&[3], Some(2), GPU, 4)]),
        // The engine restarted: seq back to 0; it re-announces block 1 only.
        (0, vec![stored(&[1], None, GPU, 4)]),
        (1, vec![removed(&[3], GPU)]),
    ];
    let (m, v) = run_seq(false, &batches);
    let stale = m.model().stale_after_restart(m.interner());
    assert_eq!(stale.len(), 1);
    assert_eq!((stale[0].0.event, stale[0].0.seq), (3, (1, 0)));
    assert_eq!(
        stale[0].1,
        vec![h(2)],
        "3 was removed since, 1 re-announced"
    );
    assert_eq!(v[4].verdict, Removed);

    let (m, v) = run_seq(true, &batches);
    assert!(m.model().stale_after_restart(m.interner()).is_empty());
    // The reset dropped the pod's entries (engine mappings survive): nothing to evict.
    assert_eq!(
        v[4].blocks[0].reason.as_deref(),
        Some("evict_removed_nothing")
    );
}

#[test]
fn with_replay_a_batch_repeating_the_last_seq_is_skipped() {
    let batches = vec![
        (0, vec![stored(&[1], None, GPU, 4)]),
        (
            0,
            vec![stored(&[2], Some(1), GPU, 4), stored(&[3], Some(2), GPU, 4)],
        ),
        (1, vec![stored(&[4], None, GPU, 4)]),
    ];
    let kinds = |v: &[EventVerdict]| v.iter().map(|v| v.verdict).collect::<Vec<_>>();
    let (_, v) = run_seq(true, &batches);
    assert_eq!(kinds(&v), [Applied, Ignored, Ignored, Applied]);
    assert_eq!(v[1].reason.as_deref(), Some("duplicate_seq"));
    let (_, v) = run_seq(false, &batches);
    assert_eq!(kinds(&v), [Applied; 4]);
}
