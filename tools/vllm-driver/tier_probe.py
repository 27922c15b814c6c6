"""Manager-level probe (no connector, no msgpack): drives vLLM's real tiering manager, CPU
primary (2 chunks) and FS tier through a cascade, an eviction, an FS existence check and an
evicting promotion, printing each step's lookup results and `take_events()` (medium, removed,
first key byte). Run: `VLLM_SRC=/tmp/vllm-0.34.0 python tier_probe.py` from this folder.
Its output for 0.34.0 is quoted in docs/vllm-offloading.md, facts 18-23."""
import os, sys; sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tiers
from vllm.v1.kv_offload.base import make_offload_key, LookupResult, ReqContext, ScheduleEndContext
mgr, fs, root = tiers.build_tiering_manager(2, 4, 1)
K = lambda i: make_offload_key(bytes([i])*32, 0)
ra, rb = ReqContext("a"), ReqContext("b")
def ev():
    return [(e.medium, e.removed, [k[0] for k in e.keys]) for e in mgr.take_events()]
def end(new=()):
    mgr.on_schedule_end(ScheduleEndContext(new, ()))
mgr.on_new_request(ra); mgr.on_new_request(rb)
# step 0: store a: keys 1,2
out = mgr.prepare_store([K(1), K(2)], ra); end(["a"])
mgr.complete_store(out.keys_to_store, ra)
print("s0", ev(), "pool", fs._pool.pending())
# step1: release job 0 from FS; lookup key 1 -> primary hit
print("s1 lookup K1", mgr.lookup(K(1), ra))
fs._pool.release(0)
end(); print("s1", ev())
# step2: store b keys 3,4 evicts 1,2 (after FS)
print("s2 lookup K1", mgr.lookup(K(1), ra))
out = mgr.prepare_store([K(3), K(4)], rb); print("prep", out and [k[0] for k in out.keys_to_store], out and [k[0] for k in out.evicted_keys] if hasattr(out,'evicted_keys') else out)
end(); mgr.complete_store(out.keys_to_store, rb); print("s2", ev())
rc = ReqContext("c"); mgr.on_new_request(rc)
print("s3 lookup K1 (not in CPU)", mgr.lookup(K(1), rc)); end(); print("s3", ev())
print("s4 lookup K1", mgr.lookup(K(1), rc)); end(); print("s4", ev(), fs._pool.pending())
fs._pool.release(1)
print("s5 lookup K1", mgr.lookup(K(1), rc), "K2", mgr.lookup(K(2), rc)); end(); print("s5", ev(), fs._pool.pending())
print("s6 lookup K1", mgr.lookup(K(1), rc)); print("pending", fs._pool.pending()); [fs._pool.release(j) for j in fs._pool.pending()]; end(); print("s6", ev())
print("s7 lookup K1", mgr.lookup(K(1), rc)); end(); print("s7", ev())
