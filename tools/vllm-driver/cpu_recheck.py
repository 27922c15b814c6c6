"""Re-run the CPU-only golden scenarios of `tests/fixtures/vllm/*.json` (made with vLLM
0.28.0) on the vLLM of `$VLLM_SRC` (`engine.Run(fs=False)`) and compare the decoded events,
step by step, in both orders (`cpython` under `PYTHONHASHSEED=0`, run this script with it).

    PYTHONHASHSEED=0 VLLM_SRC=/tmp/vllm-0.34.0 python cpu_recheck.py ../../tests/fixtures/vllm
"""
import glob
import json
import os
import sys

import msgspec

import engine


def rerun(doc, order):
    inp = doc["inputs"]
    r = engine.Run(
        inp["cpu_capacity_chunks"],
        block_size=inp["block_size"],
        blocks_per_chunk=inp["blocks_per_chunk"],
        order=order,
        fs=False,
    )
    for rid, q in inp["requests"].items():
        assert q.get("lora_name") is None, "LoRA not driven"
        r.add_request(rid, q["tokens"])
    for st in inp["steps"]:
        assert st["step"] == r.step_no
        sched = []
        for s in st["schedule"]:
            n = s["num_scheduled_tokens"] + (s["gpu_prefix_hit_tokens"] if s["new"] else 0)
            sched.append((s["req"], n))
        r.step(sched)
    return [(st, msgspec.msgpack.decode(p)) for st, p in r.batches]


def main():
    order = sys.argv[2] if len(sys.argv) > 2 else "fixed"
    mode = {"fixed": "fixed", "cpython": "legacy"}[order]
    same = 0
    for path in sorted(glob.glob(os.path.join(sys.argv[1], "*.json"))):
        doc = json.load(open(path))
        if any(q.get("lora_name") for q in doc["inputs"]["requests"].values()):
            print(doc["name"], "skipped (LoRA)")
            continue
        ours = rerun(doc, order)
        theirs = [(b["step"], [b["ts"], b["events"], b["data_parallel_rank"]])
                  for b in doc[mode]["batches"]]
        ok = [(s, list(b)) for s, b in ours] == [(s, list(b)) for s, b in theirs]
        same += ok
        print(doc["name"], "same events" if ok else "DIFFERENT")
        if not ok:
            for label, run in (("ours", ours), ("0.28", theirs)):
                print(f"  {label}:", [(s, [(e["type"][5:], [h % 1000 for h in e["block_hashes"]])
                                           for e in b[1]]) for s, b in run])
    print(same, "same")


if __name__ == "__main__":
    main()
