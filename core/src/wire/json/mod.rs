//! A small pull parser for one JSON text (one JSON Lines line), with serde_json's grammar,
//! limits and values: the JSON Lines reader ([`super::jsonl`]) drives it field by field.
//!
//! Why not serde_json's deserializer: reading lines through serde (typed visitors for every
//! field type, `Value`'s `Deserialize`, `IgnoredAny`, a fast and a general path) was ~41 KB
//! gzip of the lean npm package (`loadTrace` of JSON Lines minus msgpack loading, 2026-12-02);
//! this parser and the schema reader on top of it are a few non-generic functions (the package
//! went from 197,972 to ~186,000 B gzip with the writer in `wire/json_write.rs`). Maintained pull
//! parsers (`json-event-parser`) neither keep serde_json's number semantics nor its limits, so
//! records would differ from the ones kvscope has always built.
//!
//! What it reproduces of serde_json 1.0 (`preserve_order`, `float_roundtrip`), which the reader
//! used before: RFC 8259 strictly (no trailing commas, no leading zeros, no NaN, no control
//! characters in strings), whitespace `' ' \t \r \n`, escapes with paired surrogates, numbers
//! as `u64` / negative `i64` / correctly rounded finite `f64` (`-0` and integers beyond the
//! `i64`/`u64` range are floats, an infinite float is an error), 127 nested arrays and objects
//! at most (serde_json's recursion limit) — except inside [`Parser::skip`], which like
//! serde_json's `IgnoredAny` checks syntax only (any depth, lone surrogates, any exponent).
//! Floats are converted from the number's text by a [`FloatParser`]: by default
//! [`super::parse_float`] (Rust's `str::parse`, correctly rounded like serde_json's
//! `float_roundtrip` parser); the npm package
//! passes the JavaScript engine's own (see `wasm/README.md`, "Size").
//!
//! Error columns are 1-based byte columns: at the offending byte for syntax errors, just after
//! the offending value for type errors. (serde_json sometimes reported errors inside events a
//! few bytes further on, after closing brackets it had already consumed.)

use std::borrow::Cow;

use serde_json::Number;

use super::FloatParser;

#[cfg(test)]
mod tests;
mod value;

/// An error inside one JSON text: a 1-based byte column and what is wrong.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct JsonError {
    /// 1-based byte column.
    pub column: usize,
    /// The message (without the location).
    pub message: String,
}

impl JsonError {
    /// The same error with `prefix` before its message (`event 3: `, `field seq: `).
    pub fn context(mut self: Box<Self>, prefix: &str) -> Box<JsonError> {
        self.message.insert_str(0, prefix);
        self
    }
}

/// Shorthand for parser results (the error boxed: results stay small on the hot path).
pub(crate) type JsonResult<T> = Result<T, Box<JsonError>>;

/// A JSON number as serde_json parses it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Num {
    /// A non-negative integer up to `u64::MAX`.
    U64(u64),
    /// A negative integer down to `i64::MIN`.
    I64(i64),
    /// Anything else (fraction, exponent, `-0`, out-of-range integer), correctly rounded.
    F64(f64),
}

impl Num {
    /// The `serde_json::Number` of this number (finite by construction).
    pub fn to_number(self) -> Number {
        match self {
            Num::U64(u) => u.into(),
            Num::I64(i) => i.into(),
            Num::F64(f) => Number::from_f64(f).unwrap_or_else(|| 0.into()),
        }
    }
}

/// serde_json's recursion limit: its counter starts at 128 and errors when it reaches 0.
const DEPTH: u8 = 128;

/// A cursor over one JSON text.
pub(crate) struct Parser<'a> {
    text: &'a str,
    bytes: &'a [u8],
    pos: usize,
    /// Containers that may still be opened (serde_json's `remaining_depth`).
    depth: u8,
    /// Converts float text to `f64`.
    floats: FloatParser,
}

impl<'a> Parser<'a> {
    /// A parser at the start of `text`, converting floats with `floats`.
    pub fn new(text: &'a str, floats: FloatParser) -> Self {
        Parser {
            text,
            bytes: text.as_bytes(),
            pos: 0,
            depth: DEPTH,
            floats,
        }
    }

    /// A parser at byte `pos` of `text`, inside `open` arrays and objects.
    pub fn at(text: &'a str, pos: usize, open: u8, floats: FloatParser) -> Self {
        Parser {
            pos,
            depth: DEPTH.saturating_sub(open),
            ..Parser::new(text, floats)
        }
    }

    /// The float parser this parser was made with.
    pub fn floats(&self) -> FloatParser {
        self.floats
    }

    /// The position of the next non-whitespace byte (skipping to it).
    pub fn ws_pos(&mut self) -> usize {
        self.ws();
        self.pos
    }

    /// An error at the byte about to be read (serde_json's `peek_error`).
    #[cold]
    pub fn peek_error(&self, message: impl Into<String>) -> Box<JsonError> {
        Box::new(JsonError {
            column: (self.pos + 1).min(self.bytes.len()),
            message: message.into(),
        })
    }

    /// An error at the byte just read (serde_json's `error`: the end of a value).
    #[cold]
    pub fn error(&self, message: impl Into<String>) -> Box<JsonError> {
        Box::new(JsonError {
            column: self.pos,
            message: message.into(),
        })
    }

    #[inline]
    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.pos).copied()
    }

    /// Skip whitespace and return the next byte.
    #[inline]
    pub fn ws(&mut self) -> Option<u8> {
        while let Some(b) = self.peek() {
            if !matches!(b, b' ' | b'\t' | b'\r' | b'\n') {
                return Some(b);
            }
            self.pos += 1;
        }
        None
    }

    /// The end of the text: only whitespace may follow.
    pub fn end(&mut self) -> JsonResult<()> {
        match self.ws() {
            Some(_) => Err(self.peek_error("trailing characters")),
            None => Ok(()),
        }
    }

    /// Whether the next value is `null` (consumed if so).
    pub fn null(&mut self) -> JsonResult<bool> {
        if self.ws() == Some(b'n') {
            self.pos += 1;
            self.ident(b"ull")?;
            return Ok(true);
        }
        Ok(false)
    }

    fn ident(&mut self, rest: &[u8]) -> JsonResult<()> {
        for &want in rest {
            match self.peek() {
                None => return Err(self.error("EOF while parsing a value")),
                Some(b) => {
                    self.pos += 1;
                    if b != want {
                        return Err(self.error("expected ident"));
                    }
                }
            }
        }
        Ok(())
    }

    /// Open an array or object (`open` is `[` or `{`), counting depth; errors if the next
    /// value is something else (`expected` names what the caller wanted).
    pub fn open(&mut self, open: u8, expected: &str) -> JsonResult<()> {
        if self.ws() != Some(open) {
            return Err(self.invalid_type(expected));
        }
        self.depth = self.depth.saturating_sub(1);
        if self.depth == 0 {
            return Err(self.peek_error("recursion limit exceeded"));
        }
        self.pos += 1;
        Ok(())
    }

    /// Whether another element follows in an array opened with [`Parser::open`]; `first` is
    /// true before the first element. Consumes the closing `]`.
    pub fn next_element(&mut self, first: bool) -> JsonResult<bool> {
        let b = match self.ws() {
            Some(b']') => {
                self.close();
                return Ok(false);
            }
            Some(b',') if !first => {
                self.pos += 1;
                self.ws()
            }
            Some(b) if first => Some(b),
            Some(_) => return Err(self.peek_error("expected `,` or `]`")),
            None => return Err(self.peek_error("EOF while parsing a list")),
        };
        match b {
            Some(b']') => Err(self.peek_error("trailing comma")),
            Some(_) => Ok(true),
            None => Err(self.peek_error("EOF while parsing a value")),
        }
    }

    /// The next key of an object opened with [`Parser::open`] (and its `:`), or `None` after
    /// consuming the closing `}`.
    pub fn next_key(&mut self, first: bool) -> JsonResult<Option<Cow<'a, str>>> {
        let b = match self.ws() {
            Some(b'}') => {
                self.close();
                return Ok(None);
            }
            Some(b',') if !first => {
                self.pos += 1;
                self.ws()
            }
            Some(b) if first => Some(b),
            Some(_) => return Err(self.peek_error("expected `,` or `}`")),
            None => return Err(self.peek_error("EOF while parsing an object")),
        };
        match b {
            Some(b'"') => {}
            Some(b'}') => return Err(self.peek_error("trailing comma")),
            Some(_) => return Err(self.peek_error("key must be a string")),
            None => return Err(self.peek_error("EOF while parsing a value")),
        }
        self.pos += 1;
        let key = self.string_body()?;
        match self.ws() {
            Some(b':') => self.pos += 1,
            Some(_) => return Err(self.peek_error("expected `:`")),
            None => return Err(self.peek_error("EOF while parsing an object")),
        }
        Ok(Some(key))
    }

    fn close(&mut self) {
        self.pos += 1;
        self.depth = self.depth.saturating_add(1);
    }

    /// A string value.
    pub fn string(&mut self, expected: &str) -> JsonResult<Cow<'a, str>> {
        if self.ws() != Some(b'"') {
            return Err(self.invalid_type(expected));
        }
        self.pos += 1;
        self.string_body()
    }

    /// The rest of a string after its opening quote, unescaped.
    fn string_body(&mut self) -> JsonResult<Cow<'a, str>> {
        let mut owned: Option<String> = None;
        loop {
            // Plain bytes up to the next quote, backslash or control character.
            let run = self.pos;
            let rest = self.bytes.get(run..).unwrap_or_default();
            let plain = plain_len(rest);
            self.pos = run + plain;
            match rest.get(plain) {
                Some(b'"') => {
                    let tail = self.slice(run, self.pos)?;
                    self.pos += 1;
                    return Ok(match owned {
                        None => Cow::Borrowed(tail),
                        Some(mut s) => {
                            s.push_str(tail);
                            Cow::Owned(s)
                        }
                    });
                }
                Some(b'\\') => {
                    let s = owned.get_or_insert_with(String::new);
                    s.push_str(self.slice(run, self.pos)?);
                    self.pos += 1;
                    self.escape(s)?;
                }
                Some(_) => {
                    self.pos += 1;
                    return Err(self.error(
                        "control character (\\u0000-\\u001F) found while parsing a string",
                    ));
                }
                None => return Err(self.error("EOF while parsing a string")),
            }
        }
    }

    fn slice(&self, from: usize, to: usize) -> JsonResult<&'a str> {
        // Cut at ASCII bytes only, so always on a char boundary.
        self.text
            .get(from..to)
            .ok_or_else(|| self.error("invalid UTF-8"))
    }

    fn next_byte(&mut self) -> JsonResult<u8> {
        let b = self
            .peek()
            .ok_or_else(|| self.error("EOF while parsing a string"))?;
        self.pos += 1;
        Ok(b)
    }

    /// One escape after its backslash, appended to `out`.
    fn escape(&mut self, out: &mut String) -> JsonResult<()> {
        let c = match self.next_byte()? {
            b'"' => '"',
            b'\\' => '\\',
            b'/' => '/',
            b'b' => '\x08',
            b'f' => '\x0c',
            b'n' => '\n',
            b'r' => '\r',
            b't' => '\t',
            b'u' => {
                let n = self.hex4()?;
                if (0xDC00..=0xDFFF).contains(&n) {
                    return Err(self.error("lone leading surrogate in hex escape"));
                }
                let code = if (0xD800..=0xDBFF).contains(&n) {
                    if self.next_byte()? != b'\\' || self.next_byte()? != b'u' {
                        return Err(self.error("unexpected end of hex escape"));
                    }
                    let n2 = self.hex4()?;
                    if !(0xDC00..=0xDFFF).contains(&n2) {
                        return Err(self.error("lone leading surrogate in hex escape"));
                    }
                    (((n - 0xD800) << 10) | (n2 - 0xDC00)) + 0x1_0000
                } else {
                    n
                };
                char::from_u32(code).ok_or_else(|| self.error("invalid unicode code point"))?
            }
            _ => return Err(self.error("invalid escape")),
        };
        out.push(c);
        Ok(())
    }

    fn hex4(&mut self) -> JsonResult<u32> {
        let mut n = 0;
        for _ in 0..4 {
            let d = match self.next_byte()? {
                b @ b'0'..=b'9' => b - b'0',
                b @ b'a'..=b'f' => b - b'a' + 10,
                b @ b'A'..=b'F' => b - b'A' + 10,
                _ => return Err(self.error("invalid escape")),
            };
            n = n * 16 + u32::from(d);
        }
        Ok(n)
    }

    /// Scan a number's syntax from its first byte: `(integer part, negative, float or too
    /// long for u64)`.
    fn scan_number(&mut self) -> JsonResult<(u64, bool, bool)> {
        let neg = self.peek() == Some(b'-');
        if neg {
            self.pos += 1;
        }
        let mut v: u64 = 0;
        let mut float = false;
        match self.peek() {
            Some(b'0') => {
                self.pos += 1;
                if matches!(self.peek(), Some(b'0'..=b'9')) {
                    return Err(self.peek_error("invalid number"));
                }
            }
            Some(b'1'..=b'9') => {
                // Past `u64::MAX` the number is a float (then read from its text).
                while let Some(d @ b'0'..=b'9') = self.peek() {
                    self.pos += 1;
                    match v
                        .checked_mul(10)
                        .and_then(|x| x.checked_add(u64::from(d - b'0')))
                    {
                        Some(x) => v = x,
                        None => float = true,
                    }
                }
            }
            Some(_) => {
                self.pos += 1;
                return Err(self.error("invalid number"));
            }
            None => return Err(self.error("EOF while parsing a value")),
        }
        if self.peek() == Some(b'.') {
            self.pos += 1;
            float = true;
            if !self.digits() {
                return Err(self.peek_error("invalid number"));
            }
        }
        if matches!(self.peek(), Some(b'e' | b'E')) {
            self.pos += 1;
            float = true;
            if matches!(self.peek(), Some(b'+' | b'-')) {
                self.pos += 1;
            }
            if !self.digits() {
                self.pos += 1;
                return Err(self.error("invalid number"));
            }
        }
        Ok((v, neg, float))
    }

    /// Skip digits; whether there was at least one.
    fn digits(&mut self) -> bool {
        let start = self.pos;
        while let Some(b'0'..=b'9') = self.peek() {
            self.pos += 1;
        }
        self.pos > start
    }

    /// A number (the next byte is `-` or a digit).
    fn number_here(&mut self) -> JsonResult<Num> {
        let start = self.pos;
        let (v, neg, float) = self.scan_number()?;
        Ok(if float {
            Num::F64(self.float(start)?)
        } else if !neg {
            Num::U64(v)
        } else if (1..=1 << 63).contains(&v) {
            Num::I64(v.wrapping_neg() as i64)
        } else {
            Num::F64(-(v as f64))
        })
    }

    /// The float whose text is `start..pos`.
    #[inline(never)]
    fn float(&self, start: usize) -> JsonResult<f64> {
        // The text is a JSON number (checked by `scan_number`), so ASCII.
        let text = self.text.get(start..self.pos).unwrap_or_default();
        match (self.floats)(text) {
            Some(f) if f.is_finite() => Ok(f),
            _ => Err(self.error("number out of range")),
        }
    }

    /// A number; anything else is an error naming `expected`.
    pub fn number(&mut self, expected: &str) -> JsonResult<Num> {
        match self.ws() {
            Some(b'-' | b'0'..=b'9') => self.number_here(),
            _ => Err(self.invalid_type(expected)),
        }
    }

    /// An unsigned integer of at most `max`, named `expected` in errors (`u32`, `u64`).
    #[inline]
    pub fn unsigned(&mut self, max: u64, expected: &str) -> JsonResult<u64> {
        self.ws();
        if let Some(v) = self.plain_unsigned(max) {
            return Ok(v);
        }
        let start = self.pos;
        match self.number(expected)? {
            Num::U64(v) if v <= max => Ok(v),
            Num::F64(_) => Err(self.number_error("invalid type", start, expected)),
            _ => Err(self.number_error("invalid value", start, expected)),
        }
    }

    /// The unsigned integer at the cursor in its common form, consumed: 1 to 20 digits without
    /// a leading zero, at most `max`, followed by a byte that cannot continue a number. `None`
    /// (nothing consumed) for anything else, which the general path ([`Parser::number`]) then
    /// reads; for what this accepts, that path gives the same value.
    #[inline]
    pub fn plain_unsigned(&mut self, max: u64) -> Option<u64> {
        let (v, n) = plain_unsigned_at(self.bytes.get(self.pos..)?, max)?;
        self.pos += n;
        Some(v)
    }

    /// The elements of an array of `u32`s opened with [`Parser::open`], appended to `out`,
    /// and its closing `]`. Elements in the common form (`1, 2`: a comma, at most one space,
    /// see [`Parser::plain_unsigned`]) are read in one tight loop; anything else takes one step
    /// of the general path ([`Parser::next_element`] and [`Parser::unsigned`]), so values and
    /// errors are those of that path.
    pub fn u32_elements(&mut self, out: &mut Vec<u32>) -> JsonResult<()> {
        let mut first = true;
        loop {
            let sep = if first {
                Some(0)
            } else {
                match self.peek() {
                    Some(b']') => {
                        self.close();
                        return Ok(());
                    }
                    Some(b',') if self.bytes.get(self.pos + 1) == Some(&b' ') => Some(2),
                    Some(b',') => Some(1),
                    _ => None,
                }
            };
            let plain = sep.and_then(|s| {
                let rest = self.bytes.get(self.pos + s..)?;
                plain_unsigned_at(rest, u32::MAX.into()).map(|(v, n)| (v, s + n))
            });
            if let Some((v, n)) = plain {
                self.pos += n;
                out.push(v as u32);
            } else if self.next_element(first)? {
                out.push(self.unsigned(u32::MAX.into(), "u32")? as u32);
            } else {
                return Ok(());
            }
            first = false;
        }
    }

    /// `invalid type: floating point `1.5`, expected u32`, with the number as written.
    #[cold]
    pub fn number_error(&self, what: &str, start: usize, expected: &str) -> Box<JsonError> {
        // The text of a number that was read: ASCII, no whitespace.
        let text = self.text.get(start..self.pos).unwrap_or_default();
        let kind = if text.bytes().any(|b| matches!(b, b'.' | b'e' | b'E')) || text == "-0" {
            "floating point"
        } else {
            "integer"
        };
        self.error(format!("{what}: {kind} `{text}`, expected {expected}"))
    }
}

/// The length of the common form of an unsigned integer at the start of `digits` and its
/// value (see [`Parser::plain_unsigned`]).
#[inline]
fn plain_unsigned_at(digits: &[u8], max: u64) -> Option<(u64, usize)> {
    // Up to 19 digits cannot overflow a u64; a 20th may.
    let mut v: u64 = 0;
    let mut n = 0;
    while let Some(&b @ b'0'..=b'9') = digits.get(n) {
        if n == 19 {
            v = v.checked_mul(10)?.checked_add(u64::from(b - b'0'))?;
            n += 1;
            break;
        }
        v = v * 10 + u64::from(b - b'0');
        n += 1;
    }
    let end = *digits.get(n)?;
    let leading_zero = n > 1 && digits.first() == Some(&b'0');
    if n == 0 || leading_zero || matches!(end, b'0'..=b'9' | b'.' | b'e' | b'E') || v > max {
        return None;
    }
    Some((v, n))
}

/// The number of bytes at the start of `bytes` that a string can hold as they are: up to the
/// first `"`, `\` or control character (or the end). Eight bytes at a time.
#[inline]
fn plain_len(bytes: &[u8]) -> usize {
    const ONES: u64 = u64::from_le_bytes([1; 8]);
    const HIGH: u64 = u64::from_le_bytes([0x80; 8]);
    // Per byte, the high bit of `(x - 1) & !x` is set if the byte of `x` is 0, and in the lowest
    // flagged byte only if it is (a borrow comes from a lower byte that is 0 itself); the same
    // with 0x20 flags bytes below 0x20. So the lowest flagged byte is the first match.
    let mut i = 0;
    while let Some(chunk) = bytes.get(i..i + 8) {
        let mut word = [0; 8];
        word.copy_from_slice(chunk);
        let w = u64::from_le_bytes(word);
        let quote = w ^ (ONES * u64::from(b'"'));
        let backslash = w ^ (ONES * u64::from(b'\\'));
        let found = (quote.wrapping_sub(ONES) & !quote)
            | (backslash.wrapping_sub(ONES) & !backslash)
            | (w.wrapping_sub(ONES * 0x20) & !w);
        let found = found & HIGH;
        if found != 0 {
            return i + (found.trailing_zeros() / 8) as usize;
        }
        i += 8;
    }
    let tail = bytes.get(i..).unwrap_or_default();
    i + tail
        .iter()
        .position(|&b| b == b'"' || b == b'\\' || b < 0x20)
        .unwrap_or(tail.len())
}

/// `s` in double quotes with `"`, `\` and control characters escaped (for messages).
pub(crate) fn quoted(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => {
                out.push_str("\\u00");
                out.push(char::from(b"0123456789abcdef"[(c as usize) >> 4]));
                out.push(char::from(b"0123456789abcdef"[(c as usize) & 15]));
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}
