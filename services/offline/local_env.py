"""An in-process environment client for one-machine work (cold start, offline evaluation).

It speaks the policy's `EnvClient` protocol with the env service's own session store and step
rule (`services.env.stepping`), so an episode played here is the episode the env service would
serve: same observations, oracle labels, truncation and "session has ended" check.
"""

from __future__ import annotations

from collections.abc import Callable

from rlanything.v1 import env_pb2
from rlanything.v1.events_pb2 import TaskRef

from services.env.families.base import TaskFamily, TaskSpec
from services.env.sessions import SessionStore
from services.env.stepping import reset_episode, step_episode

__all__ = ["LocalEnvClient"]

_IDLE_TIMEOUT_S = 3600.0
"""In-process episodes are never abandoned by a remote caller; expire only forgotten ones."""


class LocalEnvClient:
    """Episodes of task families in this process; ``spec_of`` maps a TaskRef to its TaskSpec.

    Raises (from its calls): KeyError for a family it does not hold; NotFoundError for an unknown
    or closed session; InvalidArgumentError for a step after the episode ended.
    """

    def __init__(self, families: dict[str, TaskFamily], spec_of: Callable[[TaskRef], TaskSpec],
                 max_sessions: int = 100_000) -> None:
        self.families = families
        self.spec_of = spec_of
        self.sessions = SessionStore(_IDLE_TIMEOUT_S, max_sessions)

    async def reset(self, task: TaskRef, seed: int) -> env_pb2.ResetResponse:
        return await reset_episode(self.sessions, task, self.families[task.family], self.spec_of(task), seed)

    async def step(self, session_id: str, action: str) -> env_pb2.StepResponse:
        return await step_episode(self.sessions.get(session_id), action)

    async def close(self, session_id: str) -> None:
        self.sessions.close(session_id)
