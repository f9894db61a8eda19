"""The env's episode rule, in one place: open an episode, advance it by one step.

Used by the gRPC servicer (`grpc_service`) and by in-process clients (cold start, offline
evaluation), so both give the same observations, labels and end-of-episode flags:

* ``truncated`` = the step budget ``max_steps`` is used up, also on a step that terminates the
  episode (as Gymnasium's ``TimeLimit`` wrapper reports it; the outcome is still the win/loss);
* a session that terminated or was truncated accepts no more steps (InvalidArgumentError);
* the oracle label of a step compares the oracle plan length before and after it (`oracle.step_label`),
  unless the episode labels the step itself (a remote environment server).
"""

from __future__ import annotations

import asyncio

from prometheus_client import Counter
from rlanything.v1 import env_pb2
from rlanything.v1.events_pb2 import TaskRef

from services.common.errors import InvalidArgumentError
from services.env.families.base import TaskFamily, TaskSpec
from services.env.oracle import step_label
from services.env.sessions import Session, SessionStore

TEST_VERDICTS = Counter("rla_env_test_verdicts_total", "Ground-truth test runs of code answers by verdict (OK, WA, "
                        "TLE, MLE, RE, OLE); a sandbox fault (INFRA) is counted by rla_env_calls_total's errors.",
                        ["verdict"])

__all__ = ["reset_episode", "step_episode"]


async def reset_episode(sessions: SessionStore, ref: TaskRef, family: TaskFamily, spec: TaskSpec,
                        seed: int) -> env_pb2.ResetResponse:
    """Start an episode of ``spec`` (library calls in a worker thread) and register its session."""
    episode = await asyncio.to_thread(family.make_episode, spec, int(seed))
    plan = await asyncio.to_thread(episode.oracle_plan)
    session = sessions.add(ref, episode, family.max_steps, None if plan is None else len(plan))
    return env_pb2.ResetResponse(session_id=session.session_id, task_text=episode.task_text,
                                 observation=episode.observation,
                                 admissible_actions=list(episode.admissible_actions),
                                 single_turn=episode.single_turn, max_steps=family.max_steps,
                                 screenshot_png=episode.screenshot_png, code_check=episode.code_check)


async def step_episode(session: Session, action: str) -> env_pb2.StepResponse:
    """Apply ``action`` to the session's episode; one step at a time per session.

    Raises:
        InvalidArgumentError: the session's episode has already ended.
    """
    async with session.lock:
        if session.done:
            raise InvalidArgumentError(f"session {session.session_id} has ended; call Reset for a new episode")
        before = session.plan_length
        result = await asyncio.to_thread(session.episode.step, action)
        session.steps += 1
        session.plan_length = result.oracle_plan_length
        truncated = session.steps >= session.max_steps
        session.done = result.terminated or truncated
        label = result.oracle_label if result.oracle_label is not None else step_label(
            before, result.oracle_plan_length, result.won, session.episode.single_turn)
        screenshot = session.episode.screenshot_png
    for verdict in result.test_verdicts:
        TEST_VERDICTS.labels(verdict).inc()
    return env_pb2.StepResponse(observation=result.observation, admissible_actions=list(result.admissible_actions),
                                reward=result.reward, terminated=result.terminated, truncated=truncated,
                                won=result.won, oracle_label=label,  # type: ignore[arg-type]  # protobuf enum fields take their int values
                                oracle_plan_length=result.oracle_plan_length or 0,
                                screenshot_png=screenshot, test_verdicts=list(result.test_verdicts))
