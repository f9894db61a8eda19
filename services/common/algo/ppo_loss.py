"""PPO-clip loss with the k3 KL term, shared by the policy and reward-model trainers.

Source: arXiv 2602.02488 (RLAnything), "Training step", restated in docs/algorithm.md. Per response
token, with d = clamp(log π_θ − log π_old, −10, 10) and ρ = exp(d):

    surrogate = min(ρ·A, clip(ρ, 1−ε, 1+ε)·A),  and for A < 0: max(surrogate, c·A)  (dual clip, c > 1)
    k3        = exp(−d) − 1 + d
    loss      = −mean_samples(token_mean(surrogate)) + β · mean_samples(token_mean(k3))
                [+ β_ref · mean_samples(token_mean(k3 to a reference policy))]

The dual clip (Ye et al. 2020, "Mastering Complex Control in MOBA Games with Deep RL", as in
verl's ``clip_ratio_c``) is our addition: for A < 0 the plain clip leaves ρ·A unbounded as ρ
grows, and one token whose probability rose e^10-fold within a round gave a gradient large
enough to take the tiny policy's KL from 0 to 22 nats in one step. ``dual_clip = 0`` is the
paper's loss.

Each sample's tokens are averaged first, then samples (so long responses do not outweigh short
ones). Degenerate cases: θ = θ_old gives d = 0, ρ = 1, k3 = 0 and a zero KL gradient; A = 0
gives no policy gradient.

**What the k3 term is** (stated once here; `k3_kl` and docs/algorithm.md repeat it). With the
response tokens sampled from π (π_old ≈ π_θ), the *value* of k3 = e^−d − 1 + d, d = log π − log q,
is an unbiased estimate of KL(π‖q) (Schulman 2020). Its *gradient* as a loss term — the tokens held
fixed, the gradient flowing through log π — is, in expectation, that of the other direction,
KL(q‖π): ∇E_π[k3] = E_π[(1 − q/π)∇log π] = −Σ q ∇log π = ∇KL(q‖π) (Tang & Munos 2025, "On a few
pitfalls in KL divergence gradient estimation for RL"). So the β term pulls π towards covering q
(mass-covering), the ``ref_beta`` term alike towards the reference; the metrics ``ppo/kl`` and
``ppo/ref_kl`` report the value, KL(π‖q). `tests/unit/policy/test_kl_gradient.py` checks both on a
toy distribution. Only response tokens count: padding is excluded before any exp, and tokens whose
|d| reached the clamp are counted (``clamped``: their gradient is zero).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

__all__ = ["PPOStats", "ppo_clip_loss", "token_mean", "sample_mean", "k3_kl", "clamped_tokens"]


@dataclass(frozen=True)
class PPOStats:
    """Diagnostics of one loss evaluation (floats, no gradient)."""

    loss: float
    surrogate: float
    kl: float
    """Mean over samples of the token-mean k3 estimate."""
    clip_fraction: float
    """Share of response tokens whose ratio lies outside [1−ε, 1+ε]."""
    ratio_mean: float
    ref_kl: float = 0.0
    """Mean over samples of the token-mean k3 estimate to the reference policy (0 without one)."""
    clamped: float = 0.0
    """Response tokens (weighted by ``weight_B``) whose d to π_old or to the reference reached ±10."""


def token_mean(x_BL: Tensor, mask_BL: Tensor) -> Tensor:
    """Mean over each sample's masked tokens: shape [B, L] → [B] (empty samples give 0)."""
    return (x_BL * mask_BL).sum(-1) / mask_BL.sum(-1).clamp(min=1)


def sample_mean(x_B: Tensor, weight_B: Tensor | None = None) -> Tensor:
    """Mean over samples, [B] → scalar; weighted by ``weight_B`` [B] (merged duplicates) when given."""
    if weight_B is None:
        return x_B.mean()
    w_B = weight_B.to(x_B.dtype)
    return (x_B * w_B).sum() / w_B.sum().clamp(min=1e-12)


def _d(logp_BL: Tensor, logp_q_BL: Tensor, mask_BL: Tensor) -> Tensor:
    """d = clamp(log π − log q, −10, 10) on response tokens, 0 on padding (whatever its log-probs hold)."""
    return torch.where(mask_BL > 0, torch.clamp(logp_BL - logp_q_BL, -10.0, 10.0), torch.zeros_like(logp_BL))


def clamped_tokens(logp_BL: Tensor, logp_q_BL: Tensor, mask_BL: Tensor, weight_B: Tensor | None = None) -> float:
    """Response tokens (weighted by ``weight_B`` [B]) with |log π − log q| ≥ 10: where `k3_kl` clamps."""
    hit_BL = ((logp_BL - logp_q_BL).abs() >= 10.0) & (mask_BL > 0)
    w_BL = hit_BL.to(torch.float64) if weight_B is None else hit_BL * weight_B.to(torch.float64).unsqueeze(-1)
    return float(w_BL.sum())


def k3_kl(logp_BL: Tensor, logp_q_BL: Tensor, mask_BL: Tensor, weight_B: Tensor | None = None) -> Tensor:
    """The k3 KL term between π (``logp_BL``, the response tokens sampled from it) and q (``logp_q_BL``:
    π_old, or the reference), [B, L] each with ``mask_BL`` [B, L] → a scalar tensor.

    d = clamp(log π − log q, −10, 10) on response tokens, k3 = exp(−d) − 1 + d (Schulman,
    "Approximating KL divergence", 2020); token mean per sample, then the mean over samples (weighted
    by ``weight_B`` [B] when given). Its value estimates KL(π‖q); its gradient (through ``logp_BL``)
    is that of KL(q‖π) in expectation (see the module docstring). Padding never enters an exp.
    """
    d_BL = _d(logp_BL, logp_q_BL, mask_BL)
    return sample_mean(token_mean(torch.exp(-d_BL) - 1 + d_BL, mask_BL), weight_B)


def ppo_clip_loss(logp_new_BL: Tensor, logp_old_BL: Tensor, advantage_B: Tensor, mask_BL: Tensor,
                  eps: float = 0.2, beta: float = 0.01, dual_clip: float = 0.0,
                  logp_ref_BL: Tensor | None = None, ref_beta: float = 0.0,
                  weight_B: Tensor | None = None) -> tuple[Tensor, PPOStats]:
    """The RLAnything PPO-clip + k3 loss.

    Args:
        logp_new_BL: log π_θ of each response token, [B, L] (requires grad).
        logp_old_BL: log π_old of the same tokens, [B, L] (no grad).
        advantage_B: one advantage per sample, [B].
        mask_BL: 1.0 on response tokens, 0.0 on padding, [B, L].
        eps: clip range ε (0.2 in the paper).
        beta: KL coefficient β (0.01 in the paper).
        dual_clip: c > 1 bounds the surrogate of A < 0 tokens below at c·A (0 = off, the paper).
        logp_ref_BL: log π_ref of the same tokens, [B, L] (no grad), for ``ref_beta``.
        ref_beta: weight of the k3 KL to the reference policy (our addition, as GRPO's KL to the
            initial model; 0 = the paper, whose KL is to π_old only).
        weight_B: how many original samples each row stands for, [B] (`batching.merge_duplicates`);
            None = 1 each. Every mean over samples is weighted by it.

    Returns:
        ``(loss, stats)``: a scalar tensor to back-propagate, and its diagnostics.

    Raises:
        ValueError: shapes disagree, or ``dual_clip`` is in (0, 1].
    """
    if 0 < dual_clip <= 1:
        raise ValueError(f"dual_clip must be 0 (off) or > 1, got {dual_clip}")
    if logp_new_BL.shape != logp_old_BL.shape or logp_new_BL.shape != mask_BL.shape:
        raise ValueError(f"shape mismatch: new {tuple(logp_new_BL.shape)}, old {tuple(logp_old_BL.shape)}, "
                         f"mask {tuple(mask_BL.shape)}")
    if advantage_B.shape != logp_new_BL.shape[:1]:
        raise ValueError(f"advantage_B has shape {tuple(advantage_B.shape)}, expected ({logp_new_BL.shape[0]},)")
    mask_BL = mask_BL.to(logp_new_BL.dtype)
    d_BL = _d(logp_new_BL, logp_old_BL.detach(), mask_BL)
    ratio_BL = torch.exp(d_BL)
    adv_B1 = advantage_B.to(logp_new_BL.dtype).unsqueeze(-1)
    surrogate_BL = torch.minimum(ratio_BL * adv_B1, torch.clamp(ratio_BL, 1 - eps, 1 + eps) * adv_B1)
    if dual_clip:
        surrogate_BL = torch.where(adv_B1 < 0, torch.maximum(surrogate_BL, dual_clip * adv_B1), surrogate_BL)
    surrogate = sample_mean(token_mean(surrogate_BL, mask_BL), weight_B)
    kl = k3_kl(logp_new_BL, logp_old_BL.detach(), mask_BL, weight_B)
    loss = -surrogate + beta * kl
    ref_kl = 0.0
    clamped = clamped_tokens(logp_new_BL.detach(), logp_old_BL.detach(), mask_BL, weight_B)
    if ref_beta and logp_ref_BL is not None:
        ref_kl_t = k3_kl(logp_new_BL, logp_ref_BL.detach(), mask_BL, weight_B)
        loss = loss + ref_beta * ref_kl_t
        ref_kl = float(ref_kl_t.detach())
        clamped += clamped_tokens(logp_new_BL.detach(), logp_ref_BL.detach(), mask_BL, weight_B)
    with torch.no_grad():
        tok_w_BL = mask_BL if weight_B is None else mask_BL * weight_B.to(mask_BL.dtype).unsqueeze(-1)
        n_tokens = tok_w_BL.sum().clamp(min=1e-12)
        clip_frac = (((ratio_BL < 1 - eps) | (ratio_BL > 1 + eps)).to(mask_BL.dtype) * tok_w_BL).sum() / n_tokens
        stats = PPOStats(float(loss), float(surrogate), float(kl), float(clip_frac),
                         float((ratio_BL * tok_w_BL).sum() / n_tokens), ref_kl, clamped)
    return loss, stats
