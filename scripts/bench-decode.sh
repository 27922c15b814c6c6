#!/usr/bin/env bash
# kvscope's msgpack decode (`wire::read_trace`) side by side with msgspec, vLLM's own decoder,
# on the anchor stream of docs/performance.md (1M map-form events, 16 per batch).
#
#   scripts/bench-decode.sh [DIR]     (ROUNDS=7, EVENTS=1000000 by default)
#
# Builds core/examples/decode_anchor.rs (release), writes DIR/stream.msgpack and DIR/stream.lp
# with it, then runs ROUNDS alternating rounds of: kvscope's decode, msgspec dropping each
# batch, msgspec keeping every batch with Python's GC off (one process each; file read
# excluded from every time).
# Prints each round and the medians; the ratios are speeds (msgspec time / kvscope time), so
# above 1 means kvscope is faster. Needs python3 with msgspec.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:-${TMPDIR:-/tmp}/kvscope-bench-decode}
rounds=${ROUNDS:-7}
events=${EVENTS:-1000000}
mkdir -p "$dir"
cargo build --quiet --release -p kvscope-core --example decode_anchor
bin=${CARGO_TARGET_DIR:-target}/release/examples/decode_anchor
"$bin" write "$dir" "$events"
python3 -c 'import msgspec; print("msgspec", msgspec.__version__)'
results=$(mktemp)
trap 'rm -f "$results"' EXIT
for i in $(seq "$rounds"); do
    k=$("$bin" time "$dir/stream.msgpack" | awk '{print $2}')
    d=$(python3 scripts/bench_decode_msgspec.py "$dir/stream.lp" | awk '{print $2}')
    a=$(python3 scripts/bench_decode_msgspec.py --keep "$dir/stream.lp" | awk '{print $2}')
    echo "round $i: kvscope $k s, msgspec $d s (batches dropped), $a s (batches kept)"
    echo "$k $d $a" >>"$results"
done
python3 - "$results" <<'PY'
import statistics, sys
rows = [list(map(float, l.split())) for l in open(sys.argv[1])]
k, d, a = (statistics.median(c) for c in zip(*rows))
rd = statistics.median(r[1] / r[0] for r in rows)
ra = statistics.median(r[2] / r[0] for r in rows)
print(f"median: kvscope {k:.3f} s, msgspec {d:.3f} s dropped / {a:.3f} s kept")
print(f"kvscope speed / msgspec speed, median of per-round ratios: {rd:.2f}x "
      f"(batches dropped), {ra:.2f}x (batches kept)")
PY
