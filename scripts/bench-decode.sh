#!/usr/bin/env bash
# kvscope's msgpack decode (`wire::read_trace`) side by side with msgspec, vLLM's own decoder,
# on the anchor stream of docs/performance.md (1M map-form events, 16 per batch).
#
#   scripts/bench-decode.sh [DIR]     (ROUNDS=7, EVENTS=1000000 by default)
#
# Builds core/examples/decode_anchor.rs (release), writes DIR/stream.msgpack and DIR/stream.lp
# with it, then runs ROUNDS alternating rounds of: kvscope's decode, msgspec dropping each
# batch, msgspec keeping every batch with Python's GC off (one process each; file read
# excluded from every time). BEFORE=PATH also times another build of the decode_anchor example
# (e.g. main's) in each round, for a before/after figure from the same run.
# Prints each round and the medians; the ratios are speeds (msgspec time / kvscope time), so
# above 1 means kvscope is faster. Each is given for wall time and for the decoding thread's
# CPU time (on a shared, loaded machine the wall time also counts other processes' turns).
# Needs python3 with msgspec.
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
    read -r kw kc < <("$bin" time "$dir/stream.msgpack" | awk '{print $2, $3}')
    read -r dw dc < <(python3 scripts/bench_decode_msgspec.py "$dir/stream.lp" | awk '{print $2, $3}')
    read -r aw ac < <(python3 scripts/bench_decode_msgspec.py --keep "$dir/stream.lp" | awk '{print $2, $3}')
    bw=0
    if [ -n "${BEFORE:-}" ]; then
        bw=$("$BEFORE" time "$dir/stream.msgpack" | awk '{print $2}')
    fi
    echo "round $i: kvscope $kw s (cpu $kc), msgspec $dw s (cpu $dc) batches dropped," \
        "$aw s (cpu $ac) batches kept${BEFORE:+, before: kvscope $bw s}"
    echo "$kw $kc $dw $dc $aw $ac $bw" >>"$results"
done
python3 - "$results" <<'PY'
import statistics, sys
rows = [list(map(float, l.split())) for l in open(sys.argv[1])]
med = lambda f: statistics.median(f(r) for r in rows)
print(f"median wall: kvscope {med(lambda r: r[0]):.3f} s, msgspec {med(lambda r: r[2]):.3f} s "
      f"dropped / {med(lambda r: r[4]):.3f} s kept")
print(f"median cpu:  kvscope {med(lambda r: r[1]):.3f} s, msgspec {med(lambda r: r[3]):.3f} s "
      f"dropped / {med(lambda r: r[5]):.3f} s kept")
print("kvscope speed / msgspec speed, median of per-round ratios:")
print(f"  wall: {med(lambda r: r[2] / r[0]):.2f}x (batches dropped), "
      f"{med(lambda r: r[4] / r[0]):.2f}x (batches kept)")
print(f"  cpu:  {med(lambda r: r[3] / r[1]):.2f}x (batches dropped), "
      f"{med(lambda r: r[5] / r[1]):.2f}x (batches kept)")
if rows[0][6] > 0:
    print(f"before (BEFORE build), wall: {med(lambda r: r[2] / r[6]):.2f}x msgspec (batches dropped); "
          f"after / before time: {med(lambda r: r[0] / r[6]):.2f}")
PY
