//! Conversions to JavaScript values: the one serializer configuration every returned object
//! goes through, and located JS `Error`s.

use kvscope_core::wire::{Location, WireError};
use serde::Serialize;
use wasm_bindgen::prelude::*;

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
