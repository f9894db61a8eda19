"""The environment's oracle as a player, for the cold start (expert demonstrations, judge episodes).

At every state the oracle plan's first action is the expert action: a Gymnasium shortest path,
a TextWorld walkthrough, a reasoning-gym gold answer. `ExpertAgent` answers the policy's own step
chats with it (``\\boxed{i}``, or ``\\boxed{answer}`` for single-turn tasks) inside the one
episode loop (`services.policy.rollout.run_group`) over the in-process env client, so a
demonstration's chat is exactly the chat the policy is asked during RL.

With ``expert_prob < 1`` it is an ε-expert: the oracle's action with probability
``expert_prob``, otherwise a uniformly random admissible action (single-turn: a random number).
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Coroutine, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, TypeVar

from rlanything.v1.events_pb2 import RolloutJob, SamplingParams, TaskRef, Trajectory

from services.common.models.generation import Chat, Completion, Sampling, Seeds
from services.env.families.base import TaskFamily, TaskSpec
from services.offline.local_env import LocalEnvClient
from services.policy.rollout import run_group

__all__ = ["Demonstration", "ExpertAgent", "expert_demonstrations", "expert_demonstrations_async",
           "play_expert_episode", "run_sync"]

T = TypeVar("T")


def run_sync(coro: Coroutine[Any, Any, T]) -> T:
    """Run ``coro`` to completion from synchronous code, also when the caller is inside a
    running event loop (then in a worker thread with its own loop)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, coro).result()


@dataclass(frozen=True)
class Demonstration:
    """One supervised example: the step chat and the expert's answer text."""

    chat: list[dict[str, str]]
    response: str


@dataclass(frozen=True)
class Answered:
    """One chat the agent answered: whose session, the chat, the answer, and whether it was the oracle's."""

    session_id: str
    chat: list[dict[str, str]]
    text: str
    expert: bool


class ExpertAgent:
    """An `Agent` (policy.rollout) that plays the oracle of the episodes of ``env``.

    ``stop_without_oracle``: where the oracle has no action (no plan, or its action is not
    admissible) answer an invalid text, so a loop run with ``invalid_action="end_episode"`` stops
    there (demonstrations); otherwise play a random action there. Every answer is kept in
    ``answered``, in order.
    """

    model_version = 0

    def __init__(self, env: LocalEnvClient, expert_prob: float = 1.0, rng: random.Random | None = None,
                 stop_without_oracle: bool = False) -> None:
        if not 0.0 <= expert_prob <= 1.0:
            raise ValueError(f"expert_prob must be in [0, 1], got {expert_prob}")
        self.env = env
        self.expert_prob = expert_prob
        self.rng = rng or random.Random(0)
        self.stop_without_oracle = stop_without_oracle
        self.answered: list[Answered] = []

    async def answer(self, session_ids: Sequence[str], chats: Sequence[Chat], sampling: Sampling,
                     seeds: Seeds = None) -> list[Completion]:
        """The expert's answers; ``seeds`` are ignored (its draws come from ``rng``, in call order)."""
        out = []
        for sid, chat in zip(session_ids, chats):
            text, expert = await asyncio.to_thread(self._choose, sid)
            self.answered.append(Answered(sid, [dict(m) for m in chat], text, expert))
            out.append(Completion(text, (), (), (), "stop"))
        return out

    def _choose(self, session_id: str) -> tuple[str, bool]:
        episode = self.env.sessions.get(session_id).episode
        plan = episode.oracle_plan()
        if episode.single_turn:  # the order of the random draws is part of the recorded data sets
            if self.stop_without_oracle and not plan:
                return "", False
            if self.rng.random() < self.expert_prob:
                return f"\\boxed{{{(plan or ['?'])[0]}}}", bool(plan)
            return f"\\boxed{{{self.rng.randint(0, 99)}}}", False
        actions = list(episode.admissible_actions)
        expert = plan[0] if plan and plan[0] in actions and self.rng.random() < self.expert_prob else None
        if expert is None and self.stop_without_oracle:
            return "", False
        action = expert if expert is not None else self.rng.choice(actions)
        return f"\\boxed{{{actions.index(action) + 1}}}", expert is not None


def _job(family: TaskFamily, slot_id: str, seed: int) -> RolloutJob:
    return RolloutJob(job_id=slot_id, task=TaskRef(slot_id=slot_id, version=0, family=family.name), group_size=1,
                      seeds=[seed], max_steps=family.max_steps, split="train", jobs_in_round=1,
                      sampling=SamplingParams(temperature=0.0, max_new_tokens=1))


async def play_expert_episode(family: TaskFamily, spec: TaskSpec, expert_prob: float, rng: random.Random,
                              history_steps: int, episode_seed: int = 0, stop_without_oracle: bool = False,
                              agent_log: list[Answered] | None = None) -> Trajectory:
    """One episode of ``spec`` played by an `ExpertAgent` through the rollout loop.

    ``stop_without_oracle``: the episode ends at the first state without an oracle action. The
    trajectory's steps carry prompts, answers, actions and oracle labels (no token ids).
    """
    env = LocalEnvClient({family.name: family}, lambda ref: spec)
    agent = ExpertAgent(env, expert_prob, rng, stop_without_oracle)
    (trajectory,) = await run_group(_job(family, spec.key(), episode_seed), env, agent, history_steps,
                                    invalid_action="end_episode")
    if agent_log is not None:
        agent_log.extend(agent.answered)
    return trajectory


async def expert_demonstrations_async(family: TaskFamily, spec: TaskSpec, history_steps: int = 2) -> list[Demonstration]:
    """The expert's steps through ``spec`` (none when the oracle has no plan), as (chat, answer)."""
    answered: list[Answered] = []
    await play_expert_episode(family, spec, 1.0, random.Random(0), history_steps, 0, True, answered)
    demos = []
    for a in answered:
        if not a.expert:
            break
        demos.append(Demonstration(a.chat, a.text))
    return demos


def expert_demonstrations(family: TaskFamily, spec: TaskSpec, history_steps: int = 2) -> list[Demonstration]:
    """`expert_demonstrations_async` from synchronous code."""
    return run_sync(expert_demonstrations_async(family, spec, history_steps))
