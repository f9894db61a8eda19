"""The PPO-clip + k3 loss (docs/algorithm.md, training step) and sample batching."""

from __future__ import annotations

import pytest
import torch

from services.common.algo.batching import Sample, make_batch
from services.common.algo.ppo_loss import ppo_clip_loss


def test_kl_and_its_gradient_are_zero_when_theta_equals_theta_old() -> None:
    logp = torch.tensor([[-1.0, -2.0, -0.5]], requires_grad=True)
    loss, stats = ppo_clip_loss(logp, logp.detach().clone(), torch.tensor([0.0]), torch.ones(1, 3), beta=1.0)
    assert stats.kl == 0.0 and stats.ratio_mean == 1.0
    loss.backward()
    assert torch.equal(logp.grad, torch.zeros(1, 3))  # A = 0 and KL' = 0 at d = 0


def test_kl_is_k3_of_the_log_ratio() -> None:
    old = torch.zeros(1, 2)
    new = torch.tensor([[0.5, -0.5]])
    _, stats = ppo_clip_loss(new, old, torch.tensor([0.0]), torch.ones(1, 2), beta=1.0)
    k3 = lambda d: torch.exp(torch.tensor(-d)) - 1 + d  # noqa: E731
    assert stats.kl == pytest.approx(float((k3(0.5) + k3(-0.5)) / 2))


@pytest.mark.parametrize(("log_ratio", "advantage", "expected_surrogate", "clipped"), [
    (0.5, 1.0, 1.2, True),                      # A > 0: ratio e^0.5 = 1.65 is capped at 1 + ε
    (-0.5, 1.0, float(torch.exp(torch.tensor(-0.5))), True),  # A > 0, ratio below 1 − ε: min keeps ρ·A
    (-0.5, -1.0, -0.8, True),                   # A < 0: ratio 0.61 is floored at 1 − ε
    (0.5, -1.0, -float(torch.exp(torch.tensor(0.5))), True),  # A < 0, ratio above 1 + ε: min keeps ρ·A
    (0.1, 1.0, float(torch.exp(torch.tensor(0.1))), False),   # inside the clip range
])
def test_surrogate_clips_at_one_plus_minus_eps(log_ratio, advantage, expected_surrogate, clipped) -> None:
    new = torch.tensor([[log_ratio]], requires_grad=True)
    loss, stats = ppo_clip_loss(new, torch.zeros(1, 1), torch.tensor([advantage]), torch.ones(1, 1), eps=0.2, beta=0.0)
    assert stats.surrogate == pytest.approx(expected_surrogate, rel=1e-5)
    assert stats.clip_fraction == (1.0 if clipped else 0.0)
    loss.backward()
    gradient_flows = new.grad.abs().item() > 0
    # PPO: no gradient where the clipped branch is the minimum
    assert gradient_flows == (expected_surrogate != pytest.approx(advantage * (1.2 if advantage > 0 else 0.8)))


def test_loss_is_mean_over_samples_of_token_means() -> None:
    # sample 0: 1 token, surrogate 1·A0; sample 1: 3 tokens (1 padded), all ratio 1
    new = torch.zeros(2, 3)
    mask = torch.tensor([[1.0, 0.0, 0.0], [1.0, 1.0, 0.0]])
    loss, stats = ppo_clip_loss(new, torch.zeros(2, 3), torch.tensor([2.0, -1.0]), mask, beta=0.0)
    assert stats.surrogate == pytest.approx((2.0 + -1.0) / 2)  # not (2 + -1 -1) / 3 over tokens
    assert float(loss) == pytest.approx(-0.5)


def test_shape_errors() -> None:
    with pytest.raises(ValueError, match="advantage_B has shape"):
        ppo_clip_loss(torch.zeros(2, 3), torch.zeros(2, 3), torch.zeros(3), torch.ones(2, 3))


def test_dropped_sample_takes_its_advantage_with_it() -> None:
    samples = [Sample("a", (1, 2), (3,), 0.5), Sample("long", (1,) * 10, (4, 5), -7.0), Sample("c", (1,), (6, 7), 2.0)]
    batch = make_batch(samples, max_length=4, pad_id=0)
    assert batch.sample_ids == ("a", "c") and batch.dropped_ids == ("long",)
    assert batch.advantage_B.tolist() == [0.5, 2.0]
    assert batch.input_ids_BL.tolist() == [[1, 2, 3], [1, 6, 7]]
    assert batch.response_mask_BL.tolist() == [[0, 0, 1], [0, 1, 1]]


def test_dual_clip_bounds_negative_advantage_tokens_whose_ratio_exploded() -> None:
    new = torch.tensor([[3.0]], requires_grad=True)  # ρ = e^3 ≈ 20 on an A < 0 token
    loss, stats = ppo_clip_loss(new, torch.zeros(1, 1), torch.tensor([-1.0]), torch.ones(1, 1), beta=0.0,
                                dual_clip=3.0)
    assert stats.surrogate == pytest.approx(-3.0)  # max(ρ·A, c·A) = max(−20.1, −3)
    loss.backward()
    assert new.grad is not None and float(new.grad) == 0.0  # bounded: no gradient from the runaway ratio
    plain, plain_stats = ppo_clip_loss(new.detach().clone().requires_grad_(True), torch.zeros(1, 1),
                                       torch.tensor([-1.0]), torch.ones(1, 1), beta=0.0)
    assert plain_stats.surrogate == pytest.approx(-float(torch.exp(torch.tensor(3.0))), rel=1e-5)


def test_dual_clip_leaves_positive_advantages_and_small_ratios_alone() -> None:
    for log_ratio, advantage in [(3.0, 1.0), (0.5, -1.0)]:
        a = ppo_clip_loss(torch.tensor([[log_ratio]]), torch.zeros(1, 1), torch.tensor([advantage]), torch.ones(1, 1),
                          beta=0.0, dual_clip=3.0)[1]
        b = ppo_clip_loss(torch.tensor([[log_ratio]]), torch.zeros(1, 1), torch.tensor([advantage]), torch.ones(1, 1),
                          beta=0.0)[1]
        assert a.surrogate == pytest.approx(b.surrogate)
    with pytest.raises(ValueError, match="dual_clip"):
        ppo_clip_loss(torch.zeros(1, 1), torch.zeros(1, 1), torch.tensor([1.0]), torch.ones(1, 1), dual_clip=0.5)
