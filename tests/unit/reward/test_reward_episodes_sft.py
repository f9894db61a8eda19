"""Recorded ε-expert episodes carry correct oracle labels; cold-start examples flip labels at the noise rate."""

from __future__ import annotations

import random

from rlanything.v1.events_pb2 import STEP_LABEL_BAD, STEP_LABEL_GOOD
from services.common.config import FamilyConfig
from services.env.families.frozenlake import FrozenLakeFamily
from services.offline.judge_episodes import record_group, record_groups
from services.reward.judge_prompt import BAD_VERDICT, GOOD_VERDICT
from services.reward.judges import JudgeSettings
from services.offline.judge_sft import judge_examples, judge_specs

FAM = FamilyConfig(type="gym_text", knobs={"size": 4, "hole_prob": 0.2})


def test_expert_episodes_are_all_good_and_won() -> None:
    spec = judge_specs(FAM, 1, 123)[0]
    (t,) = record_group(FrozenLakeFamily(), spec, 1, 1.0, random.Random(0), "job")
    assert t.outcome == 1 and not t.truncated and t.steps
    assert all(s.oracle_label == STEP_LABEL_GOOD for s in t.steps)
    s = t.steps[0]
    assert s.prompt.startswith("Task: Walk on the frozen lake") and s.response == f"\\boxed{{{s.action_index + 1}}}"
    assert s.next_observation == t.steps[1].observation if len(t.steps) > 1 else "goal" in s.next_observation


def test_labels_agree_with_the_events() -> None:
    trajectories = record_groups(FrozenLakeFamily(), judge_specs(FAM, 30, 500), 4, 0.5, seed=3)
    assert [t.trajectory_id for t in trajectories[:5]] == ["rec/0/0", "rec/0/1", "rec/0/2", "rec/0/3", "rec/1/0"]
    assert {t.group_size for t in trajectories} == {4} and {t.split for t in trajectories} == {"train"}
    steps = [s for t in trajectories for s in t.steps]
    for s in steps:
        event = s.next_observation.splitlines()[0]
        if "hole" in event or "bumped" in event:
            assert s.oracle_label == STEP_LABEL_BAD, event
        if "goal" in event:
            assert s.oracle_label == STEP_LABEL_GOOD
    for t in trajectories:
        assert [s.index for s in t.steps] == list(range(len(t.steps)))
        assert (t.outcome == 1) == ("reached the goal" in t.steps[-1].next_observation)
    wins = sum(t.outcome == 1 for t in trajectories) / len(trajectories)
    assert 0.2 < wins < 0.8  # ε = 0.5 gives mixed groups (the RM band)
    again = record_groups(FrozenLakeFamily(), judge_specs(FAM, 30, 500), 4, 0.5, seed=3)
    assert again == trajectories  # reproducible from the seed


def test_label_noise_flips_about_that_share() -> None:
    trajectories = record_groups(FrozenLakeFamily(), judge_specs(FAM, 60, 900), 1, 0.5, seed=1)
    clean, _ = judge_examples(trajectories, 0.0, random.Random(0), JudgeSettings(prompt_chars=80, field_chars=40))
    noisy, flipped = judge_examples(trajectories, 0.3, random.Random(0), JudgeSettings(prompt_chars=80, field_chars=40))
    assert len(clean) == len(noisy) > 200
    changed = sum(a.response != b.response for a, b in zip(clean, noisy))
    assert changed == flipped and 0.22 < flipped / len(noisy) < 0.38
    assert {d.response for d in clean} == {GOOD_VERDICT, BAD_VERDICT}
    assert clean[0].chat[0]["role"] == "system" and "Agent saw:\n…" in clean[0].chat[1]["content"]
