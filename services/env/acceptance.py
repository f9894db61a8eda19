"""The acceptance rule for a candidate task variant, as a pure gate (arXiv 2602.02488 §3.3).

After a candidate's own G rollouts give ``acc_new``, with ``acc_prev`` the parent's success rate
when the variant was requested:

* harder:  accept iff acc_new > 0 and band_low ≤ acc_new < acc_prev
* easier:  accept iff acc_new > 0 and acc_prev < acc_new ≤ band_high

with the band [0.2, 0.8] by default. Degenerate case: acc_new = 0 is never accepted (a task no
rollout solves teaches nothing), even when the band's lower edge is set to 0. Modelled on
prime-rl's curriculum gates: `admit()`, `state_dict()`, `metrics()`.
"""

from __future__ import annotations

from dataclasses import dataclass

from rlanything.v1.events_pb2 import DIRECTION_EASIER, DIRECTION_HARDER

__all__ = ["Verdict", "VariantGate", "LiveVerdict", "live_verdict"]


@dataclass(frozen=True)
class Verdict:
    """The gate's decision and its reason (the reason goes into the task-pool event)."""

    accepted: bool
    reason: str


class VariantGate:
    """Accept or reject a candidate variant from its parent's and its own success rate."""

    def __init__(self, band_low: float = 0.2, band_high: float = 0.8) -> None:
        if not 0.0 <= band_low < band_high <= 1.0:
            raise ValueError(f"need 0 <= band_low < band_high <= 1, got [{band_low}, {band_high}]")
        self.band_low = band_low
        self.band_high = band_high
        self.counts = {"harder/accepted": 0, "harder/rejected": 0, "easier/accepted": 0, "easier/rejected": 0}

    def verdict(self, direction: int, acc_prev: float, acc_new: float) -> Verdict:
        """Decide without counting (pure).

        Raises:
            ValueError: ``direction`` is neither HARDER nor EASIER, or an acc is outside [0, 1].
        """
        for name, acc in (("acc_prev", acc_prev), ("acc_new", acc_new)):
            if not 0.0 <= acc <= 1.0:
                raise ValueError(f"{name} must be in [0, 1], got {acc}")
        if acc_new <= 0.0:
            return Verdict(False, f"acc_new={acc_new:.3f}: no rollout solved the candidate")
        if direction == DIRECTION_HARDER:
            if acc_new < self.band_low:
                return Verdict(False, f"harder: acc_new={acc_new:.3f} below band {self.band_low}")
            if acc_new >= acc_prev:
                return Verdict(False, f"harder: acc_new={acc_new:.3f} not below acc_prev={acc_prev:.3f}")
            return Verdict(True, f"harder: {self.band_low} <= acc_new={acc_new:.3f} < acc_prev={acc_prev:.3f}")
        if direction == DIRECTION_EASIER:
            if acc_new > self.band_high:
                return Verdict(False, f"easier: acc_new={acc_new:.3f} above band {self.band_high}")
            if acc_new <= acc_prev:
                return Verdict(False, f"easier: acc_new={acc_new:.3f} not above acc_prev={acc_prev:.3f}")
            return Verdict(True, f"easier: acc_prev={acc_prev:.3f} < acc_new={acc_new:.3f} <= {self.band_high}")
        raise ValueError(f"direction must be HARDER or EASIER, got {direction}")

    def admit(self, direction: int, acc_prev: float, acc_new: float) -> Verdict:
        """Decide and count the decision in `metrics()`."""
        v = self.verdict(direction, acc_prev, acc_new)
        side = "harder" if direction == DIRECTION_HARDER else "easier"
        self.counts[f"{side}/{'accepted' if v.accepted else 'rejected'}"] += 1
        return v

    def state_dict(self) -> dict[str, float | dict[str, int]]:
        """Band and counts, to checkpoint and restore the gate."""
        return {"band_low": self.band_low, "band_high": self.band_high, "counts": dict(self.counts)}

    def load_state_dict(self, state: dict[str, float | dict[str, int]]) -> None:
        """Restore counts saved by `state_dict` (the band comes from the config)."""
        counts = state["counts"]
        assert isinstance(counts, dict)
        self.counts.update(counts)

    def metrics(self) -> dict[str, float]:
        """Counts under the ``env/`` namespace, e.g. ``env/harder/accepted``."""
        return {f"env/{k}": float(v) for k, v in self.counts.items()}


@dataclass(frozen=True)
class LiveVerdict:
    """What a live task's own rollouts decide: its new split (None: stays pending), its new
    ``hint`` knob (None: unchanged), whether it was admitted, and the reason."""

    split: str | None
    hint: float | None
    accepted: bool
    reason: str


def live_verdict(acc: float, hint: float, has_hint_text: bool, heldout: bool) -> LiveVerdict:
    """Admission of a live task from its candidate rollouts (pure; docs/live-usage.md):

    * 0 < acc < 1 (a win and a loss: something to learn) → admitted, to ``live_heldout`` when
      ``heldout`` (never trained on: it measures whether real failures get fixed), else ``train``;
    * acc = 0 without the hint shown, and the user gave a correction → retried with ``hint`` = 1;
    * acc = 0 otherwise → ``live_rejected`` (the policy cannot solve it now);
    * acc = 1 → ``live_solved`` (the current policy already fixes this failure).

    Raises:
        ValueError: ``acc`` outside [0, 1].
    """
    if not 0.0 <= acc <= 1.0:
        raise ValueError(f"acc must be in [0, 1], got {acc}")
    if 0.0 < acc < 1.0:
        split = "live_heldout" if heldout else "train"
        return LiveVerdict(split, None, True, f"live: 0 < acc={acc:.3f} < 1: admitted to {split}")
    if acc >= 1.0:
        return LiveVerdict("live_solved", None, False, "live: acc=1.000: the current policy already solves it")
    if not hint and has_hint_text:
        return LiveVerdict(None, 1.0, False, "live: acc=0.000: retried with the user's correction as a hint")
    return LiveVerdict("live_rejected", None, False, "live: acc=0.000: no rollout solves it, hint or not")
