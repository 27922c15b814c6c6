//! The binding tests, run in Node: `wasm-pack test --node wasm`.
#![cfg(target_arch = "wasm32")]

mod agreement;
mod cases;
