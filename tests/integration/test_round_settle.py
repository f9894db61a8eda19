"""A round is recorded only after the env has made its curriculum decisions about the round's task
reports: a fresh-clone CI run once wrote the last round's line while the env was still deciding,
and ``env/requested_*`` counted 3 of the 4 requests ``events/pool.jsonl`` then held."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import nats
from nats.js.api import AckPolicy, ConsumerConfig as JsConsumerConfig

from rlanything.v1 import events_pb2
from services.common.bus import EventBus
from services.common.config import ConsumerConfig, NatsConfig
from services.common.nats_server import NatsServer
from services.common.streams import Subjects
from services.run.monitor import ENV_REPORTS_DURABLE, subscribe_progress
from services.run.progress import RunProgress


async def _settled_within(feed, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if await feed.pool_settled():
            return True
        await asyncio.sleep(0.05)
    return False


async def test_a_report_the_env_has_not_acked_holds_the_round_until_its_decisions_are_counted(tmp_path: Path) -> None:
    with NatsServer(store_dir=tmp_path / "store") as server:
        bus = await EventBus.connect(NatsConfig(url=server.url), ConsumerConfig(), name="pub")
        await bus.ensure_streams()
        nc = await nats.connect(server.url)
        progress = RunProgress()
        feed = await subscribe_progress(nc, progress)
        try:
            # no env consumer at all (an env that makes no curriculum decisions): nothing to wait for
            assert await _settled_within(feed, 10.0)
            env = await nc.jetstream().pull_subscribe(
                Subjects.CRITIC_TASK, durable=ENV_REPORTS_DURABLE, stream="REPORTS",
                config=JsConsumerConfig(ack_policy=AckPolicy.EXPLICIT))
            await bus.publish(Subjects.CRITIC_TASK, events_pb2.TaskReport(job_id="r1/job-0", round=1, acc=0.9),
                              "r1/job-0/report")
            await asyncio.sleep(0.5)
            assert not await feed.pool_settled()  # stored, not yet handled by the env
            (report,) = await env.fetch(1, timeout=5.0)
            assert not await feed.pool_settled()  # handed to the env, not acked
            await bus.publish(Subjects.ENV_POOL, events_pb2.TaskPoolEvent(
                event_id="e1", round=1, kind=events_pb2.TaskPoolEvent.KIND_REQUESTED,
                direction=events_pb2.DIRECTION_HARDER), "pool/e1")
            await report.ack_sync()  # the env acks a report after publishing its decisions
            assert await _settled_within(feed, 10.0)
            assert progress.round(1).env["env/requested_harder"] == 1  # counted once settled
        finally:
            feed.cancel()
            await bus.close()
            await nc.close()
