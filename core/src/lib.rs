//! kvscope core: the model of vLLM's KV-cache events and of the routers that consume them.
//!
//! Pure Rust, no IO, builds for `wasm32-unknown-unknown`. See `ARCHITECTURE.md` for the codemap
//! and invariants.
//!
//! * [`event`], [`hash`]: vLLM's event structs and hash values.
//! * [`hashing`]: vLLM block hashing (`sha256_cbor`).
//! * [`keys`], [`order`]: offload keys, ordered job keys (the fix) and legacy set orders.
//! * [`trace`]: the trace model (batches with source, seq and provenance).
//! * [`wire`]: msgpack and JSON Lines codecs.
//! * [`scenario`], [`sim`]: scenario files and the vLLM-faithful offload simulation.
//! * [`text`]: quoting untrusted text in error messages.
#![deny(missing_docs)]

pub mod event;
pub mod hash;
pub mod hashing;
pub mod keys;
pub mod order;
pub mod scenario;
pub mod sim;
pub mod text;
pub mod trace;
pub mod wire;

pub use event::{BlockRemoved, BlockStored, KvEvent, KvEventBatch};
pub use hash::BlockHash;
pub use trace::{Trace, TraceBatch, TraceRecord};
pub mod analysis;
pub mod consumers;
#[cfg(feature = "fuzzing")]
pub mod fuzzing;
pub mod replay;
mod room;
pub mod sort;
