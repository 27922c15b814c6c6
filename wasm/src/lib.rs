//! kvscope for JavaScript: wasm-bindgen bindings over [`kvscope_core`].
//!
//! A thin shell: every decision lives in `kvscope-core`; this crate converts between core
//! types and plain JS objects, and turns core errors into JS `Error`s. The npm package's API
//! and its conventions are documented in `wasm/README.md`:
//!
//! * functions and methods are camelCase, object fields keep the trace format's snake_case;
//! * block hashes are strings (decimal for integer hashes, `0x`-hex for byte hashes, so
//!   `BigInt(hash)` is exact for both); every other 64-bit integer is a `bigint`;
//! * errors are thrown as JS `Error`s whose message names the line or byte offset.
//!
//! Modules: [`dto`] (the JS-facing object shapes, pure Rust and natively tested), [`js`]
//! (serialization and error helpers), [`trace`] (the `Trace` class: load and export).
#![deny(missing_docs)]

pub mod dto;
pub mod js;
pub mod trace;

pub use trace::{load_trace, Trace};
