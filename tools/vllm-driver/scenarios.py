"""Issue 19's tiering scenarios, run through vLLM's real classes (`engine.Run`).

    VLLM_SRC=/tmp/vllm-0.28.0 python scenarios.py OUT_DIR            # both orders
    VLLM_SRC=/tmp/vllm-0.28.0 python scenarios.py OUT_DIR --order fixed --only NAME

Writes `<name>.<order>.msgpack` (concatenated `KVEventBatch` payloads, one per step that had
events) and `<name>.json` (inputs, vLLM version, per order the decoded batches with byte
offsets, the stream's sha256 and the driver's per-step log). `cpython` runs in a child
process with `PYTHONHASHSEED=0` (set order is CPython's for 36-byte keys under that seed).
"""
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile

import msgspec

import engine


# Each scenario: capacity, requests, then per step (schedule, FS jobs whose I/O finishes
# during that step's model run, in completion order). FS job ids are the tiering manager's
# own counter (cascades and promotions share it).


def fs_cascade_out_of_order(order):
    """CPU + FS cascade of three requests; the FS I/O finishes 2, 0 (step 2), then 1."""
    r = engine.Run(16, order=order)
    r.add_request("r0", range(1, 9))
    r.add_request("r1", range(101, 109))
    r.add_request("r2", range(201, 209))
    all3 = [("r0", 8), ("r1", 8), ("r2", 8)]
    r.step(all3)  # FS existence checks: all three RETRY, stay waiting
    r.step(all3)  # MISS: three store jobs, three cascades (FS jobs 0, 1, 2)
    r.step([], fs_release=[2, 0])  # reported by the next step's poll
    r.step([], fs_release=[1])
    r.step([])
    return r


def _preload(root, tokens, groups=1):
    """Another instance (its own run, same FS directory) stores `tokens` on the FS tier."""
    other = engine.Run(16, order="fixed", fs_root=root, groups=groups)
    other.add_request("r0", tokens)
    n = len(tokens)
    other.step([("r0", n)])  # FS existence check: RETRY
    other.step([("r0", n)])  # MISS: CPU store, cascade FS job 0
    other.step([], fs_release=[0])
    other.step([])  # STORAGE
    assert other.fs._pool.pending() == [] and len(other.batches) == 2, other.log


def fs_promotion_evicts(order):
    """Another instance wrote r0 = 1..8 to the FS directory. This instance's CPU holds 4
    chunks: r1 = 101..116 fills it (stored, cascaded, FS I/O done during step 2); r2 =
    1..8,301,302 finds r0's chunks on FS, and each promotion's `prepare_write([key])`
    evicts one of r1's chunks, least recently stored first (one CPU `BlockRemoved` per
    key; which ones depends on the store job's key order); the promotion's completion
    stores both chunks on CPU, then r2 loads them."""
    root = tempfile.mkdtemp(prefix="kvscope-fs-promote-")
    _preload(root, range(1, 9))
    r = engine.Run(4, order=order, fs_root=root, gpu_prefix_cache=False)
    r.add_request("r1", range(101, 117))
    r.add_request("r2", [*range(1, 9), 301, 302])
    r.step([("r1", 16)])  # RETRY
    r.step([("r1", 16)])  # store r1 (CPU), cascade FS job 0
    r.step([], fs_release=[0])  # FS job 0's I/O done, reported by the next poll
    for _ in range(6):  # r2: probe, promotions evicting r1 on CPU, then the load
        r.step([("r2", 10)], fs_release=r.fs._pool.pending())
    return r


def fs_preloaded(order):
    """Another instance wrote r0 = 1..8 to the FS directory; this instance's r1 = 1..16
    finds chunks 0, 1 on FS (promotion), then stores chunks 2, 3, whose STORAGE parent was
    never announced by this instance."""
    root = tempfile.mkdtemp(prefix="kvscope-fs-preload-")
    _preload(root, range(1, 9))
    r = engine.Run(16, order=order, fs_root=root)
    r.add_request("r1", range(1, 17))
    for _ in range(8):
        r.step([("r1", 16)], fs_release=r.fs._pool.pending())
    return r


def fs_next_step(order):
    """vLLM's real loop, where a worker reports a transfer job at the step after its creation
    (next-step completion), with the FS tier: the directory already holds 1..8 (another
    instance); CPU 6 chunks. r1 = 101..116 and r3 = 201..208 are stored (reported at step 2,
    so their cascades are created at step 2); the FS I/O finishes r3's cascade before r1's;
    r2 = 1..8,301..305 probes, promotes 1..8 from FS (evicting r1's chunks), loads them,
    then stores its third chunk (evicting again)."""
    root = tempfile.mkdtemp(prefix="kvscope-fs-next-")
    _preload(root, range(1, 9))
    r = engine.Run(6, order=order, fs_root=root, gpu_prefix_cache=False, next_step=True)
    r.add_request("r1", range(101, 117))
    r.add_request("r3", range(201, 209))
    r.add_request("r2", [*range(1, 9), *range(301, 306)])
    r.step([("r1", 16), ("r3", 8)])  # RETRY
    r.step([("r1", 16), ("r3", 8)])  # store jobs 0, 1 (reported at step 2)
    r.step([])  # CPU stored; cascades: tier jobs 0 (r1), 1 (r3)
    r.step([("r2", 13)], fs_release=[1, 0])  # r2 RETRY; FS I/O: r3's, then r1's
    for _ in range(8):
        r.step([("r2", 13)], fs_release=r.fs._pool.pending())
    return r


def fs_two_groups(order):
    """Two KV groups (full attention, same block size) with next-step completion and the FS
    tier: the directory holds 1..8 in both groups; CPU 8 chunks. r1 = 101..112 stores 3
    chunks per group (one job, 6 keys), cascaded to FS; r2 = 1..8,301..305 promotes 1..8 in
    both groups (the second group's promotions evict r1's chunks), loads, then stores its
    third chunk in both groups."""
    root = tempfile.mkdtemp(prefix="kvscope-fs-groups-")
    _preload(root, range(1, 9), groups=2)
    r = engine.Run(8, order=order, fs_root=root, gpu_prefix_cache=False, next_step=True, groups=2)
    r.add_request("r1", range(101, 113))
    r.add_request("r2", [*range(1, 9), *range(301, 306)])
    r.step([("r1", 12)])  # RETRY
    r.step([("r1", 12)])  # store job 0 (reported at step 2)
    r.step([])  # CPU stored; cascade tier job 0
    for _ in range(10):
        r.step([("r2", 13)], fs_release=r.fs._pool.pending())
    return r


def fs_two_workers(order):
    """The FS tier behind two workers, next-step completion: r0 = 1..8 (step 0, job 0) and
    r1 = 101..108 (step 2, job 1; it waited a step on the FS check). Worker 0 reports job 0
    at step 2, worker 1 only at step 3 with job 1, so the merged map of step 3 is [1, 0]:
    job 1's CPU events come first and its cascade (tier job 0) is submitted before job 0's
    (tier job 1); the FS I/O then finishes tier job 1 first."""
    r = engine.Run(16, order=order, next_step=True, workers=2, reports={0: {1: 3}})
    r.add_request("r0", range(1, 9))
    r.add_request("r1", range(101, 109))
    r.step([("r0", 8)])  # RETRY
    r.step([("r0", 8), ("r1", 8)])  # job 0 (r0); r1 RETRY
    r.step([("r1", 8)])  # job 1 (r1); worker 0 reports job 0, worker 1 not yet
    r.step([])  # worker 0 reports job 1, worker 1 reports {0, 1}: merged [1, 0]
    r.step([], fs_release=list(reversed(r.fs._pool.pending())))
    for _ in range(3):
        r.step([], fs_release=r.fs._pool.pending())
    return r


def two_workers_late_report(order):
    """CPU only, two workers. r0 = 1..8 (step 0, job 0), r1 = 101..108 (step 1, job 1).
    Worker 0 reports job 0 at step 0, worker 1 at step 1 with job 1: the merged map is
    {1: 2, 0: 1} (worker 0's ids first), so job 1's events come before job 0's."""
    r = engine.Run(16, order=order, fs=False, workers=2, reports={0: {1: 1}})
    r.add_request("r0", range(1, 9))
    r.add_request("r1", range(101, 109))
    r.step([("r0", 8)])
    r.step([("r1", 8)])
    r.step([])
    return r


SCENARIOS = {
    "fs_cascade_out_of_order": fs_cascade_out_of_order,
    "fs_promotion_evicts": fs_promotion_evicts,
    "fs_preloaded": fs_preloaded,
    "two_workers_late_report": two_workers_late_report,
    "fs_next_step": fs_next_step,
    "fs_two_groups": fs_two_groups,
    "fs_two_workers": fs_two_workers,
}


def vllm_version():
    """The version of the unzipped wheel (`vllm/_version.py`)."""
    ns = {}
    with open(os.path.join(os.environ["VLLM_SRC"], "vllm", "_version.py")) as f:
        exec(f.read(), ns)
    return ns["__version__"]


def _capacity(cpu):
    return getattr(cpu, "_num_chunks", None) or cpu._num_blocks  # 0.34.0 / 0.28.0


def run_one(name, order):
    r = SCENARIOS[name](order)
    if r.root:
        shutil.rmtree(r.root, ignore_errors=True)  # the FS tier's directory (temporary)
    stream = b"".join(p for _, p in r.batches)
    batches, off = [], 0
    for step, p in r.batches:
        ts, events, rank = msgspec.msgpack.decode(p)
        batches.append(
            {"step": step, "offset": off, "length": len(p), "ts": ts,
             "data_parallel_rank": rank, "events": events}
        )
        off += len(p)
    log = [list(x) for x in r.log]
    inputs = {
        "block_size": r.block_size,
        "blocks_per_chunk": r.sched.config.blocks_per_chunk,
        "capacity_chunks": _capacity(getattr(r.manager, "primary_tier", r.manager)),
        "workers": r.workers,
        "next_step": r.next_step,
        "groups": r.groups,
        "reports": {str(j): {str(w): at for w, at in ws.items()} for j, ws in r.reports.items()},
        "requests": {rid: {"tokens": list(q.prompt_token_ids)} for rid, q in r.reqs.items()},
    }
    return stream, {"inputs": inputs, "batches": batches,
                    "sha256": hashlib.sha256(stream).hexdigest(), "log": log}


def main():
    out = sys.argv[1]
    args = sys.argv[2:]
    if "--order" in args:
        order = args[args.index("--order") + 1]
        name = args[args.index("--only") + 1]
        stream, info = run_one(name, order)
        with open(os.path.join(out, f"{name}.{order}.msgpack"), "wb") as f:
            f.write(stream)
        # vLLM's logger also writes to stdout (e.g. the tracker's placeholder warning): the
        # result is the last line
        sys.stdout.write("\n" + json.dumps(info, default=repr) + "\n")
        return
    os.makedirs(out, exist_ok=True)
    for name, fn in SCENARIOS.items():
        doc = {"name": name, "what": fn.__doc__, "vllm_version": vllm_version(), "modes": {}}
        for order, seed in (("fixed", "0"), ("cpython", "0")):
            env = dict(os.environ, PYTHONHASHSEED=seed)
            res = subprocess.run(
                [sys.executable, __file__, out, "--order", order, "--only", name],
                env=env, capture_output=True, text=True, check=False,
            )
            if res.returncode != 0:
                sys.exit(f"{name} {order}: {res.stderr}")
            doc["modes"][order] = json.loads(res.stdout.splitlines()[-1])
        with open(os.path.join(out, f"{name}.json"), "w") as f:
            json.dump(doc, f, indent=1)
        print(name, {o: m["sha256"][:12] for o, m in doc["modes"].items()})


if __name__ == "__main__":
    main()
