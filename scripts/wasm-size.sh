#!/usr/bin/env bash
# Where the npm package's wasm bytes go (dev helper; not part of the test run).
#
#   scripts/wasm-size.sh [--full] [OUT_DIR]          build the lean (or full) package wasm with
#                                                    names kept, print its gzip -9 size and the
#                                                    largest functions (twiggy, when installed)
#   scripts/wasm-size.sh --keep OUT_DIR/named.wasm EXPORT...
#                                                    gzip -9 size of that wasm with only these
#                                                    exports kept (wasm-metadce, then -Oz): the
#                                                    marginal cost of an API is the difference
#
# The sizes match scripts/wasm-pkg.sh's within a few hundred bytes (same cargo profile, same
# wasm-bindgen, wasm-opt -Oz; only the names section differs, and it is stripped before gzip).
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PWD/tests/node/node_modules/.bin:$PATH"   # npm binaryen 132 first
FEATURES=(--enable-bulk-memory --enable-nontrapping-float-to-int --enable-sign-ext
  --enable-mutable-globals --enable-reference-types --enable-multivalue)

gz() { printf '%8d bytes, %7d bytes gzip -9' "$(wc -c <"$1")" "$(gzip -9 -c "$1" | wc -c)"; }

if [ "${1:-}" = "--keep" ]; then
  in=$2; shift 2
  runtime=(memory __wbg_replaysession_free __wbg_trace_free __wbindgen_malloc __wbindgen_realloc
    __wbindgen_free __wbindgen_exn_store __externref_table_alloc __externref_table_dealloc
    __wbindgen_externrefs __wbindgen_start __abort_handler __instance_terminated)
  graph=$(mktemp --suffix .json); out=$(mktemp --suffix .wasm)
  printf '%s\n' "$@" "${runtime[@]}" | awk 'BEGIN{printf "["} NR>1{printf ","} {printf "{\"name\":\"e%d\",\"export\":\"%s\",\"root\":true}", NR, $0} END{print "]"}' >"$graph"
  wasm-metadce "${FEATURES[@]}" -f "$graph" "$in" -o "$out" >/dev/null
  wasm-opt -Oz "${FEATURES[@]}" --strip-debug --strip-producers "$out" -o "$out"
  echo "kept $*: $(gz "$out")"
  rm -f "$graph" "$out"
  exit 0
fi

args=(--no-default-features); flavour=lean
if [ "${1:-}" = "--full" ]; then args=(); flavour=full; shift; fi
dir=${1:-target/wasm-size}
mkdir -p "$dir"
cargo build -p kvscope-wasm --profile wasm-release --target wasm32-unknown-unknown --locked "${args[@]}"
wasm-bindgen --keep-debug --target web --out-dir "$dir/bg" "${CARGO_TARGET_DIR:-target}/wasm32-unknown-unknown/wasm-release/kvscope_wasm.wasm"
wasm-opt -Oz --converge --low-memory-unused -g "${FEATURES[@]}" "$dir/bg/kvscope_wasm_bg.wasm" -o "$dir/named.wasm"
wasm-opt -Oz --converge --low-memory-unused "${FEATURES[@]}" --strip-debug --strip-producers --strip-target-features "$dir/bg/kvscope_wasm_bg.wasm" -o "$dir/stripped.wasm"
echo "wasm-size: $flavour: $(gz "$dir/stripped.wasm")  (names kept: $dir/named.wasm)"
if command -v twiggy >/dev/null; then
  twiggy top -n 40 "$dir/named.wasm" | cut -c1-160
else
  echo "wasm-size: install twiggy (cargo install twiggy --locked) for the function list"
fi
