//! `ExternalBlockHash = bytes | int`: the hash values that travel on the wire.

use std::fmt;

use crate::text::Quoted;
use serde::de::{self, Visitor};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A block hash as published: an unsigned 64-bit int (vLLM's default,
/// `VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES=1`) or raw digest bytes.
///
/// JSON form: ints are JSON integers (never passed through `f64`), bytes are lowercase hex
/// strings. Ordering: all ints before all bytes, then by value.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum BlockHash {
    /// The wire integer (last 8 digest bytes, big-endian).
    Int(u64),
    /// The raw digest bytes.
    Bytes(Box<[u8]>),
}

impl BlockHash {
    /// The u64 a router keys on: ints as is; bytes as their last 8 bytes big-endian (left-padded
    /// when shorter), which is what llm-d and Mooncake do (`getHashAsUint64`).
    pub fn as_u64(&self) -> u64 {
        match self {
            BlockHash::Int(v) => *v,
            BlockHash::Bytes(b) => {
                let tail = &b[b.len().saturating_sub(8)..];
                tail.iter()
                    .fold(0u64, |acc, byte| (acc << 8) | u64::from(*byte))
            }
        }
    }

    /// Exact decimal (ints) or lowercase hex (bytes): safe to show and to pass to JavaScript.
    pub fn to_display_string(&self) -> String {
        match self {
            BlockHash::Int(v) => v.to_string(),
            BlockHash::Bytes(b) => hex::encode(b),
        }
    }

    /// `0x`-prefixed, zero-padded hex of [`BlockHash::as_u64`] for ints; plain hex for bytes.
    pub fn to_hex_string(&self) -> String {
        match self {
            BlockHash::Int(v) => format!("0x{v:016x}"),
            BlockHash::Bytes(b) => hex::encode(b),
        }
    }
}

impl From<u64> for BlockHash {
    fn from(v: u64) -> Self {
        BlockHash::Int(v)
    }
}

impl fmt::Debug for BlockHash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BlockHash::Int(v) => write!(f, "{v}"),
            BlockHash::Bytes(b) => write!(f, "b'{}'", hex::encode(b)),
        }
    }
}

impl fmt::Display for BlockHash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_display_string())
    }
}

impl Serialize for BlockHash {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            BlockHash::Int(v) => s.serialize_u64(*v),
            BlockHash::Bytes(b) => s.serialize_str(&hex::encode(b)),
        }
    }
}

impl<'de> Deserialize<'de> for BlockHash {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct HashVisitor;
        impl Visitor<'_> for HashVisitor {
            type Value = BlockHash;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a block hash: an unsigned 64-bit integer or a lowercase hex string")
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<BlockHash, E> {
                Ok(BlockHash::Int(v))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<BlockHash, E> {
                // Dynamo and some producers write hashes as i64: keep the bit pattern.
                Ok(BlockHash::Int(v as u64))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<BlockHash, E> {
                hex::decode(v)
                    .map(|b| BlockHash::Bytes(b.into_boxed_slice()))
                    .map_err(|_| E::custom(format!("block hash string is not hex: {}", Quoted(v))))
            }
            fn visit_bytes<E: de::Error>(self, v: &[u8]) -> Result<BlockHash, E> {
                Ok(BlockHash::Bytes(v.into()))
            }
        }
        d.deserialize_any(HashVisitor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn u64_full_range_round_trips_through_json() {
        let h = BlockHash::Int(u64::MAX - 1);
        let s = serde_json::to_string(&h).unwrap();
        assert_eq!(s, "18446744073709551614");
        assert_eq!(serde_json::from_str::<BlockHash>(&s).unwrap(), h);
    }

    #[test]
    fn bytes_are_hex_and_normalise_to_last_eight() {
        let h = BlockHash::Bytes(vec![0xaa, 1, 2, 3, 4, 5, 6, 7, 8].into());
        assert_eq!(serde_json::to_string(&h).unwrap(), "\"aa0102030405060708\"");
        assert_eq!(h.as_u64(), 0x0102030405060708);
        assert_eq!(BlockHash::Bytes(vec![1, 2].into()).as_u64(), 0x0102);
    }
}
