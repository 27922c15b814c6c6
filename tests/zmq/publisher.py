#!/usr/bin/env python3
"""A KV-event publisher speaking vLLM's ZMQ protocol, for kvscope capture tests.

Mirrors `ZmqEventPublisher` in vllm/distributed/kv_events.py (the protocol as kvscope relies
on it, with its upstream sources, is in docs/capture.md):

- live: PUB-side socket bound on 127.0.0.1, 3 frames (topic, seq as 8-byte big-endian
  unsigned, msgspec-msgpack `KVEventBatch` payload); seq starts at 0 per publisher lifetime;
  every sent (seq, payload) is appended to a replay ring of `--buffer-steps`;
- replay: ROUTER; request (client_id, b"", start_seq 8B BE); reply per buffered seq >= start:
  (client_id, b"", topic, seq8, payload), then (client_id, b"", b"", END_SEQ, b"") with
  END_SEQ = -1 as signed 8-byte big-endian (vLLM >= #45177; `--legacy-replay` drops the topic
  frame as before #45177);
- one publisher per DP rank at port + rank (`offset_endpoint_port`), each batch carrying its
  `data_parallel_rank`.

The live socket is an XPUB instead of a PUB only so that the peer can wait until the
subscriber's subscription arrived (PUB/SUB slow joiner); a SUB sees no difference.

Modes (deliberate faults):
  plain      --count batches per rank, seq 0..count-1
  gap        seqs [--gap-start, --gap-start + --gap-len) are encoded and kept in the replay
             ring but not sent live; the first --gap-unbuffered of them are not kept either
             (as if the ring had already overwritten them)
  malformed  before batch --bad-at: a 2-frame message (topic, payload), a message whose seq
             frame is 4 bytes, and (consuming a seq) an undecodable payload
  restart    after --restart-at batches the publisher is torn down and bound again on the same
             ports: new sockets, seq from 0, empty replay ring

Prints one line `READY <pub_port> <replay_port or 0>` (base ports) on stdout once bound, then
`SENT <n>` when done; keeps serving replay requests until stdin closes or --linger seconds pass.
Exits 3 with a message on stderr if no subscriber shows up within --wait-timeout.
"""

from __future__ import annotations

import argparse
import random
import select
import sys
import time
from collections import deque
from typing import Any, Union

import msgspec
import zmq

# ---- vLLM's structs (vllm/distributed/kv_events.py), map-encoded events since #42892 ----

ExternalBlockHash = Union[bytes, int]


class EventBatch(msgspec.Struct, array_like=True, omit_defaults=True, gc=False):
    ts: float
    events: list[Any]
    data_parallel_rank: Union[int, None] = None


class KVCacheEvent(msgspec.Struct, omit_defaults=True, gc=False, tag=True):
    """Base class; `tag=True` writes `"type": <class name>` first in each event map."""


class BlockStored(KVCacheEvent):
    block_hashes: list[ExternalBlockHash]
    parent_block_hash: Union[ExternalBlockHash, None]
    token_ids: list[int]
    block_size: int
    lora_id: Union[int, None]
    medium: Union[str, None]
    lora_name: Union[str, None]
    extra_keys: Union[list[Union[tuple[Any, ...], None]], None] = None
    group_idx: Union[int, None] = None
    kv_cache_spec_kind: Union[str, None] = None
    kv_cache_spec_sliding_window: Union[int, None] = None
    locality: Union[str, None] = None
    ownership: Union[str, None] = None


class BlockRemoved(KVCacheEvent):
    block_hashes: list[ExternalBlockHash]
    medium: Union[str, None]
    group_idx: Union[int, None] = None
    locality: Union[str, None] = None
    ownership: Union[str, None] = None


class AllBlocksCleared(KVCacheEvent):
    pass


class KVEventBatch(EventBatch):
    events: list[Union[BlockStored, BlockRemoved, AllBlocksCleared]]


END_SEQ = (-1).to_bytes(8, "big", signed=True)
TS0 = 1_700_000_000.0


def block_hash(rank: int, lifetime: int, i: int) -> int:
    """Deterministic u64 hashes above i64::MAX, so the u64 path is exercised."""
    return (0xC000_0000_0000_0000 | (rank << 48) | (lifetime << 40) | i) & (2**64 - 1)


def make_batch(rank: int, lifetime: int, i: int) -> KVEventBatch:
    """Batch i of a lifetime: ts = TS0 + i, one CPU BlockStored chained to the previous batch's
    block; every 4th batch also removes the block stored two batches earlier."""
    events: list[Any] = [
        BlockStored(
            block_hashes=[block_hash(rank, lifetime, i)],
            parent_block_hash=block_hash(rank, lifetime, i - 1) if i > 0 else None,
            token_ids=[4 * i + k for k in range(4)],
            block_size=4,
            lora_id=None,
            medium="CPU",
            lora_name=None,
            group_idx=0,
            kv_cache_spec_kind="full_attention",
        )
    ]
    if i % 4 == 3:
        events.append(BlockRemoved(block_hashes=[block_hash(rank, lifetime, i - 2)], medium="CPU", group_idx=0))
    return KVEventBatch(ts=TS0 + i, events=events)


class RankPublisher:
    """One DP rank's publisher: live socket, replay socket, seq counter and replay ring."""

    def __init__(self, ctx: zmq.Context, args: argparse.Namespace, rank: int, pub_port: int, replay_port: int):
        self.args = args
        self.rank = rank
        self.topic = args.topic.encode()
        self.encoder = msgspec.msgpack.Encoder()
        self.pub = ctx.socket(zmq.XPUB)
        self.pub.setsockopt(zmq.SNDHWM, 100_000)
        self.pub.setsockopt(zmq.LINGER, 2000)
        self.pub.bind(f"tcp://127.0.0.1:{pub_port}")
        self.replay = None
        if replay_port:
            self.replay = ctx.socket(zmq.ROUTER)
            self.replay.setsockopt(zmq.LINGER, 2000)
            self.replay.bind(f"tcp://127.0.0.1:{replay_port}")
        self.seq = 0
        self.ring: deque[tuple[int, bytes]] = deque(maxlen=args.buffer_steps)
        self.subscribed = False

    def close(self) -> None:
        self.pub.close()
        if self.replay is not None:
            self.replay.close()

    def poll_subscriptions(self) -> None:
        while self.pub.poll(0):
            msg = self.pub.recv()
            if msg[:1] == b"\x01":
                self.subscribed = True

    def publish(self, batch: KVEventBatch, *, live: bool = True, buffered: bool = True) -> None:
        # ZmqEventPublisher.publish() fills in its DP rank.
        batch.data_parallel_rank = self.rank
        payload = self.encoder.encode(batch)
        seq = self.seq
        self.seq += 1
        if live:
            self.pub.send_multipart((self.topic, seq.to_bytes(8, "big"), payload))
        if buffered:
            self.ring.append((seq, payload))

    def send_raw(self, frames: list[bytes]) -> None:
        self.pub.send_multipart(frames)

    def service_replay(self) -> None:
        """vLLM's `_service_replay`: answer one pending request, if any."""
        if self.replay is None:
            return
        while self.replay.poll(0):
            frame = self.replay.recv_multipart()
            if len(frame) != 3:
                print(f"invalid replay request: {frame!r}", file=sys.stderr)
                continue
            client_id, _, start_seq_bytes = frame
            start_seq = int.from_bytes(start_seq_bytes, "big")
            for seq, buf in self.ring:
                if seq >= start_seq:
                    if self.args.legacy_replay:
                        self.replay.send_multipart((client_id, b"", seq.to_bytes(8, "big"), buf))
                    else:
                        self.replay.send_multipart((client_id, b"", self.topic, seq.to_bytes(8, "big"), buf))
            if self.args.legacy_replay:
                self.replay.send_multipart((client_id, b"", END_SEQ, b""))
            else:
                self.replay.send_multipart((client_id, b"", b"", END_SEQ, b""))


def bind_all(ctx: zmq.Context, args: argparse.Namespace, base_pub: int, base_replay: int) -> list[RankPublisher]:
    pubs: list[RankPublisher] = []
    try:
        for r in range(args.dp_size):
            pubs.append(RankPublisher(ctx, args, r, base_pub + r, base_replay + r if base_replay else 0))
    except zmq.ZMQError:
        for p in pubs:
            p.close()
        raise
    return pubs


def bind_fresh(ctx: zmq.Context, args: argparse.Namespace) -> tuple[list[RankPublisher], int, int]:
    """Bind all ranks on random free consecutive ports (127.0.0.1 only)."""
    last: Exception | None = None
    for _ in range(200):
        base_pub = random.randint(20000, 60000)
        base_replay = base_pub + args.dp_size if args.replay else 0
        try:
            return bind_all(ctx, args, base_pub, base_replay), base_pub, base_replay
        except zmq.ZMQError as e:
            last = e
    raise SystemExit(f"publisher: could not bind free ports: {last}")


def rebind(ctx: zmq.Context, args: argparse.Namespace, base_pub: int, base_replay: int) -> list[RankPublisher]:
    deadline = time.monotonic() + 10
    while True:
        try:
            return bind_all(ctx, args, base_pub, base_replay)
        except zmq.ZMQError as e:
            if time.monotonic() > deadline:
                raise SystemExit(f"publisher: could not bind again after restart: {e}")
            time.sleep(0.05)


def wait_for_subscribers(pubs: list[RankPublisher], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not all(p.subscribed for p in pubs):
        for p in pubs:
            p.poll_subscriptions()
            p.service_replay()
        if time.monotonic() > deadline:
            print(f"publisher: no subscriber within {timeout} s", file=sys.stderr)
            sys.exit(3)
        time.sleep(0.005)
    # Let the subscription settle on every pipe before the first message.
    time.sleep(0.05)


def stdin_closed() -> bool:
    r, _, _ = select.select([sys.stdin], [], [], 0)
    return bool(r) and sys.stdin.read(1) == ""


def pause(pubs: list[RankPublisher], seconds: float) -> None:
    """Sleep while answering replay requests (vLLM serves replay from its publisher thread)."""
    deadline = time.monotonic() + seconds
    while True:
        for p in pubs:
            p.service_replay()
            p.poll_subscriptions()
        left = deadline - time.monotonic()
        if left <= 0:
            return
        time.sleep(min(left, 0.002))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mode", choices=["plain", "gap", "malformed", "restart"], default="plain")
    ap.add_argument("--count", type=int, default=10, help="batches per rank (per lifetime in restart mode)")
    ap.add_argument("--dp-size", type=int, default=1)
    ap.add_argument("--topic", default="")
    ap.add_argument("--replay", action="store_true", help="also bind a ROUTER replay socket")
    ap.add_argument("--legacy-replay", action="store_true", help="replay replies without the topic frame (pre-#45177)")
    ap.add_argument("--buffer-steps", type=int, default=10_000)
    ap.add_argument("--gap-start", type=int, default=3)
    ap.add_argument("--gap-len", type=int, default=3)
    ap.add_argument("--gap-unbuffered", type=int, default=0)
    ap.add_argument("--bad-at", type=int, default=2)
    ap.add_argument("--restart-at", type=int, default=4)
    ap.add_argument("--interval", type=float, default=0.01, help="seconds between batches")
    ap.add_argument("--wait-timeout", type=float, default=20.0)
    ap.add_argument("--linger", type=float, default=30.0, help="max seconds to keep serving after sending")
    args = ap.parse_args()

    ctx = zmq.Context()
    pubs, base_pub, base_replay = bind_fresh(ctx, args)
    print(f"READY {base_pub} {base_replay}", flush=True)
    wait_for_subscribers(pubs, args.wait_timeout)

    sent = 0
    lifetime = 0
    i = 0
    while i < args.count:
        if args.mode == "restart" and lifetime == 0 and i == args.restart_at:
            pause(pubs, 0.1)
            for p in pubs:
                p.close()
            lifetime = 1
            i = 0
            pubs = rebind(ctx, args, base_pub, base_replay)
            wait_for_subscribers(pubs, args.wait_timeout)
        for p in pubs:
            if args.mode == "malformed" and i == args.bad_at:
                p.send_raw([p.topic, p.encoder.encode(make_batch(p.rank, lifetime, 99))])
                p.send_raw([p.topic, (7).to_bytes(4, "big"), p.encoder.encode(make_batch(p.rank, lifetime, 99))])
                # A valid seq whose payload is not a KVEventBatch (consumes the seq).
                garbage = b"\x93\xcb\x41"  # array of 3, then a truncated float64
                p.send_raw([p.topic, p.seq.to_bytes(8, "big"), garbage])
                p.ring.append((p.seq, garbage))
                p.seq += 1
            in_gap = args.mode == "gap" and args.gap_start <= i < args.gap_start + args.gap_len
            buffered = not (in_gap and i < args.gap_start + args.gap_unbuffered)
            p.publish(make_batch(p.rank, lifetime, i), live=not in_gap, buffered=buffered)
            sent += 1
        i += 1
        pause(pubs, args.interval)
    print(f"SENT {sent}", flush=True)

    deadline = time.monotonic() + args.linger
    while time.monotonic() < deadline and not stdin_closed():
        pause(pubs, 0.02)
    for p in pubs:
        p.close()
    ctx.term()


if __name__ == "__main__":
    main()
