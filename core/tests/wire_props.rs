//! Property tests for the wire formats: round trips, byte identity, and hostile input.

use kvscope_core::event::{BlockRemoved, BlockStored, ExtraValue, KvEvent, KvEventBatch, Label};
use kvscope_core::hash::BlockHash;
use kvscope_core::trace::{
    Provenance, ProvenanceKind, SeqGap, Trace, TraceBatch, TraceHeader, TraceRecord,
};
use kvscope_core::wire::msgpack::{decode_batch, decode_stream, encode_batch};
use kvscope_core::wire::{jsonl, read_trace, EventEncoding, Location};
use proptest::collection::vec;
use proptest::option::of;
use proptest::prelude::*;

fn hash() -> impl Strategy<Value = BlockHash> {
    prop_oneof![
        4 => any::<u64>().prop_map(BlockHash::Int),
        1 => vec(any::<u8>(), 0..40).prop_map(|b| BlockHash::Bytes(b.into())),
    ]
}

fn text() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => "[A-Z_a-z0-9-]{0,12}",
        1 => any::<String>(),
        1 => "[a-z]{30,300}",
    ]
}

fn extra_value() -> impl Strategy<Value = ExtraValue> {
    let leaf = prop_oneof![
        Just(ExtraValue::Nil),
        any::<bool>().prop_map(ExtraValue::Bool),
        any::<u64>().prop_map(ExtraValue::UInt),
        (i64::MIN..0).prop_map(ExtraValue::Int),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(ExtraValue::Float),
        text().prop_map(ExtraValue::Str),
        vec(any::<u8>(), 0..40).prop_map(ExtraValue::Bytes),
    ];
    leaf.prop_recursive(3, 24, 5, |inner| {
        prop_oneof![
            vec(inner.clone(), 0..5).prop_map(ExtraValue::Array),
            vec((inner.clone(), inner), 0..3).prop_map(ExtraValue::Map),
        ]
    })
}

/// A top-level `extra_keys` entry: nil is `None`, so `Some` never holds `Nil`.
fn extra_entry() -> impl Strategy<Value = Option<ExtraValue>> {
    of(extra_value().prop_filter("not nil", |v| *v != ExtraValue::Nil))
}

fn stored() -> impl Strategy<Value = KvEvent> {
    (
        (
            vec(hash(), 0..20),
            of(hash()),
            vec(any::<u32>(), 0..40),
            any::<u32>(),
        ),
        (any::<Option<i64>>(), of(text()), of(text())),
        (
            of(vec(extra_entry(), 0..4)),
            any::<Option<u32>>(),
            of(text()),
            any::<Option<u64>>(),
        ),
        (of(text()), of(text())),
    )
        .prop_map(|(a, b, c, d)| {
            KvEvent::BlockStored(BlockStored {
                block_hashes: a.0.into(),
                parent_block_hash: a.1,
                token_ids: a.2,
                block_size: a.3,
                lora_id: b.0,
                medium: b.1.map(Label::from),
                lora_name: b.2.map(Label::from),
                extra_keys: c.0,
                group_idx: c.1,
                kv_cache_spec_kind: c.2.map(Label::from),
                kv_cache_spec_sliding_window: c.3,
                locality: d.0.map(Label::from),
                ownership: d.1.map(Label::from),
            })
        })
}

fn removed() -> impl Strategy<Value = KvEvent> {
    (
        vec(hash(), 0..20),
        of(text()),
        any::<Option<u32>>(),
        of(text()),
        of(text()),
    )
        .prop_map(|(block_hashes, medium, group_idx, locality, ownership)| {
            KvEvent::BlockRemoved(BlockRemoved {
                block_hashes: block_hashes.into(),
                medium: medium.map(Label::from),
                group_idx,
                locality: locality.map(Label::from),
                ownership: ownership.map(Label::from),
            })
        })
}

fn event() -> impl Strategy<Value = KvEvent> {
    prop_oneof![4 => stored(), 2 => removed(), 1 => Just(KvEvent::AllBlocksCleared)]
}

fn ts() -> impl Strategy<Value = f64> {
    prop_oneof![
        (0u32..100_000).prop_map(|s| 1_700_000_000.0 + f64::from(s)),
        any::<f64>().prop_filter("finite", |f| f.is_finite()),
    ]
}

fn batch() -> impl Strategy<Value = KvEventBatch> {
    (ts(), vec(event(), 0..20), any::<Option<u32>>()).prop_map(
        |(ts, events, data_parallel_rank)| KvEventBatch {
            ts,
            events,
            data_parallel_rank,
        },
    )
}

fn provenance() -> impl Strategy<Value = Provenance> {
    (
        text(),
        prop_oneof![
            Just(ProvenanceKind::GpuStore),
            Just(ProvenanceKind::OffloadStore),
            Just(ProvenanceKind::Evict),
            Just(ProvenanceKind::Promotion),
        ],
        any::<Option<u64>>(),
        of(text()),
        any::<Option<u32>>(),
        any::<Option<u32>>(),
        any::<Option<u64>>(),
    )
        .prop_map(
            |(tier, kind, job_id, req_id, group_idx, chunk_idx, step)| Provenance {
                tier,
                kind,
                job_id,
                req_id,
                group_idx,
                chunk_idx,
                step,
            },
        )
}

fn record() -> impl Strategy<Value = TraceRecord> {
    let batch_rec = (
        text(),
        any::<Option<u32>>(),
        any::<u64>(),
        batch(),
        any::<bool>(),
        // `raw`, when present, is the batch's own payload (what `convert --raw` writes): a
        // `raw` that is not is refused on read (see `wire_refused.rs`).
        of(prop_oneof![
            Just(EventEncoding::Map),
            Just(EventEncoding::Array)
        ]),
    )
        .prop_flat_map(|(source, dp_rank, seq, b, with_prov, raw)| {
            let raw = raw.map(|encoding| {
                let wire = KvEventBatch {
                    ts: b.ts,
                    events: b.events.clone(),
                    data_parallel_rank: dp_rank,
                };
                encode_batch(&wire, encoding)
            });
            let n = b.events.len();
            let prov = if with_prov {
                of(vec(provenance(), n..=n)).boxed()
            } else {
                Just(None).boxed()
            };
            prov.prop_map(move |provenance| {
                TraceRecord::Batch(TraceBatch {
                    source: source.clone(),
                    dp_rank,
                    seq,
                    ts: b.ts,
                    events: b.events.clone(),
                    provenance,
                    raw: raw.clone(),
                    origin: 0,
                })
            })
        });
    prop_oneof![
        6 => batch_rec,
        1 => (any::<u32>(), of(text())).prop_map(|(kvscope, scenario)| {
            let mut meta = serde_json::Map::new();
            meta.insert("order".into(), serde_json::Value::String("fixed".into()));
            TraceRecord::Header(TraceHeader { kvscope, scenario, meta })
        }),
        1 => (text(), any::<Option<u32>>(), any::<u64>(), any::<u64>(), any::<bool>()).prop_map(
            |(source, dp_rank, expected_seq, received_seq, recovered)| {
                TraceRecord::Gap(SeqGap { source, dp_rank, expected_seq, received_seq, recovered })
            }
        ),
        1 => (text(), any::<i64>()).prop_map(|(s, n)| {
            TraceRecord::Other(serde_json::json!({"kind": "note", "text": s, "n": n, "nested": {"b": [1, null]}}))
        }),
    ]
}

fn check_offset(loc: Location, len: usize) {
    match loc {
        Location::Byte(o) => assert!(o as usize <= len, "offset {o} > {len}"),
        other => panic!("msgpack error with a line location: {other:?}"),
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    #[test]
    fn msgpack_round_trips_byte_identically(b in batch()) {
        for enc in [EventEncoding::Map, EventEncoding::Array] {
            let bytes = encode_batch(&b, enc);
            let back = decode_batch(&bytes).unwrap();
            prop_assert_eq!(&back, &b);
            prop_assert_eq!(encode_batch(&back, enc), bytes);
        }
    }

    #[test]
    fn every_truncation_is_an_error_with_an_in_range_offset(b in batch()) {
        let bytes = encode_batch(&b, EventEncoding::Map);
        let step = (bytes.len() / 200).max(1);
        for n in (0..bytes.len()).step_by(step) {
            let err = decode_batch(&bytes[..n]).unwrap_err();
            check_offset(err.location, n);
            if n > 0 {
                let err = decode_stream(&bytes[..n], "s").unwrap_err();
                check_offset(err.location, n);
            }
        }
    }

    #[test]
    fn arbitrary_bytes_never_panic(bytes in vec(any::<u8>(), 0..400)) {
        if let Err(e) = decode_batch(&bytes) {
            check_offset(e.location, bytes.len());
        }
        if let Err(e) = decode_stream(&bytes, "s") {
            check_offset(e.location, bytes.len());
        }
        let _ = read_trace(&bytes, "s");
    }

    #[test]
    fn corrupted_payloads_never_panic(b in batch(), at in any::<prop::sample::Index>(), byte in any::<u8>()) {
        let mut bytes = encode_batch(&b, EventEncoding::Map);
        if !bytes.is_empty() {
            let i = at.index(bytes.len());
            bytes[i] = byte;
        }
        if let Err(e) = decode_batch(&bytes) {
            check_offset(e.location, bytes.len());
        }
    }

    #[test]
    fn jsonl_write_read_is_the_identity(records in vec(record(), 0..8)) {
        let mut t = Trace { records };
        for (i, r) in t.records.iter_mut().enumerate() {
            if let TraceRecord::Batch(b) = r {
                b.origin = i as u64 + 1;
            }
        }
        let text = jsonl::write_trace(&t);
        prop_assert_eq!(text.lines().count(), t.records.len());
        let back = jsonl::read_trace(text.as_bytes()).unwrap();
        prop_assert_eq!(&back, &t);
        prop_assert_eq!(jsonl::write_trace(&back), text);
    }

    #[test]
    fn arbitrary_jsonl_never_panics(lines in vec("[ -~]{0,60}", 0..6)) {
        let text = lines.join("\n");
        if let Err(e) = jsonl::read_trace(text.as_bytes()) {
            match e.location {
                Location::Line { line, .. } => prop_assert!(line >= 1 && line as usize <= lines.len().max(1)),
                other => prop_assert!(false, "{:?}", other),
            }
        }
    }
}

/// Field name → a valid msgpack value for it.
const FIELDS: [(&str, &[u8]); 13] = [
    ("block_hashes", &[0x91, 0x01]),
    ("parent_block_hash", &[0xc0]),
    ("token_ids", &[0x91, 0x01]),
    ("block_size", &[0x01]),
    ("lora_id", &[0xc0]),
    ("medium", &[0xa3, b'C', b'P', b'U']),
    ("lora_name", &[0xc0]),
    ("extra_keys", &[0xc0]),
    ("group_idx", &[0x00]),
    ("kv_cache_spec_kind", &[0xc0]),
    ("kv_cache_spec_sliding_window", &[0xc0]),
    ("locality", &[0xc0]),
    ("ownership", &[0xc0]),
];

#[test]
fn wrong_types_name_the_field_in_msgpack_and_json() {
    for (bad_field, _) in FIELDS {
        // msgpack: {"type": "BlockStored", every field valid except bad_field = true}
        let mut p = vec![0x93, 0xcb, 0x3f, 0xf0, 0, 0, 0, 0, 0, 0, 0x91];
        let _ = rmp::encode::write_map_len(&mut p, FIELDS.len() as u32 + 1);
        let _ = rmp::encode::write_str(&mut p, "type");
        let _ = rmp::encode::write_str(&mut p, "BlockStored");
        let mut bad_offset = 0;
        for (f, v) in FIELDS {
            let _ = rmp::encode::write_str(&mut p, f);
            if f == bad_field {
                bad_offset = p.len();
                p.push(0xc3);
            } else {
                p.extend_from_slice(v);
            }
        }
        p.push(0x00);
        let err = decode_batch(&p).unwrap_err();
        assert!(
            err.message
                .starts_with(&format!("event 0: field {bad_field}: expected ")),
            "{bad_field}: {err}"
        );
        assert!(err.message.ends_with("found bool"), "{err}");
        assert_eq!(err.location, Location::Byte(bad_offset as u64));

        // JSON: the same event as a batch line.
        let mut obj = serde_json::Map::new();
        obj.insert("type".into(), "BlockStored".into());
        for (f, v) in FIELDS {
            let value = if f == bad_field {
                serde_json::Value::Bool(true)
            } else {
                match v {
                    [0x91, 0x01] => serde_json::json!([1]),
                    [0x01] => 1.into(),
                    [0x00] => 0.into(),
                    [0xc0] => serde_json::Value::Null,
                    _ => "CPU".into(),
                }
            };
            obj.insert(f.into(), value);
        }
        let line =
            serde_json::json!({"source": "s", "dp_rank": 0, "seq": 0, "ts": 1.0, "events": [obj]});
        let err = jsonl::read_trace(line.to_string().as_bytes()).unwrap_err();
        assert!(
            err.message.starts_with(&format!(
                "event 0: field {bad_field}: invalid type: boolean `true`"
            )),
            "{bad_field}: {err}"
        );
        assert!(matches!(
            err.location,
            Location::Line {
                line: 1,
                column: Some(_)
            }
        ));
    }
}

#[test]
fn json_integers_never_pass_through_f64() {
    for v in [u64::MAX, 9007199254740993, 9007199254740992 + 3, 1 << 63] {
        let line = format!(
            r#"{{"source": "s", "dp_rank": 0, "seq": 0, "ts": 1.0, "events": [{{"type": "BlockRemoved", "block_hashes": [{v}], "medium": null}}]}}"#
        );
        let t = jsonl::read_trace(line.as_bytes()).unwrap();
        let b = t.batches().next().unwrap();
        assert_eq!(b.events[0].block_hashes(), &[BlockHash::Int(v)]);
        assert_eq!(jsonl::write_trace(&t).trim_end(), line);
    }
}
