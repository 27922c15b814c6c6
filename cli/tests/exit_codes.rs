//! One rule for every command's exit code (`docs/cli.md`): 0 clean, 1 deny-level findings,
//! 2 bad or missing input, 3 failure writing output. Golden transcripts (exit code, stdout,
//! stderr) in `snapshots/`.

mod common;

use common::{fixtures, run_in, transcript};
use insta::assert_snapshot;

fn in_tmp(args: &[&str]) -> String {
    let dir = tempfile::tempdir().unwrap();
    transcript(&run_in(dir.path(), args))
}

#[test]
fn a_missing_input_file_is_exit_2_for_every_command() {
    assert_snapshot!("missing_check", in_tmp(&["check", "nope.jsonl"]));
    assert_snapshot!(
        "missing_verdicts",
        in_tmp(&["verdicts", "--consumer", "llmd", "nope.jsonl"])
    );
    assert_snapshot!(
        "missing_diff",
        in_tmp(&["diff", "nope.jsonl", "nope.msgpack"])
    );
    assert_snapshot!("missing_convert", in_tmp(&["convert", "nope.jsonl"]));
    assert_snapshot!("missing_generate", in_tmp(&["generate", "nope.json"]));
    let dist = tempfile::tempdir().unwrap();
    std::fs::write(dist.path().join("index.html"), "<html></html>").unwrap();
    assert_snapshot!(
        "missing_serve",
        in_tmp(&[
            "serve",
            "--dist",
            dist.path().to_str().unwrap(),
            "--port",
            "0",
            "nope.jsonl"
        ])
    );
}

#[test]
fn an_unreadable_input_is_exit_2() {
    // A directory cannot be read as a file.
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("adir")).unwrap();
    assert_snapshot!(
        "unreadable_convert",
        transcript(&run_in(dir.path(), &["convert", "adir"]))
    );
    assert_snapshot!(
        "unreadable_check",
        transcript(&run_in(dir.path(), &["check", "adir"]))
    );
}

#[test]
fn truncated_msgpack_is_exit_2_naming_the_byte_offset() {
    let dir = tempfile::tempdir().unwrap();
    let bytes = std::fs::read(fixtures().join("wire/stream.msgpack")).unwrap();
    std::fs::write(dir.path().join("cut.msgpack"), &bytes[..bytes.len() - 3]).unwrap();
    // `convert` streams: to stdout, the batches before the bad one are written (see
    // `convert.rs`); to a file, the partial file is removed.
    assert_snapshot!(
        "truncated_convert",
        transcript(&run_in(
            dir.path(),
            &["convert", "cut.msgpack", "--to", "jsonl", "-o", "out.jsonl"]
        ))
    );
    assert!(!dir.path().join("out.jsonl").exists());
    assert_snapshot!(
        "truncated_check",
        transcript(&run_in(dir.path(), &["check", "cut.msgpack"]))
    );
}

#[test]
fn bad_jsonl_is_exit_2_naming_line_and_column() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("bad.jsonl"),
        "{\"source\": \"a\", \"seq\": 0, \"ts\": 1.0, \"events\": []}\n\
         {\"source\": \"a\", \"seq\": 1, \"ts\": 2.0, \"events\": [7]}\n",
    )
    .unwrap();
    assert_snapshot!(
        "bad_jsonl_convert",
        transcript(&run_in(
            dir.path(),
            &[
                "convert",
                "bad.jsonl",
                "--to",
                "msgpack",
                "-o",
                "out.msgpack"
            ]
        ))
    );
    assert!(!dir.path().join("out.msgpack").exists());
    assert_snapshot!(
        "bad_jsonl_check",
        transcript(&run_in(dir.path(), &["check", "bad.jsonl"]))
    );
}

#[test]
fn bad_scenario_and_arguments_are_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("bad.json"),
        "{\n  \"block_size\": 4,\n  \"blok\": 1\n}\n",
    )
    .unwrap();
    assert_snapshot!(
        "bad_scenario",
        transcript(&run_in(dir.path(), &["generate", "bad.json"]))
    );
    let vllm = fixtures().join("vllm");
    assert_snapshot!(
        "unknown_consumer",
        transcript(&run_in(
            &vllm,
            &["check", "--consumer", "nobody", "b_chunked.fixed.msgpack"]
        ))
    );
    assert_snapshot!(
        "bad_rule",
        transcript(&run_in(
            &vllm,
            &["check", "--rule", "seq-gap=loud", "b_chunked.fixed.msgpack"]
        ))
    );
}

#[test]
fn an_output_that_cannot_be_written_is_exit_3() {
    let vllm = fixtures().join("vllm");
    assert_snapshot!(
        "unwritable_convert",
        transcript(&run_in(
            &vllm,
            &[
                "convert",
                "b_chunked.fixed.msgpack",
                "-o",
                "/nonexistent/dir/out.jsonl"
            ]
        ))
    );
    assert_snapshot!(
        "unwritable_generate",
        transcript(&run_in(
            &vllm,
            &["generate", "chunked", "-o", "/nonexistent/dir/out.jsonl"]
        ))
    );
}

/// A file that is bad from its first byte fails there: exit 2 naming byte 0, without the rest
/// being read (256 MiB of zeros, sparse, so the test is cheap).
#[test]
fn a_large_bad_file_fails_at_byte_0_without_being_read() {
    let dir = tempfile::tempdir().unwrap();
    let zeros = dir.path().join("zeros.msgpack");
    let len: u64 = 256 << 20;
    std::fs::File::create(&zeros).unwrap().set_len(len).unwrap();
    let error = "kvscope: error: zeros.msgpack: byte offset 0: batch 1:";
    for cmd in [
        &["check"][..],
        &["verdicts", "--consumer", "llmd"],
        &["convert"],
    ] {
        let args: Vec<&str> = cmd.iter().copied().chain(["zeros.msgpack"]).collect();
        let o = run_in(dir.path(), &args);
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.starts_with(error), "{args:?}: {stderr}");
        assert!(o.stdout.is_empty(), "{args:?}");
    }
    let o = run_in(dir.path(), &["diff", "zeros.msgpack", "zeros.msgpack"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).starts_with(error));

    // How much was read: the same file as `check -`'s stdin shares its file offset with ours.
    for cmd in [&["check", "-"][..], &["convert", "-"]] {
        let file = std::fs::File::open(&zeros).unwrap();
        let mut ours = file.try_clone().unwrap();
        let o = std::process::Command::new(env!("CARGO_BIN_EXE_kvscope"))
            .args(cmd)
            .stdin(file)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{cmd:?}: {stderr}");
        assert!(
            stderr.contains(": byte offset 0: batch 1:"),
            "{cmd:?}: {stderr}"
        );
        let read = std::io::Seek::stream_position(&mut ours).unwrap();
        assert!(read <= 1 << 20, "{cmd:?} read {read} of {len} bytes");
    }
}
