//! The binding tests, run in headless Chromium: `wasm-pack test --headless --chrome wasm`.
#![cfg(target_arch = "wasm32")]

wasm_bindgen_test::wasm_bindgen_test_configure!(run_in_browser);

mod cases;
