//! CPython 3.11 `set` iteration order for `bytes` offload keys.
//!
//! Before the fix, vLLM's offloading scheduler
//! (`vllm/distributed/kv_transfer/kv_connector/v1/offloading/scheduler.py`, `_build_store_jobs`)
//! did `keys_to_store = set(store_output.keys_to_store)` and then
//! `TransferJobStatus(keys=set(keys_to_store), …)`; `complete_store` iterates the second set.
//! Offload keys are 36-byte `bytes` objects (`make_offload_key`: digest ‖ group index u32 BE), so
//! that order is a function of CPython's `bytes` hash (keyed by `PYTHONHASHSEED`) and of its set
//! table. This module reproduces both exactly for CPython 3.11 on a 64-bit build:
//!
//! * [`py_hash_bytes`]: `_Py_HashBytes` (`Python/pyhash.c`) with the default `siphash13`
//!   algorithm and `Py_HASH_CUTOFF == 0`, keyed from `_Py_HashSecret` as
//!   `_Py_HashRandomization_Init` fills it (`Python/bootstrap_hash.c`): all zero for
//!   `PYTHONHASHSEED=0`, `lcg_urandom(seed)` otherwise ([`hash_secret`]).
//! * [`set_order`] / [`set_of_set_order`]: the open-addressing table of `Objects/setobject.c`
//!   (`set_add_entry`, `set_insert_clean`, `set_table_resize`, `set_merge`): 8 initial slots,
//!   `LINEAR_PROBES = 9` followed by perturbed probing (`PERTURB_SHIFT = 5`), a resize when
//!   `fill * 5 >= mask * 3` to the smallest power of two above `used * 4` (`used * 2` beyond
//!   50000), and for `set(a_set)` one up-front resize to fit `2 * len` followed by either a
//!   slot-for-slot copy (same table size) or a clean reinsertion in table order.
//!
//! Verified against CPython 3.11.7 by `tests/fixtures/cpython/gen_vectors.py` (hash values and
//! orders for `PYTHONHASHSEED` 0, 1, 42 and 4294967295; see the tests below).

use siphasher::sip::SipHasher13;

use crate::keys::OffloadKey;

/// `PySet_MINSIZE`: slots of a new set's (small) table.
const PY_SET_MINSIZE: usize = 8;
/// `LINEAR_PROBES`: slots probed linearly after the home slot before perturbing.
const LINEAR_PROBES: u64 = 9;
/// `PERTURB_SHIFT`.
const PERTURB_SHIFT: u32 = 5;

/// The 24 bytes of CPython's `_Py_HashSecret` for `PYTHONHASHSEED=python_hash_seed`
/// (`_Py_HashRandomization_Init` in `Python/bootstrap_hash.c`).
///
/// Seed 0 disables randomisation (all zero); any other seed fills the secret with
/// `lcg_urandom(seed)`: `x = x * 214013 + 2531011 (mod 2^32)`, byte = `(x >> 16) & 0xff`.
pub fn hash_secret(python_hash_seed: u32) -> [u8; 24] {
    let mut secret = [0u8; 24];
    if python_hash_seed != 0 {
        let mut x = python_hash_seed;
        for byte in secret.iter_mut() {
            x = x.wrapping_mul(214_013).wrapping_add(2_531_011);
            *byte = ((x >> 16) & 0xff) as u8;
        }
    }
    secret
}

/// CPython 3.11's `hash()` of `bytes` objects under one `PYTHONHASHSEED`.
#[derive(Clone, Debug)]
pub struct PyBytesHasher {
    sip: SipHasher13,
}

impl PyBytesHasher {
    /// The hasher for `PYTHONHASHSEED=python_hash_seed` (0 = randomisation disabled).
    ///
    /// `pysiphash` keys SipHash-1-3 with `_Py_HashSecret.siphash.{k0,k1}`, the first two
    /// little-endian u64 words of the secret (`Python/pyhash.c`).
    pub fn new(python_hash_seed: u32) -> Self {
        let secret = hash_secret(python_hash_seed);
        let mut k0 = [0u8; 8];
        let mut k1 = [0u8; 8];
        k0.copy_from_slice(&secret[0..8]);
        k1.copy_from_slice(&secret[8..16]);
        PyBytesHasher {
            sip: SipHasher13::new_with_keys(u64::from_le_bytes(k0), u64::from_le_bytes(k1)),
        }
    }

    /// `_Py_HashBytes(bytes)`: 0 for empty input, otherwise the SipHash-1-3 value cast to
    /// `Py_hash_t` (i64), with -1 (the error marker) mapped to -2.
    pub fn hash(&self, bytes: &[u8]) -> i64 {
        if bytes.is_empty() {
            return 0;
        }
        py_hash_from_u64(self.sip.hash(bytes))
    }
}

/// Cast a 64-bit hash function result to `Py_hash_t`, mapping -1 to -2 as `_Py_HashBytes` does.
fn py_hash_from_u64(x: u64) -> i64 {
    match x as i64 {
        -1 => -2,
        h => h,
    }
}

/// `hash(bytes)` in CPython 3.11 under `PYTHONHASHSEED=python_hash_seed`.
///
/// Builds a [`PyBytesHasher`] each call; keep one around to hash many values.
pub fn py_hash_bytes(bytes: &[u8], python_hash_seed: u32) -> i64 {
    PyBytesHasher::new(python_hash_seed).hash(bytes)
}

/// An occupied slot: an index into [`PySet::keys`] and the key's cached hash.
#[derive(Clone, Copy, Debug)]
struct Entry {
    key: usize,
    hash: i64,
}

/// A CPython 3.11 `set` of distinct-by-value keys, modelled slot for slot.
///
/// Keys are never discarded here, so there are no dummy entries and `fill == used` always
/// (the dummy-related branches of `setobject.c` are unreachable and omitted).
#[derive(Clone, Debug)]
struct PySet<'k> {
    /// The objects the table points at (by index), in insertion order.
    keys: Vec<&'k OffloadKey>,
    /// The hash table; its length is a power of two (`mask + 1`).
    table: Vec<Option<Entry>>,
    /// Active entries (`so->used`; equal to `so->fill` without dummies).
    used: usize,
}

impl<'k> PySet<'k> {
    /// `make_new_set`: an empty set with the 8-slot small table.
    fn new() -> Self {
        PySet {
            keys: Vec::new(),
            table: vec![None; PY_SET_MINSIZE],
            used: 0,
        }
    }

    fn mask(&self) -> u64 {
        (self.table.len() - 1) as u64
    }

    /// `set(iterable)` for a non-set iterable: `set_add_key` for each item in turn.
    fn from_iter(keys: &'k [OffloadKey], hasher: &PyBytesHasher) -> Self {
        let mut set = PySet::new();
        for key in keys {
            set.add_entry(key, hasher.hash(&key.to_bytes()));
        }
        set
    }

    /// `set_add_entry`: probe from `hash & mask`, in runs of `LINEAR_PROBES + 1` slots while the
    /// run fits in the table, then `i = i * 5 + 1 + (perturb >>= 5)`. An equal key already
    /// present is left alone; a new key goes in the first empty slot, then the table grows when
    /// `fill * 5 >= mask * 3`.
    fn add_entry(&mut self, key: &'k OffloadKey, hash: i64) {
        let mask = self.mask();
        let mut i = (hash as u64) & mask;
        let mut perturb = hash as u64;
        loop {
            let probes = if i + LINEAR_PROBES <= mask {
                LINEAR_PROBES
            } else {
                0
            };
            for slot in i..=i + probes {
                // `slot <= mask < table.len()` by the `probes` bound above.
                match self.table[slot as usize] {
                    None => {
                        self.table[slot as usize] = Some(Entry {
                            key: self.keys.len(),
                            hash,
                        });
                        self.keys.push(key);
                        self.used += 1;
                        // `fill == used` (no dummies).
                        if (self.used as u64) * 5 < mask * 3 {
                            return;
                        }
                        let minused = if self.used > 50_000 {
                            self.used * 2
                        } else {
                            self.used * 4
                        };
                        self.resize(minused);
                        return;
                    }
                    Some(entry) => {
                        if entry.hash == hash && *self.keys[entry.key] == *key {
                            return; // found_active: already present.
                        }
                    }
                }
            }
            perturb >>= PERTURB_SHIFT;
            i = (i.wrapping_mul(5).wrapping_add(1).wrapping_add(perturb)) & mask;
        }
    }

    /// `set_table_resize`: a fresh table of the smallest power of two `> minused` (at least 8);
    /// active entries are reinserted with `set_insert_clean` in old-table order.
    fn resize(&mut self, minused: usize) {
        let mut newsize = PY_SET_MINSIZE;
        while newsize <= minused {
            newsize <<= 1;
        }
        let old = std::mem::replace(&mut self.table, vec![None; newsize]);
        for entry in old.into_iter().flatten() {
            insert_clean(&mut self.table, entry);
        }
    }

    /// `set(other)` for a set `other`: `make_new_set` then `set_merge` into the empty new set.
    ///
    /// `set_merge` first resizes once if `(fill + other.used) * 5 >= mask * 3`, to fit
    /// `(used + other.used) * 2`. Then, if both tables have the same size (and `other` has no
    /// dummies), entries are copied slot for slot, keeping `other`'s order; otherwise each of
    /// `other`'s entries, in `other`'s table order, goes through `set_insert_clean`.
    fn copy_of(other: &PySet<'k>) -> Self {
        let mut set = PySet::new();
        if other.used == 0 {
            return set;
        }
        if (other.used as u64) * 5 >= set.mask() * 3 {
            set.resize(other.used * 2);
        }
        if set.table.len() == other.table.len() {
            set.table.clone_from(&other.table);
        } else {
            for entry in other.table.iter().flatten() {
                insert_clean(&mut set.table, *entry);
            }
        }
        set.keys.clone_from(&other.keys);
        set.used = other.used;
        set
    }

    /// Iteration order: table slots in index order.
    fn iter_keys(&self) -> impl Iterator<Item = OffloadKey> + '_ {
        self.table
            .iter()
            .flatten()
            .map(move |entry| *self.keys[entry.key])
    }
}

/// `set_insert_clean`: place an entry known to be absent into a table without dummies, probing
/// like [`PySet::add_entry`] but stopping at the first empty slot.
fn insert_clean(table: &mut [Option<Entry>], entry: Entry) {
    let mask = (table.len() - 1) as u64;
    let mut i = (entry.hash as u64) & mask;
    let mut perturb = entry.hash as u64;
    loop {
        let probes = if i + LINEAR_PROBES <= mask {
            LINEAR_PROBES
        } else {
            0
        };
        for slot in i..=i + probes {
            // `slot <= mask < table.len()` by the `probes` bound above.
            let cell = &mut table[slot as usize];
            if cell.is_none() {
                *cell = Some(entry);
                return;
            }
        }
        perturb >>= PERTURB_SHIFT;
        i = (i.wrapping_mul(5).wrapping_add(1).wrapping_add(perturb)) & mask;
    }
}

/// Iteration order of `set(keys)` in CPython 3.11 under `PYTHONHASHSEED=python_hash_seed`,
/// each key being the 36-byte `bytes` of [`OffloadKey::to_bytes`]. Duplicates collapse.
pub fn set_order(keys: &[OffloadKey], python_hash_seed: u32) -> Vec<OffloadKey> {
    let hasher = PyBytesHasher::new(python_hash_seed);
    PySet::from_iter(keys, &hasher).iter_keys().collect()
}

/// Iteration order of `set(set(keys))` in CPython 3.11 under `PYTHONHASHSEED=python_hash_seed`:
/// the order in which the legacy scheduler's `complete_store` walked `TransferJobStatus.keys`
/// (`keys=set(keys_to_store)` with `keys_to_store = set(store_output.keys_to_store)`, see
/// `docs/vllm-offloading.md`, fact 4). Duplicates in `keys` collapse.
pub fn set_of_set_order(keys: &[OffloadKey], python_hash_seed: u32) -> Vec<OffloadKey> {
    let hasher = PyBytesHasher::new(python_hash_seed);
    let first = PySet::from_iter(keys, &hasher);
    let second = PySet::copy_of(&first);
    second.iter_keys().collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hashing::{none_hash, request_block_hashes, Digest};
    use serde::Deserialize;
    use sha2::{Digest as _, Sha256};
    use std::collections::{BTreeMap, HashMap};

    /// Output of `tests/fixtures/cpython/gen_vectors.py` under CPython 3.11.
    const VECTORS: &str = include_str!("../../../tests/fixtures/cpython/vectors.json");

    #[derive(Deserialize)]
    struct Fixture {
        python: String,
        hash_algorithm: String,
        pool_size: usize,
        large_sizes: Vec<usize>,
        cases: Vec<Case>,
        chains: BTreeMap<String, Vec<String>>,
        seeds: BTreeMap<String, SeedResults>,
    }

    #[derive(Deserialize)]
    struct Case {
        name: String,
        input: Vec<usize>,
    }

    #[derive(Deserialize)]
    struct SeedResults {
        hashes: Vec<i64>,
        cases: BTreeMap<String, Orders>,
        chains: BTreeMap<String, ChainResults>,
        large: BTreeMap<String, LargeResults>,
    }

    /// sha256 of the order's pool indices, decimal, joined by ",".
    #[derive(Deserialize)]
    struct LargeResults {
        set: String,
        set_of_set: String,
    }

    #[derive(Deserialize)]
    struct Orders {
        set: Vec<usize>,
        set_of_set: Vec<usize>,
    }

    #[derive(Deserialize)]
    struct ChainResults {
        hashes: Vec<i64>,
        set: Vec<usize>,
        set_of_set: Vec<usize>,
    }

    fn fixture() -> Fixture {
        serde_json::from_str(VECTORS).expect("fixture parses")
    }

    /// Pool key j, as `pool_key` in gen_vectors.py.
    fn pool_key(j: usize) -> OffloadKey {
        let mut h = Sha256::new();
        h.update(b"kvscope-cpython-set-order:");
        h.update((j as u32).to_be_bytes());
        OffloadKey::new(Digest(h.finalize().into()), (j % 3) as u32)
    }

    fn key_from_hex(s: &str) -> OffloadKey {
        let bytes = hex::decode(s).expect("hex key");
        assert_eq!(bytes.len(), 36);
        let mut digest = [0u8; 32];
        digest.copy_from_slice(&bytes[..32]);
        let mut group = [0u8; 4];
        group.copy_from_slice(&bytes[32..]);
        OffloadKey::new(Digest(digest), u32::from_be_bytes(group))
    }

    fn positions(order: &[OffloadKey], keys: &[OffloadKey]) -> Vec<usize> {
        order
            .iter()
            .map(|k| {
                keys.iter()
                    .position(|x| x == k)
                    .expect("key from the input")
            })
            .collect()
    }

    #[test]
    fn fixture_is_from_cpython_311_siphash13() {
        let f = fixture();
        assert!(f.python.starts_with("3.11."), "{}", f.python);
        assert_eq!(f.hash_algorithm, "siphash13");
        let seeds: Vec<&str> = f.seeds.keys().map(String::as_str).collect();
        assert_eq!(seeds, ["0", "1", "42", "4294967295"]);
        assert!(f.cases.len() > 80);
    }

    #[test]
    fn bytes_hash_matches_cpython() {
        let f = fixture();
        let pool: Vec<OffloadKey> = (0..f.pool_size).map(pool_key).collect();
        for (seed, res) in &f.seeds {
            let seed: u32 = seed.parse().expect("seed");
            assert_eq!(res.hashes.len(), pool.len());
            let hasher = PyBytesHasher::new(seed);
            for (j, (key, want)) in pool.iter().zip(&res.hashes).enumerate() {
                assert_eq!(hasher.hash(&key.to_bytes()), *want, "seed {seed} key {j}");
                assert_eq!(py_hash_bytes(&key.to_bytes(), seed), *want);
            }
        }
    }

    #[test]
    fn set_and_set_of_set_orders_match_cpython() {
        let f = fixture();
        let pool: Vec<OffloadKey> = (0..f.pool_size).map(pool_key).collect();
        let mut copy_changed_order = 0;
        for (seed, res) in &f.seeds {
            let seed: u32 = seed.parse().expect("seed");
            for case in &f.cases {
                let keys: Vec<OffloadKey> = case.input.iter().map(|&j| pool[j]).collect();
                let want = &res.cases[&case.name];
                let got_set = positions(&set_order(&keys, seed), &pool);
                let got_sos = positions(&set_of_set_order(&keys, seed), &pool);
                assert_eq!(got_set, want.set, "set(), seed {seed}, case {}", case.name);
                assert_eq!(
                    got_sos, want.set_of_set,
                    "set(set()), seed {seed}, case {}",
                    case.name
                );
                if want.set != want.set_of_set {
                    copy_changed_order += 1;
                }
            }
        }
        // The fixture exercises the reinsertion path of set_merge, not only the slot copy.
        assert!(copy_changed_order > 0);
    }

    fn order_digest(order: &[OffloadKey], index: &HashMap<OffloadKey, usize>) -> String {
        let joined: Vec<String> = order.iter().map(|k| index[k].to_string()).collect();
        hex::encode(Sha256::digest(joined.join(",").as_bytes()))
    }

    /// Past 50000 keys the table grows to `used * 2` rather than `used * 4`, which also makes
    /// `set(set(...))` take the slot-for-slot copy; CPython's orders are pinned by digest.
    #[test]
    fn large_set_orders_match_cpython() {
        let f = fixture();
        let max = f.large_sizes.iter().copied().max().expect("large sizes");
        let pool: Vec<OffloadKey> = (0..max).map(pool_key).collect();
        let index: HashMap<OffloadKey, usize> =
            pool.iter().enumerate().map(|(j, k)| (*k, j)).collect();
        for (seed, res) in &f.seeds {
            let seed: u32 = seed.parse().expect("seed");
            for n in &f.large_sizes {
                let keys = &pool[..*n];
                let want = &res.large[&n.to_string()];
                let got = order_digest(&set_order(keys, seed), &index);
                assert_eq!(got, want.set, "set(), seed {seed}, n {n}");
                let got = order_digest(&set_of_set_order(keys, seed), &index);
                assert_eq!(got, want.set_of_set, "set(set()), seed {seed}, n {n}");
            }
        }
    }

    #[test]
    fn chain_keys_match_rust_hashing_and_cpython_orders() {
        let f = fixture();
        let nh = none_hash("vllm-none-hash");
        for (name, hex_keys) in &f.chains {
            let tokens: Vec<_> = match name.as_str() {
                "tokens_1_to_32" => (1..=32).collect(),
                "tokens_0_to_31" => (0..32).collect(),
                other => panic!("unknown chain {other}"),
            };
            let keys: Vec<OffloadKey> = request_block_hashes(&nh, &tokens, 4, &Default::default())
                .into_iter()
                .map(|d| OffloadKey::new(d, 0))
                .collect();
            let from_python: Vec<OffloadKey> = hex_keys.iter().map(|s| key_from_hex(s)).collect();
            assert_eq!(keys, from_python, "chain {name}");
            for (seed, res) in &f.seeds {
                let seed: u32 = seed.parse().expect("seed");
                let want = &res.chains[name];
                let hashes: Vec<i64> = keys
                    .iter()
                    .map(|k| py_hash_bytes(&k.to_bytes(), seed))
                    .collect();
                assert_eq!(hashes, want.hashes, "chain {name} seed {seed}");
                assert_eq!(positions(&set_order(&keys, seed), &keys), want.set);
                assert_eq!(
                    positions(&set_of_set_order(&keys, seed), &keys),
                    want.set_of_set
                );
            }
        }
    }

    /// `docs/vllm-offloading.md`, fact 4: with `PYTHONHASHSEED=0`, the eight chunks of a
    /// 32-token request (block_size 4, tokens 1..=32) iterate as [3, 4, 0, 1, 5, 6, 7, 2].
    #[test]
    fn observed_vector_32_tokens_seed_0() {
        let tokens: Vec<_> = (1..=32).collect();
        let keys: Vec<OffloadKey> = request_block_hashes(
            &none_hash("vllm-none-hash"),
            &tokens,
            4,
            &Default::default(),
        )
        .into_iter()
        .map(|d| OffloadKey::new(d, 0))
        .collect();
        assert_eq!(keys.len(), 8);
        let order = set_of_set_order(&keys, 0);
        assert_eq!(positions(&order, &keys), [3, 4, 0, 1, 5, 6, 7, 2]);
    }

    #[test]
    fn hash_secret_lcg() {
        assert_eq!(hash_secret(0), [0u8; 24]);
        // x1 = 1 * 214013 + 2531011 = 2745024 = 0x0029_e2c0 -> byte 0x29.
        assert_eq!(hash_secret(1)[0], 0x29);
        assert_ne!(hash_secret(1), hash_secret(2));
    }

    #[test]
    fn empty_bytes_hash_to_zero_and_minus_one_maps_to_minus_two() {
        assert_eq!(py_hash_bytes(b"", 0), 0);
        assert_eq!(py_hash_bytes(b"", 42), 0);
        assert_eq!(py_hash_from_u64(u64::MAX), -2);
        assert_eq!(py_hash_from_u64(u64::MAX - 1), -2);
        assert_eq!(py_hash_from_u64(5), 5);
    }

    #[test]
    fn large_sets_keep_every_key_once() {
        // Crosses several resizes (8 -> 32 -> 128 -> 512 -> 2048 slots).
        let keys: Vec<OffloadKey> = (0..1500).map(pool_key).collect();
        for seed in [0, 7] {
            let order = set_of_set_order(&keys, seed);
            assert_eq!(order.len(), keys.len());
            let mut sorted = order.clone();
            sorted.sort();
            let mut want = keys.clone();
            want.sort();
            assert_eq!(sorted, want);
        }
    }
}
