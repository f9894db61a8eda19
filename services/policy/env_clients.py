"""How a rollout reaches an environment: over gRPC (the service) or in-process (SFT evaluation).

Both return the env contract's protobuf messages, so the episode loop does not care which.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Callable
from typing import Protocol

import grpc
from rlanything.v1 import env_pb2, env_pb2_grpc
from rlanything.v1.events_pb2 import TaskRef

from services.common.errors import NotFoundError
from services.common.grpc_runtime import DEFAULT_DEADLINE_S
from services.env.families.base import Episode, TaskFamily, TaskSpec
from services.env.oracle import step_label

__all__ = ["EnvClient", "GrpcEnvClient", "LocalEnvClient"]


class EnvClient(Protocol):
    """The three calls an episode needs."""

    async def reset(self, task: TaskRef, seed: int) -> env_pb2.ResetResponse: ...
    async def step(self, session_id: str, action: str) -> env_pb2.StepResponse: ...
    async def close(self, session_id: str) -> None: ...


class GrpcEnvClient:
    """The env service over gRPC (grpc.aio), with a deadline on every call."""

    def __init__(self, address: str, deadline_s: float = DEFAULT_DEADLINE_S) -> None:
        self.channel = grpc.aio.insecure_channel(address)
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


class LocalEnvClient:
    """Episodes of task families in this process; ``spec_of`` maps a TaskRef to its TaskSpec."""

    def __init__(self, families: dict[str, TaskFamily], spec_of: Callable[[TaskRef], TaskSpec]) -> None:
        self.families = families
        self.spec_of = spec_of
        self._ids = itertools.count()
        self._open: dict[str, tuple[Episode, TaskFamily, list[int | None], list[int]]] = {}

    async def reset(self, task: TaskRef, seed: int) -> env_pb2.ResetResponse:
        family = self.families[task.family]
        episode = await asyncio.to_thread(family.make_episode, self.spec_of(task), seed)
        plan = episode.oracle_plan()
        sid = str(next(self._ids))
        self._open[sid] = (episode, family, [None if plan is None else len(plan)], [0])
        return env_pb2.ResetResponse(session_id=sid, task_text=episode.task_text, observation=episode.observation,
                                     admissible_actions=list(episode.admissible_actions),
                                     single_turn=episode.single_turn, max_steps=family.max_steps)

    async def step(self, session_id: str, action: str) -> env_pb2.StepResponse:
        if session_id not in self._open:
            raise NotFoundError(f"session {session_id!r} is unknown")
        episode, family, plan, steps = self._open[session_id]
        result = await asyncio.to_thread(episode.step, action)
        steps[0] += 1
        label = step_label(plan[0], result.oracle_plan_length, result.won, episode.single_turn)
        plan[0] = result.oracle_plan_length
        return env_pb2.StepResponse(observation=result.observation, admissible_actions=list(result.admissible_actions),
                                    reward=result.reward, terminated=result.terminated,
                                    truncated=not result.terminated and steps[0] >= family.max_steps,
                                    won=result.won, oracle_label=label,
                                    oracle_plan_length=result.oracle_plan_length or 0)

    async def close(self, session_id: str) -> None:
        entry = self._open.pop(session_id, None)
        if entry is not None:
            entry[0].close()
