"""Which saved trainer state a restart loads (pure), and the weights digest."""

from __future__ import annotations

import pytest
import torch

from services.common.trainer_state import SlotMeta, pick_slot, weights_sha256

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(("metas", "announced", "want"), [
    ({"latest": SlotMeta(3, 3), "previous": SlotMeta(2, 2)}, 3, "latest"),
    ({"latest": SlotMeta(3, 3), "previous": SlotMeta(2, 2)}, 2, "previous"),  # v3 saved, never announced
    ({"latest": SlotMeta(3, 5), "previous": SlotMeta(2, 2)}, 5, "latest"),  # v4, v5 trained on nothing
    ({"previous": SlotMeta(3, 3), "incoming": SlotMeta(4, 4)}, 4, "incoming"),  # killed while rotating
    ({"latest": SlotMeta(0, 0, fresh=True)}, 0, "latest"),
    ({"latest": SlotMeta(3, 3), "previous": SlotMeta(2, 2)}, 1, None),
    ({"latest": SlotMeta(3, 3)}, 7, None),
    ({}, 0, None),
])
def test_the_slot_covering_the_announced_version(metas: dict, announced: int, want: str | None) -> None:
    assert pick_slot(metas, announced) == want


def test_the_digest_changes_with_any_bit_name_or_shape() -> None:
    a = torch.arange(6, dtype=torch.float32)
    base = weights_sha256([("w", a), ("b", torch.zeros(2))])
    assert base == weights_sha256([("b", torch.zeros(2)), ("w", a.clone())])  # order of listing does not matter
    flipped = a.clone()
    flipped.view(torch.int32)[3] ^= 1  # one bit of one float
    assert weights_sha256([("w", flipped), ("b", torch.zeros(2))]) != base
    assert weights_sha256([("w2", a), ("b", torch.zeros(2))]) != base
    assert weights_sha256([("w", a.view(2, 3)), ("b", torch.zeros(2))]) != base
    assert weights_sha256([("w", a.to(torch.float64)), ("b", torch.zeros(2))]) != base
