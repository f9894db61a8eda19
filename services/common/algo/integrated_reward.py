"""Integrated step reward of the policy (RLAnything loop 1, arXiv 2602.02488).

    S̄_{j,k} = (1/m) Σ_l S_{j,k,l}        S ∈ {+1, −1, 0}; an unparseable vote (0) counts as 0
    r_{j,k}  = O_j + λ·S̄_{j,k}

O_j = ±1 is the verified outcome of rollout j, S̄ the mean of the reward model's m votes on
step k. λ = 1 in the paper; λ = 0 is the outcome-only ablation (every step gets O_j).
Degenerate case: a step with no vote has S̄ = 0, so r = O_j.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

__all__ = ["mean_vote", "step_rewards"]


def mean_vote(votes_M: Sequence[int]) -> float:
    """S̄: mean of the m vote values (invalid votes are 0); 0.0 when there is no vote.

    Raises:
        ValueError: a vote value outside {+1, −1, 0}.
    """
    bad = sorted({v for v in votes_M if v not in (1, -1, 0)})
    if bad:
        raise ValueError(f"vote values must be +1, -1 or 0 (invalid), got {bad}")
    return math.fsum(votes_M) / len(votes_M) if votes_M else 0.0


def step_rewards(outcome: int, mean_votes_K: Sequence[float], lam: float) -> list[float]:
    """r_k = O + λ·S̄_k for each of the K steps of one rollout.

    Raises:
        ValueError: ``outcome`` is not ±1 or ``lam`` is negative.
    """
    if outcome not in (1, -1):
        raise ValueError(f"outcome must be +1 or -1, got {outcome}")
    if lam < 0:
        raise ValueError(f"lam must be >= 0, got {lam}")
    return [outcome + lam * s for s in mean_votes_K]
