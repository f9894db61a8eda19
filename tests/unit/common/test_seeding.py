"""Per-chat seeds: `derive_seed` (pure) and `SeededSampler`, the hf backend's per-row sampler."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from services.common.models.generation import SeededSampler, check_seeds
from services.common.seeding import derive_seed


def test_derived_seeds_are_stable_and_tell_their_parts_apart() -> None:
    assert derive_seed("rollout", 7, 0) == derive_seed("rollout", 7, 0)
    assert len({derive_seed("rollout", 7, k) for k in range(1000)}) == 1000
    assert derive_seed(1, 2) != derive_seed("1", 2) != derive_seed(12)  # types and boundaries count
    with pytest.raises(TypeError, match="got NoneType"):
        derive_seed("judge", None)  # type: ignore[arg-type]  # the error under test


@given(st.lists(st.one_of(st.integers(-(2**70), 2**70), st.text(max_size=20)), max_size=5))
def test_derived_seeds_fit_every_backend(parts: list[int | str]) -> None:
    assert 0 <= derive_seed(*parts) < 2**63


def test_each_row_draws_from_its_own_generator() -> None:
    torch.manual_seed(0)
    scores = torch.randn(3, 50)
    first = SeededSampler([1, 2, 3], temperature=1.0)(None, scores)
    # row 1 alone, then beside other rows in another order: the same token
    alone = SeededSampler([2], temperature=1.0)(None, scores[1:2])
    other = SeededSampler([9, 2], temperature=1.0)(None, torch.stack([scores[0], scores[1]]))
    picked = first.argmax(-1)
    assert alone.argmax(-1).item() == picked[1].item() == other[1].argmax().item()
    assert torch.isinf(first).sum().item() == 3 * 49 and (first.max(-1).values == 0).all()


def test_draws_follow_the_softmax_at_the_temperature_and_stay_in_the_nucleus() -> None:
    logits = torch.log(torch.tensor([[0.5, 0.3, 0.15, 0.05]]))
    n = 4000
    counts = torch.zeros(4)
    nucleus = torch.zeros(4)
    for seed in range(n):
        counts[SeededSampler([seed], temperature=1.0)(None, logits).argmax()] += 1
        nucleus[SeededSampler([seed], temperature=1.0, top_p=0.7)(None, logits).argmax()] += 1
    assert torch.allclose(counts / n, torch.tensor([0.5, 0.3, 0.15, 0.05]), atol=0.03)
    # top_p 0.7 keeps {0.5, 0.3} (the mass ranked above 0.15's token is 0.8 >= 0.7), renormalised
    assert nucleus[2:].sum() == 0 and abs(nucleus[0] / n - 0.625) < 0.03
    hot = torch.zeros(4)
    for seed in range(n):
        hot[SeededSampler([seed], temperature=0.5)(None, logits).argmax()] += 1
    want = torch.softmax(logits[0] / 0.5, -1)
    assert torch.allclose(hot / n, want, atol=0.03)


def test_bad_seeds_and_settings_are_refused() -> None:
    chats = [[{"role": "user", "content": "x"}]] * 2
    check_seeds(chats, None)
    check_seeds(chats, [1, None])
    with pytest.raises(ValueError, match=r"seeds\[1\] must be in \[0, 2\*\*63\), got -1"):
        check_seeds(chats, [1, -1])
    with pytest.raises(ValueError, match="temperature must be > 0"):
        SeededSampler([1], temperature=0.0)
    with pytest.raises(ValueError, match="2 seeds for a batch of 3 rows"):
        SeededSampler([1, 2], temperature=1.0)(None, torch.zeros(3, 4))
