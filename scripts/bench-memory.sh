#!/usr/bin/env bash
# Peak resident memory of `kvscope check` (release build) on three traces, with
# /usr/bin/time -v (docs/performance.md, "check memory"):
#
#   anchor   the anchor stream of scripts/bench-decode.sh (1M map-form events, 16 per batch;
#            core/examples/decode_anchor.rs), where Dynamo orphans every GPU event;
#   churn    a generated trace with LRU churn (a CPU tier of CHURN_CPU chunks, CHURN_REQUESTS
#            requests; `kvscope generate` holds it in memory, `check` streams it), at the
#            default size about 1M events, and with SCALE=10 ten times as many requests;
#   orphans  ORPHANS one-event batches whose parents are never stored (every event an orphan
#            for every strict router; core/examples/orphans.rs).
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

# The churn scenario: CHURN_REQUESTS requests of 4 distinct 16-token blocks, one block per
# engine step, each chunk one block, a CPU tier far smaller than the working set.
churn_requests=${CHURN_REQUESTS:-$((6000 * scale))}
churn=$dir/churn-$churn_requests.msgpack
if [ ! -s "$churn" ]; then
    python3 - "$dir/churn-$churn_requests.json" "$churn_requests" <<'PY'
import json, sys
path, n = sys.argv[1], int(sys.argv[2])
json.dump({
    "name": "churn", "seed": 1, "block_size": 16,
    "cpu": {"capacity_chunks": 64},
    "engines": [{"source": f"pod-{p}", "dp_rank": 0} for p in range(8)],
    "scheduler": {"max_num_batched_tokens": 64, "max_num_seqs": 64},
    "requests": [{"id": f"r{i}", "prompt_len": 64, "arrival_step": i // 8}
                 for i in range(n)],
}, open(path, "w"))
PY
    "$kv" generate "$dir/churn-$churn_requests.json" --format msgpack -o "$churn"
fi

measure() {
    local name=$1 file=$2 log
    log=$(mktemp)
    /usr/bin/time -v "$kv" check --max-findings 0 "$file" >"$log.out" 2>"$log" || true
    local events rss wall
    events=$(head -1 "$log.out" | sed -E 's/.*: ([0-9]+) events.*/\1/')
    rss=$(awk -F: '/Maximum resident/ {print int($2 / 1024)}' "$log")
    wall=$(awk '/Elapsed \(wall clock\)/ {n = split($NF, t, ":"); s = 0; for (i = 1; i <= n; i++) s = s * 60 + t[i]; print s}' "$log")
    python3 -c "import sys; e, r, w = int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4]); print(f'{sys.argv[1]:8} {e:>9} events  peak {r:>5} MB  {w:6.1f} s  {e / w / 1e3:7.0f}k events/s')" "$name" "$events" "$rss" "$wall"
    rm -f "$log" "$log.out"
}

measure anchor "$dir/stream.msgpack"
measure churn "$churn"
measure orphans "$dir/orphans.msgpack"
