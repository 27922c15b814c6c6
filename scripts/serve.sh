#!/usr/bin/env bash
# Builds the web debugger (dist/) and the CLI, then serves the debugger on 127.0.0.1 with the
# built-in legacy-vs-fixed demo (the page opens it by default). Extra arguments go to
# `kvscope serve` (e.g. a TRACE to preload, --port N).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build-web.sh dist
cargo build --release --locked -p kvscope-cli
exec ./target/release/kvscope serve --dist dist "$@"
