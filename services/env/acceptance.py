"""The env's acceptance gate for candidate variants, and the admission rule of live tasks.

`VariantGate` applies the paper's rule (`services.common.algo.variant_gate`, arXiv 2602.02488
§3.3) with the configured band and counts its decisions. Modelled on prime-rl's curriculum gates:
`admit()`, `state_dict()`, `metrics()`.
"""

from __future__ import annotations

from dataclasses import dataclass

from rlanything.v1.events_pb2 import DIRECTION_HARDER

from services.common.algo.variant_gate import Verdict, variant_verdict

__all__ = ["Verdict", "VariantGate", "LiveVerdict", "live_verdict"]


class VariantGate:
    """Accept or reject a candidate variant from its parent's and its own success rate."""

    def __init__(self, band_low: float = 0.2, band_high: float = 0.8) -> None:
        if not 0.0 <= band_low < band_high <= 1.0:
            raise ValueError(f"need 0 <= band_low < band_high <= 1, got [{band_low}, {band_high}]")
        self.band_low = band_low
        self.band_high = band_high
        self.counts = {"harder/accepted": 0, "harder/rejected": 0, "easier/accepted": 0, "easier/rejected": 0}

    def verdict(self, direction: int, acc_prev: float, acc_new: float) -> Verdict:
        """Decide without counting (pure; `variant_verdict` with this gate's band).

        Raises:
            ValueError: ``direction`` is neither HARDER nor EASIER, or an acc is outside [0, 1].
        """
        return variant_verdict(direction, acc_prev, acc_new, self.band_low, self.band_high)

    def admit(self, direction: int, acc_prev: float, acc_new: float) -> Verdict:
        """Decide and count the decision in `metrics()`."""
        v = self.verdict(direction, acc_prev, acc_new)
        self.count(direction, v.accepted)
        return v

    def count(self, direction: int, accepted: bool) -> None:
        """Count one decision made elsewhere (`services.env.decisions.decide`) in `metrics()`."""
        side = "harder" if direction == DIRECTION_HARDER else "easier"
        self.counts[f"{side}/{'accepted' if accepted else 'rejected'}"] += 1

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
