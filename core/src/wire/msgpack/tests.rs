//! Unit tests of the msgpack codec.

use super::encode::*;
use super::*;
use crate::event::{BlockRemoved, BlockStored};
use crate::hash::BlockHash;
use smallvec::smallvec;

fn stored(hash: u64, parent: Option<u64>, tokens: Vec<u32>) -> KvEvent {
    KvEvent::BlockStored(BlockStored {
        block_hashes: smallvec![BlockHash::Int(hash)],
        parent_block_hash: parent.map(BlockHash::Int),
        token_ids: tokens,
        block_size: 4,
        lora_id: None,
        medium: Some("CPU".into()),
        lora_name: None,
        extra_keys: None,
        group_idx: Some(0),
        kv_cache_spec_kind: Some("full_attention".into()),
        kv_cache_spec_sliding_window: None,
        locality: None,
        ownership: None,
    })
}

/// Reference §1.5.
fn worked_example() -> KvEventBatch {
    let (h0, h1) = (9561501211280363793, 15292913576410714033);
    KvEventBatch {
        ts: 1700000000.5,
        events: vec![
            stored(h0, None, vec![1, 2, 3, 4]),
            stored(h1, Some(h0), vec![5, 6, 7, 8]),
            KvEvent::BlockRemoved(BlockRemoved {
                block_hashes: smallvec![BlockHash::Int(h0)],
                medium: Some("CPU".into()),
                group_idx: Some(0),
                locality: None,
                ownership: None,
            }),
            KvEvent::AllBlocksCleared,
        ],
        data_parallel_rank: Some(0),
    }
}

fn hexs(b: &[u8]) -> String {
    hex::encode(b)
}

#[test]
fn worked_example_first_bytes_match_the_reference() {
    let bytes = encode_batch(&worked_example(), EventEncoding::Map);
    // 93 cb41d954fc40200000 94 8a a474797065 ab426c6f636b53746f726564
    assert!(hexs(&bytes).starts_with("93cb41d954fc40200000948aa474797065ab426c6f636b53746f726564"));
    // The clear is the last event, then rank 0.
    assert!(hexs(&bytes).ends_with("81a474797065b0416c6c426c6f636b73436c656172656400"));
    assert_eq!(decode_batch(&bytes).unwrap(), worked_example());
}

#[test]
fn trace_batches_encode_like_their_wire_batches() {
    let wire = worked_example();
    let batch = TraceBatch {
        source: "s".into(),
        dp_rank: wire.data_parallel_rank,
        seq: 0,
        ts: wire.ts,
        events: wire.events.clone(),
        provenance: None,
        raw: None,
        origin: 1,
    };
    for encoding in [EventEncoding::Map, EventEncoding::Array] {
        let mut out = vec![0xc0];
        encode_trace_batch_into(&mut out, &batch, encoding);
        assert_eq!(out[1..], encode_batch(&batch.to_wire(), encoding)[..]);
    }
}

#[test]
fn array_form_is_positional_with_every_legacy_field() {
    let batch = KvEventBatch {
        ts: 1.0,
        events: vec![KvEvent::BlockStored(BlockStored {
            block_hashes: smallvec![BlockHash::Int(1)],
            parent_block_hash: None,
            token_ids: vec![1, 2],
            block_size: 2,
            lora_id: None,
            medium: Some("GPU".into()),
            lora_name: None,
            extra_keys: None,
            group_idx: None,
            kv_cache_spec_kind: None,
            kv_cache_spec_sliding_window: None,
            locality: None,
            ownership: None,
        })],
        data_parallel_rank: None,
    };
    let bytes = encode_batch(&batch, EventEncoding::Array);
    // ["BlockStored", [1], nil, [1,2], 2, nil, "GPU", nil, nil, nil, nil, nil]
    assert_eq!(
        hexs(&bytes),
        "93cb3ff0000000000000919cab426c6f636b53746f7265649101c092010202c0a3475055c0c0c0c0c0c0"
    );
    assert_eq!(decode_batch(&bytes).unwrap(), batch);
}

#[test]
fn short_legacy_arrays_default_trailing_fields() {
    // Too short: [tag, hashes] lacks the required token_ids.
    let bytes = hex::decode("92cb3ff00000000000009192ab426c6f636b53746f7265649101").unwrap();
    let err = decode_batch(&bytes).unwrap_err();
    assert_eq!(
        err.message,
        "event 0: BlockStored: missing required positional field token_ids"
    );
    assert_eq!(err.location, Location::Byte(11));
    // vLLM before #19737: [tag, hashes, parent, tokens, block_size, lora_id]; 2-element batch.
    let bytes =
        hex::decode("92cb3ff00000000000009196ab426c6f636b53746f7265649101c0910101c0").unwrap();
    let b = decode_batch(&bytes).unwrap();
    assert_eq!(b.data_parallel_rank, None);
    match &b.events[0] {
        KvEvent::BlockStored(s) => {
            assert_eq!(s.token_ids, vec![1]);
            assert_eq!(s.block_size, 1);
            assert_eq!(s.medium, None);
            assert_eq!(s.group_idx, None);
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn map_events_accept_any_key_order_unknown_keys_and_negative_hashes() {
    // {"block_hashes": [-1], "zzz": {"a": [1, 2.5]}, "medium": "GPU", "type": "BlockRemoved"}
    let mut p = hex::decode("93cb3ff000000000000091").unwrap();
    p.extend(hex::decode("84").unwrap());
    p.extend(hex::decode("ac626c6f636b5f686173686573").unwrap());
    p.extend(hex::decode("91ff").unwrap());
    p.extend(hex::decode("a37a7a7a").unwrap());
    p.extend(hex::decode("81a1619201cb4004000000000000").unwrap());
    p.extend(hex::decode("a66d656469756da3475055").unwrap());
    p.extend(hex::decode("a474797065ac426c6f636b52656d6f766564").unwrap());
    p.push(0x03);
    let b = decode_batch(&p).unwrap();
    assert_eq!(b.data_parallel_rank, Some(3));
    assert_eq!(
        b.events,
        vec![KvEvent::BlockRemoved(BlockRemoved {
            block_hashes: smallvec![BlockHash::Int(u64::MAX)],
            medium: Some("GPU".into()),
            group_idx: None,
            locality: None,
            ownership: None,
        })]
    );
}

#[test]
fn ts_may_be_float32_or_int() {
    let b = decode_batch(&hex::decode("93ca3fc0000090c0").unwrap()).unwrap();
    assert_eq!(b.ts, 1.5);
    let b = decode_batch(&hex::decode("93ce6553f1009000").unwrap()).unwrap();
    assert_eq!(b.ts, 1700000000.0);
    assert_eq!(b.data_parallel_rank, Some(0));
}

#[test]
fn wrong_types_name_the_event_and_field_at_the_item_offset() {
    let mut batch = worked_example();
    batch.events.truncate(1);
    let mut bytes = encode_batch(&batch, EventEncoding::Map);
    // Replace the token_ids array (fixarray 94 01 02 03 04) by a 5-byte fixstr (a4 "abcd").
    let pos = bytes
        .windows(5)
        .position(|w| w == [0x94, 1, 2, 3, 4])
        .unwrap();
    bytes.splice(pos..pos + 5, [0xa4, b'a', b'b', b'c', b'd']);
    let err = decode_batch(&bytes).unwrap_err();
    assert_eq!(
        err.message,
        "event 0: field token_ids: expected array, found str"
    );
    assert_eq!(err.location, Location::Byte(pos as u64));
    assert_eq!(
        err.to_string(),
        format!("byte offset {pos}: event 0: field token_ids: expected array, found str")
    );
}

#[test]
fn huge_declared_lengths_fail_without_allocating() {
    // array32 of 2^32-1 events, then nothing.
    let bytes = hex::decode("93cb3ff0000000000000ddffffffff").unwrap();
    let err = decode_batch(&bytes).unwrap_err();
    assert!(err.message.contains("unexpected end of input"), "{err}");
    // str32 key of 4 GiB.
    let bytes = hex::decode("93cb3ff000000000000091df00000001dbffffffff").unwrap();
    let err = decode_batch(&bytes).unwrap_err();
    assert!(
        err.message.contains("string needs 4294967295 byte(s)"),
        "{err}"
    );
}

#[test]
fn deep_nesting_is_rejected_not_overflowing_the_stack() {
    let mut bytes = hex::decode("93cb3ff000000000000091").unwrap();
    bytes.extend(hex::decode("82a474797065ac426c6f636b52656d6f766564a178").unwrap());
    bytes.extend(std::iter::repeat_n(0x91, 100_000));
    bytes.push(0xc0);
    let err = decode_batch(&bytes).unwrap_err();
    assert!(err.message.contains("nesting deeper than"), "{err}");
}

#[test]
fn every_truncation_of_a_valid_payload_is_an_error_in_range() {
    let bytes = encode_batch(&worked_example(), EventEncoding::Map);
    for n in 0..bytes.len() {
        let err = decode_batch(&bytes[..n]).unwrap_err();
        match err.location {
            Location::Byte(o) => assert!(o as usize <= n, "{n}: {err}"),
            other => panic!("{other:?}"),
        }
    }
    // decode_stream of an empty input is an empty trace.
    assert!(decode_stream(&[], "x").unwrap().records.is_empty());
}

#[test]
fn stream_errors_carry_absolute_offsets_and_the_batch_number() {
    let one = encode_batch(&worked_example(), EventEncoding::Map);
    let mut stream = one.clone();
    stream.extend_from_slice(&one);
    stream.push(0xc1);
    let err = decode_stream(&stream, "s").unwrap_err();
    assert_eq!(err.location, Location::Byte(2 * one.len() as u64));
    assert!(
        err.message.starts_with("batch 3: batch: expected array"),
        "{err}"
    );
    let ranges = split_stream(&stream[..2 * one.len()]).unwrap();
    assert_eq!(ranges, vec![0..one.len(), one.len()..2 * one.len()]);
}

/// The hand-written headers against `rmp::encode` (what this codec used before) at every
/// width boundary.
#[test]
fn headers_match_rmp_at_every_boundary() {
    let mut edges = vec![0u64, u64::MAX, i64::MAX as u64];
    for bits in [4u32, 5, 7, 8, 15, 16, 31, 32, 63] {
        let b = 1u64 << bits;
        edges.extend([b - 1, b, b + 1]);
    }
    for &n in &edges {
        let (mut ours, mut theirs) = (Vec::new(), Vec::new());
        uint(&mut ours, n);
        let _ = rmp::encode::write_uint(&mut theirs, n);
        for v in [n as i64, (n as i64).wrapping_neg(), !(n as i64)] {
            sint(&mut ours, v);
            let _ = rmp::encode::write_sint(&mut theirs, v);
        }
        if let Ok(len) = u32::try_from(n) {
            array_len(&mut ours, len as usize);
            let _ = rmp::encode::write_array_len(&mut theirs, len);
            map_len(&mut ours, len as usize);
            let _ = rmp::encode::write_map_len(&mut theirs, len);
        }
        assert_eq!(hexs(&ours), hexs(&theirs), "{n}");
    }
    for len in [0usize, 1, 31, 32, 255, 256, 65535, 65536] {
        let (mut ours, mut theirs) = (Vec::new(), Vec::new());
        let s = "x".repeat(len);
        string(&mut ours, &s);
        let _ = rmp::encode::write_str(&mut theirs, &s);
        bin(&mut ours, s.as_bytes());
        let _ = rmp::encode::write_bin(&mut theirs, s.as_bytes());
        for f in [0.0, -1.5, f64::INFINITY] {
            float(&mut ours, f);
            let _ = rmp::encode::write_f64(&mut theirs, f);
        }
        for b in [true, false] {
            boolean(&mut ours, b);
            let _ = rmp::encode::write_bool(&mut theirs, b);
        }
        nil(&mut ours);
        let _ = rmp::encode::write_nil(&mut theirs);
        assert_eq!(ours, theirs, "{len}");
    }
}

#[test]
fn minimal_int_encodings_match_msgspec() {
    let mut out = Vec::new();
    for v in [
        0u64,
        127,
        128,
        255,
        256,
        65535,
        65536,
        u32::MAX as u64,
        u32::MAX as u64 + 1,
    ] {
        uint(&mut out, v);
    }
    assert_eq!(
        hexs(&out),
        "007fcc80ccffcd0100cdffffce00010000ceffffffffcf0000000100000000"
    );
    out.clear();
    for v in [-1i64, -32, -33, -128, -129, -32768, -32769, i64::MIN] {
        sint(&mut out, v);
    }
    assert_eq!(
        hexs(&out),
        "ffe0d0dfd080d1ff7fd18000d2ffff7fffd38000000000000000"
    );
}
