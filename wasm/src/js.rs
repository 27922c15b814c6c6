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
    fn set_value(target: &js_sys::Object, key: &JsValue, value: &JsValue);
    #[wasm_bindgen(js_namespace = Reflect, js_name = set)]
    fn set_str(target: &js_sys::Object, key: &JsValue, value: &str);
    #[wasm_bindgen(js_namespace = Reflect, js_name = set)]
    fn set_f64(target: &js_sys::Object, key: &JsValue, value: f64);
    #[wasm_bindgen(js_namespace = Reflect, js_name = set)]
    fn set_u64(target: &js_sys::Object, key: &JsValue, value: u64);
    #[wasm_bindgen(js_namespace = Reflect, js_name = set)]
    fn set_bool(target: &js_sys::Object, key: &JsValue, value: bool);
    /// A JS `Array` (this crate's binding, for the typed `push` imports below).
    #[wasm_bindgen(js_name = Array)]
    type JsArray;
    #[wasm_bindgen(constructor, js_class = Array)]
    fn new() -> JsArray;
    #[wasm_bindgen(method, js_name = push)]
    fn push_value(this: &JsArray, value: &JsValue);
    #[wasm_bindgen(method, js_name = push)]
    fn push_str(this: &JsArray, value: &str);
    #[wasm_bindgen(method, js_name = push)]
    fn push_f64(this: &JsArray, value: f64);
    /// JavaScript's `String(value)`: how JS itself prints a number or bigint (used in error
    /// messages, so that the wasm carries no float formatting code).
    #[wasm_bindgen(js_name = String)]
    pub fn js_string(value: &JsValue) -> String;
    /// JavaScript's `parseFloat` (see [`parse_float`]).
    #[wasm_bindgen(js_name = parseFloat)]
    fn js_parse_float(text: &str) -> f64;
    /// `into.set(from)` with `into` a view of wasm memory: what js-sys's `Uint8Array::to_vec`
    /// calls too, there behind an `assert_eq!` of the two lengths (see [`bytes`]).
    #[wasm_bindgen(js_namespace = Uint8Array, js_name = "prototype.set.call")]
    fn copy_into(into: &mut [u8], from: &js_sys::Uint8Array);
}

/// A copy of `array`'s bytes. js-sys's `Uint8Array::to_vec` would link the formatting of its
/// length assertion's failure message; here the lengths are equal by construction.
pub fn bytes(array: &js_sys::Uint8Array) -> Vec<u8> {
    let mut out = vec![0; array.length() as usize];
    copy_into(&mut out, array);
    out
}

/// The package's [`kvscope_core::wire::FloatParser`] for JSON Lines: the JavaScript engine's
/// own `parseFloat`, so that the wasm carries no float parser (6.5 KB gzip; `wasm/README.md`,
/// "Size"). The reader only hands it JSON number text, which `parseFloat` reads whole.
/// ECMAScript rounds such text to the nearest double when it has at most 20 significant digits
/// (every shortest round-trip form has at most 17), and V8, SpiderMonkey and JavaScriptCore
/// round longer text correctly too; `wasm/tests/cases/floats.rs` checks it against Rust's `str::parse` on
/// hard cases and random text in Node and Chrome.
#[cfg(target_arch = "wasm32")]
pub fn parse_float(text: &str) -> Option<f64> {
    Some(js_parse_float(text)).filter(|f| !f.is_nan())
}

/// Off wasm (the crate's native tests) there is no JavaScript engine: the core's own parser.
#[cfg(not(target_arch = "wasm32"))]
pub use kvscope_core::wire::parse_float;

/// Slots of the key cache (a power of two above the ~70 distinct keys).
const KEY_SLOTS: usize = 256;

thread_local! {
    /// Property names as JS strings, by the address and length of their `&'static str`
    /// (open addressing). Reusing one JS string per key lets the engine skip decoding and
    /// internalising the name on every `Reflect.set`: without it building objects was about
    /// 2x slower than serde-wasm-bindgen (which caches its keys the same way).
    static KEYS: std::cell::RefCell<Vec<((usize, usize), JsValue)>> =
        const { std::cell::RefCell::new(Vec::new()) };
}

/// Most distinct runtime keys [`set_named`] caches (consumer, rule and verdict names: 25).
const NAME_SLOTS: usize = 32;

thread_local! {
    /// Runtime property names (the keys of [`Pairs`]) as JS strings, by content.
    static NAMES: std::cell::RefCell<Vec<(String, JsValue)>> =
        const { std::cell::RefCell::new(Vec::new()) };
}

/// `target[key] = value` with the runtime name `key` as a JS string, cached for the first
/// [`NAME_SLOTS`] distinct names (a linear search: the keys are short and few). Not generic:
/// one copy for every [`Pairs`] type.
#[inline(never)]
fn set_named(target: &js_sys::Object, key: &str, value: &JsValue) {
    NAMES.with(|cell| {
        let mut names = cell.borrow_mut();
        if let Some((_, k)) = names.iter().find(|(n, _)| n == key) {
            return set_value(target, k, value);
        }
        let k = JsValue::from_str(key);
        set_value(target, &k, value);
        if names.len() < NAME_SLOTS {
            names.push((key.to_owned(), k));
        }
    })
}

/// Where a key's id is in the open-addressing table [`KEYS`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Probe {
    /// Cached in this slot.
    Hit(usize),
    /// Not cached; this slot is free for it.
    Free(usize),
    /// Not cached and every slot is taken.
    Full,
}

/// Linear probing from the id's hash, over at most every slot once (so it ends even when more
/// distinct keys than slots exist). `(0, 0)` marks a free slot.
fn probe(ids: impl Fn(usize) -> (usize, usize), slots: usize, id: (usize, usize)) -> Probe {
    let start = ((id.0 as u32).wrapping_mul(0x9E37_79B1) >> 24) as usize;
    for step in 0..slots {
        let i = (start + step) % slots;
        match ids(i) {
            found if found == id => return Probe::Hit(i),
            (0, 0) => return Probe::Free(i),
            _ => {}
        }
    }
    Probe::Full
}

/// Call `f` with `key` as a JS string, cached for the first [`KEY_SLOTS`] distinct keys (a
/// key beyond them gets a fresh JS string each time).
fn with_key(key: &'static str, f: impl FnOnce(&JsValue)) {
    KEYS.with(|cell| {
        let mut slots = cell.borrow_mut();
        if slots.is_empty() {
            slots.resize_with(KEY_SLOTS, || ((0, 0), JsValue::UNDEFINED));
        }
        let id = (key.as_ptr() as usize, key.len());
        match probe(|i| slots[i].0, KEY_SLOTS, id) {
            Probe::Hit(i) => f(&slots[i].1),
            Probe::Free(i) => {
                slots[i] = (id, JsValue::from_str(key));
                f(&slots[i].1)
            }
            Probe::Full => f(&JsValue::from_str(key)),
        }
    })
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

/// A property value for [`Obj::set`].
enum Val<'a> {
    Str(&'a str),
    Num(f64),
    Big(u64),
    Flag(bool),
    Js(&'a JsValue),
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

    /// Every setter goes through this one non-generic function (one key lookup, one import
    /// call per value kind), so each field costs a call site, not a copy of the lookup.
    #[inline(never)]
    fn set(&self, key: &'static str, value: Val<'_>) {
        with_key(key, |k| match value {
            Val::Str(v) => set_str(&self.0, k, v),
            Val::Num(v) => set_f64(&self.0, k, v),
            Val::Big(v) => set_u64(&self.0, k, v),
            Val::Flag(v) => set_bool(&self.0, k, v),
            Val::Js(v) => set_value(&self.0, k, v),
        });
    }

    /// `key: value` (a string).
    pub fn str(&self, key: &'static str, value: &str) -> &Self {
        self.set(key, Val::Str(value));
        self
    }

    /// `key: value` (a string, or `null`).
    pub fn opt_str(&self, key: &'static str, value: Option<&str>) -> &Self {
        match value {
            Some(v) => self.str(key, v),
            None => self.null(key),
        }
    }

    /// `key: value` (a number).
    pub fn num(&self, key: &'static str, value: f64) -> &Self {
        self.set(key, Val::Num(value));
        self
    }

    /// `key: value` (a number, or `null`).
    pub fn opt_num(&self, key: &'static str, value: Option<f64>) -> &Self {
        match value {
            Some(v) => self.num(key, v),
            None => self.null(key),
        }
    }

    /// `key: value` (a `bigint`).
    pub fn big(&self, key: &'static str, value: u64) -> &Self {
        self.set(key, Val::Big(value));
        self
    }

    /// `key: value` (a `bigint`, or `null`).
    pub fn opt_big(&self, key: &'static str, value: Option<u64>) -> &Self {
        match value {
            Some(v) => self.big(key, v),
            None => self.null(key),
        }
    }

    /// `key: value` (a boolean).
    pub fn flag(&self, key: &'static str, value: bool) -> &Self {
        self.set(key, Val::Flag(value));
        self
    }

    /// `key: null`.
    pub fn null(&self, key: &'static str) -> &Self {
        self.val(key, &JsValue::NULL)
    }

    /// `key: value` (any JS value).
    pub fn val(&self, key: &'static str, value: &JsValue) -> &Self {
        self.set(key, Val::Js(value));
        self
    }

    /// `key: value.to_js()`.
    pub fn to<T: ToJs + ?Sized>(&self, key: &'static str, value: &T) -> &Self {
        self.val(key, &value.to_js())
    }

    /// The finished object.
    pub fn done(self) -> JsValue {
        self.0.into()
    }
}

/// A JS array built by pushes (no intermediate Rust `Vec` of the items).
pub struct Arr(JsArray);

impl Default for Arr {
    fn default() -> Self {
        Self::new()
    }
}

impl Arr {
    /// An empty array.
    pub fn new() -> Self {
        Arr(JsArray::new())
    }

    /// Append `value`.
    pub fn push(&self, value: &JsValue) {
        self.0.push_value(value);
    }

    /// The finished array.
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

/// An array of numbers (one `push` per element: faster than `Array.from` of a typed array).
pub fn num_array(items: impl Iterator<Item = f64>) -> JsValue {
    let a = JsArray::new();
    for v in items {
        a.push_f64(v);
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
            set_named(&o.0, k.as_ref(), &v.to_js());
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
    let e = Obj(js_sys::Error::new(&err.to_string()).into());
    match err.location {
        Location::Line { line, column } => {
            e.num("line", line as f64);
            if let Some(c) = column {
                e.num("column", c as f64);
            }
        }
        Location::Byte(offset) => {
            e.num("byteOffset", offset as f64);
        }
    }
    e.done()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// More distinct keys than slots: every probe ends, hits what was inserted, and reports
    /// a full table instead of looping.
    #[test]
    fn probing_ends_when_the_table_is_full() {
        let slots = 8;
        let mut table = vec![(0usize, 0usize); slots];
        let ids: Vec<(usize, usize)> = (1..=20).map(|k| (k * 4096, k)).collect();
        for (n, &id) in ids.iter().enumerate() {
            match probe(|i| table[i], slots, id) {
                Probe::Free(i) => {
                    assert!(n < slots, "a free slot with {n} keys in {slots} slots");
                    table[i] = id;
                }
                Probe::Full => assert!(n >= slots),
                Probe::Hit(_) => panic!("{id:?} was never inserted"),
            }
        }
        for &id in &ids[..slots] {
            assert!(matches!(probe(|i| table[i], slots, id), Probe::Hit(i) if table[i] == id));
        }
        assert_eq!(probe(|i| table[i], slots, ids[slots]), Probe::Full);
    }
}
