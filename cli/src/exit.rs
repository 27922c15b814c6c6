//! Exit codes: 0 success, 1 findings (e.g. `check` found deny-level violations), 2 bad input
//! or usage, 3 other failures (IO, network).

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

/// Print the error (if any) and return the process exit code.
pub fn report(result: anyhow::Result<()>) -> i32 {
    match result {
        Ok(()) => 0,
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
