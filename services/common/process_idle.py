"""How long a process keeps a core busy after its work was cancelled (benchmarks and tests of
cancellation: a disconnect or a gRPC deadline must free the model, not leave it generating)."""

from __future__ import annotations

import math
import time

import psutil

__all__ = ["seconds_until_idle", "cpu_seconds"]


def cpu_seconds(pid: int, with_children: bool = False) -> float:
    """User + system CPU seconds process ``pid`` has used (psutil); ``with_children``: plus those
    of the processes under it now (one that exits meanwhile stops counting).

    Raises:
        psutil.NoSuchProcess: ``pid`` does not exist.
    """
    proc = psutil.Process(pid)
    t = proc.cpu_times()
    total = t.user + t.system
    for child in proc.children(recursive=True) if with_children else []:
        try:
            c = child.cpu_times()
        except psutil.NoSuchProcess:
            continue
        total += c.user + c.system
    return total


def seconds_until_idle(pid: int, since: float, window_s: float = 0.25, idle_share: float = 0.15,
                       limit_s: float = 30.0, with_children: bool = False) -> float:
    """Seconds from ``since`` (a `time.monotonic` reading) to the start of the first ``window_s``
    window in which process ``pid`` used under ``idle_share`` of one core (user + system CPU time,
    psutil); ``math.inf`` if none starts within ``limit_s`` seconds. ``with_children``: the CPU time
    of the processes under ``pid`` counts too (a server whose engine runs in child processes, as
    vLLM's does; `cpu_seconds`).

    Raises:
        psutil.NoSuchProcess: ``pid`` does not exist.
    """
    while time.monotonic() - since < limit_s:
        start, before = time.monotonic(), cpu_seconds(pid, with_children)
        time.sleep(window_s)
        if (cpu_seconds(pid, with_children) - before) / (time.monotonic() - start) < idle_share:
            return start - since
    return math.inf
