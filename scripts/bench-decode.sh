#!/usr/bin/env bash
# kvscope's msgpack decode side by side with msgspec, vLLM's own decoder, on the anchor stream of
# docs/performance.md (1M map-form events, 16 per batch) and on the wire benchmark's trace
# (`cargo bench --bench wire`'s: a chain per 64-block request, every 4th event on CPU).
#
#   scripts/bench-decode.sh [DIR]     (ROUNDS=7, EVENTS=1000000, SHAPES="anchor bench")
#
# Builds core/examples/decode_anchor.rs (release), writes DIR/SHAPE/stream.msgpack and
# DIR/SHAPE/stream.lp with it, then, per shape, runs ROUNDS alternating rounds of four programs
# (one process each; file read excluded from every time):
#   * kvscope streaming: `wire::stream` batch by batch, each batch dropped once decoded (what
#     `kvscope check` and `verdicts` do);
#   * msgspec dropping each batch once decoded (the same work);
#   * kvscope `wire::read_trace`, keeping the whole trace;
#   * msgspec keeping every batch, with Python's GC off (the same work).
# BEFORE=PATH also times another build of the decode_anchor example (e.g. main's) in each round:
# its streaming run when it has one, else its read_trace run.
# Prints each round and the medians; the ratios are speeds (msgspec time / kvscope time), so
# above 1 means kvscope is faster. Each is given for wall time and for the decoding thread's
# CPU time (on a shared, loaded machine the wall time also counts other processes' turns).
# Needs python3 with msgspec.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:-${TMPDIR:-/tmp}/kvscope-bench-decode}
rounds=${ROUNDS:-7}
events=${EVENTS:-1000000}
shapes=${SHAPES:-anchor bench}
cargo build --quiet --release -p kvscope-core --example decode_anchor
bin=${CARGO_TARGET_DIR:-target}/release/examples/decode_anchor
python3 -c 'import msgspec; print("msgspec", msgspec.__version__)'
echo "load: $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) cores"
before_mode=time
if [ -n "${BEFORE:-}" ] && { "$BEFORE" 2>&1 || true; } | grep -q "stream FILE"; then
    before_mode=stream
fi
results=$(mktemp)
trap 'rm -f "$results"' EXIT
for shape in $shapes; do
    mkdir -p "$dir/$shape"
    "$bin" write "$dir/$shape" "$events" "$shape"
    : >"$results"
    for i in $(seq "$rounds"); do
        read -r sw sc < <("$bin" stream "$dir/$shape/stream.msgpack" | awk '{print $2, $3}')
        read -r dw dc < <(python3 scripts/bench_decode_msgspec.py "$dir/$shape/stream.lp" |
            awk '{print $2, $3}')
        read -r kw kc < <("$bin" time "$dir/$shape/stream.msgpack" | awk '{print $2, $3}')
        read -r aw ac < <(python3 scripts/bench_decode_msgspec.py --keep "$dir/$shape/stream.lp" |
            awk '{print $2, $3}')
        bw=0
        if [ -n "${BEFORE:-}" ]; then
            bw=$("$BEFORE" "$before_mode" "$dir/$shape/stream.msgpack" | awk '{print $2}')
        fi
        echo "$shape round $i: dropped: kvscope $sw s (cpu $sc), msgspec $dw s (cpu $dc);" \
            "kept: kvscope $kw s (cpu $kc), msgspec $aw s (cpu $ac)${BEFORE:+; before ($before_mode): $bw s}"
        echo "$sw $sc $dw $dc $kw $kc $aw $ac $bw" >>"$results"
    done
    python3 - "$results" "$shape" "$before_mode" <<'PY'
import statistics, sys
rows = [list(map(float, l.split())) for l in open(sys.argv[1])]
shape, before_mode = sys.argv[2], sys.argv[3]
med = lambda f: statistics.median(f(r) for r in rows)
print(f"{shape}: medians of {len(rows)} rounds")
print(f"  batches dropped, wall: kvscope {med(lambda r: r[0]):.3f} s, msgspec {med(lambda r: r[2]):.3f} s;"
      f" cpu: kvscope {med(lambda r: r[1]):.3f} s, msgspec {med(lambda r: r[3]):.3f} s")
print(f"  batches kept,    wall: kvscope {med(lambda r: r[4]):.3f} s, msgspec {med(lambda r: r[6]):.3f} s;"
      f" cpu: kvscope {med(lambda r: r[5]):.3f} s, msgspec {med(lambda r: r[7]):.3f} s")
print("  kvscope speed / msgspec speed, median of per-round ratios:")
print(f"    batches dropped (wire::stream): wall {med(lambda r: r[2] / r[0]):.2f}x, "
      f"cpu {med(lambda r: r[3] / r[1]):.2f}x")
print(f"    batches kept (read_trace):      wall {med(lambda r: r[6] / r[4]):.2f}x, "
      f"cpu {med(lambda r: r[7] / r[5]):.2f}x")
if rows[0][8] > 0:
    now = 0 if before_mode == "stream" else 4
    print(f"  before (BEFORE build, {before_mode}): after / before wall time "
          f"{med(lambda r: r[now] / r[8]):.2f}")
PY
done
