"""The gRPC runtime on loopback: health, reflection, error mapping, graceful stop."""

from __future__ import annotations

import grpc
import pytest
from grpc_health.v1 import health_pb2
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

from rlanything.v1 import critic_pb2, critic_pb2_grpc
from services.common.errors import InvalidArgumentError, NotFoundError
from services.common.grpc_runtime import check_health, create_server, map_errors

pytestmark = pytest.mark.integration


class RoundsOnly(critic_pb2_grpc.CriticServicer):
    """A test servicer: knows rounds 0..2, rejects negative rounds other than -1."""

    @map_errors
    async def GetRoundReport(self, request, context):
        if request.round < -1:
            raise InvalidArgumentError(f"round must be >= -1, got {request.round}")
        if request.round > 2:
            raise NotFoundError(f"round {request.round} not reported yet (latest is 2)")
        return critic_pb2.RoundReport(groups_complete=int(request.round) + 10)


async def test_health_reflection_and_error_mapping() -> None:
    name = critic_pb2.DESCRIPTOR.services_by_name["Critic"].full_name
    server, port, health = await create_server(
        "127.0.0.1", 0, [lambda s: critic_pb2_grpc.add_CriticServicer_to_server(RoundsOnly(), s)], [name])
    await server.start()
    address = f"127.0.0.1:{port}"
    try:
        assert await check_health(address, name) == "NOT_SERVING"
        assert await check_health(address) == "NOT_SERVING"
        await health.set(name, health_pb2.HealthCheckResponse.SERVING)
        assert await check_health(address, name) == "SERVING"
        assert await check_health(address, "rlanything.v1.Nope") == "SERVICE_UNKNOWN"
        async with grpc.aio.insecure_channel(address) as channel:
            stub = critic_pb2_grpc.CriticStub(channel)
            assert (await stub.GetRoundReport(critic_pb2.RoundReportRequest(round=1), timeout=5)).groups_complete == 11
            with pytest.raises(grpc.aio.AioRpcError) as err:
                await stub.GetRoundReport(critic_pb2.RoundReportRequest(round=-5), timeout=5)
            assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
            assert err.value.details() == "round must be >= -1, got -5"
            with pytest.raises(grpc.aio.AioRpcError) as err:
                await stub.GetRoundReport(critic_pb2.RoundReportRequest(round=9), timeout=5)
            assert err.value.code() == grpc.StatusCode.NOT_FOUND
            refl = reflection_pb2_grpc.ServerReflectionStub(channel)
            responses = refl.ServerReflectionInfo(iter([reflection_pb2.ServerReflectionRequest(list_services="")]))
            async for response in responses:
                listed = {s.name for s in response.list_services_response.service}
                break
            assert name in listed and "grpc.health.v1.Health" in listed
    finally:
        await server.stop(0.5)
    assert await check_health(address, timeout_s=0.5) == "UNREACHABLE"
