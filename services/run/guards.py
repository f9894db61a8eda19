"""Run guards (pure): rules that stop a run whose training has visibly broken.

Format collapse: a policy that stops writing a parseable ``\\boxed{i}`` gets no valid action,
every rollout of a task fails alike, no group has variance and training stops for good (a
policy lr of 5e-4 once did this in round 8). The critic measures ``policy/invalid_answer_rate``
per round; when it stays above ``limit`` for ``patience`` consecutive rounds the run stops with
a message that says what happened and what to change, instead of burning its budget.
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["format_collapse", "INVALID_RATE_KEY"]

INVALID_RATE_KEY = "policy/invalid_answer_rate"


def format_collapse(rounds: Sequence[dict[str, float]], limit: float, patience: int) -> str | None:
    """The reason to stop, or None: the last ``patience`` rounds all have an invalid-answer rate
    above ``limit`` (rounds without the metric break the streak).

    Args:
        rounds: the run's round records in order (``metrics.jsonl`` lines).
        limit: share of steps in (0, 1]; 1.0 or more disables the guard.
        patience: consecutive rounds, ≥ 1.

    Raises:
        ValueError: ``patience`` < 1.
    """
    if patience < 1:
        raise ValueError(f"patience must be >= 1, got {patience}")
    if limit >= 1.0 or len(rounds) < patience:
        return None
    tail = rounds[-patience:]
    rates = [r.get(INVALID_RATE_KEY) for r in tail]
    if any(rate is None or rate <= limit for rate in rates):
        return None
    first, last = int(tail[0]["round"]), int(tail[-1]["round"])
    shown = ", ".join(f"{rate:.2f}" for rate in rates if rate is not None)
    span = f"round {last}" if first == last else f"rounds {first}-{last}"
    return (f"answer format collapsed: invalid-answer rate {shown} in {span} (limit {limit:g} for {patience} "
            f"round{'s' if patience > 1 else ''}); the policy no longer writes a valid \\boxed{{i}}, so no group has "
            f"variance and nothing can be learned. Lower policy.ppo.lr, set policy.ppo.max_kl, or raise "
            f"critic.invalid_answer_penalty; the checkpoints before the collapse are in the run's checkpoints/policy/.")
