//! Exit codes, the same for every command (`docs/cli.md`): 0 clean, 1 findings (`check` found
//! deny-level violations), 2 bad or missing input (a file that is missing, unreadable or does
//! not parse; bad arguments), 3 failure writing output (and other failures: network, ZMQ).
//!
//! A closed stdout (the reader of a pipe went away, as in `kvscope check big.msgpack | head -1`)
//! is not a failure: the command stops quietly with exit 0, whatever it was writing.

use std::fmt;

/// Marks an error caused by the user's input (exit code 2).
#[derive(Debug)]
pub struct BadInput(pub String);

impl fmt::Display for BadInput {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for BadInput {}

/// Marks a run that completed but found problems (exit code 1).
#[derive(Debug)]
pub struct Findings(pub String);

impl fmt::Display for Findings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Findings {}

/// Whether an `io::ErrorKind::BrokenPipe` error is anywhere in `e`'s chain.
pub fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    })
}

/// Print the error (if any) and return the process exit code.
pub fn report(result: anyhow::Result<()>) -> i32 {
    match result {
        Ok(()) => 0,
        Err(e) if is_broken_pipe(&e) => 0,
        Err(e) if e.downcast_ref::<Findings>().is_some() => {
            let msg = e.to_string();
            if !msg.is_empty() {
                eprintln!("{msg}");
            }
            1
        }
        Err(e) if e.downcast_ref::<BadInput>().is_some() => {
            eprintln!("kvscope: error: {e:#}");
            2
        }
        Err(e) => {
            eprintln!("kvscope: error: {e:#}");
            3
        }
    }
}
