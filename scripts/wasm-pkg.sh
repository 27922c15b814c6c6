#!/usr/bin/env bash
# Builds the npm package (wasm/) for Node and the web, full (with the simulator) and lean
# (--no-default-features: no simulator), then prints each wasm's raw and gzip size and fails
# if the lean one is over its budget.
# Output: wasm/pkg-node, wasm/pkg-web (full), wasm/pkg-node-lean, wasm/pkg-web-lean.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PWD/tests/node/node_modules/.bin:$PATH"   # npm binaryen 132's wasm-opt first
if [ "$(wasm-opt --version 2>/dev/null)" != "wasm-opt version 132 (version_132)" ]; then
  echo "wasm-pkg: npm binaryen 132 missing; run scripts/install-tools.sh" >&2
  exit 1
fi

build() { # target out-dir [cargo args...]
  local target=$1 out=$2; shift 2
  wasm-pack --log-level warn build wasm --profile wasm-release --target "$target" --out-dir "$out" -- --locked "$@"
}
build nodejs pkg-node
build web pkg-web
build nodejs pkg-node-lean --no-default-features
build web pkg-web-lean --no-default-features

for d in pkg-web pkg-web-lean; do
  f=wasm/$d/kvscope_wasm_bg.wasm
  printf 'wasm-pkg: %-28s %8d bytes, %7d bytes gzip -9\n' "$f" "$(wc -c <"$f")" "$(gzip -9 -c "$f" | wc -c)"
done

# The lean package's size budget, 130 KiB = 133,120 B gzip -9 (wasm/README.md, "Size"): a regression
# gate, not a goal. A change that links something big again (a float parser, serde, a Unicode
# case table) fails here, not in a release.
budget=133120
lean=$(gzip -9 -c wasm/pkg-web-lean/kvscope_wasm_bg.wasm | wc -c)
if [ "$lean" -gt "$budget" ]; then
  echo "wasm-pkg: the lean wasm is $lean bytes gzip -9, over its $budget-byte budget" >&2
  echo "wasm-pkg: scripts/wasm-size.sh shows where the bytes go" >&2
  exit 1
fi
echo "wasm-pkg: lean wasm within its $budget-byte gzip budget ($((budget - lean)) bytes to spare)"
