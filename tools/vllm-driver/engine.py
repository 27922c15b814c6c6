"""The engine loop around vLLM's real `OffloadingConnectorScheduler` (vLLM's core `Scheduler`
needs torch, so this plays its part in its call order), over the tier stack of `tiers.py`.

Per step, for each scheduled request in the listed order: first time → `on_new_request`;
GPU prefix-cache hit = leading full blocks computed by an earlier step or an earlier request
in the same step (capped to leave ≥ 1 token); `get_num_new_matched_tokens(req, hit)`; a
request whose answer is `None` (the FS tier's asynchronous existence check) stays waiting
and is not scheduled this step; else `update_state_after_alloc(req, blocks, external)`.
Then `build_connector_meta(SchedulerOutput)`, `num_computed_tokens += scheduled`, the tier's
I/O releases for this step, `update_connector_output` with the worker reports, and
`take_events()` → one `KVEventBatch(ts = 1700000000.0 + step)` if non-empty.
"""
import types

import vllm_stubs  # noqa: F401
import tiers

import msgspec

from vllm.distributed.kv_events import KVEventBatch
from vllm.distributed.kv_transfer.kv_connector.utils import KVOutputAggregator
from vllm.distributed.kv_transfer.kv_connector.v1.offloading import scheduler as osched
from vllm.distributed.kv_transfer.kv_connector.v1.offloading.common import (
    OffloadingWorkerMetadata,
)
from vllm.utils.hashing import sha256_cbor
from vllm.v1.core import kv_cache_utils
from vllm.v1.core.kv_cache_manager import KVCacheBlocks
from vllm.v1.core.sched.output import CachedRequestData, NewRequestData, SchedulerOutput
from vllm.v1.kv_cache_interface import FullAttentionSpec, KVCacheConfig, KVCacheGroupSpec
from vllm.v1.kv_offload.base import OffloadingKVEventsConfig
from vllm.v1.outputs import KVConnectorOutput
from vllm.v1.request import Request

ns = types.SimpleNamespace


def _spec(block_size, blocks_per_chunk, manager, groups=1):
    extra = {
        "blocks_per_chunk": blocks_per_chunk,
        "self_describing_kv_events": True,
    }
    config = ns(
        groups=tuple(
            ns(
                group_id=g,
                tokens_per_block=block_size,
                layer_names=(f"layer.{g}",),
                sliding_window_size_in_chunks=None,
            )
            for g in range(groups)
        ),
        extra_config=extra,
        cache=ns(tokens_per_hash=block_size, blocks_per_chunk=blocks_per_chunk),
    )
    return ns(
        config=config,
        extra_config=extra,
        kv_events_config=OffloadingKVEventsConfig(
            enable_kv_cache_events=True, self_describing_kv_events=True
        ),
        offload_prompt_only=True,
        tokens_per_block=(block_size,) * groups,
        tokens_per_hash=block_size,
        blocks_per_chunk=blocks_per_chunk,
        replicated_layout=False,
        get_manager=lambda: manager,
    )


_JOB_STATUS = osched.TransferJobStatus  # vLLM's own, before a run replaces it


def keeps_set_order():
    """True when this vLLM keeps a store job's keys in a set (`TransferJobStatus.keys:
    set[OffloadKey]`, 0.28.0 and 0.29.0), False when in prefix order (a tuple, 0.34.0)."""
    return "set" in str(_JOB_STATUS.__annotations__["keys"])


class _SetOrderJobStatus(_JOB_STATUS):
    """`order = "cpython"` on a vLLM that keeps prefix order (0.34.0): a store job keeps its
    keys as `set(set(keys))`, as 0.28.0/0.29.0 do (`_build_store_jobs`:
    `TransferJobStatus(keys=set(keys_to_store))` over `keys_to_store = set(...)`)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        if self.is_store:
            self.keys = set(set(self.keys))


_SCHEDULER = []  # the run's OffloadingConnectorScheduler, for _PrefixOrderJobStatus


class _PrefixOrderJobStatus(_JOB_STATUS):
    """`order = "fixed"` on a vLLM that keeps a set (0.28.0): a store job's keys in prefix
    order (the request's offload keys, group by group), the proposed fix, as
    `tuple(dict.fromkeys(store_output.keys_to_store))` in 0.34.0. Only the iteration order
    changes: the same keys reach `complete_store`."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        if self.is_store:
            state = _SCHEDULER[0]._req_status[self.req_id]
            prefix = [k for g in state.group_states for k in g.offload_keys]
            rank = {k: i for i, k in reversed(list(enumerate(prefix)))}
            self.keys = sorted(self.keys, key=rank.__getitem__)


def build(
    capacity_chunks,
    block_size=4,
    blocks_per_chunk=1,
    world_size=1,
    locality=None,
    order="fixed",
    fs_root=None,
    fs=True,
    groups=1,
):
    kv_cache_utils.NONE_HASH = sha256_cbor("vllm-none-hash")
    assert order in ("fixed", "cpython"), order
    osched.TransferJobStatus = _JOB_STATUS
    if keeps_set_order():
        if order == "fixed":
            osched.TransferJobStatus = _PrefixOrderJobStatus
    elif order == "cpython":
        osched.TransferJobStatus = _SetOrderJobStatus
    if fs:
        manager, fs_tier, root = tiers.build_tiering_manager(
            capacity_chunks,
            block_size,
            blocks_per_chunk,
            fs_root=fs_root,
            locality=locality,
            groups=groups,
        )
    else:
        # CPU only: what CPUOffloadingSpec.get_manager builds (without the byte arithmetic)
        from vllm.v1.kv_offload.cpu.manager import CPUOffloadingManager

        manager = CPUOffloadingManager(
            **{tiers._capacity_kwarg(CPUOffloadingManager): capacity_chunks},
            cache_policy="lru",
            enable_events=True,
        )
        fs_tier, root = None, None
    kv_spec = FullAttentionSpec(
        block_size=block_size, num_kv_heads=1, head_size=8, dtype="float16"
    )
    kv_cache_config = KVCacheConfig(
        num_blocks=1000,
        kv_cache_tensors=[],
        # `groups` full-attention groups of the same block size (e.g. two attention types
        # with equal specs); each has its own offload keys (the group index is in the key)
        kv_cache_groups=[KVCacheGroupSpec([f"layer.{g}"], kv_spec) for g in range(groups)],
    )
    vllm_config = ns(
        num_hash_lookahead_tokens=0,
        cache_config=ns(enable_prefix_caching=True, prefix_cache_retention_interval=None),
        speculative_config=None,
        parallel_config=ns(world_size=world_size, decode_context_parallel_size=1),
    )
    sched = osched.OffloadingConnectorScheduler(
        _spec(block_size, blocks_per_chunk, manager, groups), vllm_config, kv_cache_config
    )
    _SCHEDULER[:] = [sched]
    return sched, manager, fs_tier, root


class _SamplingParams:
    """`SamplingParams` stand-in (the real one needs torch): max_tokens 16, every other
    field None/False (no extra args, no structured output, prefix cache readable)."""

    max_tokens = 16

    def __getattr__(self, name):
        return None


class Run:
    """One engine run: `step(schedule, fs_release)` per engine step, `batches` the payloads."""

    def __init__(
        self,
        capacity_chunks,
        block_size=4,
        blocks_per_chunk=1,
        locality=None,
        order="fixed",
        fs_root=None,
        gpu_prefix_cache=True,
        fs=True,
        workers=1,
        reports=None,
        next_step=False,
        groups=1,
    ):
        # reports: {connector job id: {worker: step}}: that worker reports the job at that
        # step; every other (job, worker) reports in the step that created the job.
        self.workers = workers
        self.reports = reports or {}
        # next_step: the default report comes at the step after the job's creation (vLLM's
        # real loop: the worker finishes the transfer during the next model run); else in
        # the creation step
        self.next_step = next_step
        self.due = [[] for _ in range(workers)]  # per worker: (step, job id)
        self.aggregator = KVOutputAggregator(workers)
        self.block_size = block_size
        # False: no GPU prefix hit (as if earlier requests' GPU blocks were evicted)
        self.gpu_prefix_cache = gpu_prefix_cache
        self.sched, self.manager, self.fs, self.root = build(
            capacity_chunks,
            block_size,
            blocks_per_chunk,
            locality=locality,
            order=order,
            fs_root=fs_root,
            fs=fs,
            world_size=workers,
            groups=groups,
        )
        self.groups = groups
        # async load in flight (WAITING_FOR_REMOTE_KVS): rid -> tokens computed once loaded
        self.loading = {}
        self.resumed = set()  # loaded, next scheduled as a new request with its full table
        self.hasher = kv_cache_utils.get_request_block_hasher(block_size, sha256_cbor)
        self.reqs = {}
        self.seen = set()  # on_new_request done
        self.started = set()  # scheduled at least once (blocks allocated)
        self.cached = {}  # block hash -> GPU block id (prefix cache)
        self.block_ids = {}  # req -> list of GPU block ids
        self.next_block = 1
        self.step_no = 0
        self.batches = []  # (step, payload bytes)
        self.log = []
        self.encoder = msgspec.msgpack.Encoder()

    def add_request(self, rid, token_ids):
        self.reqs[rid] = Request(
            rid,
            list(token_ids),
            _SamplingParams(),
            None,
            block_hasher=self.hasher,
        )

    def _gpu_hit(self, req):
        if not self.gpu_prefix_cache:
            return 0
        n = 0
        for h in req.block_hashes:
            if h not in self.cached:
                break
            n += 1
        hit = n * self.block_size
        if hit >= req.num_tokens:
            hit -= self.block_size
        return hit

    def _allocate(self, req, upto):
        ids = self.block_ids.setdefault(req.request_id, [])
        new = []
        nblocks = -(-upto // self.block_size)
        while len(ids) < nblocks:
            i = len(ids)
            h = req.block_hashes[i] if i < len(req.block_hashes) else None
            full = (i + 1) * self.block_size <= upto
            if h is not None and h in self.cached and self.gpu_prefix_cache:
                bid = self.cached[h]
            else:
                bid = self.next_block
                self.next_block += 1
                if h is not None and full:
                    self.cached[h] = bid
            ids.append(bid)
            new.append(bid)
        return new

    def step(self, schedule, fs_release=()):
        """schedule: [(rid, n_tokens)] in scheduling order (a new request's count starts at
        token 0, its GPU prefix hit included); fs_release: FS job ids whose I/O finishes
        during this step's model run, in completion order."""
        s = self.sched
        new_reqs, cached_ids, cached_new_blocks, num_sched, waiting = [], [], [], {}, []
        # add_request → on_new_request happens before schedule() (outside the step region)
        for rid, _n in schedule:
            if rid not in self.seen:
                s.on_new_request(self.reqs[rid])
                self.seen.add(rid)
        for rid, n in schedule:
            req = self.reqs[rid]
            if rid not in self.started:
                hit = self._gpu_hit(req)
                ext, _async = s.get_num_new_matched_tokens(req, hit)
                self.log.append((self.step_no, "lookup", rid, hit, ext))
                if ext is None:
                    waiting.append(rid)
                    continue
                if ext:
                    # An async load: blocks for hit + ext tokens, fresh ones unhashed;
                    # the request waits for the load and is not scheduled this step.
                    self._allocate(req, hit)
                    ids = self.block_ids[rid]
                    while len(ids) < -(-(hit + ext) // self.block_size):
                        ids.append(self.next_block)
                        self.next_block += 1
                    blocks = [
                        ns(block_id=b, is_null=False, block_hash=None if i * self.block_size >= hit else req.block_hashes[i])
                        for i, b in enumerate(ids)
                    ]
                    req.num_computed_tokens = hit
                    s.update_state_after_alloc(req, KVCacheBlocks((blocks,) * self.groups), ext)
                    self.loading[rid] = hit + ext
                    self.started.add(rid)
                    continue
                req.num_computed_tokens = hit
                new = self._allocate(req, n)
                s.update_state_after_alloc(req, KVCacheBlocks(([],) * self.groups), 0)
                self.started.add(rid)
                new_reqs.append(
                    ns(req_id=rid, block_ids=(list(self.block_ids[rid]),) * self.groups)
                )
                num_sched[rid] = n - hit
            elif rid in self.loading:
                continue  # still waiting for its load
            else:
                # a running request: `n` tokens this step, at most the rest of the prompt
                # (requests never decode here)
                n = min(n, req.num_tokens - req.num_computed_tokens)
                if n <= 0:
                    continue
                new = self._allocate(req, req.num_computed_tokens + n)
                if rid in self.resumed:
                    self.resumed.discard(rid)
                    new_reqs.append(
                        ns(req_id=rid, block_ids=(list(self.block_ids[rid]),) * self.groups)
                    )
                else:
                    cached_ids.append(rid)
                    cached_new_blocks.append((new,) * self.groups)
                num_sched[rid] = n
        out = ns(
            scheduled_new_reqs=new_reqs,
            scheduled_cached_reqs=ns(
                req_ids=cached_ids, new_block_ids=cached_new_blocks, resumed_req_ids=set()
            ),
            num_scheduled_tokens=num_sched,
            total_num_scheduled_tokens=sum(num_sched.values()),
            finished_req_ids=set(),
            preempted_req_ids=set(),
            kv_cache_block_copies=None,
            kv_connector_block_state=None,
            new_block_ids_to_zero=None,
            scheduled_spec_decode_tokens={},
            partial_tail_offloads=None,  # 0.28.0 reads it (SchedulerOutput default)
        )
        meta = s.build_connector_meta(out)
        for rid, n in num_sched.items():
            self.reqs[rid].num_computed_tokens += n
        for j in fs_release:
            self.fs._pool.release(j)
        created = sorted(list(meta.load_jobs) + list(meta.store_jobs))
        self.log.append((self.step_no, "jobs", sorted(meta.store_jobs), sorted(meta.load_jobs)))
        for j in created:
            for w in range(self.workers):
                default = self.step_no + 1 if self.next_step else self.step_no
                at = self.reports.get(j, {}).get(w, default)
                assert at >= self.step_no, (j, w, at)
                self.due[w].append((at, j))
        outputs = []
        for w in range(self.workers):
            now = sorted(j for at, j in self.due[w] if at <= self.step_no)
            self.due[w] = [(at, j) for at, j in self.due[w] if at > self.step_no]
            # OffloadingConnectorWorker.build_connector_worker_meta: None when empty
            wm = OffloadingWorkerMetadata(completed_jobs={j: 1 for j in now}) if now else None
            if now:
                self.log.append((self.step_no, "report", w, now))
            outputs.append(ns(kv_connector_output=KVConnectorOutput(kv_connector_worker_meta=wm)))
        merged = self.aggregator.aggregate(outputs)  # vLLM's KVOutputAggregator
        s.update_connector_output(merged.kv_connector_output)
        for rid in [r for r in self.loading if r not in self.sched._req_status or not self.sched._req_status[r].transfer_jobs]:
            # the load job completed: _update_waiting_for_remote_kv → WAITING, computed
            self.reqs[rid].num_computed_tokens = self.loading.pop(rid)
            self.resumed.add(rid)
        events = list(s.take_events())
        if events:
            batch = KVEventBatch(ts=1700000000.0 + self.step_no, events=events)
            batch.data_parallel_rank = 0
            self.batches.append((self.step_no, self.encoder.encode(batch)))
        self.step_no += 1
        return waiting
