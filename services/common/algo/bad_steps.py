"""Bad steps: the critic's feedback to the task proposer (RLAnything loop 3, arXiv 2602.02488).

For each failed rollout (O_j = −1), the bad steps are those that every one of the m RM votes
called bad:

    bad(j) = { k : m_k ≥ 1 and S_{j,k,l} = −1 for all l }

An unparseable vote (0) is not a "bad" verdict, so one invalid vote keeps a step off the list.
Degenerate case: a step with no vote at all is never bad (nothing called it bad).
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["bad_step_indices"]


def bad_step_indices(votes_KM: Sequence[Sequence[int]]) -> list[int]:
    """Indices k (0-based, ascending) of the steps whose votes are all −1.

    Args:
        votes_KM: ``votes_KM[k]`` = the m vote values on step k of one (failed) rollout.
    """
    return [k for k, votes_M in enumerate(votes_KM) if votes_M and all(v == -1 for v in votes_M)]
