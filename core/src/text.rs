//! Quoting untrusted text inside error messages, and counts with their nouns.
//!
//! Error messages name the offending input (`unknown event type "BlockStord"`). `{:?}` would do
//! that, but it costs the npm package ~10 KB of gzip for the Unicode "printable" tables behind
//! `char::escape_debug`, and it echoes input of any length. [`Quoted`] writes the text between
//! double quotes, escapes what could break or spoof a one-line message (quotes, backslashes,
//! control characters, bidirectional overrides, line separators, zero-width marks) with Rust's
//! escape syntax, and shortens long input to [`Quoted::MAX_CHARS`] characters plus its byte
//! length.

use std::fmt::{self, Display, Formatter, Write};

/// `text` in double quotes, escaped for a one-line message; see the module docs.
///
/// ```
/// use kvscope_core::text::Quoted;
/// assert_eq!(Quoted("Block\"Stord\n").to_string(), r#""Block\"Stord\n""#);
/// assert_eq!(Quoted("a\u{202e}b").to_string(), r#""a\u{202e}b""#);
/// assert_eq!(Quoted("ключ").to_string(), "\"ключ\"");
/// ```
#[derive(Clone, Copy)]
pub struct Quoted<'a>(pub &'a str);

impl Quoted<'_> {
    /// Longer text is cut after this many characters and followed by `… (N bytes)`.
    pub const MAX_CHARS: usize = 80;
}

/// Whether `c` is written as an escape: C0/C1 controls, DEL, and the invisible characters that
/// can reorder or hide text when a message is displayed (bidi controls, line and paragraph
/// separators, zero-width marks, the byte-order mark).
fn needs_escape(c: char) -> bool {
    matches!(c,
        '\0'..='\u{1f}' | '\u{7f}'..='\u{9f}' | '\u{200b}'..='\u{200f}' | '\u{2028}'..='\u{202e}'
        | '\u{2060}'..='\u{2069}' | '\u{feff}')
}

impl Display for Quoted<'_> {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        f.write_char('"')?;
        for (n, c) in self.0.chars().enumerate() {
            if n == Self::MAX_CHARS {
                f.write_str("\u{2026}\"")?;
                return write!(f, " ({} bytes)", self.0.len());
            }
            match c {
                '"' => f.write_str("\\\"")?,
                '\\' => f.write_str("\\\\")?,
                '\n' => f.write_str("\\n")?,
                '\r' => f.write_str("\\r")?,
                '\t' => f.write_str("\\t")?,
                c if needs_escape(c) => write!(f, "\\u{{{:x}}}", c as u32)?,
                c => f.write_char(c)?,
            }
        }
        f.write_char('"')
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn escapes_what_could_break_a_line() {
        assert_eq!(Quoted("").to_string(), "\"\"");
        assert_eq!(Quoted("a\\b").to_string(), r#""a\\b""#);
        assert_eq!(Quoted("\0\u{1b}[31m").to_string(), r#""\u{0}\u{1b}[31m""#);
        assert_eq!(
            Quoted("x\u{85}y\u{2028}").to_string(),
            r#""x\u{85}y\u{2028}""#
        );
        assert_eq!(
            Quoted("\u{feff}\u{200b}").to_string(),
            r#""\u{feff}\u{200b}""#
        );
        assert_eq!(Quoted("<b>é</b>").to_string(), "\"<b>é</b>\"");
    }

    #[test]
    fn shortens_long_text() {
        let long = "é".repeat(200);
        let q = Quoted(&long).to_string();
        assert_eq!(q, format!("\"{}\u{2026}\" (400 bytes)", "é".repeat(80)));
        let exact = "x".repeat(Quoted::MAX_CHARS);
        assert_eq!(Quoted(&exact).to_string(), format!("\"{exact}\""));
    }

    proptest! {
        /// For text without escapes or truncation, the output is `{:?}`'s.
        #[test]
        fn matches_debug_for_plain_text(s in "[ -~é\u{4e00}-\u{4e10}]{0,80}") {
            prop_assert_eq!(Quoted(&s).to_string(), format!("{s:?}"));
        }

        /// Any input gives one line, starting with a quote, with no raw control characters.
        #[test]
        fn always_one_clean_line(s in any::<String>()) {
            let q = Quoted(&s).to_string();
            prop_assert!(q.starts_with('"'));
            prop_assert!(!q.chars().any(needs_escape), "{:?}", q);
        }
    }
}

/// A count and its noun, singular for exactly one, the number grouped by [`Thousands`]:
/// `Count(1, "block", "blocks")` shows `1 block`, `Count(7, "block", "blocks")` shows
/// `7 blocks`.
///
/// ```
/// use kvscope_core::text::Count;
/// assert_eq!(Count(1, "event", "events").to_string(), "1 event");
/// assert_eq!(Count(0, "prefix", "prefixes").to_string(), "0 prefixes");
/// assert_eq!(Count(1_048_576, "event", "events").to_string(), "1,048,576 events");
/// ```
#[derive(Clone, Copy)]
pub struct Count<'a>(pub usize, pub &'a str, pub &'a str);

impl Display for Count<'_> {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        let noun = if self.0 == 1 { self.1 } else { self.2 };
        write!(f, "{} {noun}", Thousands(self.0))
    }
}

/// A number with its digits grouped in threes by commas, as a person reads a count at trace
/// scale: `Thousands(1000000)` shows `1,000,000`, `Thousands(999)` shows `999`. For counts
/// only: identifiers (hashes, event indices, sequence numbers) are written plain, so they can
/// be searched for and pasted.
///
/// ```
/// use kvscope_core::text::Thousands;
/// assert_eq!(Thousands(0).to_string(), "0");
/// assert_eq!(Thousands(12_345).to_string(), "12,345");
/// ```
#[derive(Clone, Copy)]
pub struct Thousands(pub usize);

impl Display for Thousands {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        let digits = self.0.to_string();
        let mut out = String::with_capacity(digits.len() + digits.len() / 3);
        for (i, d) in digits.chars().enumerate() {
            if i > 0 && (digits.len() - i).is_multiple_of(3) {
                out.push(',');
            }
            out.push(d);
        }
        f.pad(&out)
    }
}
