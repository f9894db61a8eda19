"""The critic on code groups whose RM wrote unit tests (critic.unit_tests): CURE's test rewards as the
RM samples, unit-test accuracy, the keep rule; the matrix of runs is given (the sandbox shell is tested
in tests/integration/critic/test_unit_test_scoring.py)."""

from __future__ import annotations

import math

import pytest

from services.common.config import CriticServiceConfig
from services.critic.group_eval import evaluate_group
from services.critic.round_stats import round_metrics
from services.critic.unit_test_eval import generated_tests, kept_tests, programs_of, rejection_reasons
from tests.unit.critic.critic_builders import judged


def code_group(won: list[bool], tests: list[list[str]], split: str = "train"):
    """Rollout j won (passed every ground-truth test) or not; its m generated tests are ``tests[j]``."""
    recs = []
    for j, (w, texts) in enumerate(zip(won, tests)):
        rec = judged("r0/code/train-0000/v0", j, 1 if w else -1, [[1] * len(texts)], group_size=len(won),
                     slot_id="code/train-0000", split=split)
        rec.trajectory.task.family = "code"
        rec.trajectory.steps[0].action = f"```python\nprint({j})\n```"
        for vote, text in zip(rec.judgements[0].votes, texts):
            vote.response = text
        recs.append(rec)
    return recs


WON = [True, False, False, False, True]   # pass-all 0.4: kept
TESTS = [["\\boxed{1 => 4}"], ["\\boxed{2 => 7}"], ["garbage"], ["\\boxed{3 => 0}"], ["\\boxed{0 => 1}"]]
# parseable tests k = 0..3 (rollouts 0, 1, 3, 4); programs 0 and 4 are correct.
PASSES = [[True, True, False, True],      # correct program 0: tests 0, 1, 3 pass; test 2 fails -> test 2 wrong
          [False, True, False, True],     # wrong programs 1-3
          [False, False, True, False],
          [True, False, True, False],
          [True, True, False, True]]      # correct program 4


def test_the_generated_tests_and_programs_are_read_from_the_group():
    recs = code_group(WON, TESTS)
    tests = generated_tests(recs)
    assert [(t.rollout, t.vote, t.test) for t in tests] == [
        (0, 0, ("1\n", "4\n")), (1, 0, ("2\n", "7\n")), (2, 0, None), (3, 0, ("3\n", "0\n")), (4, 0, ("0\n", "1\n"))]
    assert programs_of(recs) == [f"print({j})\n" for j in range(5)]


def test_test_rewards_are_cure_s_with_a_format_penalty_z_scored_over_the_group():
    out = evaluate_group(code_group(WON, TESTS), CriticServiceConfig(unit_tests=True), partial=False,
                         unit_test_passes=PASSES)
    # correct tests 0, 1, 3 catch 2, 2, 2 of the 3 wrong programs; wrong test 2 lets 2 pass: -2; garbage: -2
    raw = [2.0, 2.0, -2.0, -2.0, 2.0]   # in vote order: rollouts 0, 1, 2 (garbage), 3 (test 2), 4
    mean = sum(raw) / 5
    std = math.sqrt(sum((r - mean) ** 2 for r in raw) / 5)
    got = {s.sample_id: s.advantage for s in out.reward.samples}
    assert got == pytest.approx({f"r0/code/train-0000/v0/{j}/0/0": (r - mean) / std for j, r in enumerate(raw)})
    assert out.stats["sum/unit_tests"] == out.stats["sum/unit_tests_checked"] == 5
    assert out.stats["sum/unit_tests_correct"] == 3
    assert round_metrics([out.stats])["reward/unit_test_accuracy"] == 0.6


def test_a_task_outside_the_keep_band_trains_no_test_but_counts_its_accuracy():
    passes = [[True] * 4 for _ in range(5)]
    out = evaluate_group(code_group([True] * 5, TESTS), CriticServiceConfig(unit_tests=True), partial=False,
                         unit_test_passes=passes)
    assert out.reward.samples == [] and out.stats["sum/unit_tests_correct"] == 4


def test_a_group_without_a_correct_program_does_not_count_in_the_accuracy():
    """With no correct program every test would be vacuously correct: such a group counts its tests as
    written, not as checked, and the accuracy is left out when no group checked any."""
    out = evaluate_group(code_group([False] * 5, TESTS), CriticServiceConfig(unit_tests=True), partial=False,
                         unit_test_passes=PASSES)
    assert out.stats["sum/unit_tests"] == 5
    assert out.stats["sum/unit_tests_checked"] == out.stats["sum/unit_tests_correct"] == 0
    assert "reward/unit_test_accuracy" not in round_metrics([out.stats])


def test_a_matrix_of_the_wrong_shape_is_refused():
    with pytest.raises(ValueError, match="passes_NK must be 5 x 4"):
        evaluate_group(code_group(WON, TESTS), CriticServiceConfig(unit_tests=True), partial=False,
                       unit_test_passes=PASSES[:4])


def test_a_duplicate_test_is_not_run_nor_trained_twice_and_rejections_are_counted():
    """Rollout 4 writes rollout 0's test again (spaces and a missing final newline aside): it is rejected
    as a duplicate, so the group has 3 kept tests, one sample per kept test and the garbage one."""
    tests = [["\\boxed{1 => 4}"], ["\\boxed{2 => 7}"], ["garbage"], ["\\boxed{3 => 0}"], ["\\boxed{1  => 4  }"]]
    recs = code_group(WON, tests)
    assert rejection_reasons(generated_tests(recs)) == [None, None, "unparseable", None, "duplicate"]
    assert kept_tests(generated_tests(recs)) == [("1\n", "4\n"), ("2\n", "7\n"), ("3\n", "0\n")]
    passes = [row[:2] + row[3:] for row in PASSES[:4]] + [[True, True, True]]
    out = evaluate_group(recs, CriticServiceConfig(unit_tests=True), partial=False, unit_test_passes=passes)
    assert sorted(s.sample_id for s in out.reward.samples) == [f"r0/code/train-0000/v0/{j}/0/0" for j in range(4)]
    assert out.stats["sum/unit_tests_rejected_duplicate"] == 1 and out.stats["sum/unit_tests_rejected_unparseable"] == 1
    metrics = round_metrics([out.stats])
    assert metrics["reward/unit_test_duplicate_share"] == metrics["reward/unit_test_unparseable_share"] == 0.2
