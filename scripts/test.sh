#!/usr/bin/env bash
# Runs every kvscope test. Called by `make test` and `.ci/run`.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TERM_COLOR=${CARGO_TERM_COLOR:-never}
step() { printf '\n==> %s\n' "$*"; }

step "cargo fmt --check"
cargo fmt --all -- --check

step "cargo clippy (workspace, all targets, -D warnings)"
cargo clippy --workspace --all-targets --locked -- -D warnings

step "cargo test (workspace)"
cargo test --workspace --locked

step "core builds for wasm32-unknown-unknown"
cargo build -p kvscope-core --target wasm32-unknown-unknown --locked

step "all tests passed"
