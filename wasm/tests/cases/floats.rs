//! JSON Lines floats go through the JavaScript engine's `parseFloat` (`js::parse_float`): it
//! must round exactly as Rust's `str::parse` (correctly rounded, ties to even) does.

use kvscope_wasm::js::parse_float;
use kvscope_wasm::{load_trace, Trace};
use rand::{Rng, SeedableRng};
use wasm_bindgen::JsValue;
use wasm_bindgen_test::wasm_bindgen_test;

use super::support::*;

/// Rust's answer for JSON number text: the nearest double, `None` when it overflows.
fn rust(text: &str) -> Option<u64> {
    let f: f64 = text.parse().expect("JSON number text is Rust float text");
    f.is_finite().then_some(f.to_bits())
}

/// The package's answer, as the reader takes it (an infinity is "out of range").
fn js(text: &str) -> Option<u64> {
    parse_float(text)
        .filter(|f| f.is_finite())
        .map(f64::to_bits)
}

/// The hard cases the core's parser is tested on too (`tests/fixtures/floats/hard-cases.txt`).
fn hard_cases() -> impl Iterator<Item = &'static str> {
    include_str!("../../../tests/fixtures/floats/hard-cases.txt")
        .lines()
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
}

#[wasm_bindgen_test]
fn hard_cases_round_like_rust() {
    let cases: Vec<&str> = hard_cases().collect();
    assert!(cases.len() >= 20, "the fixture was read");
    for text in cases {
        assert_eq!(js(text), rust(text), "{text}");
    }
}

#[wasm_bindgen_test]
fn random_doubles_and_decimal_text_round_like_rust() {
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(0x6b76_7363);
    for _ in 0..5_000 {
        // Any finite double, written shortest, in exponent form and with 40 digits.
        let f = f64::from_bits(rng.gen::<u64>());
        if f.is_finite() {
            for text in [format!("{f:?}"), format!("{f:e}"), format!("{f:.40e}")] {
                let text = if text.contains(['.', 'e']) {
                    text
                } else {
                    format!("{text}.0")
                };
                assert_eq!(js(&text), Some(f.to_bits()), "{text}");
            }
        }
        // Random decimal text: long mantissas, any exponent.
        let digits = |rng: &mut rand_chacha::ChaCha8Rng, n: usize| -> String {
            (0..n)
                .map(|_| char::from(b'0' + rng.gen_range(0..10u8)))
                .collect()
        };
        let int_len = rng.gen_range(0..=30);
        let int = match digits(&mut rng, int_len).trim_start_matches('0') {
            "" => "0".to_owned(),
            s => s.to_owned(),
        };
        let frac_len = rng.gen_range(1..=40);
        let mut text = format!("{int}.{}", digits(&mut rng, frac_len));
        if rng.gen_bool(0.5) {
            text.push_str(&format!("e{}", rng.gen_range(-450..450)));
        }
        assert_eq!(js(&text), rust(&text), "{text}");
    }
}

#[wasm_bindgen_test]
fn jsonl_floats_load_exactly_and_overflow_names_the_line() {
    let line =
        |ts: &str| format!("{{\"source\": \"a\", \"seq\": 0, \"ts\": {ts}, \"events\": []}}");
    let t = Trace::from_jsonl(&line("1733123456.1234567")).unwrap();
    assert_eq!(
        number(&path(&t.batches(), "0.ts")).to_bits(),
        1733123456.1234567f64.to_bits()
    );
    let text = format!("{}\n{}\n", line("0.5"), line("1e400"));
    let (_, msg) = thrown(load_trace(&JsValue::from_str(&text), None));
    assert!(
        msg.starts_with("line 2") && msg.contains("number out of range"),
        "{msg}"
    );
}
