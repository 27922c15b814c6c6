//! JSON Lines reader on hostile and unusual input: every problem is an error naming its line
//! (and column), never a panic, never a value passed through `f64`; line-ending variants and
//! blank lines read like the plain file.

use kvscope_core::hash::BlockHash;
use kvscope_core::trace::{Trace, TraceRecord};
use kvscope_core::wire::{jsonl, read_trace, Location, WireError};
use proptest::prelude::*;

/// A batch line with one `BlockRemoved` event whose only hash is `hash` (raw JSON text).
fn removed_line(hash: &str) -> String {
    format!(
        r#"{{"source": "s", "dp_rank": 0, "seq": 0, "ts": 1.0, "events": [{{"type": "BlockRemoved", "block_hashes": [{hash}], "medium": "CPU"}}]}}"#
    )
}

fn read(text: &str) -> Result<Trace, WireError> {
    jsonl::read_trace(text.as_bytes())
}

fn line_of(e: &WireError) -> u64 {
    match e.location {
        Location::Line { line, .. } => line,
        other => panic!("JSONL error without a line: {other:?}"),
    }
}

#[test]
fn hashes_out_of_u64_range_or_fractional_are_errors_naming_the_field() {
    for bad in [
        "18446744073709551616",
        "99999999999999999999999",
        "1.5",
        "1e3",
        "-1.0",
        "18446744073709551615.0",
        "true",
        "\"xyz\"",
        "[1]",
        "{}",
    ] {
        let text = format!("{}\n{}\n", removed_line("1"), removed_line(bad));
        let err = read(&text).unwrap_err();
        assert_eq!(line_of(&err), 2, "{bad}: {err}");
        assert!(
            err.message.starts_with("event 0: field block_hashes: "),
            "{bad}: {err}"
        );
        assert!(
            matches!(err.location, Location::Line { column: Some(c), .. } if c > 80),
            "{bad}: {err}"
        );
    }
}

#[test]
fn u64_edge_values_and_negative_hashes_stay_exact() {
    // u64::MAX, 2^53 + 1 (not representable as f64), 2^63, and a negative i64 (bit pattern).
    for (text, want) in [
        ("18446744073709551615", u64::MAX),
        ("9007199254740993", 9_007_199_254_740_993),
        ("9223372036854775808", 1 << 63),
        ("0", 0),
        ("-1", u64::MAX),
        ("-9223372036854775808", 1 << 63),
    ] {
        let t = read(&removed_line(text)).unwrap();
        let b = t.batches().next().unwrap();
        assert_eq!(
            b.events[0].block_hashes(),
            &[BlockHash::Int(want)],
            "{text}"
        );
    }
    // Below i64::MIN there is no bit pattern: an error, not a rounded float.
    let err = read(&removed_line("-9223372036854775809")).unwrap_err();
    assert!(err.message.contains("block_hashes"), "{err}");
}

#[test]
fn integer_fields_reject_out_of_range_negative_and_fractional_values() {
    let base = r#"{"source": "s", "dp_rank": 0, "seq": 0, "ts": 1.0, "events": [{"type": "BlockStored", "block_hashes": [1], "parent_block_hash": null, "token_ids": [1], "block_size": 4, "lora_id": null, "medium": "GPU", "lora_name": null}]}"#;
    for (from, to) in [
        ("\"token_ids\": [1]", "\"token_ids\": [4294967296]"),
        ("\"token_ids\": [1]", "\"token_ids\": [-1]"),
        ("\"token_ids\": [1]", "\"token_ids\": [1.0]"),
        ("\"block_size\": 4", "\"block_size\": 4294967296"),
        ("\"lora_id\": null", "\"lora_id\": 9223372036854775808"),
        ("\"seq\": 0", "\"seq\": 18446744073709551616"),
        ("\"seq\": 0", "\"seq\": -1"),
        ("\"seq\": 0", "\"seq\": 0.5"),
        ("\"dp_rank\": 0", "\"dp_rank\": 4294967296"),
        ("\"ts\": 1.0", "\"ts\": \"1.0\""),
        ("\"ts\": 1.0", "\"ts\": null"),
    ] {
        let line = base.replace(from, to);
        assert_ne!(line, base);
        let err = read(&format!("\n{line}")).unwrap_err();
        assert_eq!(line_of(&err), 2, "{to}: {err}");
        let field = to.split('"').nth(1).unwrap();
        assert!(err.message.contains(field), "{to}: {err}");
    }
    // `ts` is a float64: an integer is fine.
    let t = read(&base.replace("\"ts\": 1.0", "\"ts\": 1700000000")).unwrap();
    assert_eq!(t.batches().next().unwrap().ts, 1_700_000_000.0);
}

#[test]
fn deep_nesting_is_an_error_not_a_stack_overflow() {
    let deep = |n: usize| format!("{}{}", "[".repeat(n), "]".repeat(n));
    // In an unknown key of the line, of an event, in extra_keys, and as a whole line.
    let lines = [
        format!(
            r#"{{"source": "s", "seq": 0, "ts": 1, "x": {}, "events": []}}"#,
            deep(100_000)
        ),
        format!(
            r#"{{"source": "s", "seq": 0, "ts": 1, "events": [{{"type": "AllBlocksCleared", "x": {}}}]}}"#,
            deep(100_000)
        ),
        format!(
            r#"{{"source": "s", "seq": 0, "ts": 1, "events": [{{"type": "BlockStored", "block_hashes": [], "parent_block_hash": null, "token_ids": [], "block_size": 0, "extra_keys": [{}]}}]}}"#,
            deep(100_000)
        ),
        format!(r#"{{"kind": "note", "x": {}}}"#, deep(100_000)),
        "{\"a\": ".repeat(100_000),
    ];
    for (i, line) in lines.iter().enumerate() {
        let text = format!("{}\n{line}\n", removed_line("1"));
        match read(&text) {
            Err(e) => assert_eq!(line_of(&e), 2, "{i}: {e}"),
            // Unknown keys of an event are skipped without building anything.
            Ok(t) => assert_eq!(i, 1, "{i}: {t:?}"),
        }
    }
    // Moderate nesting in a non-batch record is kept.
    let t = read(&format!(r#"{{"kind": "note", "x": {}}}"#, deep(100))).unwrap();
    assert!(matches!(t.records[0], TraceRecord::Other(_)));
}

#[test]
fn invalid_utf8_is_an_error_naming_line_and_column() {
    let good = removed_line("1");
    for (i, bad) in [
        b"\xff".as_slice(),
        b"\xc3\x28",
        b"\xed\xa0\x80",
        b"\xf4\x90\x80\x80",
        b"\xe2\x82",
    ]
    .iter()
    .enumerate()
    {
        // Inside a string value, an unknown key's value, and an event's unknown key.
        for template in [
            r#"{"source": "@", "seq": 0, "ts": 1, "events": []}"#,
            r#"{"source": "s", "seq": 0, "ts": 1, "x": "@", "events": []}"#,
            r#"{"source": "s", "seq": 0, "ts": 1, "events": [{"type": "AllBlocksCleared", "x": "@"}]}"#,
        ] {
            let at = template.find('@').unwrap();
            let mut text = format!("{good}\r\n\r\n").into_bytes();
            text.extend_from_slice(&template.as_bytes()[..at]);
            text.extend_from_slice(bad);
            text.extend_from_slice(&template.as_bytes()[at + 1..]);
            let err = jsonl::read_trace(&text).unwrap_err();
            assert_eq!(
                err.location,
                Location::Line {
                    line: 3,
                    column: Some(at as u64 + 1)
                },
                "{i} {template}: {err}"
            );
            assert_eq!(err.message, "invalid UTF-8");
            // The same through the format-detecting entry point.
            assert_eq!(read_trace(&text, "x").unwrap_err(), err);
        }
    }
}

#[test]
fn crlf_bom_whitespace_and_trailing_blank_lines_read_like_the_plain_file() {
    let plain = format!(
        "{}\n{{\"kind\": \"header\", \"kvscope\": 1}}\n{}\n",
        removed_line("1"),
        removed_line("2")
    );
    let want = read(&plain).unwrap();
    assert_eq!(want.records.len(), 3);
    let variants = [
        plain.replace('\n', "\r\n"),
        format!("\u{feff}{plain}"),
        format!("{plain}\n\n  \n\t\r\n\r\n"),
        plain.trim_end().to_owned(),
        plain.replace('\n', " \t\n"),
    ];
    for v in &variants {
        let t = read(v).unwrap();
        assert_eq!(t.records.len(), 3, "{v:?}");
        for (a, b) in t.records.iter().zip(&want.records) {
            match (a, b) {
                (TraceRecord::Batch(x), TraceRecord::Batch(y)) => {
                    assert_eq!((&x.events, x.seq, x.origin), (&y.events, y.seq, y.origin))
                }
                (x, y) => assert_eq!(x, y),
            }
        }
    }
    // Blank lines count: errors and origins name the physical line.
    let t = read(&format!("\n\r\n{}", removed_line("1"))).unwrap();
    assert_eq!(t.batches().next().unwrap().origin, 3);
    let err = read(&format!("\n\r\n{}\n\n{{", removed_line("1"))).unwrap_err();
    assert_eq!(line_of(&err), 5);
    // A lone CR inside a line is whitespace to JSON; a CR-only file is one (blank) line.
    assert!(read("\r").unwrap().records.is_empty());
    assert!(read("").unwrap().records.is_empty());
}

#[test]
fn progress_reaches_the_end_exactly() {
    let text = format!("{}\n\n{}\n", removed_line("1"), removed_line("2"));
    let mut seen = Vec::new();
    jsonl::read_trace_with_progress(text.as_bytes(), &mut |d| seen.push(d)).unwrap();
    assert!(seen.windows(2).all(|w| w[0] <= w[1]), "{seen:?}");
    assert_eq!(seen.last(), Some(&text.len()));
    assert_eq!(seen.len(), 4);
}

/// The line with its keys rotated (compact separators) and an unknown key appended.
fn reorder_keys(line: &str, rotate: usize) -> String {
    let v: serde_json::Value = serde_json::from_str(line).unwrap();
    let obj = v.as_object().unwrap();
    let mut keys: Vec<&String> = obj.keys().collect();
    let n = keys.len();
    keys.rotate_left(rotate % n);
    let mut out = String::from("{");
    for (i, k) in keys.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str(&serde_json::to_string(k).unwrap());
        out.push(':');
        out.push_str(&serde_json::to_string(&obj[*k]).unwrap());
    }
    out.push_str(", \"zz_unknown\": {\"a\": [1, -2.5e-3, \"\\u00e9\"]}}");
    out
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    /// Key order and unknown keys on a batch line do not change what is read.
    #[test]
    fn key_order_and_unknown_keys_do_not_matter(hash in any::<u64>(), rotate in 0usize..8, crlf in any::<bool>()) {
        let line = removed_line(&hash.to_string());
        let want = read(&line).unwrap();
        let mut text = reorder_keys(&line, rotate);
        if crlf {
            text.push_str("\r\n");
        }
        let got = read(&text).unwrap();
        prop_assert_eq!(got, want);
    }

    /// Arbitrary bytes (not just printable ASCII) never panic, and every error names a line
    /// that exists.
    #[test]
    fn arbitrary_bytes_as_jsonl_never_panic(mut bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
        bytes.insert(0, b'{');
        let lines = bytes.split(|b| *b == b'\n').count() as u64;
        if let Err(e) = jsonl::read_trace(&bytes) {
            let l = line_of(&e);
            prop_assert!(l >= 1 && l <= lines, "{} of {}", l, lines);
        }
    }
}

/// Step through `text` with `budget` bytes per step, checking positions and event counts.
fn read_stepwise(text: &[u8], budget: usize) -> Result<Trace, WireError> {
    let mut r = jsonl::Reader::new(text);
    let mut last = 0;
    let mut steps = 0;
    while !r.step(budget)? {
        steps += 1;
        assert!(r.position() > last && r.position() <= text.len());
        last = r.position();
    }
    assert_eq!(r.position(), text.len());
    assert!(steps <= text.len() / budget.max(1) + 1, "{steps} steps");
    let events = r.events();
    let t = r.finish()?;
    assert_eq!(events, t.event_count());
    Ok(t)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// Reading step by step gives what one `read_trace` call gives: same records, origins
    /// (whole-file line numbers) and errors.
    #[test]
    fn stepwise_reading_equals_reading_at_once(
        lines in proptest::collection::vec(0usize..6, 0..30),
        budget in 0usize..2000,
        bom in any::<bool>(),
    ) {
        let mut text = if bom { "\u{feff}".to_owned() } else { String::new() };
        for (i, kind) in lines.iter().enumerate() {
            text.push_str(&match kind {
                0 => removed_line(&i.to_string()),
                1 => String::new(),
                2 => "{\"kind\": \"header\", \"kvscope\": 1}\r".to_owned(),
                3 => r#"{"source": "s", "seq": 3, "ts": 1, "events": [{"type": "AllBlocksCleared"}, {"type": "AllBlocksCleared"}]}"#.to_owned(),
                4 => "  ".to_owned(),
                _ if i % 7 == 0 => "{\"source\": \"s\", \"events\": 5}".to_owned(),
                _ => removed_line("2"),
            });
            text.push('\n');
        }
        let whole = read(&text);
        let stepped = read_stepwise(text.as_bytes(), budget);
        prop_assert_eq!(stepped, whole);
    }
}
