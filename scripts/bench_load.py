"""Load on a running system: the OpenAI-compatible endpoint and `Environment.Step` under 64
concurrent clients, and a burst above the policy's pending-request bound (backpressure).

Usage: ``python scripts/bench_load.py [OUT.md] [SECONDS]`` (default ``bench/load.md``, 15 s per
phase). Starts `rlanything up --fail-fast` (tiny models, one small round) on loopback, runs each
phase, and writes p50/p99 latency, throughput, status counts, and the policy process's resident
memory before and after.
"""

from __future__ import annotations

import asyncio
import json
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import grpc  # noqa: E402
import httpx  # noqa: E402
import psutil  # noqa: E402

from rlanything.v1 import env_pb2, env_pb2_grpc  # noqa: E402

CLIENTS = 64
BURST = 256
RLANYTHING = str(Path(sys.executable).parent / "rlanything")
CHAT = {"messages": [{"role": "user", "content": "Task: walk to G.\nNow: A F G\nActions:\n1. left\n2. right"}],
        "max_tokens": 8, "temperature": 0}


def _pct(values: list[float], q: float) -> float:
    return statistics.quantiles(values, n=100)[int(q) - 1] if len(values) >= 2 else (values[0] if values else 0.0)


async def chat_load(url: str, seconds: float) -> tuple[list[float], Counter[int]]:
    latencies: list[float] = []
    codes: Counter[int] = Counter()
    deadline = time.monotonic() + seconds
    async with httpx.AsyncClient(timeout=120.0, limits=httpx.Limits(max_connections=BURST)) as client:
        async def one_client() -> None:
            while time.monotonic() < deadline:
                t0 = time.perf_counter()
                r = await client.post(url, json=CHAT)
                codes[r.status_code] += 1
                if r.status_code == 200:
                    latencies.append(time.perf_counter() - t0)
                else:
                    await asyncio.sleep(0.05)
        await asyncio.gather(*(one_client() for _ in range(CLIENTS)))
    return latencies, codes


async def burst(url: str) -> Counter[int]:
    async with httpx.AsyncClient(timeout=300.0, limits=httpx.Limits(max_connections=BURST)) as client:
        responses = await asyncio.gather(*(client.post(url, json=CHAT) for _ in range(BURST)))
    return Counter(r.status_code for r in responses)


async def step_load(address: str, seconds: float) -> tuple[list[float], Counter[str]]:
    latencies: list[float] = []
    codes: Counter[str] = Counter()
    deadline = time.monotonic() + seconds
    async with grpc.aio.insecure_channel(address) as channel:
        stub = env_pb2_grpc.EnvironmentStub(channel)
        tasks = (await stub.ListTasks(env_pb2.ListTasksRequest(split="train", limit=8), timeout=30)).tasks

        async def one_client(i: int) -> None:
            while time.monotonic() < deadline:
                reset = await stub.Reset(env_pb2.ResetRequest(task=tasks[i % len(tasks)].ref, seed=i), timeout=30)
                done = False
                while not done and time.monotonic() < deadline:
                    t0 = time.perf_counter()
                    try:
                        step = await stub.Step(env_pb2.StepRequest(session_id=reset.session_id, action="1"), timeout=30)
                        codes["OK"] += 1
                        latencies.append(time.perf_counter() - t0)
                        done = step.terminated or step.truncated
                    except grpc.aio.AioRpcError as exc:
                        codes[exc.code().name] += 1
                        done = True
                await stub.Close(env_pb2.CloseRequest(session_id=reset.session_id), timeout=30)
        await asyncio.gather(*(one_client(i) for i in range(CLIENTS)))
    return latencies, codes


def _rss_mib(pid: int) -> float:
    return psutil.Process(pid).memory_info().rss / 2**20


def main(out: Path, seconds: float) -> None:
    run_dir = Path(tempfile.mkdtemp(prefix="rla-load-")) / "run"
    proc = subprocess.Popen([RLANYTHING, "up", "--fail-fast", "--run-dir", str(run_dir), "--set", "loop.rounds=1",
                             "--set", "policy.openai_port=0", "--set", "ingest.http_port=0",
                             "--set", "env.scheduler.tasks_per_round=1", "--set", "env.scheduler.group_size=2",
                             "--set", "env.scheduler.eval_every=0"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 180
        while not (run_dir / "services.json").exists():
            if proc.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"rlanything up did not start: {proc.stderr.read().decode()[-2000:] if proc.stderr else ''}")
            time.sleep(0.2)
        manifest = json.loads((run_dir / "services.json").read_text())
        url = manifest["endpoints"]["openai"] + "/chat/completions"
        policy_pid = manifest["services"]["policy"]["pid"]
        rss_before = _rss_mib(policy_pid)
        print(f"chat: {CLIENTS} clients for {seconds:g} s", flush=True)
        chat_lat, chat_codes = asyncio.run(chat_load(url, seconds))
        print(f"burst: {BURST} requests at once", flush=True)
        burst_codes = asyncio.run(burst(url))
        rss_after = _rss_mib(policy_pid)
        print(f"Environment.Step: {CLIENTS} clients for {seconds:g} s", flush=True)
        step_lat, step_codes = asyncio.run(step_load(manifest["services"]["env"]["address"], seconds))
        alive = proc.poll() is None
    finally:
        if proc.poll() is None:
            proc.send_signal(2)
            proc.wait(timeout=60)
    ms = lambda v: f"{1000 * v:.1f}"  # noqa: E731
    lines = [
        "# Load (`scripts/bench_load.py`)", "",
        f"One `rlanything up` (tiny models) on loopback, {platform.processor() or platform.machine()}, "
        f"{psutil.cpu_count()} cores, {time.strftime('%Y-%m-%d', time.gmtime())}. {CLIENTS} concurrent clients "
        f"for {seconds:g} s per phase; the policy's bound on generations in progress is "
        "`policy.max_pending_requests` = 64.", "",
        "| phase | requests | ok | other statuses | p50 ms | p99 ms | throughput /s |", "|---|---:|---:|---|---:|---:|---:|",
        f"| OpenAI chat (8 tokens), {CLIENTS} clients | {sum(chat_codes.values())} | {chat_codes[200]} | "
        f"{dict((k, v) for k, v in chat_codes.items() if k != 200) or '–'} | {ms(_pct(chat_lat, 50))} | "
        f"{ms(_pct(chat_lat, 99))} | {len(chat_lat) / seconds:.1f} |",
        f"| `Environment.Step`, {CLIENTS} clients | {sum(step_codes.values())} | {step_codes['OK']} | "
        f"{dict((k, v) for k, v in step_codes.items() if k != 'OK') or '–'} | {ms(_pct(step_lat, 50))} | "
        f"{ms(_pct(step_lat, 99))} | {len(step_lat) / seconds:.1f} |", "",
        f"Burst of {BURST} chat requests at once (4× the bound): {burst_codes[200]} answered 200, "
        f"{burst_codes[429]} refused with 429 `rate_limit_exceeded` (Retry-After: 1), "
        f"{sum(v for k, v in burst_codes.items() if k >= 500)} 5xx. Policy resident memory "
        f"{rss_before:.0f} MiB before the chat phase, {rss_after:.0f} MiB after the burst. "
        f"Every process still running at the end: {'yes' if alive else 'NO'}.",
    ]
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("\n".join(lines) + "\n")
    print(out.read_text())


if __name__ == "__main__":
    main(Path(sys.argv[1] if len(sys.argv) > 1 else "bench/load.md"), float(sys.argv[2]) if len(sys.argv) > 2 else 15.0)
