"""The candidate acceptance rule at its edges (docs/algorithm.md, loop 3)."""

from __future__ import annotations

import pytest

from rlanything.v1.events_pb2 import DIRECTION_EASIER, DIRECTION_HARDER, DIRECTION_UNSPECIFIED
from services.common.algo.direction import direction_for
from services.env.acceptance import VariantGate

H, E = DIRECTION_HARDER, DIRECTION_EASIER


@pytest.mark.parametrize(("direction", "acc_prev", "acc_new", "accepted"), [
    # harder: accept iff acc_new > 0 and 0.2 <= acc_new < acc_prev
    (H, 1.0, 0.0, False),      # nobody solves it
    (H, 1.0, 0.125, False),    # below the band
    (H, 1.0, 0.2, True),       # lower band edge is inside
    (H, 0.875, 0.5, True),
    (H, 0.8, 0.8, False),      # equal to acc_prev: not harder
    (H, 0.875, 0.875, False),
    (H, 0.8, 0.875, False),    # easier than its parent
    (H, 1.0, 0.8, True),       # 0.8 < 1.0 and inside the band
    # easier: accept iff acc_new > 0 and acc_prev < acc_new <= 0.8
    (E, 0.0, 0.0, False),      # still nobody solves it
    (E, 0.0, 0.125, True),
    (E, 0.2, 0.2, False),      # equal to acc_prev
    (E, 0.125, 0.2, True),
    (E, 0.0, 0.8, True),       # upper band edge is inside
    (E, 0.0, 0.875, False),    # above the band
    (E, 0.2, 0.125, False),    # harder than its parent
])
def test_rule(direction: int, acc_prev: float, acc_new: float, accepted: bool) -> None:
    assert VariantGate().verdict(direction, acc_prev, acc_new).accepted is accepted


def test_zero_is_never_accepted_even_with_band_at_zero() -> None:
    assert not VariantGate(band_low=0.0).verdict(H, 0.5, 0.0).accepted


def test_reasons_name_the_numbers() -> None:
    gate = VariantGate()
    assert gate.verdict(H, 0.8, 0.8).reason == "harder: acc_new=0.800 not below acc_prev=0.800"
    assert gate.verdict(E, 0.0, 0.875).reason == "easier: acc_new=0.875 above band 0.8"
    assert gate.verdict(H, 1.0, 0.0).reason == "acc_new=0.000: no rollout solved the candidate"


def test_counts_and_state_dict() -> None:
    gate = VariantGate()
    gate.admit(H, 1.0, 0.5)
    gate.admit(H, 1.0, 0.0)
    gate.admit(E, 0.0, 0.5)
    assert gate.metrics() == {"env/harder/accepted": 1.0, "env/harder/rejected": 1.0,
                              "env/easier/accepted": 1.0, "env/easier/rejected": 0.0}
    other = VariantGate()
    other.load_state_dict(gate.state_dict())
    assert other.metrics() == gate.metrics()


def test_bad_inputs() -> None:
    with pytest.raises(ValueError, match="direction must be HARDER or EASIER"):
        VariantGate().verdict(DIRECTION_UNSPECIFIED, 0.5, 0.5)
    with pytest.raises(ValueError, match="acc_new must be in"):
        VariantGate().verdict(H, 0.5, 1.5)
    with pytest.raises(ValueError, match="band_low < band_high"):
        VariantGate(0.8, 0.2)


@pytest.mark.parametrize(("acc", "expected"), [
    (1.0, H), (0.8, H), (0.79, DIRECTION_UNSPECIFIED), (0.5, DIRECTION_UNSPECIFIED),
    (0.21, DIRECTION_UNSPECIFIED), (0.2, E), (0.0, E)])
def test_direction(acc: float, expected: int) -> None:
    assert direction_for(acc) == expected
