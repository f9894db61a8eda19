"""The reward model's data filter (RLAnything loop 2, arXiv 2602.02488).

Only tasks whose success rate lies in the balanced band feed the RM:

    low ≤ acc ≤ high,   [low, high] = [0.2, 0.8] by default (both edges inclusive)

The paper's argument: balanced positives and negatives keep the judge unbiased. A tolerance of
1e-9 keeps the edges inclusive under float rounding (e.g. acc = 1/5). Degenerate case:
low = high admits only that one acc.
"""

from __future__ import annotations

__all__ = ["in_rm_band"]

_TOL = 1e-9


def in_rm_band(acc: float, low: float = 0.2, high: float = 0.8) -> bool:
    """True when a task with success rate ``acc`` feeds the reward model.

    Raises:
        ValueError: ``acc`` outside [0, 1], or ``low > high``.
    """
    if not 0.0 <= acc <= 1.0:
        raise ValueError(f"acc must be in [0, 1], got {acc}")
    if low > high:
        raise ValueError(f"band low ({low}) must not exceed high ({high})")
    return low - _TOL <= acc <= high + _TOL
