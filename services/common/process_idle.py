"""How long a process keeps a core busy after its work was cancelled (benchmarks and tests of
cancellation: a disconnect or a gRPC deadline must free the model, not leave it generating)."""

from __future__ import annotations

import math
import time

import psutil

__all__ = ["seconds_until_idle"]


def seconds_until_idle(pid: int, since: float, window_s: float = 0.25, idle_share: float = 0.15,
                       limit_s: float = 30.0) -> float:
    """Seconds from ``since`` (a `time.monotonic` reading) to the start of the first ``window_s``
    window in which process ``pid`` used under ``idle_share`` of one core (user + system CPU time,
    psutil); ``math.inf`` if none starts within ``limit_s`` seconds.

    Raises:
        psutil.NoSuchProcess: ``pid`` does not exist.
    """
    proc = psutil.Process(pid)

    def cpu_s() -> float:
        t = proc.cpu_times()
        return t.user + t.system

    while time.monotonic() - since < limit_s:
        start, before = time.monotonic(), cpu_s()
        time.sleep(window_s)
        if (cpu_s() - before) / (time.monotonic() - start) < idle_share:
            return start - since
    return math.inf
