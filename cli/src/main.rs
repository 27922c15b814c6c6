//! `kvscope`: check, convert, generate, capture and serve vLLM KV-event traces.

mod cmd;
mod exit;
mod input;
mod out;
mod report;

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
    /// Lint a trace's event order and report what each router model loses.
    Check(cmd::check::Args),
    /// Print one JSON line per event with a router model's verdict.
    Verdicts(cmd::verdicts::Args),
    /// Compare two traces of the same scenario (e.g. legacy vs fixed order).
    Diff(cmd::diff::Args),
    /// Serve the web debugger on 127.0.0.1, optionally with a trace preloaded.
    Serve(cmd::serve::Args),
    /// Record a trace from running vLLM engines' ZMQ KV-event publishers.
    Capture(cmd::capture::Args),
}

fn main() {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Convert(args) => cmd::convert::run(args),
        Command::Generate(args) => cmd::generate::run(args),
        Command::Check(args) => cmd::check::run(args),
        Command::Verdicts(args) => cmd::verdicts::run(args),
        Command::Diff(args) => cmd::diff::run(args),
        Command::Serve(args) => cmd::serve::run(args),
        Command::Capture(args) => cmd::capture::run(args),
    };
    std::process::exit(exit::report(result));
}
