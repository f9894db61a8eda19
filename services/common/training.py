"""One PPO update over a round's samples — the training step both trainers run.

"A few optimizer steps per round, one pass over the round's data" (ALGORITHM.md): the kept
samples are split into ``optimizer_steps`` minibatches, one AdamW step each, with the loss of
`services.common.algo.ppo_loss`. π_old is recomputed with the current weights before the update
(synchronous mode) or taken from the behaviour log-probs (asynchronous mode); the mismatch
between the two is measured whenever both exist.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch

from services.common.algo.batching import Sample, make_batch
from services.common.algo.ppo_loss import ppo_clip_loss
from services.common.config import PPOConfig
from services.common.models.logprobs import token_logprobs

__all__ = ["ppo_update"]


def ppo_update(model: torch.nn.Module, optimizer: torch.optim.Optimizer, samples: Sequence[Sample],
               cfg: PPOConfig, pad_id: int, recompute_old: bool = True) -> dict[str, float]:
    """Train ``model`` in place on ``samples``; returns metrics (``ppo/...`` keys).

    Metrics: loss, kl, clip_fraction (means over minibatches), samples, dropped (too long),
    logprob_mismatch (mean |recomputed − behaviour| over response tokens; NaN when unknown),
    response_tokens (mean per sample).
    """
    batch = make_batch(samples, cfg.max_length, pad_id)
    n = len(batch.sample_ids)
    metrics = {"ppo/samples": float(n), "ppo/dropped": float(len(batch.dropped_ids)),
               "ppo/loss": 0.0, "ppo/kl": 0.0, "ppo/clip_fraction": 0.0, "ppo/logprob_mismatch": math.nan,
               "ppo/response_tokens": float(batch.response_mask_BL.sum(-1).mean()) if n else 0.0}
    if n == 0:
        return metrics
    model.eval()
    with torch.no_grad():
        recomputed_BL = token_logprobs(model, batch.input_ids_BL, batch.attention_mask_BL)
    has_behaviour = all(s.behaviour_logprobs for s in samples if s.sample_id in set(batch.sample_ids))
    mask = batch.response_mask_BL
    if has_behaviour:
        metrics["ppo/logprob_mismatch"] = float(
            ((recomputed_BL - batch.behaviour_logprobs_BL).abs() * mask).sum() / mask.sum())
    old_BL = recomputed_BL if recompute_old or not has_behaviour else batch.behaviour_logprobs_BL
    model.train()
    steps = min(cfg.optimizer_steps, n)
    order = torch.randperm(n)
    for chunk in torch.chunk(order, steps):
        logp_BL = token_logprobs(model, batch.input_ids_BL[chunk], batch.attention_mask_BL[chunk])
        loss, stats = ppo_clip_loss(logp_BL, old_BL[chunk], batch.advantage_B[chunk], mask[chunk],
                                    eps=cfg.eps, beta=cfg.beta)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip)
        optimizer.step()
        metrics["ppo/loss"] += stats.loss / steps
        metrics["ppo/kl"] += stats.kl / steps
        metrics["ppo/clip_fraction"] += stats.clip_fraction / steps
    model.eval()
    return metrics
