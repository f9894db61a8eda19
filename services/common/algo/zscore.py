"""Z-scores over a group, with the population standard deviation (RLAnything, arXiv 2602.02488).

    z_i = (x_i − μ) / σ,   μ = mean(x),   σ = sqrt(mean((x − μ)²))   (population std, ddof = 0)

Shared by the policy's step advantages (z-scored over the rollouts that reach a step index) and
the reward model's consistency rewards (z-scored over the m votes of a step). No ε is added to σ:
values are exact z-scores, and a group with σ ≤ ``eps`` is degenerate instead.

Degenerate case: σ ≤ ``eps`` (all values equal, a single value, or no value) → every z is 0.0;
`has_spread` lets a caller drop such a group altogether instead (the RM's "no sample" rule).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

__all__ = ["STD_EPS", "population_std", "has_spread", "zscore", "centred"]

STD_EPS = 1e-6
"""σ at or below which a group counts as having zero spread."""


def population_std(values_N: Sequence[float]) -> float:
    """σ of ``values_N`` with ddof = 0; 0.0 for an empty sequence."""
    n = len(values_N)
    if n == 0:
        return 0.0
    mean = math.fsum(values_N) / n
    return math.sqrt(math.fsum((x - mean) ** 2 for x in values_N) / n)


def has_spread(values_N: Sequence[float], eps: float = STD_EPS) -> bool:
    """True when σ(values_N) > ``eps``, i.e. the z-scores carry a signal."""
    return population_std(values_N) > eps


def zscore(values_N: Sequence[float], eps: float = STD_EPS) -> list[float]:
    """(x − μ) / σ for each of the N values, or N zeros when σ ≤ ``eps``.

    Returns:
        A list of length N (empty for empty input).
    """
    n = len(values_N)
    std = population_std(values_N)
    if std <= eps:
        return [0.0] * n
    mean = math.fsum(values_N) / n
    return [(x - mean) / std for x in values_N]


def centred(values_N: Sequence[float], eps: float = STD_EPS) -> list[float]:
    """x − μ for each of the N values (no division by σ, Dr. GRPO), or N zeros when σ ≤ ``eps``
    (the same degenerate rule as `zscore`)."""
    if not has_spread(values_N, eps):
        return [0.0] * len(values_N)
    mean = math.fsum(values_N) / len(values_N)
    return [x - mean for x in values_N]
