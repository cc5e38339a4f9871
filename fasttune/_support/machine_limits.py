"""What this machine, or the container it runs in, lets a process use: CPUs (the
affinity mask and a cgroup CPU quota) and memory (physical, or the cgroup's limit).

Read from the kernel's files only; :mod:`fasttune._support.resource_detection` applies
the declared overrides on top.
"""

from __future__ import annotations

import os
from pathlib import Path


def detect_cpus() -> float:
    """CPUs this process may use: the machine's, capped by its affinity and cgroup quota.

    A container limited to 2 CPUs on a 64-core host gets 2, so 2 trials run, not 64.
    """
    # loky.cpu_count (joblib's process-pool engine) is the minimum of os.cpu_count(), the
    # CPU affinity mask (sched_getaffinity; taskset, cpusets), the CFS quota of the cgroup
    # mounted at /sys/fs/cgroup (v2 cpu.max, v1 cpu.cfs_quota_us / cpu.cfs_period_us:
    # a container's own, as Docker and Kubernetes set it), rounded up, and
    # LOKY_MAX_CPU_COUNT if set; at least 1. Importing loky costs 15-20 ms of a run's
    # ~27 ms before its first trial starts, so where neither a quota nor
    # LOKY_MAX_CPU_COUNT can lower the count, the same minimum is taken here (two small
    # reads); loky computes every count a quota is part of.
    if (
        hasattr(os, "sched_getaffinity")
        and "LOKY_MAX_CPU_COUNT" not in os.environ
        and not _cgroup_cpu_quota_set()
    ):
        return float(max(1, min(os.cpu_count() or 1, len(os.sched_getaffinity(0)))))
    from loky import cpu_count

    return float(cpu_count())


def _cgroup_cpu_quota_set(root: str | Path = "/sys/fs/cgroup") -> bool:
    """Whether a cgroup CPU quota may apply, read where loky reads it: cgroup v2's
    ``cpu.max`` ("max <period>" when unlimited), else v1's ``cpu/cpu.cfs_quota_us``
    ("-1" when unlimited). Anything else, unreadable files included, counts as set."""
    root = Path(root)
    v2 = root / "cpu.max"
    if v2.exists():
        try:
            parts = v2.read_text().split()
        except OSError:
            return True
        if len(parts) == 2:
            return parts[0] != "max"
    v1 = root / "cpu" / "cpu.cfs_quota_us"
    if not v1.exists():
        return False
    try:
        return v1.read_text().strip() != "-1"
    except OSError:
        return True


def _cgroup_memory_limit(root: str | Path = "/sys/fs/cgroup") -> int | None:
    """The container's memory limit in bytes (cgroup v2 or v1), or None if unlimited."""
    root = Path(root)
    for path in (root / "memory.max", root / "memory" / "memory.limit_in_bytes"):
        try:
            text = path.read_text().strip()
        except OSError:
            continue
        if text.isdigit() and int(text) < 2**60:  # v1 writes a huge number for "no limit"
            return int(text)
    return None


def _physical_memory() -> int:
    """Total physical memory in bytes (0 if it cannot be read)."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemTotal:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    except (AttributeError, ValueError, OSError):
        pass
    try:
        import psutil

        return int(psutil.virtual_memory().total)
    except Exception:  # not installed, or unsupported platform
        return 0


def detect_memory() -> float:
    """Physical memory, or the container's limit when that is lower."""
    total, limit = _physical_memory(), _cgroup_memory_limit()
    if limit is not None and (total == 0 or limit < total):
        total = limit
    return float(total)
