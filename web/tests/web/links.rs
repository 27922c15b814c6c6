//! Links and kept traces: inline permalinks, the float parser behind them, a cut trace's
//! complete batches and traces kept for reloads.

use super::*;

/// Inline permalinks use the browser's raw-deflate streams: a trace round-trips; a stream made
/// by another deflate implementation (zlib, level 9: what links made with miniz_oxide were)
/// inflates to the same bytes; large traces are not inlined; garbage is a readable error.
#[wasm_bindgen_test]
async fn inline_permalinks_round_trip_in_the_browser() {
    use kvscope_web::permalink::{inline_trace, uninline_trace, INFLATE_LIMIT, INLINE_LIMIT};
    let inline = |b: &[u8]| {
        let blob = kvscope_web::read::blob_of(b);
        async move { inline_trace(&blob).await }
    };
    let demo = kvscope_web::DEMO_TRACE.as_bytes();
    let text = inline(demo).await.expect("the demo is small");
    assert!(
        text.len() < demo.len() / 2,
        "{} of {}",
        text.len(),
        demo.len()
    );
    assert_eq!(uninline_trace(&text).await.unwrap(), demo);
    let zlib = include_str!("../fixtures/demo-link.txt").trim();
    assert_eq!(uninline_trace(zlib).await.unwrap(), demo);
    // Pseudo-random bytes barely compress: over the limit, not inlined (and the compressor
    // stops early instead of deflating 8 MB).
    let mut x = 1u64;
    let noise: Vec<u8> = (0..8 << 20)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect();
    assert!(inline(&noise).await.is_none());
    assert!(inline(&noise[..INLINE_LIMIT / 2]).await.is_some());
    let err = uninline_trace("AAAAAAAA").await.unwrap_err();
    assert!(err.contains("does not inflate"), "{err}");
    // A link is not a zip bomb: 64 MiB + 1 zero bytes, raw deflate, base64url (Node's
    // `zlib.deflateRawSync(Buffer.alloc((64 << 20) + 1), { level: 9 }).toString('base64url')`).
    let bomb = include_str!("../fixtures/bomb-link.txt").trim();
    let err = uninline_trace(bomb).await.unwrap_err();
    assert_eq!(INFLATE_LIMIT, 64 << 20);
    assert!(
        err.contains(&format!("inflates to more than {INFLATE_LIMIT} bytes")),
        "{err}"
    );
    let err = uninline_trace("!!").await.unwrap_err();
    assert!(err.contains("base64url"), "{err}");
}

/// `permalink::parse_f64` (JavaScript's parseFloat behind a strict grammar) accepts exactly
/// what `str::parse::<f64>` accepts and gives the same values.
#[wasm_bindgen_test]
fn parse_f64_matches_rust_float_parsing() {
    use kvscope_web::permalink::parse_f64;
    for s in [
        "0",
        "-0",
        "+1",
        "1.5",
        "-2.25",
        "5.",
        ".5",
        "+.5",
        "5.e3",
        "1e5",
        "1E-5",
        "2.5e+10",
        "1e400",
        "-1e400",
        "1e-400",
        "0.1",
        "4",
        "240",
        "123456.789",
        "1.7976931348623157e308",
        "5e-324",
        "inf",
        "-inf",
        "+Infinity",
        "INF",
        "nan",
        "NaN",
        "-nan",
        "",
        ".",
        "e5",
        "1e",
        "1e+",
        "--1",
        "+-1",
        "1.2.3",
        " 1",
        "1 ",
        "0x10",
        "1_0",
        "abc",
        "1.5abc",
        "Infinityx",
        "١",
    ] {
        let want = s.parse::<f64>().ok();
        let got = parse_f64(s);
        match (want, got) {
            (Some(w), Some(g)) if w.is_nan() => assert!(g.is_nan(), "{s:?}: {g}"),
            (Some(w), Some(g)) => {
                assert_eq!(w.to_bits(), g.to_bits(), "{s:?}: want {w}, got {g}")
            }
            (None, None) => {}
            _ => panic!("{s:?}: want {want:?}, got {got:?}"),
        }
    }
}

/// Issue 16 point 10: a JSON Lines trace cut mid-line shows the located error and offers its
/// complete leading batches; the button opens exactly those.
#[wasm_bindgen_test]
async fn a_cut_trace_offers_its_complete_batches() {
    let root = container();
    let st = AppState::new();
    let _h = leptos::mount::mount_to(root.clone(), move || {
        provide_context(st);
        view! { <kvscope_web::panels::StatusBanner/> }
    });
    let whole = include_str!("../../fixtures/tiers.jsonl");
    let lines: Vec<&str> = whole.lines().collect();
    let batches = lines
        .iter()
        .take(3)
        .filter(|l| l.contains("\"events\""))
        .count();
    let cut = format!("{}\n{}", lines[..3].join("\n"), &lines[3][..20]);
    load::load_bytes(
        st,
        "cut.jsonl".into(),
        cut.into_bytes(),
        TraceOrigin::Local,
        None,
    );
    until(&root, "load-error", "line 4").await;
    let offer = until(&root, "recover", "can be opened").await;
    let plural = if batches == 1 { "batch" } else { "batches" };
    assert!(
        offer.starts_with(&format!(
            "The input broke at line 4, column 20. The {batches} complete {plural} before it"
        )),
        "{offer}"
    );
    let button: web_sys::HtmlElement = root
        .query_selector("[data-testid=recover] button")
        .unwrap()
        .expect("the offer's button")
        .unchecked_into();
    assert_eq!(
        button.inner_text(),
        format!("Open {batches} complete {plural}")
    );
    button.click();
    until(
        &root,
        "status",
        &format!("Loaded cut.jsonl (first {batches} "),
    )
    .await;
    assert!(el(&root, "recover").is_none(), "the offer is gone");
}

/// Issue 16 point 5: the browser keeps one trace for reloads, found by its id only.
#[wasm_bindgen_test]
async fn a_kept_trace_comes_back_by_its_id() {
    use kvscope_web::keep::{keep, kept, new_id};
    use kvscope_web::read::{blob_of, read_blob};
    // What comes back: the name and the bytes (read out of the kept `Blob`).
    let back = |id: String| async move {
        match kept(&id).await.unwrap() {
            Some((name, blob)) => Some((name, read_blob(&blob).await.unwrap())),
            None => None,
        }
    };
    let (a, b) = (new_id(), new_id());
    assert_ne!(a, b);
    keep(&a, "a.jsonl", &blob_of(b"first")).await.expect("kept");
    assert_eq!(
        back(a.clone()).await,
        Some(("a.jsonl".into(), b"first".to_vec()))
    );
    keep(&b, "b.jsonl", &blob_of(b"second"))
        .await
        .expect("kept");
    assert_eq!(back(a).await, None, "one trace is kept: the last");
    assert_eq!(back(b).await, Some(("b.jsonl".into(), b"second".to_vec())));
}
