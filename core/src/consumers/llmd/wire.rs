//! What llm-d's vLLM adapter (`pkg/kvevents/engineadapter/{vllm_adapter.go,common.go}` at
//! `ebab6879`) makes of the wire form vLLM writes, before the indexer sees an event: which
//! batches `ParseMessage` rejects as a whole, and the multimodal identifiers
//! (`pkg/kvcache/kvblock/extra_keys.go` `ParseRawExtraKeys`) that feed the request keys.

use crate::event::{ExtraValue, KvEvent};
use crate::hash::BlockHash;

/// Why `ParseMessage` would fail on a batch holding this event, if it would.
///
/// * vLLM's msgspec encoder writes every integer in its smallest msgpack form, and
///   vmihailenco/msgpack v5 decodes those into `int8` … `uint32` values; `getHashAsUint64`
///   (`common.go`) accepts only `uint64`, `int64` and bytes. So a block hash or a non-nil
///   parent hash below 2^32 (a parent of 0 included) fails (`small_int_hash`), and so does an
///   empty bytes hash (`empty_bytes_hash`). kvscope keeps integer hashes as `u64`, so a hash is
///   judged by the form vLLM writes for a non-negative Python int: below 2^32 it is not a
///   `uint64`.
/// * `convertExtraKeys` (`common.go`): an `extra_keys` entry that is neither an array nor nil
///   fails (`extra_keys_entry_not_array`).
/// * Before any of that, `decodeVLLMEvent` unmarshals the event into `any`, and msgpack v5
///   decodes every map into `map[string]any` (`decode_map.go` `DecodeMap` reads each key with
///   `DecodeString`): a map anywhere in `extra_keys` with a key that is not a string, bytes or
///   nil fails the event (`extra_keys_map_key_not_string`).
pub(crate) fn undecodable(ev: &KvEvent) -> Option<&'static str> {
    match ev {
        KvEvent::BlockStored(s) => {
            if s.extra_keys.iter().flatten().flatten().any(bad_map_key) {
                return Some("extra_keys_map_key_not_string");
            }
            let hashes = s.block_hashes.iter().chain(s.parent_block_hash.iter());
            if let Some(reason) = hashes.filter_map(bad_hash).next() {
                return Some(reason);
            }
            let entries = s.extra_keys.iter().flatten();
            entries
                .flatten()
                .any(|e| !matches!(e, ExtraValue::Array(_) | ExtraValue::Nil))
                .then_some("extra_keys_entry_not_array")
        }
        KvEvent::BlockRemoved(r) => r.block_hashes.iter().filter_map(bad_hash).next(),
        KvEvent::AllBlocksCleared => None,
    }
}

/// Whether `v` holds a map whose key msgpack v5's `DecodeString` rejects (anything but a
/// string, bytes or nil), at any depth.
fn bad_map_key(v: &ExtraValue) -> bool {
    match v {
        ExtraValue::Array(items) => items.iter().any(bad_map_key),
        ExtraValue::Map(pairs) => pairs.iter().any(|(k, v)| {
            !matches!(
                k,
                ExtraValue::Str(_) | ExtraValue::Bytes(_) | ExtraValue::Nil
            ) || bad_map_key(v)
        }),
        _ => false,
    }
}

/// `getHashAsUint64`'s verdict on one hash in the form vLLM writes it.
fn bad_hash(h: &BlockHash) -> Option<&'static str> {
    match h {
        BlockHash::Int(v) if *v < 1 << 32 => Some("small_int_hash"),
        BlockHash::Bytes(b) if b.is_empty() => Some("empty_bytes_hash"),
        _ => None,
    }
}

/// `ParseRawExtraKeys`: per engine block, the multimodal hashes of its `extra_keys` entry (a
/// string entry, or an array whose first element is a string; everything else skipped), or
/// `None` when the entry is nil or yields none. `None` for the whole event when it has no
/// `extra_keys`.
pub(crate) fn mm_hashes(extra: Option<&[Option<ExtraValue>]>) -> Option<Vec<Option<Vec<&str>>>> {
    let extra = extra?;
    let mut out = Vec::with_capacity(extra.len());
    for entry in extra {
        let mut hashes = Vec::new();
        if let Some(ExtraValue::Array(items)) = entry {
            for item in items {
                match item {
                    ExtraValue::Str(s) => hashes.push(s.as_str()),
                    ExtraValue::Array(v) => {
                        if let Some(ExtraValue::Str(s)) = v.first() {
                            hashes.push(s.as_str());
                        }
                    }
                    _ => {}
                }
            }
        }
        out.push((!hashes.is_empty()).then_some(hashes));
    }
    Some(out)
}

/// `realignExtraFeatures` (`pkg/kvevents/pool.go`): per-engine-block features to
/// `canonical` per-canonical-block ones (1:many replicates, many:1 merges). An empty input is
/// returned as is (and then fails `TokensToKVBlockKeys`' length check).
pub(crate) fn realign(engine: Vec<Option<Vec<&str>>>, canonical: usize) -> Vec<Option<Vec<&str>>> {
    let ne = engine.len();
    if canonical == 0 || ne == 0 || ne == canonical {
        return engine;
    }
    let mut out: Vec<Option<Vec<&str>>> = vec![None; canonical];
    if ne < canonical {
        for (i, slot) in out.iter_mut().enumerate() {
            *slot = engine.get(i * ne / canonical).cloned().flatten();
        }
    } else {
        for (i, ef) in engine.into_iter().enumerate() {
            let Some(ef) = ef else { continue };
            if let Some(slot) = out.get_mut(i * canonical / ne) {
                slot.get_or_insert_with(Vec::new).extend(ef);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(x: &str) -> ExtraValue {
        ExtraValue::Str(x.into())
    }

    #[test]
    fn mm_hashes_take_strings_and_tuples_headed_by_a_string() {
        let extra = vec![
            Some(ExtraValue::Array(vec![
                s("img1"),
                ExtraValue::Array(vec![s("img2"), ExtraValue::UInt(0)]),
                ExtraValue::UInt(7),
            ])),
            None,
            Some(ExtraValue::Array(vec![ExtraValue::UInt(3)])),
        ];
        assert_eq!(
            mm_hashes(Some(&extra)),
            Some(vec![Some(vec!["img1", "img2"]), None, None])
        );
        assert_eq!(mm_hashes(None), None);
    }

    #[test]
    fn realign_replicates_and_merges() {
        let one = vec![Some(vec!["a"]), None];
        assert_eq!(
            realign(one, 4),
            vec![Some(vec!["a"]), Some(vec!["a"]), None, None]
        );
        let four = vec![Some(vec!["a"]), Some(vec!["b"]), None, Some(vec!["c"])];
        assert_eq!(
            realign(four, 2),
            vec![Some(vec!["a", "b"]), Some(vec!["c"])]
        );
        assert!(realign(Vec::new(), 3).is_empty());
    }
}
