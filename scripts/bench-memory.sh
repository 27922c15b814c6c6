#!/usr/bin/env bash
# Peak resident memory of `kvscope check` (release build) on three traces, with
# /usr/bin/time -v (docs/performance.md, "check memory"):
#
#   anchor   the anchor stream of scripts/bench-decode.sh (1M map-form events, 16 per batch;
#            core/examples/decode_anchor.rs), where Dynamo orphans every GPU event;
#   churn    a generated trace with LRU churn (a CPU tier of 64 chunks and 8,000 * SCALE
#            requests; `kvscope generate` holds it in memory, `check` streams it): about 1M
#            events at SCALE=1 (the default), 10M at SCALE=10;
#   orphans  ORPHANS one-event batches whose parents are never stored (every event an orphan
#            for every strict router; core/examples/orphans.rs).
#
# Then `kvscope diff` of the anchor stream against itself (every event aligned) and against the
# churn trace (none aligned), with their peak and time against the anchor's `check` in the same
# run (diff streams both traces one after the other: about one check's peak plus the first
# trace's compact side, and the time of two checks).
#
#   scripts/bench-memory.sh [DIR]      (SCALE=1, ORPHANS=2000000 by default)
#
# Prints, per trace: events, peak RSS (MB), wall seconds, events per second. Needs GNU time.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:-${TMPDIR:-/tmp}/kvscope-bench-memory}
scale=${SCALE:-1}
orphans=${ORPHANS:-2000000}
mkdir -p "$dir"
cargo build --quiet --release -p kvscope-cli
cargo build --quiet --release -p kvscope-core --example decode_anchor --example orphans
target=${CARGO_TARGET_DIR:-target}/release
kv=$target/kvscope
[ -s "$dir/stream.msgpack" ] || "$target/examples/decode_anchor" write "$dir" >/dev/null
[ -s "$dir/orphans.msgpack" ] || "$target/examples/orphans" "$dir/orphans.msgpack" "$orphans" >/dev/null

# The churn scenario: one engine, requests of 1,024 distinct tokens (64 blocks of 16) arriving
# one after the other, one block per engine step, a CPU tier of 64 chunks (every block is
# stored, then evicted): about 128 events per request, 8,000 requests per 1M events. A
# scenario holds at most 2^22 blocks, so SCALE=10 concatenates two 40,000-request scenarios
# (seeds 1 and 2; a msgpack stream is its batches end to end).
churn=$dir/churn-$scale.msgpack
if [ ! -s "$churn" ]; then
    parts=()
    left=$((8000 * scale))
    seed=1
    while [ "$left" -gt 0 ]; do
        n=$((left < 40000 ? left : 40000))
        python3 - "$dir/churn-$scale-$seed.json" "$n" "$seed" <<'PY'
import json, sys
path, n, seed = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
json.dump({
    "name": "churn", "seed": seed, "block_size": 16,
    "cpu": {"capacity_chunks": 64},
    "scheduler": {"max_num_batched_tokens": 16, "max_num_seqs": 64},
    "max_steps": 4000000,
    "requests": [{"id": f"r{i}", "prompt_len": 1024, "arrival_step": i * 64}
                 for i in range(n)],
}, open(path, "w"))
PY
        "$kv" generate "$dir/churn-$scale-$seed.json" --format msgpack -o "$dir/churn-$scale-$seed.msgpack"
        parts+=("$dir/churn-$scale-$seed.msgpack")
        left=$((left - n))
        seed=$((seed + 1))
    done
    cat "${parts[@]}" >"$churn"
    rm -f "${parts[@]}"
fi

measure() {
    local name=$1 file=$2 log
    log=$(mktemp)
    /usr/bin/time -v "$kv" check --max-findings 0 "$file" >"$log.out" 2>"$log" || true
    local events rss wall
    # The report's first line: "...: 1,000,000 events, ..." (thousands grouped).
    events=$(head -1 "$log.out" | sed -E 's/.*: ([0-9,]+) events?.*/\1/' | tr -d ,)
    rss=$(awk -F: '/Maximum resident/ {print int($2 / 1024)}' "$log")
    wall=$(awk '/Elapsed \(wall clock\)/ {n = split($NF, t, ":"); s = 0; for (i = 1; i <= n; i++) s = s * 60 + t[i]; print s}' "$log")
    python3 -c "import sys; e, r, w = int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4]); print(f'{sys.argv[1]:8} {e:>9} events  peak {r:>5} MB  {w:6.1f} s  {e / w / 1e3:7.0f}k events/s')" "$name" "$events" "$rss" "$wall"
    rm -f "$log" "$log.out"
    last_rss=$rss last_wall=$wall
}

# `kvscope diff A B`: peak and wall against one `check` of the anchor stream (check_rss,
# check_wall) measured just before.
measure_diff() {
    local name=$1 a=$2 b=$3 log
    log=$(mktemp)
    /usr/bin/time -v "$kv" diff "$a" "$b" >/dev/null 2>"$log" || true
    local rss wall
    rss=$(awk -F: '/Maximum resident/ {print int($2 / 1024)}' "$log")
    wall=$(awk '/Elapsed \(wall clock\)/ {n = split($NF, t, ":"); s = 0; for (i = 1; i <= n; i++) s = s * 60 + t[i]; print s}' "$log")
    python3 -c "import sys; r, w, cr, cw = int(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5]); print(f'{sys.argv[1]:18} peak {r:>5} MB ({r / cr:.2f}x check anchor)  {w:6.1f} s ({w / (2 * cw):.2f}x two checks)')" "$name" "$rss" "$wall" "$check_rss" "$check_wall"
    rm -f "$log"
}

measure anchor "$dir/stream.msgpack"
check_rss=$last_rss check_wall=$last_wall
measure churn "$churn"
measure orphans "$dir/orphans.msgpack"
measure_diff "diff anchor" "$dir/stream.msgpack" "$dir/stream.msgpack"
measure_diff "diff anchor churn" "$dir/stream.msgpack" "$churn"
