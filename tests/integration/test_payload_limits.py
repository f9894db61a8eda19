"""One message limit (``limits.max_message_bytes``) for NATS and gRPC, servers and clients (field bugs, 7).

Regression: the local nats-server kept NATS's 1 MiB default while Kubernetes allowed 8 MB, so a
trajectory over 1 MiB published in the cluster and failed locally; gRPC's 4 MiB receive limit
could not be set at all.
"""

from __future__ import annotations

import grpc
import pytest

from rlanything.v1 import events_pb2
from services.common.bus import Delivery, EventBus
from services.common.config import MAX_MESSAGE_BYTES, ConsumerConfig, NatsConfig
from services.common.errors import ConfigError, MessageTooLargeError
from services.common.grpc_runtime import aio_channel, create_server
from services.common.nats_server import NatsServer
from services.common.streams import Subjects
from tests.integration.test_bus import dead_letters, drain, job

pytestmark = pytest.mark.integration
MIB = 1024 * 1024


def trajectory_of(n_bytes: int) -> events_pb2.Trajectory:
    """A trajectory whose serialised size is a little over ``n_bytes`` (one long step response)."""
    step = events_pb2.TrajectoryStep(response="x" * n_bytes)
    return events_pb2.Trajectory(trajectory_id="big/0", steps=[step])


async def test_a_two_mib_trajectory_publishes_on_the_local_server(bus: EventBus) -> None:
    traj = trajectory_of(2 * MIB)
    ack = await bus.publish(Subjects.TRAJ_COMPLETED, traj, msg_id="big/0")
    assert ack.seq >= 1
    assert bus.nc.max_payload == MAX_MESSAGE_BYTES == 8 * MIB


async def test_a_message_over_the_limit_fails_naming_the_limit(nats_server: NatsServer,
                                                               consumer_config: ConsumerConfig) -> None:
    bus = await EventBus.connect(NatsConfig(url=nats_server.url), consumer_config, name="small",
                                 max_message_bytes=MIB)
    await bus.ensure_streams()
    with pytest.raises(MessageTooLargeError, match=r"limits\.max_message_bytes=1048576") as err:
        await bus.publish(Subjects.TRAJ_COMPLETED, trajectory_of(MIB + 10), msg_id="big/1")
    assert "rla.traj.completed" in str(err.value) and "Trajectory of 10" in str(err.value)
    await bus.close()


async def test_a_server_below_the_limit_fails_at_connect(consumer_config: ConsumerConfig) -> None:
    with NatsServer(max_payload=MIB) as small:
        with pytest.raises(ConfigError, match=r"up to 1048576 bytes .*limits\.max_message_bytes=8388608"):
            await EventBus.connect(NatsConfig(url=small.url), consumer_config, name="svc")


async def test_a_handler_whose_output_is_too_large_dead_letters_at_once(bus: EventBus) -> None:
    async def handler(event: events_pb2.RolloutJob, delivery: Delivery) -> None:
        await bus.publish(Subjects.TRAJ_COMPLETED, trajectory_of(9 * MIB), msg_id=f"{event.job_id}/0")

    await bus.publish(Subjects.ROLLOUT_JOBS, job("huge"), msg_id="huge")
    consumer = bus.consumer(stream="JOBS", durable="workers", subject=Subjects.ROLLOUT_JOBS,
                            message_type=events_pb2.RolloutJob, handler=handler)
    await consumer.setup()
    assert await drain(consumer, rounds=2) == ["dead_lettered"]
    (dead,) = await dead_letters(bus, Subjects.ROLLOUT_JOBS, 1)
    assert dead.headers["Rla-Dlq-Deliveries"] == "1"
    assert "limits.max_message_bytes=8388608" in dead.headers["Rla-Dlq-Reason"]


def _echo_server_handler() -> grpc.GenericRpcHandler:
    async def echo(request: bytes, context: grpc.aio.ServicerContext) -> bytes:
        return request

    return grpc.method_handlers_generic_handler(
        "test.Echo", {"Echo": grpc.unary_unary_rpc_method_handler(echo)})


async def _echo(limit: int, size: int) -> bytes:
    server, port, _ = await create_server("127.0.0.1", 0, [lambda s: s.add_generic_rpc_handlers((_echo_server_handler(),))],
                                          max_message_bytes=limit)
    await server.start()
    try:
        async with aio_channel(f"127.0.0.1:{port}", limit) as ch:
            return await ch.unary_unary("/test.Echo/Echo")(b"y" * size, timeout=30)
    finally:
        await server.stop(0)


async def test_grpc_carries_messages_over_its_4_mib_default_up_to_the_limit() -> None:
    assert len(await _echo(MAX_MESSAGE_BYTES, 5 * MIB)) == 5 * MIB


async def test_grpc_over_the_limit_is_resource_exhausted_naming_the_sizes() -> None:
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await _echo(MIB, 2 * MIB)
    assert err.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert "1048576" in (err.value.details() or "")
