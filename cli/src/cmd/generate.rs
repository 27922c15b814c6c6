//! `kvscope generate`. To be completed: issue 2.

/// Arguments of `kvscope generate`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Scenario file or built-in scenario name.
    pub scenario: Option<String>,
}

/// Run the command.
pub fn run(args: Args) -> anyhow::Result<()> {
    anyhow::bail!("generate is not implemented yet ({:?})", args.scenario)
}
