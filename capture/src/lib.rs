//! `kvscope-capture`: live capture of vLLM KV-cache events from its ZMQ event publisher
//! (`ZmqEventPublisher`, `vllm/distributed/kv_events.py`) into a kvscope trace.
//!
//! Native only (links the system `libzmq` through the `zmq` crate); the decoding and the trace
//! model stay in the pure `kvscope-core`. The pieces, each in its own module:
//!
//! - [`endpoint`]: `[NAME=]tcp://HOST:PORT` specs and vLLM's per-DP-rank port offset;
//! - [`frame`]: validation of live `(topic, seq, payload)` messages and replay replies;
//! - [`seq`]: per-publisher sequence tracking (in order, gap, reset);
//! - [`replay`]: the DEALER client for vLLM's ROUTER replay socket;
//! - [`writer`]: the streaming JSON Lines trace writer (flushed per batch);
//! - [`session`]: the capture loop tying them together, with [`Stats`] and [`Diagnostic`]s.

#![deny(missing_docs)]

pub mod endpoint;
pub mod frame;
pub mod replay;
pub mod seq;
pub mod session;
pub mod writer;

pub use endpoint::{EndpointError, EndpointSpec};
pub use session::{CaptureConfig, CaptureError, Diagnostic, Observer, Stats};
