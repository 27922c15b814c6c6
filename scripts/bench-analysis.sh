#!/usr/bin/env bash
# Issue 17's analysis-to-decode ratio: (decode + full analysis) / decode, on the anchor stream
# (scripts/bench-decode.sh's: 1M map-form events, 16 per batch, one GPU/CPU alternating parent
# chain; core/examples/decode_anchor.rs) and on the benchmark traces (--bench analysis's and
# --bench wire's, 1M events each; core/examples/analysis_ratio.rs writes them as msgpack).
#
#   scripts/bench-analysis.sh [DIR]     (ROUNDS=7, EVENTS=1000000, TRACES="stream bench-analysis
#                                        bench-wire" by default)
#
# Per trace, ROUNDS alternating rounds in one process (file read once, excluded): the streaming
# decoder alone, record by record as `kvscope check` reads; then the same with every record
# pushed into `analysis::Analyzer` with all models and rules, and `finish` (no report). Prints
# each round's wall and thread CPU seconds and the median per-round ratios. On a shared,
# loaded machine quote the CPU ratio: the wall time also counts other processes' turns.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:-${TMPDIR:-/tmp}/kvscope-bench-analysis}
rounds=${ROUNDS:-7}
events=${EVENTS:-1000000}
traces=${TRACES:-stream bench-analysis bench-wire}
mkdir -p "$dir"
cargo build --quiet --release -p kvscope-core --example decode_anchor --example analysis_ratio
bin=${CARGO_TARGET_DIR:-target}/release/examples
[ -s "$dir/stream.msgpack" ] || "$bin/decode_anchor" write "$dir" "$events"
[ -s "$dir/bench-wire.msgpack" ] || "$bin/analysis_ratio" write "$dir" "$events"
for t in $traces; do
    "$bin/analysis_ratio" "$dir/$t.msgpack" "$rounds"
done
