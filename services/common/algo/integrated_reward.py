"""Integrated step reward of the policy (RLAnything loop 1, arXiv 2602.02488).

    S̄_{j,k} = (1/m) Σ_l S_{j,k,l}        S ∈ {+1, −1, 0}; an unparseable vote (0) counts as 0
    r_{j,k}  = O_j + λ·S̄_{j,k}  (− c·[answer k invalid], our format term; c = 0 is the paper)

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


def step_rewards(outcome: int, mean_votes_K: Sequence[float], lam: float,
                 invalid_K: Sequence[bool] | None = None, invalid_penalty: float = 0.0) -> list[float]:
    """r_k = O + λ·S̄_k − penalty·[answer k invalid] for each of the K steps of one rollout.

    The format term is our addition (a rule-based format reward, as in DeepSeek-R1's "format
    reward"): a step whose answer is no valid action is a no-op for the environment, so under
    O + λ·S̄ alone it inherits its rollout's outcome and a winning rollout rewards its invalid
    answers. ``invalid_penalty = 0`` (or ``invalid_K = None``) is the paper's formula.

    Raises:
        ValueError: ``outcome`` is not ±1, ``lam`` or ``invalid_penalty`` is negative, or
            ``invalid_K`` has another length than ``mean_votes_K``.
    """
    if outcome not in (1, -1):
        raise ValueError(f"outcome must be +1 or -1, got {outcome}")
    if lam < 0:
        raise ValueError(f"lam must be >= 0, got {lam}")
    if invalid_penalty < 0:
        raise ValueError(f"invalid_penalty must be >= 0, got {invalid_penalty}")
    if invalid_K is not None and len(invalid_K) != len(mean_votes_K):
        raise ValueError(f"invalid_K has {len(invalid_K)} entries, mean_votes_K {len(mean_votes_K)}")
    flags = invalid_K if invalid_K is not None else [False] * len(mean_votes_K)
    return [outcome + lam * s - (invalid_penalty if bad else 0.0) for s, bad in zip(mean_votes_K, flags)]
