#!/usr/bin/env python3
"""One timed msgspec decode of a length-prefixed stream, for scripts/bench-decode.sh.

Input: [u32 little-endian length][msgpack KVEventBatch]... (`decode_anchor write` writes it as
stream.lp). Decodes every payload with `msgspec.msgpack.Decoder(KVEventBatch)` over vLLM's
struct definitions (vllm/distributed/kv_events.py, as transcribed in
tests/fixtures/wire/bench_msgspec.py), the way a ZMQ consumer receives them, and prints
`msgspec WALL_SECONDS CPU_SECONDS` (file read excluded; CPU = this thread's, `time.thread_time`).

  --keep   keep every decoded batch (as kvscope's read_trace keeps the whole trace), with
           Python's cyclic GC disabled while decoding (with it on, the growing number of
           tracked lists makes this ~10x slower); by default each batch is dropped once
           decoded, as a consumer that handles a batch and moves on.
"""
import gc
import importlib.util
import os
import struct
import sys
import time

import msgspec

HERE = os.path.dirname(os.path.abspath(__file__))
spec = importlib.util.spec_from_file_location(
    "bench_msgspec", os.path.join(HERE, "..", "tests", "fixtures", "wire", "bench_msgspec.py"))
schema = importlib.util.module_from_spec(spec)
spec.loader.exec_module(schema)


def main():
    args = sys.argv[1:]
    keep = "--keep" in args
    path = [a for a in args if a != "--keep"][0]
    data = open(path, "rb").read()
    payloads = []
    pos = 0
    while pos < len(data):
        (n,) = struct.unpack_from("<I", data, pos)
        payloads.append(data[pos + 4:pos + 4 + n])
        pos += 4 + n
    dec = msgspec.msgpack.Decoder(schema.KVEventBatch)
    events = 0
    if keep:
        gc.disable()
        t, c = time.perf_counter(), time.thread_time()
        out = [dec.decode(p) for p in payloads]
        secs, cpu = time.perf_counter() - t, time.thread_time() - c
        events = sum(len(b.events) for b in out)
    else:
        t, c = time.perf_counter(), time.thread_time()
        for p in payloads:
            events += len(dec.decode(p).events)
        secs, cpu = time.perf_counter() - t, time.thread_time() - c
    print(f"msgspec {secs:.3f} {cpu:.3f} ({events} events)")


if __name__ == "__main__":
    main()
