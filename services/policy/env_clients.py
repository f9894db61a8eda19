"""How a rollout reaches an environment: the `EnvClient` protocol and its gRPC implementation.

Every client returns the env contract's protobuf messages, so the episode loop does not care
which one it talks to (one-machine work plugs in an in-process client: `services.offline.local_env`).
"""

from __future__ import annotations

import asyncio
from typing import Protocol

import grpc
from rlanything.v1 import env_pb2, env_pb2_grpc
from rlanything.v1.events_pb2 import TaskRef

from services.common.config import MAX_MESSAGE_BYTES
from services.common.grpc_runtime import DEFAULT_DEADLINE_S, aio_channel
from services.common.session_ids import replica_of

__all__ = ["EnvClient", "GrpcEnvClient"]

RECONNECT_BACKOFF_S = 2.0
"""Most seconds between two attempts to reach an env that is down (a restarted env is found within it)."""
STEP_RETRIES = 2
"""Times a Step answered UNAVAILABLE (the env's own fault, e.g. a lost sandbox worker) is sent again."""
STEP_RETRY_S = 0.5
"""Seconds between two tries of such a Step."""


class EnvClient(Protocol):
    """The three calls an episode needs."""

    async def reset(self, task: TaskRef, seed: int) -> env_pb2.ResetResponse: ...
    async def step(self, session_id: str, action: str) -> env_pb2.StepResponse: ...
    async def close(self, session_id: str) -> None: ...


class GrpcEnvClient:
    """The env service over gRPC (grpc.aio), with a deadline on every call.

    ``address`` is any gRPC target: ``host:port``, a name with several addresses (``dns:///env-pods:50051``
    for a headless Kubernetes Service) or a list (``ipv4:127.0.0.1:5001,127.0.0.1:5002``). Reset goes
    over one channel that spreads calls round-robin over every address the target resolves to; Step
    and Close go to the replica named by the session id (`services.common.session_ids.replica_of`),
    each replica over its own channel, opened on first use and kept; a session id that names no
    replica goes over the Reset channel.

    Reset waits for the env to be reachable (gRPC ``wait_for_ready``, reconnecting at least every
    `RECONNECT_BACKOFF_S`) up to ``deadline_s`` instead of failing at once with UNAVAILABLE: a rollout job that starts while the env
    restarts waits for it, where it used to spend its deliveries (5 in about 20 s) and go to
    the dead-letter stream. Step and Close fail fast: the session lived in the process that is gone.
    """

    def __init__(self, address: str, deadline_s: float = DEFAULT_DEADLINE_S,
                 max_message_bytes: int = MAX_MESSAGE_BYTES) -> None:
        self.max_message_bytes = max_message_bytes
        self.channel = aio_channel(address, max_message_bytes, load_balancing="round_robin",
                                   max_reconnect_backoff_s=RECONNECT_BACKOFF_S)
        self.stub = env_pb2_grpc.EnvironmentStub(self.channel)
        self.replicas: dict[str, env_pb2_grpc.EnvironmentStub] = {}
        """Replica ``host:port`` → its stub (its channel is ``self._channels[address]``)."""
        self._channels: dict[str, grpc.aio.Channel] = {}
        self.deadline_s = deadline_s

    def stub_for(self, session_id: str) -> env_pb2_grpc.EnvironmentStub:
        """The stub that reaches the replica holding ``session_id`` (the Reset stub when it names none)."""
        address = replica_of(session_id)
        if address is None:
            return self.stub
        if address not in self.replicas:
            self._channels[address] = aio_channel(address, self.max_message_bytes)
            self.replicas[address] = env_pb2_grpc.EnvironmentStub(self._channels[address])
        return self.replicas[address]

    async def reset(self, task: TaskRef, seed: int) -> env_pb2.ResetResponse:
        return await self.stub.Reset(env_pb2.ResetRequest(task=task, seed=seed), timeout=self.deadline_s,
                                     wait_for_ready=True)

    async def step(self, session_id: str, action: str) -> env_pb2.StepResponse:
        """One Step; retried (`STEP_RETRIES` times, `STEP_RETRY_S` apart) when the env answers UNAVAILABLE
        for a fault of its own, a lost sandbox worker say (the episode is left unanswered there, so the
        retry runs the action again: an infrastructure fault is never scored as the action's reward)."""
        request = env_pb2.StepRequest(session_id=session_id, action=action)
        for attempt in range(STEP_RETRIES + 1):
            try:
                return await self.stub_for(session_id).Step(request, timeout=self.deadline_s)
            except grpc.aio.AioRpcError as exc:
                if exc.code() != grpc.StatusCode.UNAVAILABLE or attempt == STEP_RETRIES:
                    raise
                await asyncio.sleep(STEP_RETRY_S)
        raise AssertionError("unreachable")

    async def close(self, session_id: str) -> None:
        try:
            await self.stub_for(session_id).Close(env_pb2.CloseRequest(session_id=session_id), timeout=self.deadline_s)
        except grpc.aio.AioRpcError as exc:
            if exc.code() != grpc.StatusCode.NOT_FOUND:
                raise

    async def aclose(self) -> None:
        """Close every channel."""
        for channel in [self.channel, *self._channels.values()]:
            await channel.close()
