"""How many threads to run by default (the cores this process may use, not the machine's), and the worker threads
that batch calls and long texts share out their work on."""

from __future__ import annotations

import math
import os
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Callable, Iterator, Sequence, TypeVar

T = TypeVar("T")
R = TypeVar("R")

CGROUP_V2_MAX = Path("/sys/fs/cgroup/cpu.max")
CGROUP_V1_QUOTA = Path("/sys/fs/cgroup/cpu/cpu.cfs_quota_us")
CGROUP_V1_PERIOD = Path("/sys/fs/cgroup/cpu/cpu.cfs_period_us")


def available_cores() -> int:
    """The cores this process may run on (CPU affinity, ``os.sched_getaffinity``), capped by a container's CPU
    quota (cgroup v2 ``cpu.max`` or v1 ``cpu.cfs_quota_us``, rounded up); at least 1."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    if cores <= 1:
        return 1  # no quota to read (it takes tens of microseconds)
    quota = cgroup_cpu_quota()
    return max(1, min(cores, math.ceil(quota)) if quota is not None else cores)


def cgroup_cpu_quota(v2: Path = CGROUP_V2_MAX, v1_quota: Path = CGROUP_V1_QUOTA,
                     v1_period: Path = CGROUP_V1_PERIOD) -> float | None:
    """The container's CPU limit in cores (quota / period), or None where there is none or it cannot be read."""
    try:
        quota, period = v2.read_text().split()[:2]
        return None if quota == "max" else int(quota) / int(period)
    except (OSError, ValueError):
        pass
    try:
        quota, period = int(v1_quota.read_text()), int(v1_period.read_text())
        return None if quota <= 0 or period <= 0 else quota / period
    except (OSError, ValueError):
        return None


_pools: dict[int, ThreadPoolExecutor] = {}
_pools_lock = threading.Lock()
_worker = threading.local()  # .is_worker: this thread is one of the pools'


def _forget_pools() -> None:
    """In a forked child the pools' threads do not exist: start afresh."""
    global _pools_lock
    _pools.clear()
    _pools_lock = threading.Lock()


os.register_at_fork(after_in_child=_forget_pools)


def _mark_worker() -> None:
    _worker.is_worker = True


def worker_map(function: Callable[[T], R], items: Sequence[T], threads: int) -> Iterator[R]:
    """``function(item)`` of each item, in order, the calls spread over ``threads`` threads of a pool kept for the
    process: its threads keep their thread-local buffers (an engine's piece caches) warm from one call to the next,
    and no thread is started per call. On the calling thread where ``threads`` is 1, there is one item, or the
    caller is itself a pool thread (it would wait on its own pool). Results come as soon as they and those before
    them are done; closing the iterator early cancels the calls not yet started."""
    if threads < 2 or len(items) < 2 or getattr(_worker, "is_worker", False):
        return map(function, items)
    with _pools_lock:
        pool = _pools.get(threads)
        if pool is None:
            pool = _pools[threads] = ThreadPoolExecutor(threads, thread_name_prefix="crayon-worker",
                                                        initializer=_mark_worker)
    return pool.map(function, items)
