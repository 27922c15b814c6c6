//! `kvscope convert` end to end.

use std::path::Path;
use std::process::{Command, Output};

fn kvscope(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_kvscope"))
        .args(args)
        .output()
        .expect("run kvscope")
}

fn fixture(name: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/fixtures/wire")
        .join(name)
        .display()
        .to_string()
}

/// A JSONL trace as a msgpack stream reproduces it: one source, seq from 0, dp_rank per batch.
const TRACE: &str = concat!(
    r#"{"source": "pod", "dp_rank": 0, "seq": 0, "ts": 1700000000.0, "events": [{"type": "BlockStored", "block_hashes": [18446744073709551615], "parent_block_hash": null, "token_ids": [1, 2, 3, 4], "block_size": 4, "lora_id": null, "medium": "CPU", "lora_name": null, "group_idx": 0, "kv_cache_spec_kind": "full_attention"}]}"#,
    "\n",
    r#"{"source": "pod", "dp_rank": 0, "seq": 1, "ts": 1700000001.0, "events": [{"type": "BlockStored", "block_hashes": [9007199254740993], "parent_block_hash": 18446744073709551615, "token_ids": [5, 6, 7, 8], "block_size": 4, "lora_id": 3, "medium": "CPU", "lora_name": "lora", "extra_keys": [["lora", {"bytes": "00ff"}]]}, {"type": "BlockRemoved", "block_hashes": ["abcdef"], "medium": "CPU"}, {"type": "AllBlocksCleared"}]}"#,
    "\n",
);

#[test]
fn jsonl_to_msgpack_to_jsonl_is_identical() {
    let dir = tempfile::tempdir().unwrap();
    let jsonl = dir.path().join("pod.jsonl");
    let mp = dir.path().join("pod.msgpack");
    let back = dir.path().join("back.jsonl");
    std::fs::write(&jsonl, TRACE).unwrap();
    for encoding in ["map", "array"] {
        let o = kvscope(&[
            "convert",
            jsonl.to_str().unwrap(),
            "-o",
            mp.to_str().unwrap(),
            "--to",
            "msgpack",
            "--encoding",
            encoding,
        ]);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let bytes = std::fs::read(&mp).unwrap();
        assert_eq!(bytes[0], 0x93, "a 3-array batch");
        // Source defaults to the msgpack file's stem ("pod").
        let o = kvscope(&[
            "convert",
            mp.to_str().unwrap(),
            "-o",
            back.to_str().unwrap(),
            "--to",
            "jsonl",
        ]);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        assert_eq!(std::fs::read_to_string(&back).unwrap(), TRACE, "{encoding}");
    }
}

#[test]
fn msgspec_stream_to_jsonl_and_back_is_byte_identical_and_raw_is_kept() {
    let dir = tempfile::tempdir().unwrap();
    let jsonl = dir.path().join("s.jsonl");
    let mp = dir.path().join("s.msgpack");
    let stream = fixture("stream.msgpack");
    // Default output is stdout, default --to is the other format.
    let o = kvscope(&["convert", &stream, "--source", "engine-1"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let text = String::from_utf8(o.stdout).unwrap();
    assert!(text.starts_with(r#"{"source": "engine-1", "dp_rank": 0, "seq": 0, "ts": 1700000000.5, "events": [{"type": "BlockStored""#), "{text}");
    std::fs::write(&jsonl, &text).unwrap();
    let o = kvscope(&[
        "convert",
        jsonl.to_str().unwrap(),
        "-o",
        mp.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(std::fs::read(&mp).unwrap(), std::fs::read(&stream).unwrap());

    // --raw carries each payload's bytes; converting back writes them verbatim.
    let o = kvscope(&["convert", &stream, "--raw", "-o", jsonl.to_str().unwrap()]);
    assert!(o.status.success());
    let text = std::fs::read_to_string(&jsonl).unwrap();
    assert!(text.lines().all(|l| l.contains(r#""raw": ""#)));
    let o = kvscope(&[
        "convert",
        jsonl.to_str().unwrap(),
        "--to",
        "msgpack",
        "--encoding",
        "array",
        "-o",
        mp.to_str().unwrap(),
    ]);
    assert!(o.status.success());
    assert_eq!(std::fs::read(&mp).unwrap(), std::fs::read(&stream).unwrap());
}

/// `convert` streams (a record read, a record written): on bad input it has already written
/// the records before the bad one, then fails with exit 2 naming where.
#[test]
fn a_bad_record_ends_the_stream_after_the_records_before_it() {
    let full = kvscope(&["convert", &fixture("stream.msgpack"), "--to", "jsonl"]);
    assert_eq!(full.status.code(), Some(0));
    let dir = tempfile::tempdir().unwrap();
    let bytes = std::fs::read(fixture("stream.msgpack")).unwrap();
    let cut = dir.path().join("stream.msgpack");
    std::fs::write(&cut, &bytes[..bytes.len() - 3]).unwrap();
    let o = kvscope(&["convert", cut.to_str().unwrap(), "--to", "jsonl"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains(": byte offset 4253: batch 10: "));
    let lines = String::from_utf8(o.stdout).unwrap();
    let full = String::from_utf8(full.stdout).unwrap();
    assert_eq!(lines.lines().count(), 9);
    assert!(
        full.starts_with(&lines),
        "the first 9 batches as a whole conversion writes them"
    );
    assert_eq!(full.lines().count(), 10);
}

/// `--raw` keeps each payload's exact bytes when payloads straddle the reader's chunks: a
/// stream of many read chunks (64 KiB each) goes to JSON Lines and back (`--encoding array`,
/// so only kept `raw` bytes can reproduce the map-encoded input).
#[test]
fn raw_payloads_across_read_chunks_are_kept_exactly() {
    let dir = tempfile::tempdir().unwrap();
    let one = std::fs::read(fixture("stream.msgpack")).unwrap();
    let many: Vec<u8> = one.iter().copied().cycle().take(one.len() * 64).collect();
    assert!(many.len() > 4 << 16);
    let (mp, jsonl, back) = (
        dir.path().join("many.msgpack"),
        dir.path().join("many.jsonl"),
        dir.path().join("back.msgpack"),
    );
    std::fs::write(&mp, &many).unwrap();
    let o = kvscope(&[
        "convert",
        mp.to_str().unwrap(),
        "--raw",
        "-o",
        jsonl.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let o = kvscope(&[
        "convert",
        jsonl.to_str().unwrap(),
        "--encoding",
        "array",
        "-o",
        back.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(
        std::fs::read(&back).unwrap() == many,
        "payload bytes changed"
    );
}

/// A bare msgpack stream is named by its file name up to the first dot, as the debugger and the
/// npm package name it, so `pod-a.trace.msgpack` is `pod-a` in every tool.
#[test]
fn a_stream_is_named_up_to_the_first_dot_like_the_page_names_it() {
    let dir = tempfile::tempdir().unwrap();
    let mp = dir.path().join("pod-a.trace.msgpack");
    std::fs::copy(fixture("stream.msgpack"), &mp).unwrap();
    let o = kvscope(&["convert", mp.to_str().unwrap(), "--to", "jsonl"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let text = String::from_utf8(o.stdout).unwrap();
    assert!(text.starts_with(r#"{"source": "pod-a", "#), "{text}");
}
