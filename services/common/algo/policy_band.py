"""The policy's data filter (RLAnything loop 1, arXiv 2602.02488).

Only tasks with at least one win and one loss train the policy:

    1/G ≤ acc ≤ 1 − 1/G

With acc = wins / n over the n ≤ G rollouts received, this is exactly 1 ≤ wins ≤ n − 1, so a
partial group is filtered by the same rule. A tolerance of 1e-9 keeps the edges inclusive under
float rounding. Degenerate case: G = 1 has an empty band (one rollout cannot both win and lose).
"""

from __future__ import annotations

__all__ = ["in_policy_band"]

_TOL = 1e-9


def in_policy_band(acc: float, group_size: int) -> bool:
    """True when a task with success rate ``acc`` over a group of ``group_size`` trains the policy.

    Raises:
        ValueError: ``acc`` outside [0, 1] or ``group_size`` < 1.
    """
    if not 0.0 <= acc <= 1.0:
        raise ValueError(f"acc must be in [0, 1], got {acc}")
    if group_size < 1:
        raise ValueError(f"group_size must be >= 1, got {group_size}")
    return 1.0 / group_size - _TOL <= acc <= 1.0 - 1.0 / group_size + _TOL
