"""`StreamFollower` (the run's progress reader) reads every message once, in order, through a
NATS restart and from before the stream exists."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import nats

from rlanything.v1 import events_pb2
from services.common.bus import EventBus
from services.common.config import ConsumerConfig, NatsConfig
from services.common.nats_server import NatsServer
from services.common.streams import Subjects
from services.run.monitor import StreamFollower


async def _publish(bus: EventBus, ids: list[str], timeout_s: float = 20.0) -> None:
    for msg_id in ids:
        deadline = time.monotonic() + timeout_s
        while True:  # the publisher's connection may still be reconnecting after the restart
            try:
                await bus.publish(Subjects.TRAJ_COMPLETED, events_pb2.Trajectory(trajectory_id=msg_id), msg_id)
                break
            except Exception:
                assert time.monotonic() < deadline, f"could not publish {msg_id}"
                await asyncio.sleep(0.2)


async def _until(predicate, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline
        await asyncio.sleep(0.05)


async def test_follower_sees_each_message_once_across_a_nats_restart(tmp_path: Path) -> None:
    server = NatsServer(store_dir=tmp_path / "store").start()
    try:
        seen: list[str] = []
        nc = await nats.connect(server.url, max_reconnect_attempts=-1, reconnect_time_wait=0.2)
        follower = StreamFollower(nc, "TRAJ", Subjects.TRAJ_COMPLETED,
                                  lambda m: seen.append(m.headers["Nats-Msg-Id"]), headers_only=True, retry_s=0.1)
        task = asyncio.create_task(follower.run())  # before the stream exists: it waits for it
        await asyncio.sleep(0.5)
        bus = await EventBus.connect(NatsConfig(url=server.url), ConsumerConfig(), name="pub")
        await bus.ensure_streams()
        first = [f"r0/job-{i}/0" for i in range(5)]
        await _publish(bus, first)
        await _publish(bus, first[:2])  # duplicates inside the window: stored once
        await _until(lambda: len(seen) == 5)

        server.proc.kill()  # kill -9 of the broker, then the same port and store again
        server.proc.wait()
        server.start()
        second = [f"r1/job-{i}/0" for i in range(5)]
        await _publish(bus, second)
        await _until(lambda: len(seen) >= 10)
        await asyncio.sleep(1.0)  # nothing more arrives late
        assert seen == first + second
        task.cancel()
        await bus.close()
        await nc.close()
    finally:
        server.stop()
