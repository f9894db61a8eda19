"""`rollout_instance`: the instance one rollout plays when a train task stands for its knobs."""

from __future__ import annotations

from hypothesis import given, strategies as st

from services.env.families.base import TaskSpec, rollout_instance
from services.env.families.frozenlake import FrozenLakeFamily

FAMILY = FrozenLakeFamily()
SPEC = TaskSpec("gym_text", {"size": 4, "hole_prob": 0.2}, 12)


@given(st.integers(0, 2**31 - 1), st.integers(0, 2**31 - 1))
def test_same_knobs_a_seed_from_task_and_rollout(task_seed: int, episode_seed: int) -> None:
    spec = TaskSpec("gym_text", {"size": 5, "hole_prob": 0.25}, task_seed)
    one = rollout_instance(spec, episode_seed)
    assert one == rollout_instance(spec, episode_seed)  # pure: a rerun plays the same instance
    assert one.family == "gym_text" and dict(one.knobs) == {"size": 5, "hole_prob": 0.25}
    assert 0 <= one.seed < 2**31


def test_rollouts_of_one_task_play_different_maps_and_tasks_differ() -> None:
    maps = {tuple(FAMILY.map_for(rollout_instance(SPEC, seed))) for seed in range(8)}
    assert len(maps) >= 6  # 8 rollouts of a group: (nearly) all different 4x4 maps
    other = TaskSpec("gym_text", {"size": 4, "hole_prob": 0.2}, 13)
    assert [rollout_instance(SPEC, s).seed for s in range(8)] != [rollout_instance(other, s).seed for s in range(8)]
    assert all(rollout_instance(SPEC, s).seed != SPEC.seed for s in range(8))
