"""The format-collapse guard of `rlanything run` (pure rule)."""

from __future__ import annotations

import pytest

from services.run.guards import INVALID_RATE_KEY, format_collapse


def rounds(*rates: float | None) -> list[dict[str, float]]:
    return [{"round": float(i), **({INVALID_RATE_KEY: r} if r is not None else {})} for i, r in enumerate(rates)]


def test_stops_after_patience_rounds_above_the_limit() -> None:
    reason = format_collapse(rounds(0.02, 0.6, 0.9), limit=0.5, patience=2)
    assert reason is not None
    assert "0.60, 0.90" in reason and "rounds 1-2" in reason and "policy.ppo.lr" in reason


@pytest.mark.parametrize("rates", [(0.9, 0.1), (0.6, 0.5), (0.9, None), (0.9,)])
def test_no_stop_without_a_full_streak(rates: tuple[float | None, ...]) -> None:
    assert format_collapse(rounds(*rates), limit=0.5, patience=2) is None


def test_limit_one_disables_and_patience_is_checked() -> None:
    assert format_collapse(rounds(1.0, 1.0), limit=1.0, patience=1) is None
    assert "round 0" in (format_collapse(rounds(0.7), limit=0.5, patience=1) or "")
    with pytest.raises(ValueError, match="patience"):
        format_collapse(rounds(0.7), limit=0.5, patience=0)
