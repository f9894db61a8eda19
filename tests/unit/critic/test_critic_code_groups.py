"""The critic on groups of family code: CURE's program reward (share of ground-truth tests passed,
z-scored in the group) is the policy's advantage, and the [0.2, 0.8] pass-all keep rule decides."""

from __future__ import annotations

import math

import pytest

from services.common.config import CriticServiceConfig
from services.critic.group_eval import evaluate_group
from tests.unit.critic.critic_builders import judged


def code_group(shares: list[float], split: str = "train"):
    """One code job: rollout j passed ``shares[j]`` of the tests (won when all of them), one step each."""
    recs = []
    for j, share in enumerate(shares):
        rec = judged("r0/code/train-0000/v0", j, 1 if share == 1.0 else -1, [[0, 0, 0]], group_size=len(shares),
                     slot_id="code/train-0000", split=split)
        rec.trajectory.task.family = "code"
        rec.trajectory.steps[0].env_reward = share
        recs.append(rec)
    return recs


def advantages(out) -> dict[str, float]:
    return {s.sample_id: s.advantage for s in out.policy.samples}


def test_the_program_reward_is_the_z_scored_share_of_tests_passed():
    shares = [1.0, 0.5, 0.25, 0.0, 1.0]  # pass-all rate 0.4: kept
    out = evaluate_group(code_group(shares), CriticServiceConfig(), partial=False)
    mean = sum(shares) / 5
    std = math.sqrt(sum((s - mean) ** 2 for s in shares) / 5)
    assert advantages(out) == pytest.approx({f"r0/code/train-0000/v0/{j}/0": (s - mean) / std
                                             for j, s in enumerate(shares)})
    assert out.report.acc == 0.4 and out.stats["sum/policy_steps"] == 5.0


@pytest.mark.parametrize(("shares", "kept"), [
    ([1.0, 1.0, 1.0, 1.0, 0.5], True),     # pass-all 0.8: kept (the band is closed)
    ([1.0, 1.0, 1.0, 1.0, 1.0], False),    # every program passes everything: no signal
    ([0.0, 0.5, 0.25, 0.75, 0.5], False),  # pass-all 0.0: dropped, though the shares differ
    ([1.0, 0.5, 0.5, 0.5, 0.5], True),     # pass-all 0.2: kept
])
def test_a_code_task_trains_only_while_its_pass_all_rate_is_in_the_band(shares, kept):
    out = evaluate_group(code_group(shares), CriticServiceConfig(), partial=False)
    assert bool(out.policy.samples) is kept


def test_the_keep_band_and_the_switch_are_config_keys():
    shares = [0.0, 0.5, 0.25, 0.75, 0.5]
    wide = evaluate_group(code_group(shares), CriticServiceConfig(code_keep_low=0.0), partial=False)
    assert len(wide.policy.samples) == 5
    # code_rewards off: the usual r = O + λ·S̄ and policy band (all rollouts lost: no samples)
    off = evaluate_group(code_group(shares), CriticServiceConfig(code_rewards=False, code_keep_low=0.0), partial=False)
    assert off.policy.samples == []


def test_evaluation_groups_train_nothing():
    out = evaluate_group(code_group([1.0, 0.5, 0.0, 0.5], split="heldout"), CriticServiceConfig(), partial=False)
    assert out.policy.samples == [] and out.report.acc == 0.25


def test_a_codeio_group_gets_the_same_program_reward():
    recs = code_group([1.0, 0.5, 0.0, 0.0, 0.5])  # pass-all 0.2: kept
    for rec in recs:
        rec.trajectory.task.family = "codeio"
    z = {j: (s - 0.4) / math.sqrt(0.14) for j, s in enumerate([1.0, 0.5, 0.0, 0.0, 0.5])}
    out = evaluate_group(recs, CriticServiceConfig(), partial=False)
    assert advantages(out) == pytest.approx({f"r0/code/train-0000/v0/{j}/0": v for j, v in z.items()})
