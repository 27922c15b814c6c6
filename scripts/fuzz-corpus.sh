#!/usr/bin/env bash
# Rebuild the fuzz targets' seed corpus under fuzz/corpus/<target>/ (docs/fuzzing.md) from the
# test fixtures and from traces `kvscope generate` makes of every built-in scenario. Files over
# 16 KiB are left out (a fuzzer mutates small inputs best, and the corpus is committed).
#
#   scripts/fuzz-corpus.sh [KVSCOPE]     KVSCOPE: the kvscope binary (default: cargo run)
set -euo pipefail
cd "$(dirname "$0")/.."
kvscope=${1:-}
if [ -z "$kvscope" ]; then
  cargo build -q -p kvscope-cli
  kvscope="${CARGO_TARGET_DIR:-target}/debug/kvscope"
fi
max=16384
rm -rf fuzz/corpus && mkdir -p fuzz/corpus/{decode,round_trip,analysis_replay,scenario_simulate}

# put TARGET... -- FILE NAME: copy FILE as NAME into each target's corpus when small enough
put() {
  local targets=() ; while [ "$1" != -- ]; do targets+=("$1"); shift; done; shift
  local file=$1 name=$2
  [ "$(wc -c <"$file")" -le $max ] || return 0
  for t in "${targets[@]}"; do cp "$file" "fuzz/corpus/$t/$name"; done
}

# Traces: every msgpack and JSON Lines fixture (the refused ones too: their errors are checked).
while IFS= read -r f; do
  name=$(echo "${f#tests/fixtures/}" | tr / -)
  put decode round_trip analysis_replay -- "$f" "$name"
done < <(find tests/fixtures web/fixtures tests/e2e/fixtures -type f \( -name '*.msgpack' -o -name '*.jsonl' \) | sort)

# Generated traces: each built-in, in JSON Lines and msgpack, fixed and cpython order.
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
for s in scenarios/*.json; do
  b=$(basename "$s" .json)
  for order in fixed cpython; do
    "$kvscope" generate "$b" --order "$order" -o "$tmp/$b.$order.jsonl"
    "$kvscope" generate "$b" --order "$order" --format msgpack -o "$tmp/$b.$order.msgpack"
    put decode round_trip analysis_replay -- "$tmp/$b.$order.jsonl" "gen-$b.$order.jsonl"
    put decode round_trip analysis_replay -- "$tmp/$b.$order.msgpack" "gen-$b.$order.msgpack"
  done
done

# Scenarios: the built-ins, the hostile ones, and the hand-written mirrors of vLLM's streams.
while IFS= read -r f; do
  name=$(echo "$f" | sed 's|^tests/fixtures/||' | tr / -)
  put scenario_simulate -- "$f" "$name"
done < <(find scenarios tests/fixtures/scenarios tests/fixtures/vllm/kvscope tests/fixtures/vllm/tiering/kvscope \
  -maxdepth 1 -type f -name '*.json' | sort)

for t in fuzz/corpus/*/; do echo "$t: $(ls "$t" | wc -l) files, $(du -sk "$t" | cut -f1) KiB"; done
