#!/usr/bin/env bash
# What `kvscope check` says on each shape of issue 14 (dev helper, not part of the tests; the
# table in docs/rules.md, "Measured on each shape", is its output):
#
#   scripts/rules-shapes.sh [KVSCOPE_BIN]     (default: target/debug/kvscope)
#
# Each shape is made by `kvscope generate` from the scenarios in tests/fixtures/agreement/:
# `msgpack` streams carry no provenance (what a capture of vLLM gives); "gpu" sets the
# scenario's `gpu_events`; "provenance" keeps it (JSON Lines). Needs python3.
set -uo pipefail
cd "$(dirname "$0")/../tests/fixtures/agreement"
K=$(realpath "${1:-../../../target/debug/kvscope}")
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
summary() {
  python3 -c '
import collections, json, sys
r = json.load(sys.stdin)
c = collections.Counter(
    "%s %s (%s)" % (f.get("class"), f["level"], f.get("evidence"))
    for f in r["findings"] if f["rule"] != "consumer-loss")
print(", ".join("%d %s" % (n, k) for k, n in sorted(c.items())) or "none")'
}
row() { # name scenario order evidence(none|gpu|provenance) workers
  local name=$1 sc=$2 order=$3 ev=$4 w=$5 f
  case $ev in
    none) f=$out/t.msgpack; "$K" generate "$sc" --order "$order" --format msgpack -o "$f" ;;
    gpu) python3 -c 'import json,sys; s=json.load(open(sys.argv[1])); s["gpu_events"]=True; print(json.dumps(s))' \
           "$sc" >"$out/gpu.json"
         f=$out/t.msgpack; "$K" generate "$out/gpu.json" --order "$order" --format msgpack -o "$f" ;;
    provenance) f=$out/t.jsonl; "$K" generate "$sc" --order "$order" -o "$f" ;;
  esac
  local json code
  json=$("$K" check --json --max-findings all --workers "$w" "$f"); code=$?
  echo "| $name | $order | $ev | $w | $(summary <<<"$json") | $code |"
}
echo "| shape | order | in the capture | --workers | child-before-parent findings: count, class, level (evidence) | exit |"
echo "|---|---|---|---|---|---|"
for ev in none gpu provenance; do
  for o in fixed cpython; do row "two groups" two-groups.json "$o" $ev 1; done
done
for ev in none gpu provenance; do
  for o in fixed cpython; do for w in 1 2; do row "two jobs, two workers" two-jobs.json "$o" $ev $w; done; done
done
for ev in none gpu provenance; do
  for o in fixed cpython; do for w in 1 2; do row "one job of 8 chunks" one-job.json "$o" $ev $w; done; done
done
for o in fixed cpython; do row "one job, CPU + file tier" cascade-one-job.json "$o" none 1; done
for o in fixed cpython; do row "two jobs, CPU + file tier" cascade-two-jobs.json "$o" none 1; done
