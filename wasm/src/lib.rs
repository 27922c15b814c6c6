//! kvscope for JavaScript: wasm-bindgen bindings over [`kvscope_core`].
//!
//! A thin shell: every decision lives in `kvscope-core`; this crate converts between core
//! types and plain JS objects, and turns core errors into JS `Error`s. The npm package's API
//! and its conventions are documented in `wasm/README.md`:
//!
//! * functions and methods are camelCase, object fields keep the trace format's snake_case;
//! * block hashes are strings (decimal for integer hashes, `0x`-hex for byte hashes, so
//!   `BigInt(hash)` is exact for both); other 64-bit integers from the wire (`seq`, job ids)
//!   are `bigint`; counts and indices are numbers;
//! * errors are thrown as JS `Error`s whose message names the line or byte offset.
//!
//! Modules: [`dto`] (trace objects), [`report`] (analysis objects), [`options`] (parsed
//! option objects), [`js`] (serialization, errors), [`trace`] (`Trace`: load, inspect,
//! export), [`replay`] (`ReplaySession`, `Trace.analyze`), [`scenario`] (`generate`, cargo
//! feature `sim`), [`alloc`] (heap accounting).
#![deny(missing_docs)]

pub mod alloc;
pub mod dto;
pub mod js;
pub mod options;
pub mod replay;
pub mod report;
#[cfg(feature = "sim")]
pub mod scenario;
pub mod trace;

pub use replay::ReplaySession;
pub use trace::{load_trace, Trace};

/// The package version (the crate version).
#[wasm_bindgen::prelude::wasm_bindgen]
pub fn version() -> String {
    env!("CARGO_PKG_VERSION").to_owned()
}

/// Whether this build includes the scenario simulator (`generate`): `false` in the lean build.
#[wasm_bindgen::prelude::wasm_bindgen(js_name = hasSimulator)]
pub fn has_simulator() -> bool {
    cfg!(feature = "sim")
}
