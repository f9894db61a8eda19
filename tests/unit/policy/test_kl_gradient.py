"""The k3 term of the PPO loss, on a 5-token toy distribution, in exact expectation over the tokens:
its value is KL(π‖q) and its gradient is that of KL(q‖π) (what the loss's docstring and
docs/algorithm.md state); padding never enters it and clamped tokens are counted."""

from __future__ import annotations

import pytest
import torch

from services.common.algo.ppo_loss import clamped_tokens, k3_kl, ppo_clip_loss

pytestmark = pytest.mark.unit


def _toy(seed: int, drift: float) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(5, generator=g, dtype=torch.float64)
    theta = (q + drift * torch.randn(5, generator=g, dtype=torch.float64)).requires_grad_(True)
    return theta, torch.log_softmax(q, -1)


def _expected_k3(theta: torch.Tensor, logq: torch.Tensor) -> torch.Tensor:
    """E_{x~π}[k3(x)] with the token weights π(x) held fixed (sampled tokens carry no gradient):
    each of the 5 tokens is one "sample" of one response token, weighted by its probability."""
    logp = torch.log_softmax(theta, -1)
    return k3_kl(logp.unsqueeze(-1), logq.unsqueeze(-1), torch.ones(5, 1, dtype=torch.float64),
                 weight_B=torch.softmax(theta, -1).detach())


def _cos(a: torch.Tensor, b: torch.Tensor) -> float:
    return float(torch.nn.functional.cosine_similarity(a, b, dim=0))


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("drift", [0.3, 1.0, 2.0])
def test_the_value_is_kl_pi_q_and_the_gradient_is_that_of_kl_q_pi(seed: int, drift: float) -> None:
    theta, logq = _toy(seed, drift)
    logp = torch.log_softmax(theta, -1)
    value = _expected_k3(theta, logq)
    kl_pq = (logp.exp() * (logp - logq)).sum()
    kl_qp = (logq.exp() * (logq - logp)).sum()
    assert float(value.detach()) == pytest.approx(float(kl_pq.detach()), rel=1e-9)  # the metric reports KL(π‖q)
    (grad_k3,) = torch.autograd.grad(value, theta)
    (grad_qp,) = torch.autograd.grad(kl_qp, theta, retain_graph=True)
    (grad_pq,) = torch.autograd.grad(kl_pq, theta)
    assert _cos(grad_k3, grad_qp) >= 0.99  # the stated direction (exact: 1 up to rounding)
    torch.testing.assert_close(grad_k3, grad_qp)
    if drift >= 1.0:  # once π drifts, it is not the gradient of KL(π‖q)
        assert not torch.allclose(grad_k3, grad_pq, rtol=0.05, atol=1e-3)


def test_padding_is_excluded_before_the_exp_and_clamped_tokens_are_counted() -> None:
    logp = torch.tensor([[-1.0, -0.5, float("-inf")], [-20.0, -1.0, -30.0]], requires_grad=True)
    old = torch.tensor([[-1.2, -0.5, 0.0], [-2.0, -1.1, 0.0]])
    mask = torch.tensor([[1.0, 1.0, 0.0], [1.0, 1.0, 0.0]])  # position 2 is padding in both rows
    loss, stats = ppo_clip_loss(logp, old, torch.tensor([1.0, -1.0]), mask, beta=0.01)
    loss.backward()
    assert torch.isfinite(loss) and torch.isfinite(logp.grad).all()
    assert float(logp.grad[:, 2].abs().sum()) == 0.0
    assert stats.clamped == 1.0  # -20 vs -2: |d| = 18, clamped at 10; the padded -30 is not counted
    assert clamped_tokens(logp.detach(), old, mask) == 1.0
    want = (torch.exp(torch.tensor(-0.2)) - 1 + 0.2 + 0) / 2, (torch.exp(torch.tensor(10.0)) - 1 - 10
                                                              + torch.exp(torch.tensor(-0.1)) - 1 + 0.1) / 2
    assert stats.kl == pytest.approx(float(sum(want)) / 2, rel=1e-5)
