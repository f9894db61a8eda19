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

CANARY = "rla-canary-bench-0123456789"
ATTEMPTS = [
    ("fork bomb", "forks in a loop; every child forks forever", "RE",
     "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass\n", "", 2.0),
    ("infinite loop", "`while True: pass`", "TLE", "while True:\n    pass\n", "", 1.0),
    ("10 GB allocation", "`bytearray(10 * 1024**3)`", "MLE", "x = bytearray(10 * 1024 ** 3)\n", "", 3.0),
    ("8 x 200 MiB", "8 processes each touch 200 MiB (each below the limit, together far above)", "MLE",
     "import os, time\nfor _ in range(7):\n    if os.fork() == 0:\n        break\nb = bytearray(200 << 20)\n"
     "for i in range(0, len(b), 4096):\n    b[i] = 1\ntime.sleep(3)\n", "", 3.0),
    ("64 threads", "starts 64 threads that meet at a barrier, prints ok", "OK",
     "import threading\nb = threading.Barrier(65)\nts = [threading.Thread(target=b.wait) for _ in range(64)]\n"
     "[t.start() for t in ts]\nb.wait()\n[t.join() for t in ts]\nprint('ok')\n", "", 3.0),
    ("write outside scratch", "opens /tmp/x, /var/tmp/x, /dev/shm/x, /x, /root/x for writing", "RE",
     "for p in ['/tmp/x', '/var/tmp/x', '/dev/shm/x', '/x', '/root/x']:\n"
     "    try:\n        open(p, 'w').write('x')\n        print('WROTE', p)\n"
     "    except OSError as e:\n        print('refused', p, e.strerror)\n"
     "raise SystemExit(1)\n", "", 3.0),
    ("read the cached tests", "reads a ground-truth test file of the host (outside /tmp); exit 1 if it cannot",
     {"fork": "OK", "bwrap": "RE"}, "print(open(input()).read()[:40])\n", "CACHE", 3.0),
    ("read /proc for secrets", "looks for a secret on a host process's command line; exit 1 if not found",
     {"fork": "OK", "bwrap": "RE"},
     "import os\nfor pid in filter(str.isdigit, os.listdir('/proc')):\n    try:\n"
     f"        if {CANARY!r} in open(f'/proc/{{pid}}/cmdline').read():\n            print('FOUND in', pid)\n"
     "            raise SystemExit(0)\n    except OSError:\n        pass\nraise SystemExit(1)\n", "", 3.0),
    ("socket", "connects to a port the host listens on at 127.0.0.1", "RE",
     "import socket\nsocket.create_connection(('127.0.0.1', int(input())), timeout=2)\n", "PORT", 3.0),
    ("kill the worker and the pool", "SIGKILL to its parent (the worker), the pool, pid 1", "RE",
     "import os\nfor pid in [os.getppid(), int(input()), 1]:\n    os.kill(pid, 9)\n", "POOL", 3.0),
    ("killpg its own group", "forks, then `os.killpg(0, SIGKILL)`", "RE",
     "import os\nos.fork()\nos.killpg(0, 9)\n", "", 3.0),
    ("daemon", "a child calls setsid() and sleeps; the parent exits 0", "OK",
     "import os, time\nif os.fork() == 0:\n    os.setsid()\n    time.sleep(60)\n", "", 3.0),
    ("huge output", "prints 1000-byte lines forever", "OLE", "while True:\n    print('x' * 1000)\n", "", 3.0),
    ("text then buffer writes", "`print(1)`, then `sys.stdout.buffer.write(b'2\\n')`: must come out 1, 2", "OK",
     "import sys\nprint(1)\nsys.stdout.buffer.write(b'2\\n')\n", "", 3.0),
    ("10**100000", "prints the number of digits of `str(10**100000)` (past CPython's 4,300-digit cap)", "OK",
     "print(len(str(10 ** 100000)))\n", "", 3.0),
]
"""(name, what it does, expected verdict (or one per isolation), program, stdin, timeout_s)."""
LIMITS = dict(workers=1, timeout_s=2.0, memory_mb=256, max_processes=128, max_output_bytes=1 << 20)
"""The coding preset's limits (configs/coding.yaml)."""


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


def containment(isolation: str, cache_file: Path) -> list[str]:
    """One table row per attempt in ``isolation``."""
    import socket
    rows = []
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    listener.setblocking(False)
    holder = subprocess.Popen(["sh", "-c", "sleep 600", CANARY])   # a secret on a host command line
    with Sandbox(SandboxConfig(isolation=isolation, **LIMITS)) as sb:
        workers = sb.worker_pids
        for name, what, expected, program, stdin, timeout in ATTEMPTS:
            stdin = {"PORT": str(listener.getsockname()[1]), "POOL": str(os.getpid()),
                     "CACHE": str(cache_file)}.get(stdin, stdin)
            want = expected[isolation] if isinstance(expected, dict) else expected
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
            outcome = ("; ".join(line for line in result.stdout.splitlines()[:5])[:110]
                       if result.stdout and not result.stdout_truncated else last)
            check = "yes" if result.verdict.value == want else f"NO (expected {want})"
            rows.append(f"| {isolation} | {name} | {what} | {outcome.replace('|', '/')}{leaked} | "
                        f"{result.verdict.value}: {result.detail} | {check} | {contain_s:.2f} | {left} | "
                        f"{'yes' if alive else 'NO'} |")
    holder.kill()
    holder.wait()
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
    cache = Path(__file__).resolve().parents[1] / ".cache" / "bench-sandbox"
    cache.mkdir(parents=True, exist_ok=True)
    cache_file = cache / "tests.json"
    cache_file.write_text('{"inputs": ["21"], "outputs": ["42"]}')
    for isolation in isolations:
        rows += containment(isolation, cache_file)
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
              "One worker per isolation, the coding preset's limits (256 MiB for the run's processes together, "
              "128 processes and threads, 1 MiB output cap); `contain s`: seconds from the call to the result, "
              "clean-up included; `left`: processes of the pool's uids alive afterwards; `serves`: the same worker "
              "then runs `print(1)` correctly. Two rows expect fork isolation to fail (it shares the host's file "
              "system and processes: development only); bwrap, the default, must contain them.", "",
              "| isolation | attempt | what it does | what happened | verdict | as expected | contain s | left | "
              "serves |", "|---|---|---|---|---|---|---:|---:|---|", *rows, ""]
    out.write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else Path("bench/sandbox.md"))
