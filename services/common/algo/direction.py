"""Which way a task should move after its G rollouts (RLAnything loop 3, arXiv 2602.02488 §3.3).

acc ≥ 0.8 → ask for a harder variant; acc ≤ 0.2 → an easier one; otherwise keep the task.
Both the critic (it writes the direction into the task report) and the env (it acts on it) use
this one function.
"""

from __future__ import annotations

from rlanything.v1.events_pb2 import DIRECTION_EASIER, DIRECTION_HARDER, DIRECTION_UNSPECIFIED

__all__ = ["direction_for"]


def direction_for(acc: float, harder_at: float = 0.8, easier_at: float = 0.2) -> int:
    """The `Direction` enum value for a task whose success rate is ``acc`` in [0, 1].

    Raises:
        ValueError: ``acc`` outside [0, 1], or ``easier_at >= harder_at``.
    """
    if not 0.0 <= acc <= 1.0:
        raise ValueError(f"acc must be in [0, 1], got {acc}")
    if easier_at >= harder_at:
        raise ValueError(f"easier_at ({easier_at}) must be below harder_at ({harder_at})")
    if acc >= harder_at:
        return DIRECTION_HARDER
    if acc <= easier_at:
        return DIRECTION_EASIER
    return DIRECTION_UNSPECIFIED
