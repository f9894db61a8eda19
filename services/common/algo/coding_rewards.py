"""Rewards of the coding setting: the policy's programs and the reward model's unit tests, each
trained from the other (CURE, Wang et al., "Co-Evolving LLM Coder and Unit Tester via Reinforcement
Learning", arXiv 2506.03136, §3; the RLAnything paper's coding setting, arXiv 2602.02488).

For one task, N programs of the policy and K unit tests of the reward model are run against each
other, and the programs against the task's T ground-truth tests, all in the sandbox:

* ``gt_NT[n][t]``: program n passes ground-truth test t;
* ``passes_NK[n][k]``: program n, run on generated test k's input, prints test k's output.

**Program reward** (as the issue and the released code describe it): the share of ground-truth
tests the program passes, z-scored over the task's N programs::

    p_n = (1/T) Σ_t gt_NT[n][t],        R_n = (p_n − mean(p)) / std(p)   (population std; all 0 when std = 0)

A program is **correct** when it passes every ground-truth test (p_n = 1; CURE's I_{s_n}).

**Unit-test reward** (CURE eq. for r_{u_k}): a generated test is *correct* when every correct
program passes it (the task's reference solution counts as one more correct program when its row
``reference_K`` is given). With W = the number of wrong programs::

    correct test:  raw_k = Σ_{n wrong} (1 − passes_NK[n][k])     (the wrong programs it catches)
    wrong test:    raw_k = − Σ_{n wrong} passes_NK[n][k]         (minus the wrong programs it lets pass)
    R_k = (raw_k − mean(raw)) / std(raw)                         over the task's K tests (all 0 when std = 0)

CURE writes it as one sum, raw_k = −Σ_n (1 − I_n)·B_{n,k} + (Π_n (1 − I_n + I_n·B_{n,k}))·Σ_n (1 − I_n),
which is the same: Σ_wrong(1 − B) = W − Σ_wrong B. With no correct program (and no reference) every
test counts as correct, as the product over an empty set is 1.

**Keep rule**: a task trains only while its pass-all rate (share of its programs that are correct)
is in [0.2, 0.8] (`keep_task`): outside it the program rewards carry almost no signal.

**Unit-test accuracy** (the metric): the share of generated tests that are correct.
"""

from __future__ import annotations

from collections.abc import Sequence

from services.common.algo.zscore import STD_EPS, zscore

__all__ = ["KEEP_LOW", "KEEP_HIGH", "pass_fractions", "correct_programs", "program_rewards", "program_rewards_of",
           "unit_tests_correct",
           "raw_unit_test_rewards", "unit_test_rewards", "unit_test_accuracy", "pass_all_rate", "keep_task"]

KEEP_LOW = 0.2
"""Lowest pass-all rate at which a task is kept for training (inclusive)."""
KEEP_HIGH = 0.8
"""Highest pass-all rate at which a task is kept for training (inclusive)."""


def _rows(name: str, matrix: Sequence[Sequence[bool]], width: int | None = None) -> int:
    """The common row length of ``matrix``; raises ValueError naming ``name`` when rows differ."""
    widths = {len(row) for row in matrix}
    if len(widths) > 1:
        raise ValueError(f"{name}: rows have different lengths {sorted(widths)}")
    found = widths.pop() if widths else (width or 0)
    if width is not None and found != width:
        raise ValueError(f"{name}: rows have {found} entries, expected {width}")
    return found


def pass_fractions(gt_NT: Sequence[Sequence[bool]]) -> list[float]:
    """p_n: the share of the T ground-truth tests each of the N programs passes.

    Raises:
        ValueError: rows of different lengths, or T = 0 (``gt_NT`` names the field).
    """
    tests = _rows("gt_NT", gt_NT)
    if gt_NT and tests == 0:
        raise ValueError("gt_NT: a task needs at least one ground-truth test, got rows of length 0")
    return [sum(map(bool, row)) / tests for row in gt_NT]


def correct_programs(gt_NT: Sequence[Sequence[bool]]) -> list[bool]:
    """I_n: program n passes every ground-truth test.

    Raises:
        ValueError: as `pass_fractions`.
    """
    return [p == 1.0 for p in pass_fractions(gt_NT)]


def program_rewards(gt_NT: Sequence[Sequence[bool]], eps: float = STD_EPS) -> list[float]:
    """R_n: the pass fractions z-scored over the task's N programs (N zeros when they are all equal).

    Raises:
        ValueError: as `pass_fractions`.
    """
    return zscore(pass_fractions(gt_NT), eps)


def program_rewards_of(shares_N: Sequence[float], eps: float = STD_EPS) -> list[float]:
    """R_n from the pass fractions themselves (what the env reports as a code episode's reward), z-scored
    over the task's N programs.

    Raises:
        ValueError: a share outside [0, 1] (``shares_N`` names the field).
    """
    bad = [p for p in shares_N if not 0.0 <= p <= 1.0]
    if bad:
        raise ValueError(f"shares_N: pass fractions must be in [0, 1], got {bad[0]}")
    return zscore(list(shares_N), eps)


def unit_tests_correct(passes_NK: Sequence[Sequence[bool]], correct_N: Sequence[bool],
                  reference_K: Sequence[bool] | None = None) -> list[bool]:
    """Which of the K generated tests are correct: every correct program passes it (and the reference,
    when its row ``reference_K`` is given: reference_K[k] = the reference solution passes test k).

    Raises:
        ValueError: ``passes_NK`` has not one row per program of ``correct_N``, rows of different
            lengths, or ``reference_K`` of another length.
    """
    if len(passes_NK) != len(correct_N):
        raise ValueError(f"passes_NK has {len(passes_NK)} rows but correct_N has {len(correct_N)} programs")
    width = _rows("passes_NK", passes_NK, None if reference_K is None else len(reference_K))
    out = []
    for k in range(width):
        by_programs = all(row[k] for row, ok in zip(passes_NK, correct_N) if ok)
        out.append(by_programs and (reference_K is None or bool(reference_K[k])))
    return out


def raw_unit_test_rewards(passes_NK: Sequence[Sequence[bool]], correct_N: Sequence[bool],
                     reference_K: Sequence[bool] | None = None) -> list[float]:
    """raw_k: the wrong programs a correct test fails, or minus the wrong programs a wrong test passes.

    Raises:
        ValueError: as `unit_tests_correct`.
    """
    correct_K = unit_tests_correct(passes_NK, correct_N, reference_K)
    wrong_rows = [row for row, ok in zip(passes_NK, correct_N) if not ok]
    out = []
    for k, correct in enumerate(correct_K):
        passing = sum(bool(row[k]) for row in wrong_rows)
        out.append(float(len(wrong_rows) - passing) if correct else -float(passing))
    return out


def unit_test_rewards(passes_NK: Sequence[Sequence[bool]], correct_N: Sequence[bool],
                 reference_K: Sequence[bool] | None = None, eps: float = STD_EPS) -> list[float]:
    """R_k: `raw_unit_test_rewards` z-scored over the task's K tests (K zeros when they are all equal).

    Raises:
        ValueError: as `unit_tests_correct`.
    """
    return zscore(raw_unit_test_rewards(passes_NK, correct_N, reference_K), eps)


def unit_test_accuracy(correct_K: Sequence[bool]) -> float | None:
    """The share of generated tests that are correct; None when there are none."""
    return sum(map(bool, correct_K)) / len(correct_K) if correct_K else None


def pass_all_rate(correct_N: Sequence[bool]) -> float | None:
    """The share of a task's programs that pass every ground-truth test; None when there are none."""
    return sum(map(bool, correct_N)) / len(correct_N) if correct_N else None


def keep_task(rate: float | None, low: float = KEEP_LOW, high: float = KEEP_HIGH) -> bool:
    """Is a task with pass-all rate ``rate`` kept for training: low ≤ rate ≤ high (None: no programs, no).

    Raises:
        ValueError: ``rate`` outside [0, 1], or not 0 ≤ low ≤ high ≤ 1.
    """
    if not 0.0 <= low <= high <= 1.0:
        raise ValueError(f"keep band must satisfy 0 <= low <= high <= 1, got low={low}, high={high}")
    if rate is None:
        return False
    if not 0.0 <= rate <= 1.0:
        raise ValueError(f"pass-all rate must be in [0, 1], got {rate}")
    return low <= rate <= high
