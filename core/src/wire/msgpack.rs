//! vLLM's msgpack `KVEventBatch` codec (msgspec-compatible). To be completed: issue 2.

use crate::event::KvEventBatch;
use crate::trace::Trace;

use super::{EventEncoding, Location, WireError};

/// Decode one `KVEventBatch` payload.
pub fn decode_batch(payload: &[u8]) -> Result<KvEventBatch, WireError> {
    let _ = payload;
    Err(WireError { location: Location::Byte(0), message: "msgpack decoding not implemented yet".into() })
}

/// Encode one batch byte-identically to vLLM's msgspec encoder.
pub fn encode_batch(batch: &KvEventBatch, encoding: EventEncoding) -> Vec<u8> {
    let _ = (batch, encoding);
    Vec::new()
}

/// Decode a stream of concatenated payloads into a trace (source = `source`, seq = position).
pub fn decode_stream(bytes: &[u8], source: &str) -> Result<Trace, WireError> {
    let _ = (bytes, source);
    Err(WireError { location: Location::Byte(0), message: "msgpack decoding not implemented yet".into() })
}
