"""The expert plays through the rollout loop: its demonstrations are the policy's own step chats."""

from __future__ import annotations

import asyncio
import random

from services.env.families.base import TaskSpec
from services.env.families.frozenlake import ACTIONS, FrozenLakeFamily, shortest_path
from services.offline.expert import expert_demonstrations, play_expert_episode, run_sync
from services.policy.prompting import HistoryItem, step_chat

SPEC = TaskSpec("gym_text", {"size": 4, "hole_prob": 0.2}, 3)


def test_demonstrations_follow_the_shortest_path_in_the_rl_prompt_format() -> None:
    family = FrozenLakeFamily(view="window")
    demos = expert_demonstrations(family, SPEC, history_steps=1)
    plan = family.make_episode(SPEC, 0).oracle_plan()
    assert plan and [d.response for d in demos] == [f"\\boxed{{{ACTIONS.index(a) + 1}}}" for a in plan]
    episode = family.make_episode(SPEC, 0)  # replay: each chat is exactly what run_group asks the policy
    history: list[HistoryItem] = []
    for demo, action in zip(demos, plan):
        assert demo.chat == step_chat(episode.task_text, history, episode.observation, list(ACTIONS), 1)
        observation = episode.observation
        episode.step(action)
        history.append(HistoryItem(observation, action))
    assert shortest_path(family.map_for(SPEC), 0, 0) == plan  # S is the top-left tile


def test_an_epsilon_expert_mixes_oracle_and_random_actions_and_labels_every_step() -> None:
    family = FrozenLakeFamily()
    won = 0
    for seed in range(20):
        t = asyncio.run(play_expert_episode(family, SPEC, 0.5, random.Random(seed), 2, 0))
        assert t.steps and all(s.valid and s.oracle_label != 0 for s in t.steps)
        won += t.outcome == 1
    assert 0 < won < 20  # neither always the expert nor never


def test_run_sync_works_inside_a_running_event_loop() -> None:
    async def inner() -> int:
        await asyncio.sleep(0)
        return 7

    async def outer() -> int:
        return run_sync(inner())

    assert run_sync(inner()) == 7
    assert asyncio.run(outer()) == 7
