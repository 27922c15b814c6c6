//! vLLM block hashing with `prefix_caching_hash_algo = "sha256_cbor"`
//! (`vllm/v1/core/kv_cache_utils.py`, `vllm/utils/hashing.py`).
//!
//! `hash_block_tokens(fn, parent, tokens, extra) = fn((parent or NONE_HASH, tuple(tokens), extra))`
//! with `fn = sha256(cbor2.dumps(x, canonical=True))`. `NONE_HASH = fn(seed)` where the seed is
//! the string `"vllm-none-hash"` by default (vLLM #51875) or `PYTHONHASHSEED` when set.

use ciborium_io::Write as _;
use ciborium_ll::{simple, Encoder, Header};
use sha2::{Digest as _, Sha256};

use crate::event::{ExtraValue, TokenId};

/// The default seed string for `NONE_HASH` (`DEFAULT_NONE_HASH_SEED`, vLLM #51875).
pub const DEFAULT_NONE_HASH_SEED: &str = "vllm-none-hash";

/// A 32-byte SHA-256 block digest (vLLM's `BlockHash` bytes).
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Digest(pub [u8; 32]);

impl Digest {
    /// The wire integer: `int.from_bytes(digest, "big") & (2**64 - 1)`, i.e. the last 8 bytes
    /// big-endian (`maybe_convert_block_hash`).
    pub fn wire_u64(&self) -> u64 {
        let mut tail = [0u8; 8];
        tail.copy_from_slice(&self.0[24..]);
        u64::from_be_bytes(tail)
    }

    /// Lowercase hex of the 32 bytes.
    pub fn to_hex(&self) -> String {
        hex::encode(self.0)
    }
}

impl std::fmt::Debug for Digest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Digest({})", self.to_hex())
    }
}

/// A CBOR writer into a `Vec` (ciborium's low-level encoder: the same header encoding as
/// `ciborium::into_writer`, including the shortest lossless float width, without building a
/// `ciborium::Value` tree first).
type Cbor<'a> = Encoder<&'a mut Vec<u8>>;

// Writing into a Vec cannot fail, so the encoder's `io::Result`s are dropped below.

fn put_extra(e: &mut Cbor<'_>, v: &ExtraValue) {
    let _ = match v {
        ExtraValue::Nil => e.push(Header::Simple(simple::NULL)),
        ExtraValue::Bool(b) => e.push(Header::Simple(if *b {
            simple::TRUE
        } else {
            simple::FALSE
        })),
        ExtraValue::UInt(u) => e.push(Header::Positive(*u)),
        ExtraValue::Int(i) if *i < 0 => e.push(Header::Negative(*i as u64 ^ !0)),
        ExtraValue::Int(i) => e.push(Header::Positive(*i as u64)),
        ExtraValue::Float(x) => e.push(Header::Float(*x)),
        ExtraValue::Str(s) => e.text(s, None),
        ExtraValue::Bytes(b) => e.bytes(b, None),
        ExtraValue::Array(items) => {
            let r = e.push(Header::Array(Some(items.len())));
            for item in items {
                put_extra(e, item);
            }
            r
        }
        ExtraValue::Map(pairs) => {
            // cbor2's `canonical=True` (what vLLM's `sha256_cbor` uses) writes map entries sorted
            // by their encoded key, shorter keys first, then bytewise (RFC 7049 §3.9).
            let mut entries: Vec<(Vec<u8>, &ExtraValue)> = pairs
                .iter()
                .map(|(k, v)| {
                    let mut key = Vec::new();
                    put_extra(&mut Encoder::from(&mut key), k);
                    (key, v)
                })
                .collect();
            entries.sort_by(|a, b| a.0.len().cmp(&b.0.len()).then_with(|| a.0.cmp(&b.0)));
            let r = e.push(Header::Map(Some(entries.len())));
            for (key, v) in entries {
                let _ = e.write_all(&key);
                put_extra(e, v);
            }
            r
        }
    };
}

/// The canonical CBOR bytes vLLM hashes for one block: `(parent or NONE_HASH, tokens, extra)`.
pub fn block_cbor(
    parent: &Digest,
    tokens: &[TokenId],
    extra_keys: Option<&[ExtraValue]>,
) -> Vec<u8> {
    let mut buf = Vec::with_capacity(64 + tokens.len() * 3);
    write_block(&mut buf, parent, tokens, extra_keys);
    buf
}

fn write_block(
    buf: &mut Vec<u8>,
    parent: &Digest,
    tokens: &[TokenId],
    extra_keys: Option<&[ExtraValue]>,
) {
    let mut e: Cbor<'_> = Encoder::from(buf);
    let _ = e.push(Header::Array(Some(3)));
    let _ = e.bytes(&parent.0, None);
    let _ = e.push(Header::Array(Some(tokens.len())));
    for t in tokens {
        let _ = e.push(Header::Positive(u64::from(*t)));
    }
    match extra_keys {
        None => {
            let _ = e.push(Header::Simple(simple::NULL));
        }
        Some(keys) => {
            let _ = e.push(Header::Array(Some(keys.len())));
            for k in keys {
                put_extra(&mut e, k);
            }
        }
    }
}

/// `NONE_HASH = sha256_cbor(seed)` with the seed as a CBOR text string.
pub fn none_hash(seed: &str) -> Digest {
    let mut buf = Vec::with_capacity(seed.len() + 9);
    let _ = Cbor::from(&mut buf).text(seed, None);
    Digest(Sha256::digest(&buf).into())
}

/// `hash_block_tokens(sha256_cbor, parent, tokens, extra_keys)`.
pub fn hash_block_tokens(
    none_hash: &Digest,
    parent: Option<&Digest>,
    tokens: &[TokenId],
    extra_keys: Option<&[ExtraValue]>,
) -> Digest {
    let mut buf = Vec::with_capacity(64 + tokens.len() * 3);
    write_block(&mut buf, parent.unwrap_or(none_hash), tokens, extra_keys);
    Digest(Sha256::digest(&buf).into())
}

/// Per-request inputs to `generate_block_hash_extra_keys` that kvscope models.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ExtraKeyInputs {
    /// LoRA adapter name: added to every block's extra keys.
    pub lora_name: Option<String>,
    /// Cache salt: added to block 0's extra keys only.
    pub cache_salt: Option<String>,
}

impl ExtraKeyInputs {
    /// The extra keys of the block starting at token `start`, or `None` when empty (as vLLM's
    /// `generate_block_hash_extra_keys`: `lora + mm + cache_salt + prompt_embeds`).
    pub fn for_block(&self, start: usize) -> Option<Vec<ExtraValue>> {
        let mut keys = Vec::new();
        if let Some(name) = &self.lora_name {
            keys.push(ExtraValue::Str(name.clone()));
        }
        if start == 0 {
            if let Some(salt) = &self.cache_salt {
                keys.push(ExtraValue::Str(salt.clone()));
            }
        }
        (!keys.is_empty()).then_some(keys)
    }
}

/// `Request.block_hashes`: hashes of every *full* block of `tokens` at `block_size`
/// granularity, chained from `None` (`get_request_block_hasher`).
pub fn request_block_hashes(
    none_hash: &Digest,
    tokens: &[TokenId],
    block_size: usize,
    extra: &ExtraKeyInputs,
) -> Vec<Digest> {
    assert!(block_size > 0, "block_size must be positive");
    let mut out: Vec<Digest> = Vec::with_capacity(tokens.len() / block_size);
    for (i, block) in tokens.chunks_exact(block_size).enumerate() {
        let keys = extra.for_block(i * block_size);
        let digest = hash_block_tokens(none_hash, out.last(), block, keys.as_deref());
        out.push(digest);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use ciborium::value::{Integer, Value};
    use proptest::prelude::*;

    /// The reference encoding: the `ciborium::Value` tree written by `ciborium::into_writer`.
    fn extra_to_value(v: &ExtraValue) -> Value {
        match v {
            ExtraValue::Nil => Value::Null,
            ExtraValue::Bool(b) => Value::Bool(*b),
            ExtraValue::UInt(u) => Value::Integer(Integer::from(*u)),
            ExtraValue::Int(i) => Value::Integer(Integer::from(*i)),
            ExtraValue::Float(x) => Value::Float(*x),
            ExtraValue::Str(s) => Value::Text(s.clone()),
            ExtraValue::Bytes(b) => Value::Bytes(b.clone()),
            ExtraValue::Array(items) => Value::Array(items.iter().map(extra_to_value).collect()),
            ExtraValue::Map(pairs) => {
                // cbor2 canonical order: by encoded key, length first.
                let mut entries: Vec<(Vec<u8>, Value, Value)> = pairs
                    .iter()
                    .map(|(k, v)| {
                        let key = extra_to_value(k);
                        let mut bytes = Vec::new();
                        ciborium::into_writer(&key, &mut bytes).unwrap();
                        (bytes, key, extra_to_value(v))
                    })
                    .collect();
                entries.sort_by(|a, b| (a.0.len(), &a.0).cmp(&(b.0.len(), &b.0)));
                Value::Map(entries.into_iter().map(|(_, k, v)| (k, v)).collect())
            }
        }
    }

    /// `cbor2.dumps({'bb': 1, 'a': 2, 10: 3, (1, 2): 4, b'z': 5, -1: 6}, canonical=True)`
    /// (cbor2 5.x): map keys sorted by their encoding, shorter first.
    #[test]
    fn map_keys_in_cbor2_canonical_order() {
        let s = |x: &str| ExtraValue::Str(x.into());
        let map = ExtraValue::Map(vec![
            (s("bb"), ExtraValue::UInt(1)),
            (s("a"), ExtraValue::UInt(2)),
            (ExtraValue::UInt(10), ExtraValue::UInt(3)),
            (
                ExtraValue::Array(vec![ExtraValue::UInt(1), ExtraValue::UInt(2)]),
                ExtraValue::UInt(4),
            ),
            (ExtraValue::Bytes(b"z".to_vec()), ExtraValue::UInt(5)),
            (ExtraValue::Int(-1), ExtraValue::UInt(6)),
        ]);
        let bytes = block_cbor(&Digest([0; 32]), &[], Some(&[map]));
        let want = hex::decode("a60a032006417a056161026262620182010204").unwrap();
        assert!(bytes.ends_with(&want), "{}", hex::encode(&bytes));
    }

    fn block_via_ciborium(
        parent: &Digest,
        tokens: &[TokenId],
        extra: Option<&[ExtraValue]>,
    ) -> Vec<u8> {
        let v = Value::Array(vec![
            Value::Bytes(parent.0.to_vec()),
            Value::Array(tokens.iter().map(|t| Value::Integer((*t).into())).collect()),
            match extra {
                None => Value::Null,
                Some(keys) => Value::Array(keys.iter().map(extra_to_value).collect()),
            },
        ]);
        let mut buf = Vec::new();
        ciborium::into_writer(&v, &mut buf).unwrap();
        buf
    }

    fn extra_strategy() -> impl Strategy<Value = ExtraValue> {
        let leaf = prop_oneof![
            Just(ExtraValue::Nil),
            any::<bool>().prop_map(ExtraValue::Bool),
            any::<u64>().prop_map(ExtraValue::UInt),
            any::<i64>().prop_map(ExtraValue::Int),
            prop_oneof![
                any::<f64>(),
                Just(1.5),
                Just(-0.0),
                Just(f64::INFINITY),
                Just(f64::NAN),
                Just(65504.0),
                Just(1e-7)
            ]
            .prop_map(ExtraValue::Float),
            ".{0,30}".prop_map(ExtraValue::Str),
            prop::collection::vec(any::<u8>(), 0..40).prop_map(ExtraValue::Bytes),
        ];
        leaf.prop_recursive(3, 24, 6, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..6).prop_map(ExtraValue::Array),
                prop::collection::vec((inner.clone(), inner), 0..4).prop_map(ExtraValue::Map),
            ]
        })
    }

    proptest! {
        /// The direct encoder writes exactly what ciborium writes for the `Value` tree.
        #[test]
        fn block_cbor_matches_ciborium(
            parent in any::<[u8; 32]>(),
            tokens in prop::collection::vec(any::<u32>(), 0..40),
            extra in prop::option::of(prop::collection::vec(extra_strategy(), 0..5)),
        ) {
            let parent = Digest(parent);
            prop_assert_eq!(
                block_cbor(&parent, &tokens, extra.as_deref()),
                block_via_ciborium(&parent, &tokens, extra.as_deref())
            );
        }

        #[test]
        fn none_hash_matches_ciborium(seed in ".{0,300}") {
            let mut buf = Vec::new();
            ciborium::into_writer(&Value::Text(seed.clone()), &mut buf).unwrap();
            prop_assert_eq!(none_hash(&seed), Digest(Sha256::digest(&buf).into()));
        }
    }

    // Vectors of docs/vllm-offloading.md, fact 2 (sha256_cbor, vllm/v1/core/kv_cache_utils.py).
    const NONE_DEFAULT: &str = "9bd96a485ad84efdafb72ee48a1d7a69bcead0f8f0433173941b276b9581eef0";
    const NONE_SEED0: &str = "4e1195df020de59e0d65a33a4279f1183e7ae4e5d980e309f8b55adff2e61c3e";

    #[test]
    fn cbor_of_seed_string() {
        let mut buf = Vec::new();
        ciborium::into_writer(&Value::Text(DEFAULT_NONE_HASH_SEED.into()), &mut buf).unwrap();
        assert_eq!(hex::encode(buf), "6e766c6c6d2d6e6f6e652d68617368");
    }

    #[test]
    fn none_hash_vectors() {
        assert_eq!(none_hash(DEFAULT_NONE_HASH_SEED).to_hex(), NONE_DEFAULT);
        assert_eq!(none_hash("0").to_hex(), NONE_SEED0);
    }

    #[test]
    fn shortest_int_encoding_check_vector() {
        let v = Value::Array(vec![
            Value::Bytes(vec![1, 2]),
            Value::Array(
                [1u32, 24, 255, 256, 65536]
                    .iter()
                    .map(|t| Value::Integer((*t).into()))
                    .collect(),
            ),
            Value::Null,
        ]);
        let mut buf = Vec::new();
        ciborium::into_writer(&v, &mut buf).unwrap();
        assert_eq!(hex::encode(buf), "834201028501181818ff1901001a00010000f6");
    }

    #[test]
    fn block_zero_cbor() {
        let nh = none_hash(DEFAULT_NONE_HASH_SEED);
        let cbor = block_cbor(&nh, &[1, 2, 3, 4], None);
        assert_eq!(
            hex::encode(cbor),
            format!("835820{NONE_DEFAULT}8401020304f6")
        );
    }

    #[test]
    fn chained_block_vectors() {
        let nh = none_hash(DEFAULT_NONE_HASH_SEED);
        let tokens: Vec<u32> = (1..=16).collect();
        let hashes = request_block_hashes(&nh, &tokens, 4, &ExtraKeyInputs::default());
        let expect = [
            (
                "58d0879dff3800f65f8c5fd449d73048c0f7699dd238a03b84b146b151d55111",
                9561501211280363793u64,
            ),
            (
                "e1bc29393a2da9fd798f35ff04d215f846aee6df4b803ce3d43b57df56b58fb1",
                15292913576410714033,
            ),
            (
                "321cf73a943519e37f9c8afa804132a5b9076e22b40b2d5fe6f7a2886960a68a",
                16642949654738151050,
            ),
            (
                "01dc4cca389391f8af911f65044fcfa1ab6371852fdf6b81dd13503db99baf5a",
                15930164532976791386,
            ),
        ];
        assert_eq!(hashes.len(), 4);
        for (h, (hex_digest, wire)) in hashes.iter().zip(expect) {
            assert_eq!(h.to_hex(), hex_digest);
            assert_eq!(h.wire_u64(), wire);
        }
    }

    #[test]
    fn partial_tail_block_is_not_hashed() {
        let nh = none_hash(DEFAULT_NONE_HASH_SEED);
        let tokens: Vec<u32> = (1..=7).collect();
        assert_eq!(
            request_block_hashes(&nh, &tokens, 4, &ExtraKeyInputs::default()).len(),
            1
        );
    }

    #[test]
    fn extra_keys_cbor_vector() {
        let nh = none_hash(DEFAULT_NONE_HASH_SEED);
        let extra = [
            ExtraValue::Str("my-lora".into()),
            ExtraValue::Array(vec![
                ExtraValue::Str("mm-hash-abc".into()),
                ExtraValue::UInt(0),
            ]),
            ExtraValue::Str("salt".into()),
        ];
        let cbor = block_cbor(&nh, &[1, 2], Some(&extra));
        assert_eq!(
            hex::encode(cbor),
            format!(
                "835820{NONE_DEFAULT}820102\
                 83676d792d6c6f7261826b6d6d2d686173682d616263006473616c74"
            )
        );
    }

    #[test]
    fn lora_on_every_block_salt_on_first_only() {
        let x = ExtraKeyInputs {
            lora_name: Some("a".into()),
            cache_salt: Some("s".into()),
        };
        assert_eq!(
            x.for_block(0),
            Some(vec![
                ExtraValue::Str("a".into()),
                ExtraValue::Str("s".into())
            ])
        );
        assert_eq!(x.for_block(4), Some(vec![ExtraValue::Str("a".into())]));
        assert_eq!(ExtraKeyInputs::default().for_block(0), None);
    }
}
