"""Version skew: every event carries the contract version it was published under, every gRPC call
the caller's; a service refuses a peer whose version it does not speak, with a clear error (an
event goes to the dead-letter stream with the reason; a call gets FAILED_PRECONDITION), and
accepts peers that say nothing (tools, older clients)."""

from __future__ import annotations

import asyncio

import grpc
import pytest

from rlanything.v1 import critic_pb2, critic_pb2_grpc, events_pb2
from services.common.bus import Delivery, EventBus
from services.common.contract_version import CONTRACT_VERSION, GRPC_METADATA_KEY, HEADER
from services.common.grpc_runtime import aio_channel, channel, create_server
from services.common.streams import Subjects
from tests.integration.test_bus import dead_letters, drain, job

pytestmark = pytest.mark.integration


async def test_events_carry_the_version_and_a_foreign_one_is_dead_lettered(bus: EventBus) -> None:
    handled: list[str] = []

    async def handler(event: events_pb2.RolloutJob, delivery: Delivery) -> None:
        handled.append(event.job_id)

    await bus.publish(Subjects.ROLLOUT_JOBS, job("ours"), msg_id="ours")
    await bus.js.publish(Subjects.ROLLOUT_JOBS, job("future").SerializeToString(),
                         headers={"Nats-Msg-Id": "future", HEADER: str(CONTRACT_VERSION + 1)})
    await bus.js.publish(Subjects.ROLLOUT_JOBS, job("unmarked").SerializeToString(), headers={"Nats-Msg-Id": "unmarked"})
    consumer = bus.consumer(stream="JOBS", durable="workers", subject=Subjects.ROLLOUT_JOBS,
                            message_type=events_pb2.RolloutJob, handler=handler)
    await consumer.setup()
    assert await drain(consumer, rounds=3) == ["acked", "dead_lettered", "acked"]
    assert handled == ["ours", "unmarked"]
    (dead,) = await dead_letters(bus, Subjects.ROLLOUT_JOBS, 1)
    assert dead.headers["Rla-Dlq-Reason"] == (
        f"published under contract version {CONTRACT_VERSION + 1}; this service speaks version {CONTRACT_VERSION} "
        "(upgrade the older side)")


class Echo(critic_pb2_grpc.CriticServicer):
    seen: list[tuple] = []
    """The metadata of every call answered."""

    async def GetRoundReport(self, request, context):
        Echo.seen.append(tuple((m.key, m.value) for m in context.invocation_metadata()))
        return critic_pb2.RoundReport(groups_complete=7)


async def test_a_call_from_another_contract_version_is_refused_by_name() -> None:
    server, port, _ = await create_server("127.0.0.1", 0, [lambda s: critic_pb2_grpc.add_CriticServicer_to_server(Echo(), s)])
    await server.start()
    address = f"127.0.0.1:{port}"
    try:
        async with aio_channel(address) as ours:  # says its version on every call
            assert (await critic_pb2_grpc.CriticStub(ours).GetRoundReport(critic_pb2.RoundReportRequest(), timeout=5)
                    ).groups_complete == 7
        def blocking_call() -> int:  # the blocking channel stamps its calls too
            with channel(address) as ch:
                return critic_pb2_grpc.CriticStub(ch).GetRoundReport(critic_pb2.RoundReportRequest(), timeout=5,
                                                                      metadata=(("x-other", "1"),)).groups_complete
        assert await asyncio.to_thread(blocking_call) == 7
        stamp = (GRPC_METADATA_KEY, str(CONTRACT_VERSION))
        assert [stamp in m for m in Echo.seen] == [True, True]  # both our channels said their version
        async with grpc.aio.insecure_channel(address) as plain:
            stub = critic_pb2_grpc.CriticStub(plain)
            assert (await stub.GetRoundReport(critic_pb2.RoundReportRequest(), timeout=5)).groups_complete == 7
            with pytest.raises(grpc.aio.AioRpcError) as err:
                await stub.GetRoundReport(critic_pb2.RoundReportRequest(), timeout=5,
                                          metadata=((GRPC_METADATA_KEY, "99"),))
            assert err.value.code() == grpc.StatusCode.FAILED_PRECONDITION
            assert err.value.details() == (
                f"the caller speaks contract version 99; this service speaks version {CONTRACT_VERSION} "
                "(upgrade the older side)")
            with pytest.raises(grpc.aio.AioRpcError) as err:
                await stub.GetRoundReport(critic_pb2.RoundReportRequest(), timeout=5,
                                          metadata=((GRPC_METADATA_KEY, "one"),))
            assert err.value.code() == grpc.StatusCode.FAILED_PRECONDITION
            assert "contract version 'one' is not a number" in err.value.details()
    finally:
        await server.stop(0.5)
