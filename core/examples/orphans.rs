//! The memory benchmark's worst case for findings (issue 20, "memory per finding"): `N`
//! one-event msgpack batches, each a `BlockStored` of one block whose parent is never stored,
//! so every event is an orphan for every strict router (a `consumer-loss` finding per router
//! and an `unknown-parent` finding per event). Written with kvscope's own encoder.
//!
//! ```text
//! orphans FILE [N]     # N one-event batches (default 2,000,000) to FILE
//! ```
//!
//! `scripts/bench-memory.sh` runs `kvscope check` on it under `/usr/bin/time -v`.

use std::io::Write;

use kvscope_core::event::{BlockStored, KvEvent, KvEventBatch};
use kvscope_core::hash::BlockHash;
use kvscope_core::wire::msgpack::encode_batch_into;
use kvscope_core::wire::EventEncoding;

/// SplitMix64: distinct, well-spread 64-bit hashes (every one at least 2^32, as vLLM's are).
fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    (z ^ (z >> 31)) | (1 << 63)
}

fn write(file: &str, n: u64) -> std::io::Result<()> {
    let mut out = std::io::BufWriter::new(std::fs::File::create(file)?);
    let mut payload = Vec::new();
    let mut bytes = 0usize;
    for i in 0..n {
        let batch = KvEventBatch {
            ts: 1.7e9 + i as f64,
            events: vec![KvEvent::BlockStored(BlockStored {
                block_hashes: vec![BlockHash::Int(mix(2 * i))].into(),
                // Odd inputs: never a stored block's hash.
                parent_block_hash: Some(BlockHash::Int(mix(2 * i + 1))),
                token_ids: (0..16).collect(),
                block_size: 16,
                medium: Some("GPU".into()),
                ..Default::default()
            })],
            data_parallel_rank: Some(0),
        };
        payload.clear();
        encode_batch_into(&mut payload, &batch, EventEncoding::Map);
        out.write_all(&payload)?;
        bytes += payload.len();
    }
    out.flush()?;
    println!(
        "wrote {n} one-event batches, {:.1} MB, to {file}",
        bytes as f64 / 1e6
    );
    Ok(())
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.iter().map(String::as_str).collect::<Vec<_>>()[..] {
        [file] => write(file, 2_000_000).map_err(|e| e.to_string()),
        [file, n] => match n.parse() {
            Ok(n) => write(file, n).map_err(|e| e.to_string()),
            Err(e) => Err(format!("N: {e}")),
        },
        _ => Err("usage: orphans FILE [N]".into()),
    };
    if let Err(e) = result {
        eprintln!("orphans: {e}");
        std::process::exit(2);
    }
}
