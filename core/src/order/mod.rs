//! How a transfer job's keys are ordered when `complete_store` receives them.
//!
//! * [`OrderMode::CPython`] (`cpython`): what vLLM does in the versions that keep
//!   `TransferJobStatus.keys` in a set (0.28.0, the modelled version, through 0.33.0,
//!   checked in each PyPI wheel), CPython 3.11's exact iteration
//!   order of `set(set(keys))` for 36-byte `bytes` keys under a given `PYTHONHASHSEED` (see
//!   [`cpython`]).
//! * [`OrderMode::Fixed`] (`fixed`): prefix order de-duplicated ([`crate::keys::JobKeys`]):
//!   the proposed key-order fix, which upstream vLLM has from 0.34.0 (a tuple built with
//!   `dict.fromkeys`).
//! * [`OrderMode::Legacy`] (`legacy`): a seeded stand-in for set order, a deterministic
//!   permutation per job (any seed; not CPython's order).
//!
//! Upstream: `TransferJobStatus.keys` in
//! `vllm/distributed/kv_transfer/kv_connector/v1/offloading/scheduler.py` is
//! `set(set(store_output.keys_to_store))` up to 0.33.0; the fix (0.34.0) makes it an insertion-ordered,
//! de-duplicated collection; `complete_store` emits one `BlockStored` per key in that order
//! (`docs/vllm-offloading.md`, fact 4).

pub mod cpython;
pub mod legacy;

use serde::{Deserialize, Serialize};

use crate::keys::{JobKeys, OffloadKey};

/// Which order a store job's keys take. JSON form: `{"mode": "fixed"}`,
/// `{"mode": "legacy", "seed": N}`, `{"mode": "cpython", "python_hash_seed": N}`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "mode", rename_all = "snake_case", try_from = "OrderRepr")]
pub enum OrderMode {
    /// Prefix order, de-duplicated, first occurrence kept: the proposed key-order fix
    /// (upstream vLLM from 0.34.0).
    Fixed,
    /// A seeded stand-in for set order: a permutation of the de-duplicated keys (any seed).
    Legacy {
        /// Permutation seed (combined with the job id so jobs differ).
        seed: u64,
    },
    /// What vLLM 0.28.0-0.33.0 do: exactly as CPython 3.11 iterates `set(set(keys_to_store))`.
    #[serde(rename = "cpython")]
    CPython {
        /// `PYTHONHASHSEED` (0 = hash randomisation off, zero SipHash key).
        python_hash_seed: u32,
    },
}

/// The JSON form of [`OrderMode`] as read: a plain struct instead of serde's internally
/// tagged enum, which buffers the whole object first (a large amount of wasm code).
#[derive(Deserialize)]
struct OrderRepr {
    mode: OrderName,
    seed: Option<u64>,
    python_hash_seed: Option<u32>,
}

/// The `mode` names.
#[derive(Deserialize)]
#[serde(rename_all = "snake_case")]
enum OrderName {
    Fixed,
    Legacy,
    #[serde(rename = "cpython")]
    CPython,
}

impl TryFrom<OrderRepr> for OrderMode {
    type Error = &'static str;
    fn try_from(r: OrderRepr) -> Result<Self, Self::Error> {
        Ok(match r.mode {
            OrderName::Fixed => OrderMode::Fixed,
            OrderName::Legacy => OrderMode::Legacy {
                seed: r.seed.ok_or("missing field `seed`")?,
            },
            OrderName::CPython => OrderMode::CPython {
                python_hash_seed: r
                    .python_hash_seed
                    .ok_or("missing field `python_hash_seed`")?,
            },
        })
    }
}

impl OrderMode {
    /// The JSON form as a value (what `Serialize` writes), built without serde's tagged-enum
    /// serializer, for trace headers.
    pub fn to_json(&self) -> serde_json::Value {
        let mut m = serde_json::Map::new();
        let (mode, field) = match *self {
            OrderMode::Fixed => ("fixed", None),
            OrderMode::Legacy { seed } => ("legacy", Some(("seed", seed))),
            OrderMode::CPython { python_hash_seed } => (
                "cpython",
                Some(("python_hash_seed", u64::from(python_hash_seed))),
            ),
        };
        m.insert("mode".into(), mode.into());
        if let Some((key, value)) = field {
            m.insert(key.into(), value.into());
        }
        serde_json::Value::Object(m)
    }

    /// Order `keys_to_store` (in `prepare_store` order, possibly with duplicates) as the job's
    /// `TransferJobStatus.keys` would iterate. `job_id` decorrelates legacy permutations.
    pub fn order(&self, keys_to_store: &[OffloadKey], job_id: u64) -> Vec<OffloadKey> {
        match *self {
            OrderMode::Fixed => JobKeys::from_keys(keys_to_store.iter().copied()).to_vec(),
            OrderMode::Legacy { seed } => legacy::permute(keys_to_store, seed, job_id),
            OrderMode::CPython { python_hash_seed } => {
                cpython::set_of_set_order(keys_to_store, python_hash_seed)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hashing::Digest;
    use proptest::prelude::*;

    fn mode_strategy() -> impl Strategy<Value = OrderMode> {
        prop_oneof![
            Just(OrderMode::Fixed),
            any::<u64>().prop_map(|seed| OrderMode::Legacy { seed }),
            any::<u32>().prop_map(|python_hash_seed| OrderMode::CPython { python_hash_seed }),
        ]
    }

    fn keys_strategy() -> impl Strategy<Value = Vec<OffloadKey>> {
        // Small alphabet so duplicates are common; up to 120 keys crosses CPython resizes.
        prop::collection::vec((0u8..100, 0u32..2), 0..120).prop_map(|v| {
            v.into_iter()
                .map(|(n, g)| OffloadKey::new(Digest([n; 32]), g))
                .collect()
        })
    }

    fn distinct_first_occurrence(keys: &[OffloadKey]) -> Vec<OffloadKey> {
        let mut out: Vec<OffloadKey> = Vec::new();
        for k in keys {
            if !out.contains(k) {
                out.push(*k);
            }
        }
        out
    }

    proptest! {
        #[test]
        fn every_mode_returns_exactly_the_distinct_keys(
            mode in mode_strategy(), keys in keys_strategy(), job in any::<u64>()
        ) {
            let out = mode.order(&keys, job);
            let distinct = distinct_first_occurrence(&keys);
            prop_assert_eq!(out.len(), distinct.len());
            let mut a = out.clone();
            a.sort();
            let mut b = distinct;
            b.sort();
            prop_assert_eq!(a, b);
        }

        #[test]
        fn fixed_keeps_first_occurrence_order(keys in keys_strategy(), job in any::<u64>()) {
            prop_assert_eq!(OrderMode::Fixed.order(&keys, job), distinct_first_occurrence(&keys));
        }

        #[test]
        fn cpython_mode_ignores_job_id(keys in keys_strategy(), seed in any::<u32>(), a in any::<u64>(), b in any::<u64>()) {
            let mode = OrderMode::CPython { python_hash_seed: seed };
            prop_assert_eq!(mode.order(&keys, a), mode.order(&keys, b));
        }
    }

    #[test]
    fn serde_names() {
        let json = serde_json::to_string(&OrderMode::CPython {
            python_hash_seed: 0,
        })
        .unwrap();
        assert_eq!(json, r#"{"mode":"cpython","python_hash_seed":0}"#);
        let json = serde_json::to_string(&OrderMode::Legacy { seed: 3 }).unwrap();
        assert_eq!(json, r#"{"mode":"legacy","seed":3}"#);
    }

    #[test]
    fn json_form_round_trips_in_any_key_order_and_bad_forms_are_named() {
        for mode in [
            OrderMode::Fixed,
            OrderMode::Legacy { seed: u64::MAX },
            OrderMode::CPython {
                python_hash_seed: 7,
            },
        ] {
            let json = serde_json::to_string(&mode).unwrap();
            assert_eq!(serde_json::from_str::<OrderMode>(&json).unwrap(), mode);
            assert_eq!(serde_json::to_string(&mode.to_json()).unwrap(), json);
        }
        let back: OrderMode = serde_json::from_str(r#"{"seed": 5, "mode": "legacy"}"#).unwrap();
        assert_eq!(back, OrderMode::Legacy { seed: 5 });
        for (text, needle) in [
            (r#"{"mode": "legacy"}"#, "missing field `seed`"),
            (r#"{"mode": "cpython"}"#, "missing field `python_hash_seed`"),
            (r#"{"mode": "random"}"#, "unknown variant `random`"),
            (r#"{"seed": 1}"#, "missing field `mode`"),
            (r#"{"mode": "legacy", "seed": -1}"#, "invalid value"),
        ] {
            let err = serde_json::from_str::<OrderMode>(text)
                .unwrap_err()
                .to_string();
            assert!(err.contains(needle), "{text}: {err}");
        }
    }
}
