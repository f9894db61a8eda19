"""A rollout's Reset waits for an env that is restarting (`GrpcEnvClient`, gRPC ``wait_for_ready``)
instead of failing at once: before, a job that started while the env restarted spent its 5
deliveries in about 20 s and was dead-lettered (seen in the three-node chaos run)."""

from __future__ import annotations

import asyncio
import time

import grpc
import pytest
from rlanything.v1 import env_pb2, env_pb2_grpc
from rlanything.v1.events_pb2 import TaskRef

from services.common.nats_server import free_port
from services.policy.env_clients import RECONNECT_BACKOFF_S, GrpcEnvClient


class _Env(env_pb2_grpc.EnvironmentServicer):
    async def Reset(self, request: env_pb2.ResetRequest, context: grpc.aio.ServicerContext) -> env_pb2.ResetResponse:
        return env_pb2.ResetResponse(session_id=f"s-{request.seed}")


async def _serve(port: int) -> grpc.aio.Server:
    server = grpc.aio.server()
    env_pb2_grpc.add_EnvironmentServicer_to_server(_Env(), server)
    server.add_insecure_port(f"127.0.0.1:{port}")
    await server.start()
    return server


async def test_reset_waits_for_an_env_that_comes_up_within_the_deadline() -> None:
    port = free_port()
    client = GrpcEnvClient(f"127.0.0.1:{port}", deadline_s=60.0)
    server = None
    try:
        started = time.monotonic()
        reset = asyncio.create_task(client.reset(TaskRef(slot_id="t"), 7))
        await asyncio.sleep(30.0)  # the env is down: the call is still waiting, not failed
        assert not reset.done()
        server = await _serve(port)
        response = await asyncio.wait_for(reset, 20.0)
        assert response.session_id == "s-7"
        # found within the capped reconnect back-off (2 s, jittered by 20 %); gRPC's own back-off has
        # grown to about 17 s by then, its attempts falling near 16 s and 43 s
        assert RECONNECT_BACKOFF_S == 2.0
        assert 30.0 <= time.monotonic() - started <= 30.0 + 2.4 + 1.5
    finally:
        await client.aclose()
        if server is not None:
            await server.stop(None)


async def test_reset_against_an_env_that_stays_down_ends_at_the_deadline() -> None:
    client = GrpcEnvClient(f"127.0.0.1:{free_port()}", deadline_s=1.5)
    try:
        started = time.monotonic()
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await client.reset(TaskRef(slot_id="t"), 7)
        assert err.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
        assert time.monotonic() - started >= 1.4
    finally:
        await client.aclose()
