//! JSON writing in the layout of Python's `json.dumps` defaults (`", "` between items, `": "`
//! after keys) with serde_json's number and string forms, byte for byte: integers in decimal,
//! finite floats as `zmij` writes them (serde_json's float formatter: `1.0`, `1e+20`),
//! non-finite floats as `null`, strings with `"`, `\` and control characters escaped
//! (`\b \t \n \f \r`, else `\u00XX` lowercase) and everything else raw.
//!
//! Why not serde_json's serializer with a formatter: the serializer monomorphised for every
//! record type was ~7 KB gzip of the npm package's `toJsonl`; these few functions are not
//! generic.

use std::fmt;

use serde_json::{Map, Value};

/// A [`Value`] shown as its JSON text (in messages), without serde_json's serializer.
pub(crate) struct Json<'a>(pub &'a Value);

impl fmt::Display for Json<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut out = Vec::new();
        JsonOut { out: &mut out }.value(self.0);
        f.write_str(&String::from_utf8_lossy(&out))
    }
}

/// A JSON writer appending to a byte buffer.
pub(crate) struct JsonOut<'a> {
    /// The output.
    pub out: &'a mut Vec<u8>,
}

impl JsonOut<'_> {
    /// Raw bytes (punctuation).
    pub fn raw(&mut self, s: &str) {
        self.out.extend_from_slice(s.as_bytes());
    }

    /// `, ` before every item but the first.
    pub fn sep(&mut self, first: bool) {
        if !first {
            self.raw(", ");
        }
    }

    /// `"key": ` (after `, ` unless `first`).
    pub fn key(&mut self, first: bool, key: &str) {
        self.sep(first);
        self.str(key);
        self.raw(": ");
    }

    /// A JSON string.
    pub fn str(&mut self, s: &str) {
        const HEX: &[u8; 16] = b"0123456789abcdef";
        self.out.push(b'"');
        let bytes = s.as_bytes();
        let mut run = 0;
        for (i, &b) in bytes.iter().enumerate() {
            let esc: &[u8] = match b {
                b'"' => b"\\\"",
                b'\\' => b"\\\\",
                0x08 => b"\\b",
                0x09 => b"\\t",
                0x0a => b"\\n",
                0x0c => b"\\f",
                0x0d => b"\\r",
                0..=0x1f => b"",
                _ => continue,
            };
            self.out.extend_from_slice(&bytes[run..i]);
            if esc.is_empty() {
                self.out.extend_from_slice(b"\\u00");
                self.out.push(HEX[usize::from(b >> 4)]);
                self.out.push(HEX[usize::from(b & 15)]);
            } else {
                self.out.extend_from_slice(esc);
            }
            run = i + 1;
        }
        self.out.extend_from_slice(&bytes[run..]);
        self.out.push(b'"');
    }

    /// `bytes` as a JSON string of their standard (padded) base64, which needs no escaping.
    pub fn base64(&mut self, bytes: &[u8]) {
        let start = self.out.len() + 1;
        let text_len = super::base64::encoded_len(bytes.len());
        // The opening quote, room for the text, the closing quote.
        self.out.resize(start + text_len + 1, b'"');
        if let Some(text) = self.out.get_mut(start..start + text_len) {
            super::base64::encode_into(bytes, text);
        }
    }

    /// An unsigned integer.
    pub fn u64(&mut self, v: u64) {
        self.raw(itoa::Buffer::new().format(v));
    }

    /// A signed integer.
    pub fn i64(&mut self, v: i64) {
        self.raw(itoa::Buffer::new().format(v));
    }

    /// A float (`null` if not finite, as serde_json writes it).
    pub fn f64(&mut self, v: f64) {
        if v.is_finite() {
            self.raw(zmij::Buffer::new().format_finite(v));
        } else {
            self.raw("null");
        }
    }

    /// `null`, or the value written by `write`.
    pub fn opt<T>(&mut self, v: Option<T>, write: impl FnOnce(&mut Self, T)) {
        match v {
            Some(v) => write(self, v),
            None => self.raw("null"),
        }
    }

    /// Any JSON value (objects in their key order).
    pub fn value(&mut self, v: &Value) {
        match v {
            Value::Null => self.raw("null"),
            Value::Bool(b) => self.raw(if *b { "true" } else { "false" }),
            Value::Number(n) => match (n.as_u64(), n.as_i64()) {
                (Some(u), _) => self.u64(u),
                (None, Some(i)) => self.i64(i),
                _ => self.f64(n.as_f64().unwrap_or(f64::NAN)),
            },
            Value::String(s) => self.str(s),
            Value::Array(items) => {
                self.raw("[");
                for (i, item) in items.iter().enumerate() {
                    self.sep(i == 0);
                    self.value(item);
                }
                self.raw("]");
            }
            Value::Object(m) => self.value_map(m),
        }
    }

    /// A JSON object, in its key order.
    pub fn value_map(&mut self, m: &Map<String, Value>) {
        self.raw("{");
        for (i, (k, v)) in m.iter().enumerate() {
            self.key(i == 0, k);
            self.value(v);
        }
        self.raw("}");
    }
}
