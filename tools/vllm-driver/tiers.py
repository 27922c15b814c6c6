"""vLLM's real `TieringOffloadingManager` over a real `CPUPrimaryTierOffloadingManager` and a
real `FileSystemTierManager` (writing real files under a temporary directory), with the two
sources of non-determinism put under the driver's control:

* the FS tier's `DualQueueThreadPool` is replaced by `ControlledPool`: a job's I/O runs at
  submission (real file writes and reads), and `get_finished()` reports it only once the
  driver has released it (`release(job_id)`), in release order: that is how a scenario says
  "job 3 finished before job 2" (the thread pool's completion order in a real run);
* the FS tier's `AsyncLookupManager` keeps its own code, but its background worker body runs
  synchronously when `flush()` posts a batch, so a probe posted at step N is answered before
  step N+1 (the first lookup returns RETRY, the next one the verdict).

Only vLLM's code decides events, their order and their content.
"""
import collections
import inspect
import mmap
import tempfile
import types

import vllm_stubs  # noqa: F401  (must come before any vllm import)

from vllm.v1.kv_offload.tiering import manager as tiering_manager
from vllm.v1.kv_offload.tiering.fs import manager as fs_manager


class ControlledPool:
    """`DualQueueThreadPool`'s interface; completion order chosen by the driver."""

    def __init__(self, *args, **kwargs):
        self.done = {}  # job_id -> success, I/O already run
        self.released = collections.deque()
        self.submitted = []

    def _run(self, job_id, tasks):
        ok = True
        for t in tasks:
            try:
                t()
            except Exception:  # the real pool reports a failed task as success=False
                ok = False
        self.done[job_id] = ok
        self.submitted.append(job_id)

    def enqueue_load(self, job_id, n_tasks, tasks):
        self._run(job_id, tasks)

    def enqueue_store(self, job_id, n_tasks, tasks):
        self._run(job_id, tasks)

    def release(self, job_id):
        self.released.append((job_id, self.done.pop(job_id), 0.0))

    def pending(self):
        return sorted(self.done)

    def get_finished(self):
        out = list(self.released)
        self.released.clear()
        return out

    def wait_idle(self):
        pass

    def shutdown(self, wait=True):
        pass


class _SyncQueue:
    """Stands in for `AsyncLookupManager._lookup_queue`: runs the worker body at `put`."""

    def __init__(self, owner):
        self.owner = owner
        self.items = collections.deque()

    def put(self, item):
        if item is None:
            return
        self.items.append(item)
        self.items.append(None)
        # AsyncLookupManager._worker: processes items until it reads None.
        type(self.owner)._worker(self.owner)

    def get(self):
        return self.items.popleft()


def _sync_lookup_manager(mgr):
    mgr._lookup_queue.put(None)  # stop the real background thread
    mgr._thread.join()
    mgr._lookup_queue = _SyncQueue(mgr)
    return mgr


def _fs_spec(block_size, blocks_per_chunk, enable_events, groups=1):
    from vllm.v1.kv_offload.base import OffloadingKVEventsConfig

    ns = types.SimpleNamespace
    config = ns(
        groups=[
            ns(tokens_per_block=block_size, layer_names=[f"layer.{g}"]) for g in range(groups)
        ],
        parallel=ns(
            tp_size=1, pp_size=1, pcp_size=1, dcp_size=1, rank=0,
            is_parallelism_agnostic=True,
        ),
        canonical_layout=False,
        kv_cache_layout=None,
        replicated_layout=False,
        model=ns(name="kvscope-driver", dtype="float16"),
        cache=ns(tokens_per_hash=block_size, blocks_per_chunk=blocks_per_chunk),
    )
    return ns(
        config=config,
        blocks_per_chunk=blocks_per_chunk,
        kv_events_config=OffloadingKVEventsConfig(
            enable_kv_cache_events=enable_events, self_describing_kv_events=True
        ),
    )


class _Region:
    """`SharedOffloadRegion` stand-in: only `create_kv_memoryview` and `cleanup` are used
    by the scheduler-side primary tier. Page-aligned (an anonymous mmap) with 4096 bytes a
    chunk, so the FS tier's O_DIRECT writes succeed as they do on a real host buffer."""

    def __init__(self, num_chunks, chunk_bytes=4096):
        self.buf = mmap.mmap(-1, num_chunks * chunk_bytes)
        self.shape = [num_chunks, chunk_bytes]

    def create_kv_memoryview(self):
        return memoryview(self.buf).cast("B", self.shape)

    def cleanup(self):
        pass


def _capacity_kwarg(cls):
    """The CPU manager's capacity parameter: `num_blocks` (0.28.0) or `num_chunks` (0.34.0)."""
    params = inspect.signature(cls.__init__).parameters
    return "num_chunks" if "num_chunks" in params else "num_blocks"


def build_tiering_manager(
    capacity_chunks, block_size, blocks_per_chunk, fs_root=None, locality=None, groups=1
):
    """CPU (LRU) primary + one FS tier, events enabled, tier-poll thread off (as with
    `tier_poll_interval_s <= 0`; the FS tier does not set `tolerates_off_thread_polling`)."""
    fs_manager.DualQueueThreadPool = ControlledPool
    # 0.28.0 names the capacity `num_blocks`, 0.34.0 `num_chunks`
    primary = tiering_manager.CPUPrimaryTierOffloadingManager(
        **{_capacity_kwarg(tiering_manager.CPUPrimaryTierOffloadingManager): capacity_chunks},
        mmap_region=_Region(capacity_chunks),
        cache_policy="lru",
        enable_events=True,
    )
    root = fs_root or tempfile.mkdtemp(prefix="kvscope-fs-")
    fs = fs_manager.FileSystemTierManager(
        _fs_spec(block_size, blocks_per_chunk, True, groups),
        primary.get_kv_memoryview(),
        tier_type="fs",
        root_dir=root,
        n_read_threads=1,
        n_write_threads=1,
        enable_kv_events=True,
        locality=locality,
    )
    _sync_lookup_manager(fs._lookup_manager)
    kwargs = {}
    if "tier_poll_interval_s" in inspect.signature(
        tiering_manager.TieringOffloadingManager.__init__
    ).parameters:
        kwargs["tier_poll_interval_s"] = 0  # 0.34.0's tier-poll thread off
    mgr = tiering_manager.TieringOffloadingManager(
        primary_tier=primary, secondary_tiers=[fs], **kwargs
    )
    return mgr, fs, root
