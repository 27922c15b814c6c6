//! `kvscope`: check, convert, generate, capture and serve vLLM KV-event traces.

mod cmd;
mod exit;

use clap::{Parser, Subcommand};

/// Debug the order of vLLM KV-cache events and what KV-aware routers make of them.
#[derive(Parser, Debug)]
#[command(name = "kvscope", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Convert a trace between JSON Lines and a msgpack stream (input format auto-detected).
    Convert(cmd::convert::Args),
    /// Generate a trace from a scenario file or a built-in scenario.
    Generate(cmd::generate::Args),
    /// Record a trace from running vLLM engines' ZMQ KV-event publishers.
    Capture(cmd::capture::Args),
}

fn main() {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Convert(args) => cmd::convert::run(args),
        Command::Generate(args) => cmd::generate::run(args),
        Command::Capture(args) => cmd::capture::run(args),
    };
    std::process::exit(exit::report(result));
}
