#!/usr/bin/env bash
# Builds kvscope and shows the built-in demo. (Until the web debugger lands this runs the CLI
# on the demo scenario; it becomes `kvscope serve` with the demo trace.)
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --locked -p kvscope-cli
exec ./target/release/kvscope generate --list
