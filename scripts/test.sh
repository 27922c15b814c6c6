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

step "dynamo model vs. the real dynamo-kv-router 1.6.1 (test-only package, not a default member)"
cargo test -p kvscope-dynamo-diff --locked

step "core builds for wasm32-unknown-unknown"
cargo build -p kvscope-core --target wasm32-unknown-unknown --locked

step "wasm package (kvscope-wasm): wasm-pack test --node"
export PATH="$PWD/tests/node/node_modules/.bin:$PATH"   # npm binaryen 132's wasm-opt first
wasm-pack test --node wasm

step "wasm package: wasm-pack test --headless --chrome"
wasm-pack test --headless --chrome wasm

step "wasm package: build (nodejs, web; full and lean), README example + checks in Node"
./scripts/wasm-pkg.sh
node tests/node/package-e2e.mjs

step "wasm package: TypeScript declarations type-check (tsc --strict)"
tsc -p tests/node

step "web: component tests in headless Chromium (wasm-bindgen-test)"
export CHROMEDRIVER=${CHROMEDRIVER:-/usr/bin/chromedriver}
cargo test -p kvscope-web --target wasm32-unknown-unknown --locked --no-run
# Since 2026-12-05 wasm-bindgen-test-runner sometimes never starts the test page (about one run
# in three here, with no test output: it hangs before "running N tests"; not understood yet).
# A run that has not finished in 2 minutes (a good one takes under 30 s, built) is stopped and
# retried, at most twice, saying so; a failing test still fails the step at once.
web_component_tests() {
  timeout -k 10 120 cargo test -p kvscope-web --target wasm32-unknown-unknown --locked
}
for attempt in 1 2 3; do
  rc=0
  web_component_tests || rc=$?
  [ "$rc" = 124 ] || break
  echo "web component tests: the runner hung (no result in 120 s, attempt $attempt)" >&2
done
[ "$rc" = 0 ] || exit "$rc"

step "web: clippy for wasm32"
cargo clippy -p kvscope-web --target wasm32-unknown-unknown --all-targets --locked --no-deps -- -D warnings

step "web: build dist/ (cargo wasm-release -> wasm-bindgen -> wasm-opt)"
scripts/build-web.sh dist

step "web: end-to-end (Playwright + Debian chromium, served by kvscope serve)"
cargo build -p kvscope-cli --locked
KVSCOPE_BIN="$PWD/target/debug/kvscope" KVSCOPE_DIST="$PWD/dist" node --test tests/e2e/e2e.test.mjs

step "all tests passed"
