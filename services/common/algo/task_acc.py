"""Task success rate over a group of rollouts (RLAnything, arXiv 2602.02488, notation).

    acc = (number of rollouts with O_j = +1) / (number of rollouts)

Outcomes are verified: O_j = +1 (task won) or −1 (lost). The critic computes acc over the
rollouts it actually received, so a partial group (fewer than G) has acc over fewer rollouts.
Degenerate case: no rollout at all has no success rate (ValueError), never a silent 0.
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["count_wins", "task_acc"]


def _check(outcomes_G: Sequence[int]) -> None:
    if not outcomes_G:
        raise ValueError("task acc needs at least one rollout, got none")
    bad = sorted({o for o in outcomes_G if o not in (1, -1)})
    if bad:
        raise ValueError(f"outcomes must be +1 (won) or -1 (lost), got {bad}")


def count_wins(outcomes_G: Sequence[int]) -> int:
    """Number of rollouts with O = +1.

    Raises:
        ValueError: empty input, or an outcome other than ±1.
    """
    _check(outcomes_G)
    return sum(1 for o in outcomes_G if o == 1)


def task_acc(outcomes_G: Sequence[int]) -> float:
    """Share of the rollouts that won, in [0, 1].

    Raises:
        ValueError: empty input, or an outcome other than ±1.
    """
    return count_wins(outcomes_G) / len(outcomes_G)
