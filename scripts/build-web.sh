#!/usr/bin/env bash
# Builds the kvscope web debugger into dist/ without trunk (docs/web-build.md):
#   cargo (wasm-release profile) -> wasm-bindgen --target web -> wasm-opt -Oz (npm binaryen 132)
#   -> the app wasm's gzip size gate (360 KiB, 368,640 bytes gzip -9).
# Two wasm modules: the app (kvscope_web*, web/) and the Compare dialog's simulator
# (kvscope_sim*, web/sim/), which the app imports only when Compare opens.
# Usage: scripts/build-web.sh [OUT_DIR]   (default: dist)
# WEB_CARGO_FLAGS="--no-default-features" builds without the Compare dialog (and its simulator).
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-dist}
log() { printf '[build-web] %s\n' "$*" >&2; }
compare=1
case " ${WEB_CARGO_FLAGS:-} " in *" --no-default-features "*) compare=0 ;; esac

# shellcheck disable=SC2086
cargo build --locked --profile wasm-release --target wasm32-unknown-unknown -p kvscope-web ${WEB_CARGO_FLAGS:-}
if [ "$compare" = 1 ]; then
  cargo build --locked --profile wasm-release --target wasm32-unknown-unknown -p kvscope-web-sim
fi
TARGET=${CARGO_TARGET_DIR:-target}/wasm32-unknown-unknown/wasm-release
mkdir -p "$OUT"
rm -rf "$OUT"/kvscope_web* "$OUT"/kvscope_sim* "$OUT"/snippets

# wasm-opt: only npm's binaryen 132 (Debian's binaryen 108 breaks wasm-bindgen output).
WASM_OPT=tests/e2e/node_modules/.bin/wasm-opt
optimize() {
  if [ -x "$WASM_OPT" ] && "$WASM_OPT" --version | grep -q 'version 132'; then
    "$WASM_OPT" -Oz --enable-bulk-memory --enable-nontrapping-float-to-int --enable-sign-ext \
      --enable-mutable-globals --enable-reference-types --enable-multivalue "$1" -o "$1"
  else
    log "npm binaryen 132 not found (run scripts/install-tools.sh); skipping wasm-opt"
  fi
}
report() {
  log "$1: $(wc -c <"$1") B, $(gzip -9 -c "$1" | wc -c) B gzip"
}

wasm-bindgen --target web --no-typescript --out-dir "$OUT" --out-name kvscope_web "$TARGET/kvscope-web.wasm"
optimize "$OUT/kvscope_web_bg.wasm"
if [ "$compare" = 1 ]; then
  wasm-bindgen --target web --no-typescript --out-dir "$OUT" --out-name kvscope_sim "$TARGET/kvscope_web_sim.wasm"
  optimize "$OUT/kvscope_sim_bg.wasm"
fi

cp index.html "$OUT/index.html"
report "$OUT/kvscope_web_bg.wasm"
[ "$compare" = 0 ] || report "$OUT/kvscope_sim_bg.wasm"
# The app's size budget (docs/web-build.md): a regression gate, not a goal. A change that
# links something big (serde_json's float code, a Unicode table, the simulator outside its lazy
# module) fails here, not in a release. Only the wasm the page loads at start is gated;
# kvscope_sim_bg.wasm loads when Compare opens.
budget=368640
app=$(gzip -9 -c "$OUT/kvscope_web_bg.wasm" | wc -c)
if [ "$app" -gt "$budget" ]; then
  log "the app wasm is $app bytes gzip -9, over its $budget-byte budget"
  exit 1
fi
log "app wasm within its $budget-byte gzip budget ($((budget - app)) bytes to spare)"
log "dist ready: $OUT (the app loads kvscope_web_bg.wasm; kvscope_sim_bg.wasm only when Compare opens)"
