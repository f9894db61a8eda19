"""The coding rewards (CURE, arXiv 2506.03136): program rewards, unit-test rewards, the keep rule."""

from __future__ import annotations

import math
import random

import pytest

from services.common.algo.coding_rewards import (correct_programs, keep_task, pass_all_rate, pass_fractions,
                                                 program_rewards, raw_unit_test_rewards, unit_test_accuracy,
                                                 unit_test_rewards, unit_tests_correct)

T, F = True, False


def test_program_reward_is_the_pass_fraction_z_scored_within_the_task():
    gt = [[T, T, T, T], [T, T, F, F], [F, F, F, F], [T, T, T, T]]
    assert pass_fractions(gt) == [1.0, 0.5, 0.0, 1.0]
    assert correct_programs(gt) == [T, F, F, T]
    # mean 0.625, population std sqrt(((.375)^2*2 + (.125)^2 + (.625)^2)/4) = 0.414578...
    std = math.sqrt((0.375 ** 2 * 2 + 0.125 ** 2 + 0.625 ** 2) / 4)
    assert program_rewards(gt) == pytest.approx([0.375 / std, -0.125 / std, -0.625 / std, 0.375 / std])
    assert program_rewards([[T, F], [F, T]]) == [0.0, 0.0]  # no spread: no signal
    assert program_rewards([]) == []


def test_a_correct_test_scores_the_wrong_programs_it_catches_a_wrong_one_minus_those_it_lets_pass():
    # programs 0, 1 correct; 2, 3, 4 wrong. Tests: 0 catches all 3 wrong, 1 catches 1 (2 pass it),
    # 2 is wrong (correct program 1 fails it) and 2 wrong programs pass it, 3 is wrong and no one passes it.
    passes = [[T, T, T, F],
              [T, T, F, F],
              [F, T, T, F],
              [F, T, T, F],
              [F, F, F, F]]
    correct = [T, T, F, F, F]
    assert unit_tests_correct(passes, correct) == [T, T, F, F]
    raw = raw_unit_test_rewards(passes, correct)
    assert raw == [3.0, 1.0, -2.0, 0.0]
    mean, std = 0.5, math.sqrt((2.5 ** 2 + 0.5 ** 2 + 2.5 ** 2 + 0.5 ** 2) / 4)
    assert unit_test_rewards(passes, correct) == pytest.approx([(r - mean) / std for r in raw])
    assert unit_test_accuracy(unit_tests_correct(passes, correct)) == 0.5


def test_the_reference_counts_as_one_more_correct_program():
    passes = [[T, T], [F, T]]
    correct = [F, F]  # no generated program is correct: every test is vacuously correct ...
    assert unit_tests_correct(passes, correct) == [T, T]
    assert raw_unit_test_rewards(passes, correct) == [1.0, 0.0]
    # ... unless the reference fails it: test 1 (which the reference fails) is wrong, and lets 2 pass
    assert unit_tests_correct(passes, correct, reference_K=[T, F]) == [T, F]
    assert raw_unit_test_rewards(passes, correct, reference_K=[T, F]) == [1.0, -2.0]


def cure_single_sum(passes, correct):
    """CURE's one-line form: −Σ(1−I)B + (Π(1 − I + I·B))·Σ(1−I)."""
    out = []
    for k in range(len(passes[0])):
        caught = -sum((1 - i) * b[k] for i, b in zip(correct, passes))
        all_correct_pass = math.prod(1 - i + i * b[k] for i, b in zip(correct, passes))
        out.append(float(caught + all_correct_pass * sum(1 - i for i in correct)))
    return out


def test_the_two_case_form_equals_cure_s_single_sum():
    rng = random.Random(0)
    for _ in range(300):
        n, k = rng.randint(1, 8), rng.randint(1, 6)
        passes = [[rng.random() < 0.5 for _ in range(k)] for _ in range(n)]
        correct = [rng.random() < 0.4 for _ in range(n)]
        assert raw_unit_test_rewards(passes, correct) == cure_single_sum(
            [[int(b) for b in row] for row in passes], [int(c) for c in correct])


@pytest.mark.parametrize(("rate", "kept"), [(0.0, F), (0.19, F), (0.2, T), (0.5, T), (0.8, T), (0.81, F),
                                            (1.0, F), (None, F)])
def test_a_task_is_kept_while_its_pass_all_rate_is_in_the_band(rate, kept):
    assert keep_task(rate) is kept


def test_pass_all_rate_is_the_share_of_correct_programs():
    assert pass_all_rate([T, F, F, T, F]) == 0.4
    assert pass_all_rate([]) is None and unit_test_accuracy([]) is None


@pytest.mark.parametrize(("call", "message"), [
    (lambda: pass_fractions([[T, T], [T]]), "gt_NT: rows have different lengths"),
    (lambda: pass_fractions([[], []]), "at least one ground-truth test"),
    (lambda: unit_tests_correct([[T]], [T, F]), "passes_NK has 1 rows but correct_N has 2"),
    (lambda: unit_tests_correct([[T, F]], [T], reference_K=[T]), "passes_NK: rows have 2 entries, expected 1"),
    (lambda: keep_task(1.5), "pass-all rate must be in"),
    (lambda: keep_task(0.5, low=0.9, high=0.1), "keep band"),
])
def test_bad_input_names_the_field(call, message):
    with pytest.raises(ValueError, match=message):
        call()


def test_program_rewards_from_the_env_s_pass_shares_equal_those_from_the_test_matrix():
    from services.common.algo.coding_rewards import program_rewards_of

    gt = [[T, T, T, T], [T, T, F, F], [F, F, F, F], [T, F, F, F]]
    assert program_rewards_of([1.0, 0.5, 0.0, 0.25]) == pytest.approx(program_rewards(gt))
    with pytest.raises(ValueError, match=r"shares_N: pass fractions must be in \[0, 1\], got 1.5"):
        program_rewards_of([0.5, 1.5])
