"""Programs executed per second through the sandbox vs a bare subprocess, and the containment table of
hostile programs (what each attempt did, its verdict, the time to contain it, processes left).

Usage: ``python scripts/bench_sandbox.py [OUT.md]`` (default ``bench/sandbox.md``); needs root (the
sandbox does). Under two minutes on 2 cores. Every rate is the median of ``REPEATS`` alternating passes.
"""

from __future__ import annotations

import os
import platform
import statistics
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import psutil  # noqa: E402

from services.common.config import SandboxConfig  # noqa: E402
from services.common.sandbox import Job, Sandbox, SandboxStartError  # noqa: E402
from services.common.sandbox.launch import base_python  # noqa: E402

PROGRAM = "n = int(input())\nprint(sum(i * i for i in range(n)))\n"
STDIN = "1000\n"
EXPECTED = f"{sum(i * i for i in range(1000))}\n"
BARE_RUNS = 40
SANDBOX_RUNS = 400
REPEATS = 3

ATTEMPTS = [
    ("fork bomb", "forks in a loop; every child forks forever", "timeout",
     "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass\n", "", 2.0),
    ("infinite loop", "`while True: pass`", "timeout", "while True:\n    pass\n", "", 1.0),
    ("10 GB allocation", "`bytearray(10 * 1024**3)`", "memory", "x = bytearray(10 * 1024 ** 3)\n", "", 3.0),
    ("write outside scratch", "opens /tmp/x, /var/tmp/x, /dev/shm/x, /x, /root/x for writing", "crashed",
     "for p in ['/tmp/x', '/var/tmp/x', '/dev/shm/x', '/x', '/root/x']:\n"
     "    try:\n        open(p, 'w').write('x')\n        print('WROTE', p)\n"
     "    except OSError as e:\n        print('refused', p, e.strerror)\n"
     "raise SystemExit(1)\n", "", 3.0),
    ("socket", "connects to a port the host listens on at 127.0.0.1", "crashed",
     "import socket\nsocket.create_connection(('127.0.0.1', int(input())), timeout=2)\n", "PORT", 3.0),
    ("kill the worker and the pool", "SIGKILL to its parent (the worker), the pool, pid 1", "crashed",
     "import os\nfor pid in [os.getppid(), int(input()), 1]:\n    os.kill(pid, 9)\n", "POOL", 3.0),
    ("killpg its own group", "forks, then `os.killpg(0, SIGKILL)`", "killed",
     "import os\nos.fork()\nos.killpg(0, 9)\n", "", 3.0),
    ("escape the group", "a child calls setsid() and sleeps; the parent exits 0", "ok",
     "import os, time\nif os.fork() == 0:\n    os.setsid()\n    time.sleep(60)\n", "", 3.0),
    ("huge output", "prints 1000-byte lines forever", "killed", "while True:\n    print('x' * 1000)\n", "", 3.0),
]
"""(name, what it does, expected verdict, program, stdin, timeout_s)."""


def bare_rate(python: list[str], runs: int, parallel: int) -> float:
    """Programs per second through ``subprocess.run`` of a fresh interpreter, ``parallel`` at once."""
    def one(_: int) -> None:
        done = subprocess.run([*python, "-c", PROGRAM], input=STDIN, capture_output=True, text=True, timeout=30)
        assert done.stdout == EXPECTED, done
    start = time.perf_counter()
    with ThreadPoolExecutor(parallel) as pool:
        list(pool.map(one, range(runs)))
    return runs / (time.perf_counter() - start)


def sandbox_rate(sb: Sandbox, runs: int) -> float:
    """Programs per second through ``sb.run_many`` (as many at once as the pool has workers)."""
    start = time.perf_counter()
    results = sb.run_many([Job(PROGRAM, STDIN, 5.0)] * runs)
    elapsed = time.perf_counter() - start
    assert all(r.stdout == EXPECTED for r in results), results[0]
    return runs / elapsed


def uid_processes(uids: list[int]) -> int:
    return sum(1 for p in psutil.process_iter(["uids", "status"])
               if p.info["uids"] and p.info["uids"].real in uids and p.info["status"] != psutil.STATUS_ZOMBIE)


def containment(isolation: str) -> list[str]:
    """One table row per attempt in ``isolation``."""
    import socket
    rows = []
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    listener.setblocking(False)
    with Sandbox(SandboxConfig(isolation=isolation, workers=1, max_output_bytes=1 << 20)) as sb:
        workers = sb.worker_pids
        for name, what, expected, program, stdin, timeout in ATTEMPTS:
            stdin = {"PORT": str(listener.getsockname()[1]), "POOL": str(os.getpid())}.get(stdin, stdin)
            start = time.perf_counter()
            result = sb.run(program, stdin, timeout)
            contain_s = time.perf_counter() - start
            left = uid_processes(sb.uids)
            try:
                listener.accept()
                leaked = " CONNECTED"
            except BlockingIOError:
                leaked = ""
            alive = sb.worker_pids == workers and sb.run("print(1)").stdout == "1\n"
            last = (result.stderr.strip().splitlines() or [""])[-1][:70]
            outcome = "; ".join(line for line in result.stdout.splitlines()[:5])[:110] if name.startswith("write") \
                else last
            check = "yes" if result.verdict.value == expected else f"NO (expected {expected})"
            rows.append(f"| {isolation} | {name} | {what} | {outcome.replace('|', '/')}{leaked} | "
                        f"{result.verdict.value}: {result.detail} | {check} | {contain_s:.2f} | {left} | "
                        f"{'yes' if alive else 'NO'} |")
    listener.close()
    return rows


def main(out: Path) -> None:
    if os.geteuid() != 0:
        sys.exit("bench_sandbox: the sandbox needs root")
    began = time.perf_counter()
    isolations = ["fork", "bwrap"]
    pools = {}
    for isolation in isolations:
        try:
            pools[(isolation, 1)] = Sandbox(SandboxConfig(isolation=isolation, workers=1))
            pools[(isolation, 2)] = Sandbox(SandboxConfig(isolation=isolation, workers=2))
        except SandboxStartError as error:
            print(f"{isolation}: {error}", file=sys.stderr)
    venv = [sys.executable]
    bare_is = [base_python(), "-I", "-S"]
    rates: dict[str, list[float]] = {}
    for _ in range(REPEATS):
        for parallel in (1, 2):
            rates.setdefault(f"bare `subprocess.run([sys.executable, '-c', ...])`, {parallel} at once", []).append(
                bare_rate(venv, BARE_RUNS, parallel))
            rates.setdefault(f"bare `subprocess.run([python, '-I', '-S', '-c', ...])`, {parallel} at once",
                             []).append(bare_rate(bare_is, BARE_RUNS, parallel))
            for (isolation, workers), sb in pools.items():
                if workers == parallel:
                    rates.setdefault(f"sandbox, isolation {isolation}, {workers} worker(s)", []).append(
                        sandbox_rate(sb, SANDBOX_RUNS))
    for sb in pools.values():
        sb.close()
    base = statistics.median(rates["bare `subprocess.run([sys.executable, '-c', ...])`, 1 at once"])
    rows = []
    for isolation in isolations:
        rows += containment(isolation)
    elapsed = time.perf_counter() - began
    lines = ["# Sandbox: throughput and containment (`scripts/bench_sandbox.py`)", "",
             f"{platform.machine()}, {os.cpu_count()} cores, {platform.system()} {platform.release()}, Python "
             f"{platform.python_version()}; the program reads n = 1000 and prints the sum of squares below it; "
             f"programs per second, median of {REPEATS} alternating passes ({BARE_RUNS} bare runs, "
             f"{SANDBOX_RUNS} sandboxed runs per pass). The whole bench took {elapsed:.0f} s.", "",
             "| how | programs/s | vs bare, 1 at once |", "|---|---:|---:|"]
    for label, values in rates.items():
        rate = statistics.median(values)
        lines.append(f"| {label} | {rate:,.0f} | {rate / base:.1f}x |")
    lines += ["", "A sandboxed run forks a small pre-started interpreter (`python -I -S`, common standard-library "
              "modules already imported) instead of starting a fresh one; each run also pays for a scratch "
              "directory, its limits, a uid switch and the check that nothing of it is left. The machine's two "
              "cores were shared with other work: compare rows of one run of this script, not across runs.", "",
              "## Containment", "",
              "One worker per isolation, default limits (512 MiB address space, 16 processes, 1 MiB output cap); "
              "`contain s`: seconds from the call to the result, clean-up included; `left`: processes of the "
              "pool's uids alive afterwards; `serves`: the same worker then runs `print(1)` correctly.", "",
              "| isolation | attempt | what it does | what happened | verdict | as expected | contain s | left | "
              "serves |", "|---|---|---|---|---|---|---:|---:|---|", *rows, ""]
    out.write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else Path("bench/sandbox.md"))
