"""The data filters' band edges: policy [1/G, 1-1/G], reward model [0.2, 0.8], both inclusive."""

from __future__ import annotations

import pytest

from services.common.algo.policy_band import in_policy_band
from services.common.algo.rm_band import in_rm_band
from services.common.algo.task_acc import task_acc


@pytest.mark.parametrize(("acc", "inside"), [(0.2, True), (0.8, True), (0.5, True), (0.19999, False),
                                             (0.80001, False), (0.0, False), (1.0, False)])
def test_rm_band_edges_are_inclusive(acc: float, inside: bool) -> None:
    assert in_rm_band(acc) is inside


def test_rm_band_edges_hold_for_computed_acc() -> None:
    assert in_rm_band(task_acc([1, -1, -1, -1, -1]))          # 1/5
    assert in_rm_band(task_acc([1, 1, 1, 1, -1]))             # 4/5
    assert not in_rm_band(task_acc([1] + [-1] * 5))           # 1/6
    assert in_rm_band(0.3, low=0.3, high=0.3)
    with pytest.raises(ValueError, match="must not exceed"):
        in_rm_band(0.5, low=0.6, high=0.4)


@pytest.mark.parametrize(("wins", "group_size", "inside"), [
    (0, 8, False), (1, 8, True), (7, 8, True), (8, 8, False), (1, 3, True), (2, 3, True), (1, 1, False),
    (0, 1, False), (1, 2, True)])
def test_policy_band_is_one_win_and_one_loss(wins: int, group_size: int, inside: bool) -> None:
    assert in_policy_band(wins / group_size, group_size) is inside


def test_policy_band_edges_are_one_over_g() -> None:
    assert in_policy_band(1 / 8, 8) and in_policy_band(1 - 1 / 8, 8)
    assert not in_policy_band(1 / 8 - 1e-6, 8) and not in_policy_band(1 - 1 / 8 + 1e-6, 8)
    assert in_policy_band(2 / 3, 4)  # a partial group: 2 wins of the 3 rollouts received, G = 4
    with pytest.raises(ValueError, match="acc must be in"):
        in_policy_band(1.5, 4)
