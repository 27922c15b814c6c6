#!/usr/bin/env bash
# Builds the kvscope web debugger into dist/ without trunk (see ../shared/reference/toolchain.md):
#   cargo (wasm-release profile) -> wasm-bindgen --target web -> wasm-opt -Oz (npm binaryen 132)
# Usage: scripts/build-web.sh [OUT_DIR]   (default: dist)
# WEB_CARGO_FLAGS="--no-default-features" builds without the Compare dialog (no simulator).
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-dist}
log() { printf '[build-web] %s\n' "$*" >&2; }

# shellcheck disable=SC2086
cargo build --locked --profile wasm-release --target wasm32-unknown-unknown -p kvscope-web ${WEB_CARGO_FLAGS:-}
WASM=target/wasm32-unknown-unknown/wasm-release/kvscope-web.wasm
mkdir -p "$OUT"
rm -f "$OUT"/kvscope_web*
wasm-bindgen --target web --no-typescript --out-dir "$OUT" --out-name kvscope_web "$WASM"

# wasm-opt: only npm's binaryen 132 (Debian's binaryen 108 breaks wasm-bindgen output).
WASM_OPT=tests/e2e/node_modules/.bin/wasm-opt
if [ -x "$WASM_OPT" ] && "$WASM_OPT" --version | grep -q 'version 132'; then
  "$WASM_OPT" -Oz --enable-bulk-memory --enable-nontrapping-float-to-int --enable-sign-ext \
    --enable-mutable-globals --enable-reference-types --enable-multivalue \
    "$OUT/kvscope_web_bg.wasm" -o "$OUT/kvscope_web_bg.wasm"
else
  log "npm binaryen 132 not found (run scripts/install-tools.sh); skipping wasm-opt"
fi

cp index.html "$OUT/index.html"
raw=$(wc -c <"$OUT/kvscope_web_bg.wasm")
gz=$(gzip -9 -c "$OUT/kvscope_web_bg.wasm" | wc -c)
log "dist ready: $OUT (kvscope_web_bg.wasm ${raw} B, ${gz} B gzip)"
