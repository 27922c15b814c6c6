//! Conversions to JavaScript values: the one serializer configuration every returned object
//! goes through, and located JS `Error`s.

use std::fmt;
use std::marker::PhantomData;

use kvscope_core::wire::{Location, WireError};
use serde::de::{Deserialize, Deserializer, MapAccess, Visitor};
use serde::ser::{Serialize, SerializeMap, Serializer};
use wasm_bindgen::prelude::*;

/// Key/value pairs as a plain JS object, keys in order. Used instead of `BTreeMap`, which
/// would re-sort maps the core already keeps ordered and cost a sort plus a tree's code in
/// wasm per key/value type.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Pairs<K, V>(pub Vec<(K, V)>);

impl<K: Serialize, V: Serialize> Serialize for Pairs<K, V> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(self.0.len()))?;
        for (k, v) in &self.0 {
            m.serialize_entry(k, v)?;
        }
        m.end()
    }
}

impl<'de, K: Deserialize<'de>, V: Deserialize<'de>> Deserialize<'de> for Pairs<K, V> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct PairsVisitor<K, V>(PhantomData<(K, V)>);
        impl<'de, K: Deserialize<'de>, V: Deserialize<'de>> Visitor<'de> for PairsVisitor<K, V> {
            type Value = Pairs<K, V>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut a: A) -> Result<Self::Value, A::Error> {
                let mut out = Vec::new();
                while let Some(entry) = a.next_entry()? {
                    out.push(entry);
                }
                Ok(Pairs(out))
            }
        }
        d.deserialize_map(PairsVisitor(PhantomData))
    }
}

/// Serialize `value` to a plain JS value: structs and maps become plain objects, `None`
/// becomes `null`, and 64-bit integers become `bigint` (never a lossy `number`).
pub fn to_js<T: Serialize + ?Sized>(value: &T) -> Result<JsValue, JsValue> {
    let serializer = serde_wasm_bindgen::Serializer::new()
        .serialize_missing_as_null(true)
        .serialize_maps_as_objects(true)
        .serialize_large_number_types_as_bigints(true);
    value
        .serialize(&serializer)
        .map_err(|e| js_error(&format!("cannot convert result to JavaScript: {e}")))
}

/// A serde_json error's message without the " at line L column C" suffix (positions inside
/// `JSON.stringify` output mean nothing to the caller).
pub fn json_error_message(e: &serde_json::Error) -> String {
    let full = e.to_string();
    let suffix = format!(" at line {} column {}", e.line(), e.column());
    full.strip_suffix(&suffix).unwrap_or(&full).to_owned()
}

/// A JS `Error` with `message`.
pub fn js_error(message: &str) -> JsValue {
    js_sys::Error::new(message).into()
}

/// A JS `Error` for a decoding error. The message starts with the location (`line 3: ...`,
/// `line 3, column 7: ...`, `byte offset 42: ...`); the error also carries it as properties
/// `line` / `column` (JSON Lines) or `byteOffset` (msgpack), all numbers.
pub fn wire_error(err: &WireError) -> JsValue {
    let e = js_sys::Error::new(&err.to_string());
    let set = |key: &str, value: u64| {
        // Setting a property on a fresh Error object cannot fail.
        let _ = js_sys::Reflect::set(
            &e,
            &JsValue::from_str(key),
            &JsValue::from_f64(value as f64),
        );
    };
    match err.location {
        Location::Line { line, column } => {
            set("line", line);
            if let Some(c) = column {
                set("column", c);
            }
        }
        Location::Byte(offset) => set("byteOffset", offset),
    }
    e.into()
}
