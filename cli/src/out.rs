//! Writing reports to stdout. Every command writes through here (or through its own writer
//! whose errors it returns), never through `print!`, which panics when stdout is closed: a
//! closed stdout then surfaces as an `io::ErrorKind::BrokenPipe` error that
//! [`crate::exit::report`] turns into a quiet exit 0, as ripgrep does.

use std::io::Write;

use anyhow::Context as _;

/// Write `bytes` to stdout and flush.
pub fn stdout(bytes: &[u8]) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    out.write_all(bytes).context("writing stdout")?;
    out.flush().context("writing stdout")
}
