#!/usr/bin/env bash
# Issue 17's analysis-to-decode ratio: (decode + full analysis) / decode, on the anchor stream
# (scripts/bench-decode.sh's: 1M map-form events, 16 per batch, one GPU/CPU alternating parent
# chain; core/examples/decode_anchor.rs) and on the benchmark traces (--bench analysis's and
# --bench wire's, 1M events each; core/examples/analysis_ratio.rs writes them as msgpack).
#
#   scripts/bench-analysis.sh [DIR]     (ROUNDS=7, EVENTS=1000000, TRACES="stream bench-analysis
#                                        bench-wire" by default)
#   BEFORE=/path/to/old/analysis_ratio scripts/bench-analysis.sh [DIR]
#       before/after: per trace, ROUNDS alternating runs of the old build's analysis_ratio and
#       this one's (one round each per run), then both builds' median CPU and wall ratios.
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
if [ -z "${BEFORE:-}" ]; then
    for t in $traces; do
        "$bin/analysis_ratio" "$dir/$t.msgpack" "$rounds"
    done
    exit 0
fi
# One "round" line per run: decode wall, decode + analysis wall, decode CPU, decode + analysis
# CPU; the medians of the per-round ratios per build.
round() { "$1" "$2" 1 | sed -nE 's/^round 1: decode ([0-9.]+) s \(cpu ([0-9.]+)\), decode \+ analysis ([0-9.]+) s \(cpu ([0-9.]+)\).*/\1 \3 \2 \4/p'; }
for t in $traces; do
    f=$dir/$t.msgpack
    for i in $(seq "$rounds"); do
        echo "before $(round "$BEFORE" "$f")"
        echo "after $(round "$bin/analysis_ratio" "$f")"
    done | awk -v t="$t" '
        function median(s,   a, n, i, j, x) {
            n = split(s, a, " ")
            for (i = 2; i <= n; i++) { x = a[i]; for (j = i - 1; j > 0 && a[j] > x; j--) a[j + 1] = a[j]; a[j + 1] = x }
            return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
        }
        { print t ": " $0; w[$1] = w[$1] " " $3 / $2; c[$1] = c[$1] " " $5 / $4; a[$1] = a[$1] " " $5 - $4 }
        END {
            for (k in w) printf "%s %s: (decode + analysis) / decode, median: cpu %.2f, wall %.2f; analysis cpu %.3f s\n", t, k, median(c[k]), median(w[k]), median(a[k])
        }'
done
