"""The event bus against a real nats-server with JetStream (no fakes)."""

from __future__ import annotations

import asyncio

import pytest
from nats.js.api import ConsumerConfig as JsConsumerConfig

from rlanything.v1 import events_pb2
from services.common.bus import Delivery, EventBus
from services.common.config import ConsumerConfig, NatsConfig
from services.common.errors import InvalidEventError
from services.common.nats_server import NatsServer
from services.common.streams import Subjects, dlq_subject

pytestmark = pytest.mark.integration


def job(job_id: str, round_: int = 0) -> events_pb2.RolloutJob:
    return events_pb2.RolloutJob(job_id=job_id, round=round_, group_size=8,
                                 task=events_pb2.TaskRef(slot_id="gym_text/0", family="gym_text"))


async def dead_letters(bus: EventBus, subject: str, count: int, timeout_s: float = 5.0) -> list:
    """Read ``count`` messages from the dead-letter stream (ephemeral consumer)."""
    sub = await bus.js.pull_subscribe(dlq_subject(subject), durable=None, stream="DLQ",
                                      config=JsConsumerConfig(filter_subject=dlq_subject(subject)))
    msgs = await sub.fetch(count, timeout=timeout_s)
    await sub.unsubscribe()
    return msgs


async def drain(consumer, rounds: int = 10) -> list[str]:
    outcomes: list[str] = []
    for _ in range(rounds):
        for msg in await consumer.fetch():
            outcomes.append(await consumer.process(msg))
    return outcomes


async def test_publish_consume_ack(bus: EventBus) -> None:
    seen: list[tuple[str, Delivery]] = []

    async def handler(event: events_pb2.RolloutJob, delivery: Delivery) -> None:
        seen.append((event.job_id, delivery))

    for i in range(3):
        await bus.publish(Subjects.ROLLOUT_JOBS, job(f"job-{i}"), msg_id=f"job-{i}")
    consumer = bus.consumer(stream="JOBS", durable="workers", subject=Subjects.ROLLOUT_JOBS,
                            message_type=events_pb2.RolloutJob, handler=handler)
    await consumer.setup()
    assert await drain(consumer, rounds=2) == ["acked"] * 3
    assert [job_id for job_id, _ in seen] == ["job-0", "job-1", "job-2"]
    assert seen[0][1].num_delivered == 1 and seen[0][1].msg_id == "job-0"
    info = await bus.js.consumer_info("JOBS", "workers")
    assert info.num_ack_pending == 0 and info.num_pending == 0
    # JOBS is a work queue: acked jobs are gone from the stream.
    assert (await bus.js.stream_info("JOBS")).state.messages == 0


async def test_duplicate_publish_is_stored_once(bus: EventBus) -> None:
    first = await bus.publish(Subjects.TRAJ_COMPLETED, events_pb2.Trajectory(trajectory_id="j/0"), msg_id="j/0")
    second = await bus.publish(Subjects.TRAJ_COMPLETED, events_pb2.Trajectory(trajectory_id="j/0"), msg_id="j/0")
    third = await bus.publish(Subjects.TRAJ_COMPLETED, events_pb2.Trajectory(trajectory_id="j/1"), msg_id="j/1")
    assert not first.duplicate and second.duplicate and not third.duplicate
    assert second.seq == first.seq
    assert (await bus.js.stream_info("TRAJ")).state.messages == 2


async def test_ensure_streams_is_idempotent(bus: EventBus) -> None:
    await bus.publish(Subjects.TRAJ_COMPLETED, events_pb2.Trajectory(trajectory_id="keep"), msg_id="keep")
    await bus.ensure_streams()
    await bus.ensure_streams()
    assert (await bus.js.stream_info("TRAJ")).state.messages == 1


async def test_unacked_message_is_redelivered_to_a_replacement(nats_server: NatsServer,
                                                               consumer_config: ConsumerConfig) -> None:
    """A worker that dies mid-handler (no ack) loses nothing: the next worker gets the message."""
    nats_cfg = NatsConfig(url=nats_server.url)
    doomed = await EventBus.connect(nats_cfg, consumer_config, name="doomed")
    await doomed.ensure_streams()
    await doomed.publish(Subjects.ROLLOUT_JOBS, job("job-x"), msg_id="job-x")
    started = asyncio.Event()

    async def hangs(event: events_pb2.RolloutJob, delivery: Delivery) -> None:
        started.set()
        await asyncio.sleep(3600)

    consumer = doomed.consumer(stream="JOBS", durable="workers", subject=Subjects.ROLLOUT_JOBS,
                               message_type=events_pb2.RolloutJob, handler=hangs)
    await consumer.setup()
    (msg,) = await consumer.fetch()
    task = asyncio.create_task(consumer.process(msg))
    await started.wait()
    task.cancel()
    await doomed.nc.close()  # the worker process is gone, its message never acked

    replacement = await EventBus.connect(nats_cfg, consumer_config, name="replacement")
    got: list[Delivery] = []

    async def handler(event: events_pb2.RolloutJob, delivery: Delivery) -> None:
        assert event.job_id == "job-x"
        got.append(delivery)

    consumer2 = replacement.consumer(stream="JOBS", durable="workers", subject=Subjects.ROLLOUT_JOBS,
                                     message_type=events_pb2.RolloutJob, handler=handler)
    await consumer2.setup()
    outcomes: list[str] = []
    for _ in range(20):  # ack_wait is 1 s
        outcomes += [await consumer2.process(m) for m in await consumer2.fetch()]
        if outcomes:
            break
    assert outcomes == ["acked"]
    assert got[0].num_delivered == 2
    assert (await replacement.js.stream_info("JOBS")).state.messages == 0
    await replacement.close()


async def test_malformed_payload_goes_to_dead_letter_and_consumer_goes_on(bus: EventBus) -> None:
    handled: list[str] = []

    async def handler(event: events_pb2.RolloutJob, delivery: Delivery) -> None:
        handled.append(event.job_id)

    await bus.js.publish(Subjects.ROLLOUT_JOBS, b"\xff\xff\xff not protobuf", headers={"Nats-Msg-Id": "bad-1"})
    await bus.publish(Subjects.ROLLOUT_JOBS, job("good-1"), msg_id="good-1")
    consumer = bus.consumer(stream="JOBS", durable="workers", subject=Subjects.ROLLOUT_JOBS,
                            message_type=events_pb2.RolloutJob, handler=handler)
    await consumer.setup()
    assert await drain(consumer, rounds=2) == ["dead_lettered", "acked"]
    assert handled == ["good-1"]
    (dead,) = await dead_letters(bus, Subjects.ROLLOUT_JOBS, 1)
    assert dead.data == b"\xff\xff\xff not protobuf"  # payload kept as it was
    assert dead.headers["Rla-Dlq-Reason"].startswith("malformed payload: not a rlanything.v1.RolloutJob")
    assert dead.headers["Rla-Dlq-Subject"] == Subjects.ROLLOUT_JOBS
    assert dead.headers["Rla-Dlq-Consumer"] == "workers"
    assert (await bus.js.stream_info("JOBS")).state.messages == 0


async def test_invalid_event_is_dead_lettered_at_once(bus: EventBus) -> None:
    async def handler(event: events_pb2.RolloutJob, delivery: Delivery) -> None:
        if event.group_size < 1:
            raise InvalidEventError(f"group_size must be >= 1, got {event.group_size}")

    await bus.publish(Subjects.ROLLOUT_JOBS, events_pb2.RolloutJob(job_id="g0", group_size=0), msg_id="g0")
    consumer = bus.consumer(stream="JOBS", durable="workers", subject=Subjects.ROLLOUT_JOBS,
                            message_type=events_pb2.RolloutJob, handler=handler)
    await consumer.setup()
    assert await drain(consumer, rounds=1) == ["dead_lettered"]
    (dead,) = await dead_letters(bus, Subjects.ROLLOUT_JOBS, 1)
    assert dead.headers["Rla-Dlq-Reason"] == "invalid event: group_size must be >= 1, got 0"
    assert dead.headers["Rla-Dlq-Deliveries"] == "1"


async def test_a_reason_longer_than_a_header_is_cut_and_the_consumer_goes_on(bus: EventBus) -> None:
    """Found by fuzzing: a job id of 200,000 characters put into the reason made the dead-letter
    publish fail (NATS headers are at most 64 KiB), which killed the consumer's task."""
    handled: list[str] = []

    async def handler(event: events_pb2.RolloutJob, delivery: Delivery) -> None:
        if event.group_size < 1:
            raise InvalidEventError(f"rollout job {event.job_id!r} needs group_size >= 1")
        handled.append(event.job_id)

    huge = "a" * 200_000
    await bus.publish(Subjects.ROLLOUT_JOBS, events_pb2.RolloutJob(job_id=huge, group_size=0), msg_id="huge")
    await bus.publish(Subjects.ROLLOUT_JOBS, job("good-2"), msg_id="good-2")
    consumer = bus.consumer(stream="JOBS", durable="workers", subject=Subjects.ROLLOUT_JOBS,
                            message_type=events_pb2.RolloutJob, handler=handler)
    await consumer.setup()
    assert await drain(consumer, rounds=2) == ["dead_lettered", "acked"]
    assert handled == ["good-2"]
    (dead,) = await dead_letters(bus, Subjects.ROLLOUT_JOBS, 1)
    reason = dead.headers["Rla-Dlq-Reason"]
    assert reason.startswith("invalid event: rollout job 'aaaa") and len(reason) <= 2048
    full = f"invalid event: rollout job {huge!r} needs group_size >= 1"
    assert reason.endswith(f"… ({len(full)} characters, cut)")
    assert events_pb2.RolloutJob.FromString(dead.data).job_id == huge  # the payload itself is kept whole


async def test_a_huge_subject_or_message_id_is_refused_before_it_reaches_nats(bus: EventBus) -> None:
    """Found by fuzzing: ids of 200,000 characters in a subject (or a header) made NATS close the
    publisher's connection; the bus now refuses them as poison (the handler's message is then
    dead-lettered) and the connection stays up."""
    from services.common.errors import InvalidKeyError

    with pytest.raises(InvalidKeyError, match="msg_id"):
        await bus.publish(Subjects.ROLLOUT_JOBS, job("x"), msg_id="m" * 200_000)
    with pytest.raises(InvalidKeyError, match="subject"):
        await bus.publish(Subjects.ROLLOUT_JOBS + "." + "s" * 200_000, job("x"), msg_id="ok")
    assert bus.nc.is_connected
    assert not (await bus.publish(Subjects.ROLLOUT_JOBS, job("fine"), msg_id="fine")).duplicate


async def test_two_consumers_of_one_message_each_keep_their_dead_letter(bus: EventBus) -> None:
    """Found by fuzzing: the critic and the env both consume policy versions; the dead letter's
    message id named only the stream sequence, so JetStream dropped the second as a duplicate."""
    async def handler(event: events_pb2.RolloutJob, delivery: Delivery) -> None:
        raise AssertionError("never reached: the payload does not parse")

    await bus.js.publish(Subjects.TRAJ_COMPLETED, b"\xff\xff not protobuf", headers={"Nats-Msg-Id": "bad-3"})
    for durable in ("first", "second"):  # TRAJ keeps its messages: each consumer gets the same one
        consumer = bus.consumer(stream="TRAJ", durable=durable, subject=Subjects.TRAJ_COMPLETED,
                                message_type=events_pb2.Trajectory, handler=handler)
        await consumer.setup()
        assert await drain(consumer, rounds=1) == ["dead_lettered"]
    letters = await dead_letters(bus, Subjects.TRAJ_COMPLETED, 2)
    assert sorted(m.headers["Rla-Dlq-Consumer"] for m in letters) == ["first", "second"]


async def test_max_deliveries_sends_failing_message_to_dead_letter(bus: EventBus) -> None:
    attempts: list[int] = []

    async def flaky(event: events_pb2.RolloutJob, delivery: Delivery) -> None:
        attempts.append(delivery.num_delivered)
        raise RuntimeError("backend unavailable")

    await bus.publish(Subjects.ROLLOUT_JOBS, job("always-fails"), msg_id="always-fails")
    consumer = bus.consumer(stream="JOBS", durable="workers", subject=Subjects.ROLLOUT_JOBS,
                            message_type=events_pb2.RolloutJob, handler=flaky)
    await consumer.setup()
    outcomes = await drain(consumer, rounds=15)
    assert outcomes == ["nacked", "nacked", "dead_lettered"]  # max_deliveries = 3
    assert attempts == [1, 2, 3]
    (dead,) = await dead_letters(bus, Subjects.ROLLOUT_JOBS, 1)
    assert dead.headers["Rla-Dlq-Reason"] == ("failed 3 times (max_deliveries=3); "
                                              "last error: RuntimeError: backend unavailable")
    assert events_pb2.RolloutJob.FromString(dead.data).job_id == "always-fails"
    assert (await bus.js.stream_info("JOBS")).state.messages == 0


async def test_transient_failure_then_success(bus: EventBus) -> None:
    attempts: list[int] = []

    async def once_flaky(event: events_pb2.RolloutJob, delivery: Delivery) -> None:
        attempts.append(delivery.num_delivered)
        if delivery.num_delivered == 1:
            raise RuntimeError("try again")

    await bus.publish(Subjects.ROLLOUT_JOBS, job("j"), msg_id="j")
    consumer = bus.consumer(stream="JOBS", durable="workers", subject=Subjects.ROLLOUT_JOBS,
                            message_type=events_pb2.RolloutJob, handler=once_flaky)
    await consumer.setup()
    assert await drain(consumer, rounds=10) == ["nacked", "acked"]
    assert attempts == [1, 2]


async def test_message_that_kept_killing_workers_is_dead_lettered_before_handling(
        nats_server: NatsServer) -> None:
    cfg = ConsumerConfig(ack_wait_s=0.5, max_deliveries=2, backoff_s=[0.05], fetch_timeout_s=0.3)
    nats_cfg = NatsConfig(url=nats_server.url)
    first = await EventBus.connect(nats_cfg, cfg, name="setup")
    await first.ensure_streams()
    await first.publish(Subjects.ROLLOUT_JOBS, job("killer"), msg_id="killer")
    await first.close()
    for _ in range(2):  # two workers fetch it and die without acking
        worker = await EventBus.connect(nats_cfg, cfg, name="dies")
        c = worker.consumer(stream="JOBS", durable="workers", subject=Subjects.ROLLOUT_JOBS,
                            message_type=events_pb2.RolloutJob, handler=None)  # type: ignore[arg-type]
        await c.setup()
        msgs: list = []
        for _ in range(10):
            msgs = await c.fetch()
            if msgs:
                break
        assert len(msgs) == 1
        await worker.nc.close()
    survivor = await EventBus.connect(nats_cfg, cfg, name="survivor")
    called: list[str] = []

    async def handler(event: events_pb2.RolloutJob, delivery: Delivery) -> None:
        called.append(event.job_id)

    c = survivor.consumer(stream="JOBS", durable="workers", subject=Subjects.ROLLOUT_JOBS,
                          message_type=events_pb2.RolloutJob, handler=handler)
    await c.setup()
    outcomes = await drain(c, rounds=10)
    assert outcomes == ["dead_lettered"] and called == []
    (dead,) = await dead_letters(survivor, Subjects.ROLLOUT_JOBS, 1)
    assert dead.headers["Rla-Dlq-Deliveries"] == "3"
    assert "over max_deliveries=2" in dead.headers["Rla-Dlq-Reason"]
    await survivor.close()


async def test_consumer_run_stops_on_event(bus: EventBus) -> None:
    handled: list[str] = []
    stop = asyncio.Event()

    async def handler(event: events_pb2.RolloutJob, delivery: Delivery) -> None:
        handled.append(event.job_id)
        if len(handled) == 2:
            stop.set()

    consumer = bus.consumer(stream="JOBS", durable="workers", subject=Subjects.ROLLOUT_JOBS,
                            message_type=events_pb2.RolloutJob, handler=handler)
    runner = asyncio.create_task(consumer.run(stop))
    await bus.publish(Subjects.ROLLOUT_JOBS, job("a"), msg_id="a")
    await bus.publish(Subjects.ROLLOUT_JOBS, job("b"), msg_id="b")
    await asyncio.wait_for(runner, timeout=10)
    assert handled == ["a", "b"]


async def _two_replicas(nats_server: NatsServer, ack_wait_s: float, fetch_batch: int | None,
                        jobs: int, handler_s: float) -> dict[str, list[str]]:
    """Two worker processes (own connections) on one durable consumer; returns job id -> replicas that ran it."""
    cfg = ConsumerConfig(ack_wait_s=ack_wait_s, max_deliveries=5, backoff_s=[0.2], fetch_batch=16,
                         fetch_timeout_s=0.3)
    nats_cfg = NatsConfig(url=nats_server.url)
    buses = [await EventBus.connect(nats_cfg, cfg, name=f"replica-{i}") for i in range(2)]
    await buses[0].ensure_streams()
    for i in range(jobs):
        await buses[0].publish(Subjects.ROLLOUT_JOBS, job(f"job-{i}"), msg_id=f"job-{i}")
    runs: dict[str, list[str]] = {}
    stop = asyncio.Event()

    def handler_for(name: str):
        async def handler(event: events_pb2.RolloutJob, delivery: Delivery) -> None:
            runs.setdefault(event.job_id, []).append(name)
            await asyncio.sleep(handler_s)
        return handler

    extra = {} if fetch_batch is None else {"fetch_batch": fetch_batch}
    consumers = [b.consumer(stream="JOBS", durable="workers", subject=Subjects.ROLLOUT_JOBS,
                            message_type=events_pb2.RolloutJob, handler=handler_for(f"replica-{i}"),
                            **extra) for i, b in enumerate(buses)]
    for c in consumers:
        await c.setup()
    tasks = [asyncio.create_task(c.run(stop)) for c in consumers]
    try:
        for _ in range(200):
            info = await buses[0].js.consumer_info("JOBS", "workers")
            if len(runs) == jobs and info.num_ack_pending == 0 and info.num_pending == 0:
                break
            await asyncio.sleep(0.1)
        await asyncio.sleep(ack_wait_s * 1.5)  # a late redelivery would show up here
    finally:
        stop.set()
        await asyncio.wait(tasks, timeout=handler_s * 3)
        for b in buses:
            await b.close()
    return runs


async def test_prefetched_messages_do_not_expire_behind_a_long_handler(nats_server: NatsServer) -> None:
    """Bug: a fetch of 16 held the waiting messages without a heartbeat; with ack_wait shorter than
    the handler they were redelivered to the other replica and ran twice."""
    runs = await _two_replicas(nats_server, ack_wait_s=1.0, fetch_batch=None, jobs=4, handler_s=1.5)
    assert sorted(runs) == ["job-0", "job-1", "job-2", "job-3"]
    assert {job_id: len(names) for job_id, names in runs.items()} == {f"job-{i}": 1 for i in range(4)}


async def test_one_message_per_fetch_spreads_long_jobs_over_replicas(nats_server: NatsServer) -> None:
    runs = await _two_replicas(nats_server, ack_wait_s=1.0, fetch_batch=1, jobs=4, handler_s=1.0)
    assert {job_id: len(names) for job_id, names in runs.items()} == {f"job-{i}": 1 for i in range(4)}
    assert {name for names in runs.values() for name in names} == {"replica-0", "replica-1"}
