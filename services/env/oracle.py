"""Oracle step labels from plan lengths (pure).

A step is *good* when it shortens the oracle's winning plan from the current state (TextWorld's
`policy_commands`, FrozenLake's shortest path) and *bad* otherwise — including a step after
which no winning plan exists (fell into a hole). With no oracle the label is unspecified.
"""

from __future__ import annotations

from rlanything.v1.events_pb2 import STEP_LABEL_BAD, STEP_LABEL_GOOD, STEP_LABEL_UNSPECIFIED

__all__ = ["step_label"]


def step_label(plan_before: int | None, plan_after: int | None, won: bool, single_turn: bool = False) -> int:
    """The `StepLabel` of one step from the oracle plan lengths before and after it (steps)."""
    if single_turn:
        return STEP_LABEL_UNSPECIFIED
    if won:
        return STEP_LABEL_GOOD
    if plan_before is None:
        return STEP_LABEL_UNSPECIFIED
    if plan_after is None:
        return STEP_LABEL_BAD
    return STEP_LABEL_GOOD if plan_after < plan_before else STEP_LABEL_BAD
