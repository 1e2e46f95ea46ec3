"""How many threads to run by default: the cores this process may use, not the machine's."""

from __future__ import annotations

import math
import os
from pathlib import Path

CGROUP_V2_MAX = Path("/sys/fs/cgroup/cpu.max")
CGROUP_V1_QUOTA = Path("/sys/fs/cgroup/cpu/cpu.cfs_quota_us")
CGROUP_V1_PERIOD = Path("/sys/fs/cgroup/cpu/cpu.cfs_period_us")


def available_cores() -> int:
    """The cores this process may run on (CPU affinity, ``os.sched_getaffinity``), capped by a container's CPU
    quota (cgroup v2 ``cpu.max`` or v1 ``cpu.cfs_quota_us``, rounded up); at least 1."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
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
