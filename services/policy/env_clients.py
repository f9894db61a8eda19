"""How a rollout reaches an environment: the `EnvClient` protocol and its gRPC implementation.

Every client returns the env contract's protobuf messages, so the episode loop does not care
which one it talks to (one-machine work plugs in an in-process client: `services.offline.local_env`).
"""

from __future__ import annotations

from typing import Protocol

import grpc
from rlanything.v1 import env_pb2, env_pb2_grpc
from rlanything.v1.events_pb2 import TaskRef

from services.common.config import MAX_MESSAGE_BYTES
from services.common.grpc_runtime import DEFAULT_DEADLINE_S, aio_channel

__all__ = ["EnvClient", "GrpcEnvClient"]


class EnvClient(Protocol):
    """The three calls an episode needs."""

    async def reset(self, task: TaskRef, seed: int) -> env_pb2.ResetResponse: ...
    async def step(self, session_id: str, action: str) -> env_pb2.StepResponse: ...
    async def close(self, session_id: str) -> None: ...


class GrpcEnvClient:
    """The env service over gRPC (grpc.aio), with a deadline on every call."""

    def __init__(self, address: str, deadline_s: float = DEFAULT_DEADLINE_S,
                 max_message_bytes: int = MAX_MESSAGE_BYTES) -> None:
        self.channel = aio_channel(address, max_message_bytes)
        self.stub = env_pb2_grpc.EnvironmentStub(self.channel)
        self.deadline_s = deadline_s

    async def reset(self, task: TaskRef, seed: int) -> env_pb2.ResetResponse:
        return await self.stub.Reset(env_pb2.ResetRequest(task=task, seed=seed), timeout=self.deadline_s)

    async def step(self, session_id: str, action: str) -> env_pb2.StepResponse:
        return await self.stub.Step(env_pb2.StepRequest(session_id=session_id, action=action), timeout=self.deadline_s)

    async def close(self, session_id: str) -> None:
        try:
            await self.stub.Close(env_pb2.CloseRequest(session_id=session_id), timeout=self.deadline_s)
        except grpc.aio.AioRpcError as exc:
            if exc.code() != grpc.StatusCode.NOT_FOUND:
                raise

    async def aclose(self) -> None:
        """Close the channel."""
        await self.channel.close()
