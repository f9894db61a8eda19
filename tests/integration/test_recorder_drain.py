"""The run's event log is complete when the run ends: closing the recorder first lets each file
catch up with its stream (a fresh-clone run once stopped the recorders while the last events were
still being fetched, and the log missed judged trajectories the metrics counted), and the end of
a run waits for a shadow judge to finish the trajectories it has not judged yet."""

from __future__ import annotations

import asyncio
from pathlib import Path

import nats
from nats.js.api import AckPolicy, ConsumerConfig as JsConsumerConfig

from rlanything.v1 import events_pb2
from services.common.bus import EventBus
from services.common.config import ConsumerConfig, NatsConfig
from services.common.nats_server import NatsServer
from services.common.streams import Subjects
from services.run.monitor import StreamFollower, consumer_idle
from services.run.recorder import EventRecorder, read_events, record_events


async def _published(url: str, n: int) -> None:
    bus = await EventBus.connect(NatsConfig(url=url), ConsumerConfig(), name="pub")
    await bus.ensure_streams()
    for i in range(n):
        traj = events_pb2.Trajectory(trajectory_id=f"r0/job-{i}/0", steps=[events_pb2.TrajectoryStep(response="x" * 200)])
        await bus.publish(Subjects.TRAJ_JUDGED, events_pb2.JudgedTrajectory(trajectory=traj), f"r0/job-{i}/0/judged")
    await bus.close()


async def test_closing_the_recorder_writes_every_stored_event(tmp_path: Path) -> None:
    with NatsServer(store_dir=tmp_path / "store") as server:
        await _published(server.url, 600)
        nc = await nats.connect(server.url)
        recorder = await record_events(nc, tmp_path / "run")
        assert await recorder.close(timeout_s=30.0) == []  # nothing left behind
        assert all(task.done() for task in recorder.tasks)
        await nc.close()
    ids = [e["trajectory"]["trajectory_id"] for e in read_events(tmp_path / "run" / "events" / "judged.jsonl",
                                                                   "trajectory.trajectory_id")]
    assert ids == [f"r0/job-{i}/0" for i in range(600)]


async def test_files_sharing_a_stream_catch_up_while_others_write_to_it(tmp_path: Path) -> None:
    """judged and shadow share TRAJ, tasks and pool share REPORTS: each file is complete once its own
    subject is, although the stream's last message is another subject's (and ``close`` does not
    wait out its bound)."""
    with NatsServer(store_dir=tmp_path / "store") as server:
        bus = await EventBus.connect(NatsConfig(url=server.url), ConsumerConfig(), name="pub")
        await bus.ensure_streams()
        nc = await nats.connect(server.url)
        recorder = await record_events(nc, tmp_path / "run")
        await asyncio.sleep(1.5)  # the followers wait in a fetch while other subjects' messages arrive
        for i in range(60):
            traj = events_pb2.Trajectory(trajectory_id=f"t{i}")
            if i % 3 == 0:
                await bus.publish(f"{Subjects.TRAJ_SHADOW}.oracle", events_pb2.JudgedTrajectory(trajectory=traj),
                                  f"t{i}/shadow/oracle")
            await bus.publish(Subjects.TRAJ_JUDGED, events_pb2.JudgedTrajectory(trajectory=traj), f"t{i}/judged")
            if i % 7 == 0:
                await bus.publish(Subjects.ENV_POOL, events_pb2.TaskPoolEvent(event_id=f"e{i}"), f"e{i}")
            await bus.publish(Subjects.CRITIC_TASK, events_pb2.TaskReport(job_id=f"j{i}"), f"j{i}/report")
        started = asyncio.get_running_loop().time()
        assert await recorder.close(timeout_s=20.0) == []
        assert asyncio.get_running_loop().time() - started < 10.0
        await bus.close()
        await nc.close()
    events_dir = tmp_path / "run" / "events"
    assert len(list(read_events(events_dir / "judged.jsonl", "trajectory.trajectory_id"))) == 60
    assert len(list(read_events(events_dir / "shadow.jsonl", "trajectory.trajectory_id"))) == 20
    assert len(list(read_events(events_dir / "tasks.jsonl", "job_id"))) == 60
    assert len(list(read_events(events_dir / "pool.jsonl", "event_id"))) == 9


async def test_a_recorder_that_cannot_catch_up_is_named_and_stopped(tmp_path: Path) -> None:
    with NatsServer(store_dir=tmp_path / "store") as server:
        await _published(server.url, 5)
        nc = await nats.connect(server.url)
        recorder = await record_events(nc, tmp_path / "run")
        server.stop()  # no broker: no follower can confirm it has read everything
        lagging = await recorder.close(timeout_s=1.0)
        assert lagging  # named, not waited on forever
        assert all(task.done() for task in recorder.tasks)
        await nc.close()


async def test_consumer_idle_once_every_message_is_acked(tmp_path: Path) -> None:
    with NatsServer(store_dir=tmp_path / "store") as server:
        await _published(server.url, 3)
        nc = await nats.connect(server.url)
        js = nc.jetstream()
        assert not await consumer_idle(js, "TRAJ", "shadow-like")  # no such consumer yet: not idle
        sub = await js.pull_subscribe(Subjects.TRAJ_JUDGED, durable="shadow-like", stream="TRAJ",
                                      config=JsConsumerConfig(ack_policy=AckPolicy.EXPLICIT))
        assert not await consumer_idle(js, "TRAJ", "shadow-like")  # 3 pending
        msgs = await sub.fetch(3, timeout=5.0)
        assert len(msgs) == 3 and not await consumer_idle(js, "TRAJ", "shadow-like")  # delivered, not acked
        for m in msgs:
            await m.ack_sync()
        assert await consumer_idle(js, "TRAJ", "shadow-like")
        await nc.close()


async def test_stop_ends_a_follower_whose_cancellation_was_lost(tmp_path: Path) -> None:
    """A fresh-clone run hung at its end: one follower never ended after its cancellation (lost in
    the client's fetch). `stop` cancels again until it ends, and closes every file."""
    swallowed: list[int] = []

    async def loses_the_first_cancel() -> None:
        while True:
            try:
                await asyncio.sleep(0.05)
            except asyncio.CancelledError:
                if swallowed:
                    raise
                swallowed.append(1)

    handle = open(tmp_path / "x.jsonl", "a", encoding="utf-8")  # noqa: SIM115 - closed by stop
    task = asyncio.create_task(loses_the_first_cancel())
    recorder = EventRecorder({"x": StreamFollower(None, "TRAJ", "x", lambda m: None)}, [task], [handle])
    await asyncio.wait_for(recorder.stop(timeout_s=5.0), timeout=10.0)
    assert swallowed == [1] and task.done() and handle.closed
