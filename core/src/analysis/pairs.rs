//! [`SortedPairs`]: a small ordered map as a sorted `Vec` of pairs.

use std::borrow::Borrow;
use std::fmt;
use std::marker::PhantomData;

use serde::de::{Deserialize, Deserializer, MapAccess, Visitor};
use serde::ser::{Serialize, SerializeMap, Serializer};

/// A map with a handful of entries, kept sorted by key: it iterates, serializes (as a map) and
/// compares like a `BTreeMap` with the same entries, without a B-tree's code per key/value
/// type (which matters in wasm).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SortedPairs<K, V>(Vec<(K, V)>);

impl<K, V> Default for SortedPairs<K, V> {
    fn default() -> Self {
        SortedPairs(Vec::new())
    }
}

impl<K: Ord, V> SortedPairs<K, V> {
    /// An empty map.
    pub fn new() -> Self {
        Self::default()
    }

    /// Insert or replace the value of `key`.
    pub fn insert(&mut self, key: K, value: V) {
        match self.0.binary_search_by(|(k, _)| k.cmp(&key)) {
            Ok(i) => {
                if let Some(slot) = self.0.get_mut(i) {
                    slot.1 = value;
                }
            }
            Err(i) => self.0.insert(i, (key, value)),
        }
    }

    /// The value of `key`.
    pub fn get<Q: Ord + ?Sized>(&self, key: &Q) -> Option<&V>
    where
        K: Borrow<Q>,
    {
        let i = self.0.binary_search_by(|(k, _)| k.borrow().cmp(key)).ok()?;
        self.0.get(i).map(|(_, v)| v)
    }
}

impl<K, V> SortedPairs<K, V> {
    /// Pairs already in ascending key order without repeated keys (the caller's guarantee;
    /// checked in debug builds): no search per pair.
    pub(crate) fn from_sorted(pairs: Vec<(K, V)>) -> Self
    where
        K: Ord,
    {
        debug_assert!(pairs
            .windows(2)
            .all(|w| w.first().map(|p| &p.0) < w.last().map(|p| &p.0)));
        SortedPairs(pairs)
    }

    /// The entries in key order.
    pub fn iter(&self) -> impl Iterator<Item = (&K, &V)> {
        self.0.iter().map(|(k, v)| (k, v))
    }

    /// The entries in key order, as a slice.
    pub fn as_slice(&self) -> &[(K, V)] {
        &self.0
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether there are no entries.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl<K: Ord, V> FromIterator<(K, V)> for SortedPairs<K, V> {
    fn from_iter<I: IntoIterator<Item = (K, V)>>(iter: I) -> Self {
        let mut m = SortedPairs::new();
        for (k, v) in iter {
            m.insert(k, v);
        }
        m
    }
}

impl<K: Serialize, V: Serialize> Serialize for SortedPairs<K, V> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(self.0.len()))?;
        for (k, v) in &self.0 {
            m.serialize_entry(k, v)?;
        }
        m.end()
    }
}

impl<'de, K: Ord + Deserialize<'de>, V: Deserialize<'de>> Deserialize<'de> for SortedPairs<K, V> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct PairsVisitor<K, V>(PhantomData<(K, V)>);
        impl<'de, K: Ord + Deserialize<'de>, V: Deserialize<'de>> Visitor<'de> for PairsVisitor<K, V> {
            type Value = SortedPairs<K, V>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a map")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut a: A) -> Result<Self::Value, A::Error> {
                let mut out = SortedPairs::new();
                while let Some((k, v)) = a.next_entry()? {
                    out.insert(k, v);
                }
                Ok(out)
            }
        }
        d.deserialize_map(PairsVisitor(PhantomData))
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    #[test]
    fn behaves_like_a_btreemap() {
        let entries = [
            ("llmd", 1),
            ("dynamo", 2),
            ("sglang", 3),
            ("dynamo", 4),
            ("ideal", 0),
        ];
        let p: SortedPairs<String, i32> =
            entries.iter().map(|(k, v)| (k.to_string(), *v)).collect();
        let b: BTreeMap<String, i32> = entries.iter().map(|(k, v)| (k.to_string(), *v)).collect();
        assert_eq!(p.len(), b.len());
        assert!(p.iter().eq(b.iter()));
        assert_eq!(p.get("dynamo"), Some(&4));
        assert_eq!(p.get("vllm"), None);
        let json = serde_json::to_string(&p).unwrap();
        assert_eq!(json, serde_json::to_string(&b).unwrap());
        let back: SortedPairs<String, i32> =
            serde_json::from_str(r#"{"b": 1, "a": 2, "b": 3}"#).unwrap();
        assert_eq!(
            back.as_slice(),
            &[("a".to_string(), 2), ("b".to_string(), 3)]
        );
    }
}
