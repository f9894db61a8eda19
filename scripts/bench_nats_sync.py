"""Acknowledged JetStream publishes per second under nats-server's default ``sync_interval`` (an fsync
every 2 minutes) and under ``sync_interval: always`` (an fsync before every acknowledgement).

Usage: ``python scripts/bench_nats_sync.py [OUT.md]`` (default ``bench/nats_sync.md``). Each setting
gets a fresh local nats-server (file store under the system temp folder) and three loads: one
publish at a time of 4 KiB and of 64 KiB messages (a small event, a trajectory), and 16 in flight
at once of 4 KiB. Each setting runs ``REPEATS`` times, alternating; the table gives the median rate.
"""

from __future__ import annotations

import asyncio
import os
import platform
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import nats  # noqa: E402

from services.common.nats_server import NatsServer  # noqa: E402

LOADS = ((4096, 1, 1000), (65536, 1, 500), (4096, 16, 3000))
"""(message bytes, publishes in flight, messages)."""
REPEATS = 3
SETTINGS = (None, "always")


async def rate(url: str, size: int, in_flight: int, n: int) -> float:
    """Acknowledged publishes per second of ``n`` messages of ``size`` bytes, ``in_flight`` at once."""
    nc = await nats.connect(url)
    js = nc.jetstream()
    stream = f"B{size}x{in_flight}"
    await js.add_stream(name=stream, subjects=[f"bench.{stream}"], storage="file")
    data = os.urandom(size)
    gate = asyncio.Semaphore(in_flight)

    async def one(i: int) -> None:
        async with gate:
            await js.publish(f"bench.{stream}", data, headers={"Nats-Msg-Id": str(i)})

    start = time.perf_counter()
    await asyncio.gather(*(one(i) for i in range(n)))
    elapsed = time.perf_counter() - start
    await nc.close()
    return n / elapsed


def measure(sync: str | None) -> list[float]:
    """One fresh server with ``sync`` and every load; rates in the order of `LOADS`."""
    with NatsServer(sync_interval=sync) as server:
        return [asyncio.run(rate(server.url, *load)) for load in LOADS]


def main(out: Path) -> None:
    runs: dict[str | None, list[list[float]]] = {s: [] for s in SETTINGS}
    for _ in range(REPEATS):
        for sync in SETTINGS:
            runs[sync].append(measure(sync))
    median = {s: [statistics.median(r[i] for r in runs[s]) for i in range(len(LOADS))] for s in SETTINGS}
    lines = ["# JetStream publish rate: default sync_interval vs `always` (`scripts/bench_nats_sync.py`)", "",
             f"{platform.machine()}, {os.cpu_count()} cores, {platform.system()} {platform.release()}; "
             f"file store in {Path(os.environ.get('TMPDIR', '/tmp'))}; acknowledged publishes per second, "
             f"median of {REPEATS} fresh servers each (alternating).", "",
             "| load | default (fsync every 2 min) | `sync_interval: always` | ratio |", "|---|---:|---:|---:|"]
    for i, (size, in_flight, n) in enumerate(LOADS):
        d, a = median[None][i], median["always"][i]
        lines.append(f"| {size // 1024} KiB, {in_flight} in flight ({n} msgs) | {d:,.0f} | {a:,.0f} | {d / a:.1f}x |")
    lines += ["", "The default acknowledges a publish once the message is in the OS page cache: a killed server "
              "(`kill -9`) loses nothing, but a power loss or kernel crash loses what was written since the last "
              "fsync, up to 2 minutes of acknowledged messages, KV entries and consumer acknowledgements. With "
              "`always` the server fsyncs before each acknowledgement, so nothing acknowledged is lost (if the disk "
              "honours fsync). The local launcher (`launcher.nats_sync_interval`) and the Kubernetes NATS "
              "(`k8s/base/nats/nats.conf`) use `always`: the loop publishes at the pace of generation and judging, "
              "far below these rates.", ""]
    out.write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else Path("bench/nats_sync.md"))
