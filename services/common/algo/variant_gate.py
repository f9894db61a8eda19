"""The acceptance rule for a candidate task variant (arXiv 2602.02488 §3.3), pure.

After a candidate's own G rollouts give ``acc_new``, with ``acc_prev`` the parent's success rate
when the variant was requested:

* harder:  accept iff acc_new > 0 and band_low ≤ acc_new < acc_prev
* easier:  accept iff acc_new > 0 and acc_prev < acc_new ≤ band_high

with the band [0.2, 0.8] by default. Degenerate case: acc_new = 0 is never accepted (a task no
rollout solves teaches nothing), even when the band's lower edge is set to 0. The env decides with
it (`services.env.acceptance.VariantGate`); the critic applies the same rule to the same numbers
(carried by the job's `CandidateCheck`) to train on an accepted candidate's rollouts.
"""

from __future__ import annotations

from dataclasses import dataclass

from rlanything.v1.events_pb2 import DIRECTION_EASIER, DIRECTION_HARDER

__all__ = ["Verdict", "variant_verdict"]


@dataclass(frozen=True)
class Verdict:
    """The gate's decision and its reason (the reason goes into the task-pool event)."""

    accepted: bool
    reason: str


def variant_verdict(direction: int, acc_prev: float, acc_new: float, band_low: float = 0.2,
                    band_high: float = 0.8) -> Verdict:
    """Accept or reject a candidate variant from its parent's and its own success rate.

    Raises:
        ValueError: ``direction`` is neither HARDER nor EASIER, or an acc is outside [0, 1].
    """
    for name, acc in (("acc_prev", acc_prev), ("acc_new", acc_new)):
        if not 0.0 <= acc <= 1.0:
            raise ValueError(f"{name} must be in [0, 1], got {acc}")
    if acc_new <= 0.0:
        return Verdict(False, f"acc_new={acc_new:.3f}: no rollout solved the candidate")
    if direction == DIRECTION_HARDER:
        if acc_new < band_low:
            return Verdict(False, f"harder: acc_new={acc_new:.3f} below band {band_low}")
        if acc_new >= acc_prev:
            return Verdict(False, f"harder: acc_new={acc_new:.3f} not below acc_prev={acc_prev:.3f}")
        return Verdict(True, f"harder: {band_low} <= acc_new={acc_new:.3f} < acc_prev={acc_prev:.3f}")
    if direction == DIRECTION_EASIER:
        if acc_new > band_high:
            return Verdict(False, f"easier: acc_new={acc_new:.3f} above band {band_high}")
        if acc_new <= acc_prev:
            return Verdict(False, f"easier: acc_new={acc_new:.3f} not above acc_prev={acc_prev:.3f}")
        return Verdict(True, f"easier: acc_prev={acc_prev:.3f} < acc_new={acc_new:.3f} <= {band_high}")
    raise ValueError(f"direction must be HARDER or EASIER, got {direction}")
