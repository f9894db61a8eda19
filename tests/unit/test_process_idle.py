"""CPU time of a process with or without the processes under it (a vLLM server's engine runs in
its children)."""

from __future__ import annotations

import math
import os
import subprocess
import sys
import time

from services.common.process_idle import cpu_seconds, seconds_until_idle

BUSY_THEN_WAIT = ("import sys, time\nend = time.process_time() + 0.4\nwhile time.process_time() < end: pass\n"
                  "print('busy done', flush=True)\nsys.stdin.readline()\n")


def test_a_childs_cpu_time_counts_only_with_children() -> None:
    alone, with_children = cpu_seconds(os.getpid()), cpu_seconds(os.getpid(), with_children=True)
    child = subprocess.Popen([sys.executable, "-c", BUSY_THEN_WAIT], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             text=True)
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "busy done"
        own_growth = cpu_seconds(os.getpid()) - alone
        tree_growth = cpu_seconds(os.getpid(), with_children=True) - with_children
        # the child's busy 0.4 s, counted with the children only; /proc reports CPU time in clock
        # ticks, so a sum can read a tick short (CI read 0.3999999999999986)
        tick_s = 1 / os.sysconf("SC_CLK_TCK")
        assert tree_growth - own_growth >= 0.4 - 2 * tick_s
        assert seconds_until_idle(os.getpid(), time.monotonic(), limit_s=10, with_children=True) < math.inf  # waiting: idle
    finally:
        assert child.stdin is not None
        child.stdin.close()
        child.wait(timeout=10)
