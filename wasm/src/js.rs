//! Conversions to JavaScript values: a small builder for the plain objects the package returns,
//! and located JS `Error`s.
//!
//! Returned objects are built field by field with `Reflect.set` / `Array.prototype.push`
//! imports typed per value kind (string, number, bigint, boolean, value), one import call per
//! field. This replaced serde-wasm-bindgen with serde-derived `Serialize` impls: the generic
//! serializer was instantiated once per returned type (`to_js::<T>` copies of 2-4 KB raw each,
//! plus serde-wasm-bindgen's own ~8 KB and the derives' per-field code); the builder is
//! non-generic and each field costs one call site. See "Size" in `wasm/README.md` for numbers.
//!
//! Conventions kept by every [`ToJs`] impl: fields in declaration order, `None` → `null`,
//! 64-bit integers from the wire → `bigint`, counts and indices → `number`.

use kvscope_core::wire::{Location, WireError};
use wasm_bindgen::prelude::*;

#[wasm_bindgen]
extern "C" {
    #[wasm_bindgen(js_namespace = Reflect, js_name = set)]
    fn set_value(target: &js_sys::Object, key: &str, value: &JsValue);
    #[wasm_bindgen(js_namespace = Reflect, js_name = set)]
    fn set_str(target: &js_sys::Object, key: &str, value: &str);
    #[wasm_bindgen(js_namespace = Reflect, js_name = set)]
    fn set_f64(target: &js_sys::Object, key: &str, value: f64);
    #[wasm_bindgen(js_namespace = Reflect, js_name = set)]
    fn set_u64(target: &js_sys::Object, key: &str, value: u64);
    #[wasm_bindgen(js_namespace = Reflect, js_name = set)]
    fn set_bool(target: &js_sys::Object, key: &str, value: bool);
    /// A JS `Array` (this crate's binding, for the typed `push` imports below).
    #[wasm_bindgen(js_name = Array)]
    type JsArray;
    #[wasm_bindgen(constructor, js_class = Array)]
    fn new() -> JsArray;
    #[wasm_bindgen(method, js_name = push)]
    fn push_value(this: &JsArray, value: &JsValue);
    #[wasm_bindgen(method, js_name = push)]
    fn push_str(this: &JsArray, value: &str);
    /// JavaScript's `String(value)`: how JS itself prints a number or bigint (used in error
    /// messages, so that the wasm carries no float formatting code).
    #[wasm_bindgen(js_name = String)]
    pub fn js_string(value: &JsValue) -> String;
}

/// A value with a plain-JS-object form.
pub trait ToJs {
    /// The JS value (a fresh plain object, array or primitive).
    fn to_js(&self) -> JsValue;
}

impl<T: ToJs> ToJs for [T] {
    fn to_js(&self) -> JsValue {
        let a = JsArray::new();
        for item in self {
            a.push_value(&item.to_js());
        }
        a.into()
    }
}

impl<T: ToJs> ToJs for Vec<T> {
    fn to_js(&self) -> JsValue {
        self.as_slice().to_js()
    }
}

impl<T: ToJs> ToJs for Option<T> {
    fn to_js(&self) -> JsValue {
        self.as_ref().map_or(JsValue::NULL, T::to_js)
    }
}

impl ToJs for f64 {
    fn to_js(&self) -> JsValue {
        JsValue::from_f64(*self)
    }
}

impl ToJs for &str {
    fn to_js(&self) -> JsValue {
        JsValue::from_str(self)
    }
}

/// A plain JS object under construction; every setter adds one own property, in call order.
pub struct Obj(js_sys::Object);

impl Default for Obj {
    fn default() -> Self {
        Self::new()
    }
}

impl Obj {
    /// An empty plain object (`{}`).
    pub fn new() -> Self {
        Obj(js_sys::Object::new())
    }

    /// `key: value` (a string).
    pub fn str(&self, key: &str, value: &str) -> &Self {
        set_str(&self.0, key, value);
        self
    }

    /// `key: value` (a string, or `null`).
    pub fn opt_str(&self, key: &str, value: Option<&str>) -> &Self {
        match value {
            Some(v) => self.str(key, v),
            None => self.null(key),
        }
    }

    /// `key: value` (a number).
    pub fn num(&self, key: &str, value: f64) -> &Self {
        set_f64(&self.0, key, value);
        self
    }

    /// `key: value` (a number, or `null`).
    pub fn opt_num(&self, key: &str, value: Option<f64>) -> &Self {
        match value {
            Some(v) => self.num(key, v),
            None => self.null(key),
        }
    }

    /// `key: value` (a `bigint`).
    pub fn big(&self, key: &str, value: u64) -> &Self {
        set_u64(&self.0, key, value);
        self
    }

    /// `key: value` (a `bigint`, or `null`).
    pub fn opt_big(&self, key: &str, value: Option<u64>) -> &Self {
        match value {
            Some(v) => self.big(key, v),
            None => self.null(key),
        }
    }

    /// `key: value` (a boolean).
    pub fn flag(&self, key: &str, value: bool) -> &Self {
        set_bool(&self.0, key, value);
        self
    }

    /// `key: null`.
    pub fn null(&self, key: &str) -> &Self {
        self.val(key, &JsValue::NULL)
    }

    /// `key: value` (any JS value).
    pub fn val(&self, key: &str, value: &JsValue) -> &Self {
        set_value(&self.0, key, value);
        self
    }

    /// `key: value.to_js()`.
    pub fn to<T: ToJs + ?Sized>(&self, key: &str, value: &T) -> &Self {
        self.val(key, &value.to_js())
    }

    /// The finished object.
    pub fn done(self) -> JsValue {
        self.0.into()
    }
}

/// An array of strings.
pub fn str_array<S: AsRef<str>>(items: &[S]) -> JsValue {
    let a = JsArray::new();
    for s in items {
        a.push_str(s.as_ref());
    }
    a.into()
}

/// Key/value pairs as a plain JS object, keys in order. Used instead of `BTreeMap`, which
/// would re-sort maps the core already keeps ordered and cost a sort plus a tree's code in
/// wasm per key/value type.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Pairs<K, V>(pub Vec<(K, V)>);

impl<K: AsRef<str>, V: ToJs> ToJs for Pairs<K, V> {
    fn to_js(&self) -> JsValue {
        let o = Obj::new();
        for (k, v) in &self.0 {
            o.to(k.as_ref(), v);
        }
        o.done()
    }
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
    let set = |key: &str, value: u64| set_f64(&e, key, value as f64);
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
