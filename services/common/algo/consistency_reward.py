"""Consistency rewards of the reward model's votes (RLAnything loop 2, arXiv 2602.02488).

For one judged step k of rollout j, with the m votes S_l ∈ {+1, −1, 0} (0 = unparseable):

    raw_l = (O_j + λ·S̄_{j,k}) · S_l    when S_l = ±1
    raw_l = penalty (−2)               when S_l = 0 (format penalty)
    R_l   = (raw_l − mean(raw)) / std(raw)   over the m votes, population std

What it reduces to: when λ ≤ 1 and the valid votes disagree, |λ·S̄| < 1, so O + λ·S̄ has the
sign of O and the votes that agree with the outcome get R > 0, the others R < 0. Unanimous
steps (and any step whose raw rewards are all equal) have zero variance and give no sample.
Degenerate case: zero variance → None (no sample), never m zero-advantage samples.
"""

from __future__ import annotations

from collections.abc import Sequence

from services.common.algo.integrated_reward import mean_vote
from services.common.algo.zscore import STD_EPS, has_spread, zscore

__all__ = ["INVALID_VOTE_PENALTY", "raw_vote_rewards", "consistency_rewards"]

INVALID_VOTE_PENALTY = -2.0
"""The reference's raw reward of an unparseable vote."""


def raw_vote_rewards(outcome: int, votes_M: Sequence[int], lam: float,
                     invalid_penalty: float = INVALID_VOTE_PENALTY) -> list[float]:
    """raw_l for each of the m votes of one step (S̄ computed from the same votes).

    Raises:
        ValueError: ``outcome`` not ±1, a vote outside {+1, −1, 0}, or ``lam`` negative.
    """
    if outcome not in (1, -1):
        raise ValueError(f"outcome must be +1 or -1, got {outcome}")
    if lam < 0:
        raise ValueError(f"lam must be >= 0, got {lam}")
    target = outcome + lam * mean_vote(votes_M)
    return [target * v if v != 0 else invalid_penalty for v in votes_M]


def consistency_rewards(outcome: int, votes_M: Sequence[int], lam: float,
                        invalid_penalty: float = INVALID_VOTE_PENALTY,
                        eps: float = STD_EPS) -> list[float] | None:
    """R_l, the z-scored raw rewards of the m votes of one step, or None when std ≤ ``eps``.

    Returns:
        A list of length m, or None (the step trains the RM not at all).

    Raises:
        ValueError: as `raw_vote_rewards`.
    """
    raw_M = raw_vote_rewards(outcome, votes_M, lam, invalid_penalty)
    if not has_spread(raw_M, eps):
        return None
    return zscore(raw_M, eps)
