"""gRPC `Environment` servicer: ListTasks, Reset, Step, Close over the pool and the sessions."""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Awaitable, Callable
from typing import TypeVar

import grpc
from prometheus_client import Counter
from rlanything.v1 import env_pb2, env_pb2_grpc

from services.common.errors import InvalidArgumentError, NotFoundError
from services.common.grpc_runtime import map_errors
from services.env.disjoint import train_instance
from services.env.pool import TaskPool, spec_of
from services.env.sessions import SessionStore
from services.env.slots import find_version, ref_of
from services.env.stepping import reset_episode, step_episode

__all__ = ["EnvironmentServicer", "SERVICE_NAME", "CALLS"]
R = TypeVar("R")

SERVICE_NAME = env_pb2.DESCRIPTOR.services_by_name["Environment"].full_name
CALLS = Counter("rla_env_calls_total", "Reset, Step and Close calls answered by this env process, by method and "
                "outcome (ok; not_found: a session this process does not hold, or for Reset an unknown task; error).",
                ["method", "outcome"])
_SPLITS = {"", "train", "heldout", "ood", "live_pending", "live_heldout", "live_solved", "live_rejected"}


def _counted(method: Callable[..., Awaitable[R]]) -> Callable[..., Awaitable[R]]:
    """Count each call of a session method in ``self.calls`` and `CALLS` by outcome (inside `map_errors`)."""
    name = method.__name__

    @functools.wraps(method)
    async def wrapper(self: "EnvironmentServicer", request: object, context: grpc.aio.ServicerContext) -> R:
        outcome = "error"
        try:
            response = await method(self, request, context)
            outcome = "ok"
            return response
        except NotFoundError:
            outcome = "not_found"  # with several replicas: a call sent to a replica that did not open the session
            raise
        finally:
            self.calls[name][outcome] += 1
            CALLS.labels(name, outcome).inc()
    return wrapper


class EnvironmentServicer(env_pb2_grpc.EnvironmentServicer):
    """Episodes of pool tasks; library calls run in worker threads so the server stays responsive."""

    def __init__(self, pool: TaskPool, sessions: SessionStore, per_rollout: frozenset[str] = frozenset()) -> None:
        self.pool = pool
        self.sessions = sessions
        self.per_rollout = per_rollout
        """Families whose train tasks give each rollout its own instance (`disjoint.train_instance`:
        redrawn while it is a held-out or OOD instance)."""
        self.calls: dict[str, dict[str, int]] = {m: {"ok": 0, "not_found": 0, "error": 0}
                                                  for m in ("Reset", "Step", "Close")}
        """Reset, Step and Close calls answered, by outcome (also `CALLS`); logged when the process stops."""

    @map_errors
    async def ListTasks(self, request: env_pb2.ListTasksRequest, context: grpc.aio.ServicerContext
                        ) -> env_pb2.ListTasksResponse:
        if request.limit < 0:
            raise InvalidArgumentError(f"limit must be >= 0, got {request.limit}")
        if request.split not in _SPLITS:
            raise InvalidArgumentError(f"split must be one of {', '.join(sorted(_SPLITS - {''}))} or empty; "
                                       f"got {request.split!r}")
        tasks = []
        for slot in await self.pool.slots():
            if slot.family not in self.pool.families:  # another replica's family sharing the bucket: not resettable here
                continue
            if (request.family and slot.family != request.family) or (request.split and slot.split != request.split):
                continue
            versions = [("active", slot.active)] + ([("pending", slot.pending)] if slot.HasField("pending") else [])
            for status, version in versions:
                tasks.append(env_pb2.TaskInfo(ref=ref_of(slot, version), knobs=version.knobs, status=status,
                                              oracle_plan_length=version.oracle_plan_length, split=slot.split,
                                              parent_version=version.parent_version, seed=version.seed,
                                              metadata=version.metadata))
        if request.limit:
            tasks = tasks[: request.limit]
        return env_pb2.ListTasksResponse(tasks=tasks)

    @map_errors
    @_counted
    async def Reset(self, request: env_pb2.ResetRequest, context: grpc.aio.ServicerContext) -> env_pb2.ResetResponse:
        if not request.task.slot_id:
            raise InvalidArgumentError("task.slot_id is required")
        if request.task.version < 0:
            raise InvalidArgumentError(f"task.version must be >= 0, got {request.task.version}")
        slot = await self.pool.slot(request.task.slot_id)
        family = self.pool.family(slot.family)
        version = find_version(slot, request.task.version)
        family.load_version(version.metadata)
        spec = spec_of(slot.family, version)
        if slot.split == "train" and slot.family in self.per_rollout:  # its own instance, never an evaluation one
            spec, _ = await asyncio.to_thread(train_instance, family, spec, int(request.seed), True,
                                              await self.pool.held_out_keys())
        return await reset_episode(self.sessions, ref_of(slot, version), family, spec, int(request.seed))

    @map_errors
    @_counted
    async def Step(self, request: env_pb2.StepRequest, context: grpc.aio.ServicerContext) -> env_pb2.StepResponse:
        if not request.session_id:
            raise InvalidArgumentError("session_id is required")
        return await step_episode(self.sessions.get(request.session_id), request.action)

    @map_errors
    @_counted
    async def Close(self, request: env_pb2.CloseRequest, context: grpc.aio.ServicerContext) -> env_pb2.CloseResponse:
        if not request.session_id:
            raise InvalidArgumentError("session_id is required")
        self.sessions.get(request.session_id)  # NotFoundError for an unknown session
        self.sessions.close(request.session_id)
        return env_pb2.CloseResponse()

