//! `kvscope convert`. To be completed: issue 2.

use std::path::PathBuf;

/// Arguments of `kvscope convert`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Input trace (JSON Lines or msgpack stream; auto-detected).
    pub input: PathBuf,
}

/// Run the command.
pub fn run(args: Args) -> anyhow::Result<()> {
    anyhow::bail!("convert is not implemented yet ({})", args.input.display())
}
