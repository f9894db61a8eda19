"""Backpressure for generation requests (`services.common.request_limit`): at most ``limit`` at once."""

from __future__ import annotations

import pytest

from services.common.request_limit import RequestLimit
from services.common.errors import BusyError


def test_requests_beyond_the_limit_are_refused_and_slots_come_back() -> None:
    gate = RequestLimit(limit=2, setting="policy.max_pending_requests")
    with gate.slot(), gate.slot():
        assert gate.active == 2
        with pytest.raises(BusyError, match=r"2 requests in progress \(policy.max_pending_requests=2\)"):
            with gate.slot():
                pass
    assert gate.active == 0
    with pytest.raises(RuntimeError):  # a slot is returned when its request fails, too
        with gate.slot():
            raise RuntimeError("generation failed")
    assert gate.active == 0 and gate.refused_total == 1
