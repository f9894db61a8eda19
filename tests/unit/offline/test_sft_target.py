"""A cold start that goes on until a success target (`policy.sft.target_success`): where it
measures, how the config refuses a target without room, and what the cache key holds."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from services.common.config import RunConfig
from services.offline.policy_sft import check_points
from services.run.coldstart import policy_coldstart_dir


@pytest.mark.parametrize(("steps", "max_steps", "every", "expected"), [
    (250, 300, 20, [250, 270, 290, 300]),
    (250, 300, 10, [250, 260, 270, 280, 290, 300]),
    (0, 25, 10, [0, 10, 20, 25]),
    (10, 11, 50, [10, 11]),
])
def test_checks_start_at_steps_and_end_at_max_steps(steps: int, max_steps: int, every: int,
                                                    expected: list[int]) -> None:
    assert check_points(steps, max_steps, every) == expected


def test_a_target_without_room_above_steps_is_refused_by_name() -> None:
    with pytest.raises(ValidationError, match=r"target_success=0.3 needs max_steps above steps=250, got max_steps=0"):
        RunConfig.model_validate({"policy": {"sft": {"steps": 250, "target_success": 0.3}}})
    with pytest.raises(ValidationError, match="target_success"):
        RunConfig.model_validate({"policy": {"sft": {"target_success": 1.5, "max_steps": 900}}})


def _cold_dir(**sft: object) -> str:
    fam = {"type": "code", "knobs": {"ops": 1, "examples": 2}, "train_slots": 8, "heldout_slots": 8}
    return str(policy_coldstart_dir(RunConfig.model_validate({"env": {"families": [fam]},
                                                              "policy": {"sft": {"steps": 250, **sft}}})))


def test_the_target_is_in_the_cache_key_only_when_set() -> None:
    plain = _cold_dir()
    assert _cold_dir(max_steps=400, check_every=20) == plain  # no target: those knobs do nothing, same cold start
    target = _cold_dir(target_success=0.3, max_steps=400)
    assert target != plain
    assert _cold_dir(target_success=0.3, max_steps=400, check_every=20) != target
    assert _cold_dir(target_success=0.4, max_steps=400) != target
