"""The in-process env client plays by the env service's step rule (services/env/stepping.py)."""

from __future__ import annotations

import asyncio

import pytest
from rlanything.v1.events_pb2 import STEP_LABEL_GOOD, TaskRef

from services.common.errors import InvalidArgumentError, NotFoundError
from services.env.families.base import TaskSpec
from services.env.families.frozenlake import FrozenLakeFamily
from services.offline.local_env import LocalEnvClient

SPEC = TaskSpec("gym_text", {"size": 4, "hole_prob": 0.2}, 3)
REF = TaskRef(family="gym_text", slot_id="s0", version=0)


def _client(max_steps: int | None = None) -> LocalEnvClient:
    family = FrozenLakeFamily()
    if max_steps is not None:
        family.max_steps = max_steps
    return LocalEnvClient({"gym_text": family}, lambda ref: SPEC)


def test_an_ended_episode_takes_no_more_steps() -> None:
    """Regression: the old local client kept stepping a finished episode (the service refuses)."""

    async def play() -> None:
        client = _client()
        reset = await client.reset(REF, 0)
        plan = FrozenLakeFamily().make_episode(SPEC, 0).oracle_plan()
        assert plan
        for action in plan:
            step = await client.step(reset.session_id, action)
            assert step.oracle_label == STEP_LABEL_GOOD
        assert step.terminated and step.won and not step.truncated
        with pytest.raises(InvalidArgumentError, match="has ended"):
            await client.step(reset.session_id, plan[0])
        await client.close(reset.session_id)
        with pytest.raises(NotFoundError):
            await client.step(reset.session_id, plan[0])

    asyncio.run(play())


def test_the_step_budget_truncates_and_ends_the_episode() -> None:
    async def play() -> None:
        client = _client(max_steps=2)
        reset = await client.reset(REF, 0)
        assert reset.max_steps == 2
        wall = "left"  # from the start corner, moving left is a wall: the agent stays put
        first = await client.step(reset.session_id, wall)
        second = await client.step(reset.session_id, wall)
        assert (first.truncated, second.truncated) == (False, True)
        with pytest.raises(InvalidArgumentError):
            await client.step(reset.session_id, wall)

    asyncio.run(play())


def test_a_goal_reached_on_the_last_allowed_step_is_won_and_truncated() -> None:
    """Regression (field bugs, 8): Gymnasium's TimeLimit reports truncated=True on the step that uses
    up the budget, also when it reaches the goal; the outcome stays a win."""

    async def play() -> None:
        plan = FrozenLakeFamily().make_episode(SPEC, 0).oracle_plan()
        assert plan
        client = _client(max_steps=len(plan))
        reset = await client.reset(REF, 0)
        for action in plan:
            step = await client.step(reset.session_id, action)
        assert (step.terminated, step.won, step.truncated) == (True, True, True)

    asyncio.run(play())
