//! Cutting trace bytes into chunks of whole records, so the loader can parse a large file a
//! chunk at a time and show progress (bytes, events, events/s) in between.
//!
//! JSON Lines chunks end at a newline. A msgpack stream is a concatenation of `KVEventBatch`
//! payloads with no framing, so its chunks end where a payload ends: [`msgpack_value_len`]
//! walks one msgpack value's markers (no decoding, no allocation). Chunking never decides
//! whether input is valid: the core's decoder parses every chunk, and the loader falls back to
//! decoding the whole input in one go when anything looks off, so errors keep the core's exact
//! location.

use rmp::Marker;

/// The length in bytes of the msgpack value at the start of `b`, or `None` when it is
/// truncated or uses a reserved marker. Iterative (nesting costs no stack) and bounded by
/// `b.len()`: every value consumes at least one byte, so hostile lengths end at the input's end.
pub fn msgpack_value_len(b: &[u8]) -> Option<usize> {
    let mut pos = 0usize;
    let mut pending: u64 = 1;
    let be = |b: &[u8], at: usize, n: usize| -> Option<u64> {
        let s = b.get(at..at.checked_add(n)?)?;
        Some(s.iter().fold(0u64, |acc, x| (acc << 8) | u64::from(*x)))
    };
    while pending > 0 {
        pending -= 1;
        let m = Marker::from_u8(*b.get(pos)?);
        pos += 1;
        let skip: u64 = match m {
            Marker::FixPos(_) | Marker::FixNeg(_) | Marker::Null | Marker::True | Marker::False => {
                0
            }
            Marker::U8 | Marker::I8 => 1,
            Marker::U16 | Marker::I16 => 2,
            Marker::U32 | Marker::I32 | Marker::F32 => 4,
            Marker::U64 | Marker::I64 | Marker::F64 => 8,
            Marker::FixStr(n) => u64::from(n),
            Marker::Str8 | Marker::Bin8 => {
                let n = be(b, pos, 1)?;
                pos += 1;
                n
            }
            Marker::Str16 | Marker::Bin16 => {
                let n = be(b, pos, 2)?;
                pos += 2;
                n
            }
            Marker::Str32 | Marker::Bin32 => {
                let n = be(b, pos, 4)?;
                pos += 4;
                n
            }
            Marker::FixArray(n) => {
                pending += u64::from(n);
                0
            }
            Marker::Array16 => {
                pending += be(b, pos, 2)?;
                2
            }
            Marker::Array32 => {
                pending += be(b, pos, 4)?;
                4
            }
            Marker::FixMap(n) => {
                pending += 2 * u64::from(n);
                0
            }
            Marker::Map16 => {
                pending += 2 * be(b, pos, 2)?;
                2
            }
            Marker::Map32 => {
                pending += 2 * be(b, pos, 4)?;
                4
            }
            Marker::FixExt1 => 2,
            Marker::FixExt2 => 3,
            Marker::FixExt4 => 5,
            Marker::FixExt8 => 9,
            Marker::FixExt16 => 17,
            Marker::Ext8 => {
                let n = be(b, pos, 1)?;
                pos += 1;
                n + 1
            }
            Marker::Ext16 => {
                let n = be(b, pos, 2)?;
                pos += 2;
                n + 1
            }
            Marker::Ext32 => {
                let n = be(b, pos, 4)?;
                pos += 4;
                n + 1
            }
            Marker::Reserved => return None,
        };
        pos = pos.checked_add(usize::try_from(skip).ok()?)?;
        if pos > b.len() {
            return None;
        }
    }
    Some(pos)
}

/// A chunk of a msgpack stream: its bytes and how many payloads (batches) it holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MsgpackChunk {
    /// Start offset in the stream.
    pub start: usize,
    /// End offset (exclusive).
    pub end: usize,
    /// Payloads in the chunk.
    pub payloads: u64,
}

/// The next chunk of whole payloads starting at `start`, at least `min_len` bytes long unless
/// the stream ends first. `None` when a payload there is truncated or malformed (let the core's
/// decoder report it).
pub fn next_msgpack_chunk(bytes: &[u8], start: usize, min_len: usize) -> Option<MsgpackChunk> {
    let mut end = start;
    let mut payloads = 0u64;
    while end < bytes.len() && end - start < min_len {
        end += msgpack_value_len(bytes.get(end..)?)?;
        payloads += 1;
    }
    Some(MsgpackChunk {
        start,
        end,
        payloads,
    })
}

/// The end of the chunk of whole JSON Lines starting at `start`, at least `min_len` bytes
/// unless the input ends first (the chunk includes its final newline).
pub fn next_jsonl_chunk(bytes: &[u8], start: usize, min_len: usize) -> usize {
    let rest = bytes.get(start..).unwrap_or_default();
    if rest.len() <= min_len {
        return bytes.len();
    }
    match rest
        .get(min_len..)
        .and_then(|r| r.iter().position(|&b| b == b'\n'))
    {
        Some(nl) => start + min_len + nl + 1,
        None => bytes.len(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kvscope_core::event::{BlockStored, ExtraValue, KvEvent, KvEventBatch};
    use kvscope_core::hash::BlockHash;
    use kvscope_core::wire::msgpack::{decode_stream, encode_batch};
    use kvscope_core::wire::EventEncoding;

    fn batch(i: u64) -> KvEventBatch {
        KvEventBatch {
            ts: 1.5 + i as f64,
            events: vec![
                KvEvent::BlockStored(BlockStored {
                    block_hashes: vec![
                        BlockHash::Int(u64::MAX - i),
                        BlockHash::Bytes(vec![7; 40].into()),
                    ]
                    .into(),
                    parent_block_hash: (i > 0).then_some(BlockHash::Int(i)),
                    token_ids: (0..(i as u32 * 37) % 300).collect(),
                    block_size: 16,
                    lora_id: None,
                    medium: Some("CPU".into()),
                    lora_name: Some("x".repeat(i as usize % 70).into()),
                    extra_keys: Some(vec![Some(ExtraValue::Array(vec![
                        ExtraValue::Str("k".into()),
                        ExtraValue::Float(0.5),
                        ExtraValue::Int(-70000),
                    ]))]),
                    group_idx: Some(i as u32),
                    ..BlockStored::default()
                }),
                KvEvent::AllBlocksCleared,
            ],
            data_parallel_rank: Some(i as u32 % 3),
        }
    }

    fn stream(n: u64) -> (Vec<u8>, Vec<usize>) {
        let mut out = Vec::new();
        let mut ends = Vec::new();
        for i in 0..n {
            let enc = if i % 2 == 0 {
                EventEncoding::Array
            } else {
                EventEncoding::Map
            };
            out.extend(encode_batch(&batch(i), enc));
            ends.push(out.len());
        }
        (out, ends)
    }

    /// Every payload's length is found exactly; truncations and reserved markers are `None`.
    #[test]
    fn value_lengths_match_the_encoder() {
        let (bytes, ends) = stream(40);
        let mut start = 0;
        for end in &ends {
            assert_eq!(msgpack_value_len(&bytes[start..]), Some(end - start));
            for cut in [1, 2, (end - start) / 2, end - start - 1] {
                assert_eq!(
                    msgpack_value_len(&bytes[start..end - cut]),
                    None,
                    "cut {cut}"
                );
            }
            start = *end;
        }
        assert_eq!(msgpack_value_len(&[0xc1]), None);
        assert_eq!(msgpack_value_len(&[]), None);
        // A hostile array length ends at the end of the input.
        assert_eq!(
            msgpack_value_len(&[0xdd, 0xff, 0xff, 0xff, 0xff, 0x01]),
            None
        );
        assert_eq!(msgpack_value_len(&[0x92, 0xcc, 0x05, 0xa1, b'x']), Some(5));
    }

    /// Chunks cover the stream exactly, end on payload boundaries, and decode (with the seq
    /// offset) to the same batches as the whole stream.
    #[test]
    fn chunks_decode_like_the_whole_stream() {
        let (bytes, ends) = stream(57);
        let whole = decode_stream(&bytes, "s").unwrap();
        let mut start = 0;
        let mut seq0 = 0u64;
        let mut decoded = Vec::new();
        while start < bytes.len() {
            let c = next_msgpack_chunk(&bytes, start, 1000).unwrap();
            assert!(ends.contains(&c.end));
            assert!(c.end - c.start >= 1000 || c.end == bytes.len());
            let part = decode_stream(&bytes[c.start..c.end], "s").unwrap();
            assert_eq!(part.records.len() as u64, c.payloads);
            for mut r in part.records {
                if let kvscope_core::trace::TraceRecord::Batch(b) = &mut r {
                    b.seq += seq0;
                    b.origin += seq0;
                }
                decoded.push(r);
            }
            seq0 += c.payloads;
            start = c.end;
        }
        assert_eq!(decoded, whole.records);
        assert_eq!(
            next_msgpack_chunk(&bytes[..bytes.len() - 3], ends[55], 1 << 20),
            None
        );
    }

    #[test]
    fn jsonl_chunks_end_after_a_newline() {
        let text = b"{\"a\":1}\n{\"b\":2}\n{\"c\":3}";
        assert_eq!(next_jsonl_chunk(text, 0, 3), 8);
        assert_eq!(next_jsonl_chunk(text, 8, 3), 16);
        assert_eq!(next_jsonl_chunk(text, 16, 3), text.len());
        assert_eq!(next_jsonl_chunk(text, 0, 100), text.len());
    }
}
