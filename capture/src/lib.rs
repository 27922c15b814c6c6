//! `kvscope-capture`: live capture of vLLM KV-cache events from its ZMQ event publisher
//! (`ZmqEventPublisher`, `vllm/distributed/kv_events.py`) into a kvscope trace.
//!
//! Native only (links the system `libzmq` through the `zmq` crate); the decoding and the trace
//! model stay in the pure `kvscope-core`. The pieces, each in its own module:
//!
//! - [`endpoint`]: `[NAME=]tcp://HOST:PORT` specs and vLLM's per-DP-rank port offset;
//! - [`plan`]: the [`CaptureConfig`] expanded into one publisher per (endpoint, DP rank);
//! - [`frame`]: validation of live `(topic, seq, payload)` messages and replay replies;
//! - [`seq`]: per-publisher sequence tracking (in order, gap, reset);
//! - [`replay`]: the DEALER client for vLLM's ROUTER replay socket;
//! - [`gaps`]: recovering a sequence gap over the replay socket, as gap records;
//! - [`writer`]: the streaming JSON Lines trace writer (flushed per batch) and note records;
//! - [`diag`]: [`Stats`], [`Diagnostic`]s and the [`Observer`] that receives them;
//! - [`session`]: the capture loop tying them together.
//!
//! The protocol facts it relies on, with their upstream sources, are in `docs/capture.md`.

#![deny(missing_docs)]

pub mod diag;
pub mod endpoint;
pub mod frame;
mod gaps;
pub mod plan;
pub mod replay;
pub mod seq;
pub mod session;
pub mod writer;

pub use diag::{Diagnostic, Observer, Quiet, Stats, StopReason};
pub use endpoint::{EndpointError, EndpointSpec};
pub use plan::CaptureConfig;
pub use session::{Capture, CaptureError};
