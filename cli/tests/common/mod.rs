//! Shared by the CLI's end-to-end tests: run the binary and render what it did as one text
//! for a snapshot (`insta`).

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The repository's `tests/fixtures/` folder.
pub fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures")
}

/// Run `kvscope ARGS` in `dir`, so that relative paths in its output do not depend on where
/// the repository is.
pub fn run_in(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_kvscope"))
        .args(args)
        .current_dir(dir)
        .output()
        .expect("run kvscope")
}

/// Exit code, stdout and stderr as one text.
pub fn transcript(o: &Output) -> String {
    let code = o
        .status
        .code()
        .map_or_else(|| "signal".to_string(), |c| c.to_string());
    format!(
        "exit: {code}\n--- stdout\n{}--- stderr\n{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}
