"""Live usage: ingest throughput, and the latency capture adds to /v1/chat/completions.

Usage: ``python scripts/bench_live.py [OUT.md]`` (default ``bench/live_usage.md``).

1. Ingest: a local nats-server and the ingest service as real processes; ``EPISODES`` episodes
   (with PII to redact) posted over HTTP by ``CONCURRENCY`` clients; reports accepted episodes/s
   and, with a 0 s settle window, the rate at which they are settled (published on
   ``rla.ingest.settled.<tenant>``).
2. Capture: the policy service (tiny model) with capture on; ``REQUESTS`` chat completions, each
   sent with and without capture headers in alternation (side by side in one run); reports p50 and
   p99 latency of each and their ratio.
"""

from __future__ import annotations

import asyncio
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import httpx  # noqa: E402
import yaml  # noqa: E402

from services.common.bus import EventBus  # noqa: E402
from services.common.config import ConsumerConfig, FamilyConfig, NatsConfig, TinyModelConfig  # noqa: E402
from services.common.nats_server import NatsServer, free_port  # noqa: E402
from services.common.service_start import Started, start_service, wait_serving  # noqa: E402

EPISODES = 400
CONCURRENCY = 8
REQUESTS = 200
KEY = "bench-key-0123456789"


def _start(name: str, config: dict, tmp: Path) -> subprocess.Popen:
    path = tmp / f"{name}.yaml"
    path.write_text(yaml.safe_dump(config))
    proc = start_service(name, path, tmp / f"{name}.log")
    wait_serving([Started(name, f"127.0.0.1:{config[name]['server']['grpc_port']}", proc, tmp / f"{name}.log")], 300)
    return proc


def _wait_http(url: str) -> None:
    while True:
        try:
            httpx.get(url, timeout=2)
            return
        except httpx.TransportError:
            time.sleep(0.05)


def _episode(i: int) -> dict:
    return {"episodeId": f"ep-{i}", "revision": 0, "ended": True, "consent": {"training": True},
            "userRef": f"user-{i % 50}", "taskType": "arithmetic",
            "messages": [{"role": "user", "content": f"I am u{i}@example.org, card 4111 1111 1111 1111. "
                                                     f"What is {i} + 17?"},
                         {"role": "assistant", "content": f"\\boxed{{{i + 17}}}"}]}


async def _post_all(base: str) -> float:
    """Seconds to post every episode (CONCURRENCY clients); each must be accepted."""
    queue: asyncio.Queue[int] = asyncio.Queue()
    for i in range(EPISODES):
        queue.put_nowait(i)

    async def worker(client: httpx.AsyncClient) -> None:
        while not queue.empty():
            i = queue.get_nowait()
            r = await client.post("/v1/ingest/episodes", json=_episode(i))
            assert r.status_code == 202 and r.json()["status"] == "STATUS_ACCEPTED", r.text

    start = time.perf_counter()
    async with httpx.AsyncClient(base_url=base, headers={"Authorization": f"Bearer {KEY}"}, timeout=30) as client:
        await asyncio.gather(*(worker(client) for _ in range(CONCURRENCY)))
    return time.perf_counter() - start


async def _settled_after(nats_url: str, start: float) -> float:
    bus = await EventBus.connect(NatsConfig(url=nats_url), ConsumerConfig(), name="bench")
    try:
        while True:
            info = await bus.js.stream_info("INGEST", subjects_filter="rla.ingest.settled.>")
            if sum((info.state.subjects or {}).values()) >= EPISODES:
                return time.perf_counter() - start
            await asyncio.sleep(0.05)
    finally:
        await bus.close()


def bench_ingest(tmp: Path) -> tuple[float, float]:
    """(accepted episodes/s, settled episodes/s from the first post)."""
    with NatsServer() as nats:
        http = free_port()
        config = {"nats": {"url": nats.url}, "ingest": {
            "server": {"grpc_port": free_port()}, "http_port": http, "settle_window_s": 0.0, "sweep_every_s": 0.1,
            "max_open_episodes": EPISODES * 2, "tenants": {"bench": {"key": KEY, "secret": "s"}}}}
        proc = _start("ingest", config, tmp)
        try:
            base = f"http://127.0.0.1:{http}"
            _wait_http(f"{base}/healthz")
            start = time.perf_counter()
            posted = asyncio.run(_post_all(base))
            settled = asyncio.run(_settled_after(nats.url, start))
        finally:
            proc.terminate()
            proc.wait()
    return EPISODES / posted, EPISODES / settled


def bench_capture(tmp: Path) -> tuple[list[float], list[float]]:
    """Latencies (s) of completions without and with capture, interleaved."""
    from openai import OpenAI

    from services.env.families.frozenlake import FrozenLakeFamily
    from services.offline.policy_sft import build_tiny_for, demonstrations

    fam = FamilyConfig(type="gym_text", knobs={"size": 4, "hole_prob": 0.2})
    model = build_tiny_for(demonstrations(FrozenLakeFamily(), fam, 20, history_steps=2), tmp / "model",
                           TinyModelConfig(hidden_size=64))
    with NatsServer() as nats:
        port = free_port()
        config = {"nats": {"url": nats.url}, "ingest": {"tenants": {"bench": {"key": KEY}}},
                  "policy": {"role": "rollout", "server": {"grpc_port": free_port()}, "openai_port": port,
                             "checkpoint_dir": str(tmp / "ckpt"), "model": {"source": str(model), "threads": 1},
                             "capture": {"enabled": True, "queue_size": 1024}}}
        proc = _start("policy", config, tmp)
        try:
            _wait_http(f"http://127.0.0.1:{port}/v1/models")
            client = OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key=KEY, max_retries=0)
            chat = [{"role": "user", "content": "I am jane@example.org. Task: walk to G.\nNow: A F G"}]
            off: list[float] = []
            on: list[float] = []
            for i in range(REQUESTS * 2 + 10):
                headers = {"X-RLA-Episode": f"c-{i}", "X-RLA-Consent": "training"} if i % 2 else {}
                start = time.perf_counter()
                raw = client.chat.completions.with_raw_response.create(
                    model="policy", messages=chat, temperature=0, max_tokens=8, extra_headers=headers)
                elapsed = time.perf_counter() - start
                assert raw.headers["x-rla-capture"] == ("queued" if headers else "off")
                if i >= 10:  # warm-up
                    (on if headers else off).append(elapsed)
        finally:
            proc.terminate()
            proc.wait()
    return off, on


def _pct(xs: list[float], q: float) -> float:
    return statistics.quantiles(xs, n=100, method="inclusive")[int(q) - 1] * 1e3


def main(out_path: Path) -> None:
    tmp = Path(tempfile.mkdtemp(prefix="rla-bench-live-"))
    accepted, settled = bench_ingest(tmp)
    print(f"ingest: {accepted:.1f} episodes/s accepted, {settled:.1f} episodes/s settled")
    off, on = bench_capture(tmp)
    rows = [(name, _pct(xs, 50), _pct(xs, 99)) for name, xs in (("capture off", off), ("capture on", on))]
    for name, p50, p99 in rows:
        print(f"{name}: p50 {p50:.2f} ms, p99 {p99:.2f} ms")
    cpus = len(os.sched_getaffinity(0))
    lines = [
        "# Live usage: ingest throughput and capture latency", "",
        f"Measured in one run on {platform.machine()}, {cpus} CPUs; every server a real process on loopback.", "",
        "## Ingest throughput", "",
        f"{EPISODES} episodes (two messages, an e-mail and a card number to redact each), posted over HTTP by "
        f"{CONCURRENCY} concurrent clients; settle window 0 s, sweep every 0.1 s.", "",
        "| | episodes/s |", "|---|---:|",
        f"| accepted (redacted, published, stored) | {accepted:.1f} |",
        f"| settled (published on `rla.ingest.settled.<tenant>`), from the first post | {settled:.1f} |", "",
        "## Latency capture adds to `/v1/chat/completions`", "",
        f"{REQUESTS} requests each way, alternating with and without capture headers (tiny model, greedy, "
        "8 tokens, official `openai` client), after 10 warm-up requests.", "",
        "| | p50 (ms) | p99 (ms) |", "|---|---:|---:|",
    ]
    lines += [f"| {name} | {p50:.2f} | {p99:.2f} |" for name, p50, p99 in rows]
    lines += ["", f"Ratio on / off: p50 {rows[1][1] / rows[0][1]:.2f}×, p99 {rows[1][2] / rows[0][2]:.2f}×."]
    out_path.parent.mkdir(parents=True, exist_ok=True)
    out_path.write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else Path("bench/live_usage.md"))
