//! Unit tests of the JSON parser.

#[cfg(test)]
mod float_tests {
    use super::super::*;
    use proptest::prelude::*;

    /// What the reader makes of `text` as one JSON number: the float's bits, or `None` for an
    /// error; integers are not floats and are left out by the strategies below.
    fn read(text: &str) -> Option<u64> {
        match Parser::new(text, crate::wire::parse_float).number("a number") {
            Ok(Num::F64(f)) => Some(f.to_bits()),
            Ok(other) => panic!("{text} read as {other:?}"),
            Err(_) => None,
        }
    }

    /// core's `dec2flt`: correctly rounded; JSON has no infinities.
    fn want(text: &str) -> Option<u64> {
        let f: f64 = text
            .parse()
            .expect("JSON number grammar is Rust float grammar");
        f.is_finite().then_some(f.to_bits())
    }

    /// The shared hard cases (`tests/fixtures/floats/hard-cases.txt`).
    fn hard_cases() -> impl Iterator<Item = &'static str> {
        include_str!("../../../../tests/fixtures/floats/hard-cases.txt")
            .lines()
            .filter(|l| !l.is_empty() && !l.starts_with('#'))
    }

    #[test]
    fn hard_cases_round_like_dec2flt() {
        let cases: Vec<&str> = hard_cases().collect();
        assert!(cases.len() >= 20, "the fixture was read");
        for text in cases {
            assert_eq!(read(text), want(text), "{text}");
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 20_000, ..ProptestConfig::default() })]

        /// Any finite double, written shortest, exponent and long forms, reads back exactly.
        #[test]
        fn doubles_round_trip(f in proptest::num::f64::NORMAL | proptest::num::f64::SUBNORMAL | proptest::num::f64::ZERO) {
            for text in [format!("{f:?}"), format!("{f:e}"), format!("{f:.40e}")] {
                let text = if text.contains(['.', 'e']) { text } else { format!("{text}.0") };
                prop_assert_eq!(read(&text), Some(f.to_bits()), "{}", text);
            }
        }

        /// Random decimal text (long mantissas, any exponent) rounds as `dec2flt` does.
        #[test]
        fn decimal_text_rounds_like_dec2flt(
            neg in any::<bool>(),
            int in "(0|[1-9][0-9]{0,30})",
            frac in "[0-9]{1,40}",
            exp in proptest::option::of(-450i32..450),
        ) {
            let mut text = format!("{}{int}.{frac}", if neg { "-" } else { "" });
            if let Some(e) = exp {
                text.push_str(&format!("e{e}"));
            }
            prop_assert_eq!(read(&text), want(&text), "{}", text);
        }
    }
}

#[cfg(test)]
mod plain_scans {
    use super::super::*;

    fn plain_len_naive(bytes: &[u8]) -> usize {
        bytes
            .iter()
            .position(|&b| b == b'"' || b == b'\\' || b < 0x20)
            .unwrap_or(bytes.len())
    }

    fn plain_unsigned_naive(digits: &[u8], max: u64) -> Option<(u64, usize)> {
        let n = digits.iter().take_while(|b| b.is_ascii_digit()).count();
        let end = *digits.get(n)?;
        let text = std::str::from_utf8(&digits[..n]).ok()?;
        let v: u64 = text.parse().ok()?;
        let ok = n > 0 && (n == 1 || digits[0] != b'0') && !matches!(end, b'.' | b'e' | b'E');
        (ok && v <= max).then_some((v, n))
    }

    #[test]
    fn plain_scans_agree_with_their_definitions_at_edges() {
        for s in [
            &b""[..],
            b"abcdefg\"",
            b"abcdefgh\"",
            b"\x7f\x80\xff\x1f",
            b"\xe2\x9c\x93\\",
            b"0123456789abcdef\x00",
            b"\"\"\"",
        ] {
            assert_eq!(plain_len(s), plain_len_naive(s), "{s:?}");
        }
        for s in [
            "0,",
            "01,",
            "18446744073709551615,",
            "18446744073709551616,",
            "99999999999999999999,",
            "184467440737095516150,",
            "4294967295]",
            "4294967296]",
            "1.5",
            "1e3",
            "12",
            "",
        ] {
            for max in [u64::MAX, u32::MAX.into()] {
                assert_eq!(
                    plain_unsigned_at(s.as_bytes(), max),
                    plain_unsigned_naive(s.as_bytes(), max),
                    "{s}"
                );
            }
        }
    }

    proptest::proptest! {
        /// The word-at-a-time string scan finds the byte the byte-at-a-time scan finds, at any
        /// offset in the word and near the end of the input.
        #[test]
        fn plain_len_agrees_with_a_byte_loop(
            bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..40),
            plain in proptest::collection::vec(0x20u8..=0xff, 0..40),
        ) {
            proptest::prop_assert_eq!(plain_len(&bytes), plain_len_naive(&bytes));
            let mut mixed = plain.clone();
            mixed.extend_from_slice(&bytes);
            proptest::prop_assert_eq!(plain_len(&mixed), plain_len_naive(&mixed));
        }

        /// The integer fast path accepts what `str::parse` does under the JSON rules, with
        /// the same value.
        #[test]
        fn plain_unsigned_agrees_with_parse(
            digits in "[0-9]{0,22}",
            end in proptest::sample::select(vec!["", ",", "]", " ", ".5", "e3", "E", "x", "-"]),
            small in proptest::prelude::any::<bool>(),
        ) {
            let text = format!("{digits}{end}");
            let max = if small { u32::MAX.into() } else { u64::MAX };
            proptest::prop_assert_eq!(
                plain_unsigned_at(text.as_bytes(), max),
                plain_unsigned_naive(text.as_bytes(), max)
            );
        }
    }
}
