"""One PPO update over a round's samples — the training step both trainers run.

"A few optimizer steps per round, one pass over the round's data" (docs/algorithm.md): the kept
samples are split into ``optimizer_steps`` minibatches, one AdamW step each, with the loss of
`services.common.algo.ppo_loss`. π_old is recomputed with the current weights before the update
(synchronous mode) or taken from the behaviour log-probs (asynchronous mode); the mismatch
between the two is measured whenever both exist.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass

import torch
from torch import Tensor

from services.common.adamw_undo import undo_adamw_step
from services.common.algo.batching import Batch, Sample, make_batch, merge_duplicates, micro_batches
from services.common.algo.ppo_loss import k3_kl, ppo_clip_loss
from services.common.config import PPOConfig
from services.common.data_parallel import all_sum, current_shard
from services.common.models.logprobs import token_logprobs

__all__ = ["ppo_update", "warmup_lr"]


def warmup_lr(lr: float, steps_done: int, warmup_steps: int) -> float:
    """Linear learning-rate warm-up: ``lr·(steps_done+1)/warmup_steps`` for the first
    ``warmup_steps`` optimizer steps, then ``lr`` (0 = no warm-up).

    Why: Adam's first updates are sign-like (m̂/√v̂ ≈ ±1), so every parameter moves by the full
    lr at once; on the tiny policy one such step at lr 1e-3 took the KL to π_old from 0 to 20–42
    nats and broke the answer format. Warm-up is the standard cure (Goyal et al. 2017; Liu et
    al. 2020, "On the Variance of the Adaptive Learning Rate").
    """
    if warmup_steps <= 0 or steps_done >= warmup_steps:
        return lr
    return lr * (steps_done + 1) / warmup_steps


@dataclass(frozen=True)
class _Pass:
    """What one minibatch's forward/backward passes measured (weighted as over the whole minibatch)."""

    loss: float
    kl: float
    """k3 KL(π_old‖π_θ) of the minibatch before the step."""
    kl_start: float
    """k3 KL to the weights this update started from (= ``kl`` when π_old was recomputed)."""
    clip_fraction: float
    ref_kl: float
    clamped: float
    """Response tokens (weighted) whose log-ratio to π_old or the reference reached the k3 clamp (±10)."""


def _micro(batch: Batch, rows: Tensor, budget: int) -> list[tuple[Tensor, int, int]]:
    """``rows`` (indices into ``batch``) cut under the token budget: (row indices, padded length, positions
    whose logits are needed) each. The last count covers every response token of the micro-batch
    (a row's response ends it: rows are right-padded) and the position before its first."""
    lengths = batch.attention_mask_BL[rows].sum(-1).tolist()
    first_response = batch.response_mask_BL[rows].argmax(-1).tolist()
    out = []
    for part in micro_batches([int(n) for n in lengths], budget):
        n = int(max(lengths[i] for i in part))
        out.append((rows[torch.tensor(part)], n, n - min(int(first_response[i]) for i in part) + 1))
    return out


def _autocast(model: torch.nn.Module, cfg: PPOConfig) -> AbstractContextManager[None]:
    """The forward passes' precision (``cfg.autocast``): bfloat16 autocast on the model's device, or fp32."""
    device = next(model.parameters()).device.type
    return torch.autocast(device, dtype=torch.bfloat16, enabled=cfg.autocast == "bf16")


@torch.no_grad()
def _logprobs(model: torch.nn.Module, batch: Batch, rows: Tensor, cfg: PPOConfig) -> Tensor:
    """log π of every token of ``rows``, [len(rows), L] (padding 0), computed micro-batch by micro-batch."""
    was_training = model.training
    model.eval()
    out_RL = torch.zeros((len(rows), batch.input_ids_BL.shape[1]), device=batch.input_ids_BL.device)
    where = {int(r): i for i, r in enumerate(rows)}
    for part, length, keep in _micro(batch, rows, cfg.micro_batch_tokens):
        with _autocast(model, cfg):
            logp = token_logprobs(model, batch.input_ids_BL[part, :length], batch.attention_mask_BL[part, :length],
                                  keep)
        out_RL[[where[int(r)] for r in part], :length] = logp
    model.train(was_training)
    return out_RL


def _accumulate(model: torch.nn.Module, batch: Batch, rows: Tensor, old_BL: Tensor, start_BL: Tensor,
                ref_BL: Tensor | None, cfg: PPOConfig) -> _Pass:
    """Forward and backward over the minibatch ``rows`` in micro-batches (``cfg.micro_batch_tokens``),
    the gradients summed in ``.grad``. Each micro-batch's loss is weighted by its share of the
    minibatch's sample weight, and its token statistics by its share of the weighted tokens: the
    loss (a weighted mean over samples, `ppo_loss`) and so the gradient are those of the whole
    minibatch at once, whatever the cut (up to float summation order).

    Under data parallelism (`data_parallel`: W ranks, FSDP2 averaging gradients) this rank passes
    its rows of the minibatch, its loss scaled by W, and as many passes as the rank with the most
    (a pass with no rows of its own counts nothing): every rank makes the same collective calls.
    The returned figures are summed over the ranks, so every rank sees the same ones."""
    shard = current_shard()
    weight_B, mask_BL = batch.weight_B, batch.response_mask_BL
    total_w = float(weight_B[rows].sum())
    total_tok = float((mask_BL[rows] * weight_B[rows].unsqueeze(-1)).sum()) or 1.0
    plans = [_micro(batch, shard_rows, cfg.micro_batch_tokens) if len(shard_rows) else []
             for shard_rows in (rows[r::shard.world] for r in range(shard.world))]
    mine = plans[shard.rank]
    loss = kl = kl_start = clip = ref_kl = clamped = 0.0
    for i in range(max(len(plan) for plan in plans)):
        counts = i < len(mine)  # else an empty pass: the first row, weighted 0
        part, n, keep = mine[i] if counts else _micro(batch, rows[:1], 0)[0]
        w = weight_B[part]
        with _autocast(model, cfg):
            logp = token_logprobs(model, batch.input_ids_BL[part, :n], batch.attention_mask_BL[part, :n], keep)
        part_loss, stats = ppo_clip_loss(logp, old_BL[part, :n], batch.advantage_B[part], mask_BL[part, :n],
                                         eps=cfg.eps, beta=cfg.beta, dual_clip=cfg.dual_clip,
                                         logp_ref_BL=None if ref_BL is None else ref_BL[part, :n],
                                         ref_beta=cfg.ref_beta, weight_B=w)
        share = float(w.sum()) / total_w if counts else 0.0
        (part_loss * (share * shard.world)).backward()
        if not counts:
            continue
        loss += stats.loss * share
        kl += stats.kl * share
        ref_kl += stats.ref_kl * share
        clamped += stats.clamped
        clip += stats.clip_fraction * float((mask_BL[part, :n] * w.unsqueeze(-1)).sum()) / total_tok
        kl_start += share * (stats.kl if old_BL is start_BL else float(
            k3_kl(logp.detach(), start_BL[part, :n], mask_BL[part, :n], w)))
    return _Pass(*all_sum([loss, kl, kl_start, clip, ref_kl, clamped], shard))


@torch.no_grad()
def _batch_kl(model: torch.nn.Module, batch: Batch, rows: Tensor, start_BL: Tensor, cfg: PPOConfig) -> float:
    """k3 KL(π_start‖π_θ) of ``rows`` (token mean per sample, then the weighted sample mean)."""
    logp_RL = _logprobs(model, batch, rows, cfg)
    return float(k3_kl(logp_RL, start_BL[rows], batch.response_mask_BL[rows], batch.weight_B[rows]))


def _steps_done(optimizer: torch.optim.Optimizer) -> int:
    """Optimizer steps taken so far (Adam keeps a per-parameter ``step``; 0 before the first)."""
    for group in optimizer.param_groups:
        for p in group["params"]:
            step = optimizer.state.get(p, {}).get("step")
            if step is not None:
                return int(step)
    return 0


def ppo_update(model: torch.nn.Module, optimizer: torch.optim.Optimizer, samples: Sequence[Sample],
               cfg: PPOConfig, pad_id: int, recompute_old: bool = True,
               reference: torch.nn.Module | Callable[[], AbstractContextManager[torch.nn.Module]] | None = None,
               seed: int = 0) -> dict[str, float]:
    """Train ``model`` in place on ``samples``; returns metrics (``ppo/...`` keys).

    ``seed`` seeds the minibatch split (its own `torch.Generator`, so that nothing else that draws
    from torch's global generator in the process changes the update: same samples, same seed, same
    weights).

    ``cfg.epochs`` passes over the data, each split into ``cfg.optimizer_steps`` minibatches (one
    AdamW step each). With ``cfg.max_kl > 0`` the update is a trust region: it stops before the
    first minibatch whose KL(π_old‖π_θ) (k3, token mean) exceeds it — the early stop of
    Stable-Baselines3 (``target_kl``) and OpenAI Spinning Up — and a single step that takes the
    KL of its minibatch above it (with ``cfg.trust_region`` "batch": the mean KL over the whole
    batch, TRPO's constraint) is undone (weights and optimizer state), then the update stops.
    Measured on the tiny policy: one AdamW step at lr 3e-4 took the KL from 0.1 to 13.9
    nats and the train success from 0.56 to 0.14. The check costs one forward pass over the
    minibatch (or the batch) per step; the undo inverts the AdamW step from the gradients it used
    (`adamw_undo.undo_adamw_step`), with no copy of weights or optimizer state, so ``optimizer``
    must be `torch.optim.AdamW` when ``cfg.max_kl`` is set. With ``cfg.backtrack_steps`` such a step
    is first retried with a shorter length (TRPO's backtracking line search): the update goes on
    with the first length inside the region, and a step is undone only if none was.

    ``cfg.micro_batch_tokens`` bounds the tokens of one forward/backward pass: each minibatch (and
    each no-grad pass: π_old, the reference, the KL check) is cut into micro-batches under it and
    the gradients are accumulated, each micro-batch's loss weighted by its share of the
    minibatch's samples, so the gradient does not depend on the cut. Activation memory scales
    with the budget instead of the minibatch.

    ``reference`` (with ``cfg.ref_beta > 0``; a model, or a function giving a context manager that
    yields one for this update's reference pass only: a model loaded and dropped before the optimizer
    steps, or the LoRA policy with its adapter disabled) adds β_ref·k3(π_θ, π_ref) to the loss (value
    KL(π_θ‖π_ref), gradient that of KL(π_ref‖π_θ): `services.common.algo.ppo_loss`), the anchor
    GRPO keeps to its initial model: the KL to π_old alone is reset every round and lets the
    shared format tokens drift (measured: invalid answers 0.04 → 0.45 within one round, every
    step inside the trust region).

    With ``cfg.merge_duplicates`` identical samples are trained once, weighted by their count
    (`batching.merge_duplicates`: the loss is the same, the forward and backward passes are not
    repeated); in asynchronous mode only those with equal behaviour log-probs are merged.

    Phases, one function each: `_prepare` (batch), `_old_logprobs` (π_old and the mismatch),
    `_reference_logprobs`, `_optimize` (epochs × minibatches, each a `_step`), `_summarise`.

    Raises:
        TypeError: ``cfg.max_kl`` is set, a step must be undone and ``optimizer`` is not AdamW.

    Metrics: loss, kl, clip_fraction (means over the steps taken), kl_clamped_tokens (response tokens,
    summed over the steps taken, whose log-ratio to π_old or the reference reached the k3 clamp of
    ±10: their KL gradient is zero), ref_kl (last step's KL to the
    reference), kl_max (largest minibatch KL seen, including the one that stopped the update),
    optimizer_steps (taken), early_stopped (0/1), reverted_steps (0/1), backtracks (retries of a
    step at a shorter length), lr, samples (kept, counted
    before merging), distinct_samples (rows trained), dropped (too long), logprob_mismatch (mean
    |recomputed − behaviour| over response tokens; NaN when unknown), response_tokens (mean per
    sample).
    """
    batch, metrics = _prepare(samples, cfg, pad_id, recompute_old, next(model.parameters()).device)
    if not batch.sample_ids:
        return metrics
    recomputed_BL, old_BL = _old_logprobs(model, batch, samples, cfg, recompute_old, metrics)
    ref_BL = _reference_logprobs(reference, batch, cfg)
    model.train()
    taken, stopped, reverted = _optimize(model, optimizer, batch, (old_BL, recomputed_BL, ref_BL), cfg, seed, metrics)
    optimizer.zero_grad(set_to_none=True)  # the gradients are not kept between updates (4 bytes per parameter)
    _summarise(metrics, optimizer, taken, stopped, reverted)
    model.eval()
    return metrics


def _prepare(samples: Sequence[Sample], cfg: PPOConfig, pad_id: int, recompute_old: bool,
             device: torch.device) -> tuple[Batch, dict[str, float]]:
    """Phase 1: the padded batch of the kept samples (identical ones merged with
    ``cfg.merge_duplicates``) on ``device``, and the metrics known before any pass."""
    rows = merge_duplicates(samples, by_behaviour=not recompute_old) if cfg.merge_duplicates else list(samples)
    batch = make_batch(rows, cfg.max_length, pad_id).to(device)  # a GPU trainer's too
    n = len(batch.sample_ids)
    weight = {s.sample_id: s.weight for s in rows}
    metrics = {"ppo/samples": float(batch.weight_B.sum()) if n else 0.0, "ppo/distinct_samples": float(n),
               "ppo/dropped": float(sum(weight[i] for i in batch.dropped_ids)),
               "ppo/loss": 0.0, "ppo/kl": 0.0, "ppo/clip_fraction": 0.0, "ppo/logprob_mismatch": math.nan,
               "ppo/kl_clamped_tokens": 0.0,
               "ppo/response_tokens": float(batch.response_mask_BL.sum(-1).mean()) if n else 0.0}
    return batch, metrics


def _old_logprobs(model: torch.nn.Module, batch: Batch, samples: Sequence[Sample], cfg: PPOConfig,
                  recompute_old: bool, metrics: dict[str, float]) -> tuple[Tensor, Tensor]:
    """Phase 2: the log-probs of the weights this update starts from, and π_old's (the same when
    ``recompute_old`` or a sample has no behaviour log-probs, else the behaviour ones); sets
    ``ppo/logprob_mismatch`` when both exist."""
    recomputed_BL = _logprobs(model, batch, torch.arange(len(batch.sample_ids)), cfg)
    has_behaviour = all(s.behaviour_logprobs for s in samples if s.sample_id in set(batch.sample_ids))
    mask = batch.response_mask_BL
    if has_behaviour:
        metrics["ppo/logprob_mismatch"] = float(
            ((recomputed_BL - batch.behaviour_logprobs_BL).abs() * mask).sum() / mask.sum())
    old_BL = recomputed_BL if recompute_old or not has_behaviour else batch.behaviour_logprobs_BL
    return recomputed_BL, old_BL


def _reference_logprobs(reference: torch.nn.Module | Callable[[], AbstractContextManager[torch.nn.Module]] | None,
                        batch: Batch, cfg: PPOConfig) -> Tensor | None:
    """Phase 3: the reference model's log-probs (None without a reference or with ``ref_beta`` 0); a
    reloaded reference is freed before the optimizer steps."""
    if reference is None or not cfg.ref_beta:
        return None
    with (nullcontext(reference) if isinstance(reference, torch.nn.Module) else reference()) as ref_model:
        ref_BL = _logprobs(ref_model, batch, torch.arange(len(batch.sample_ids)), cfg)
    del ref_model
    return ref_BL


def _optimize(model: torch.nn.Module, optimizer: torch.optim.Optimizer, batch: Batch,
              logprobs: tuple[Tensor, Tensor, Tensor | None], cfg: PPOConfig, seed: int,
              metrics: dict[str, float]) -> tuple[int, bool, int]:
    """Phase 4: ``cfg.epochs`` passes of ``cfg.optimizer_steps`` minibatches (split by ``seed``), one
    step each, until the trust region stops it; sums loss, kl and clip_fraction of the steps taken
    into ``metrics``. Returns (steps taken, stopped early, steps undone: 0/1)."""
    n = len(batch.sample_ids)
    steps = min(cfg.optimizer_steps, n)
    taken = 0
    split = torch.Generator().manual_seed(seed)
    for _epoch in range(cfg.epochs):
        for chunk in torch.chunk(torch.randperm(n, generator=split), steps):
            outcome = _step(model, optimizer, batch, chunk, logprobs, cfg, metrics)
            if outcome != "taken":
                return taken, True, int(outcome == "reverted")
            taken += 1
    return taken, False, 0


def _step(model: torch.nn.Module, optimizer: torch.optim.Optimizer, batch: Batch, chunk: Tensor,
          logprobs: tuple[Tensor, Tensor, Tensor | None], cfg: PPOConfig, metrics: dict[str, float]) -> str:
    """One minibatch's AdamW step inside the trust region: "taken", "stopped" (the minibatch
    already sees a policy too far from π_old: no step) or "reverted" (the step left it: undone)."""
    old_BL, recomputed_BL, ref_BL = logprobs
    optimizer.zero_grad(set_to_none=True)
    # the trust region is measured from the weights this update started from (= π_old in sync
    # mode; in async mode π_old is the older behaviour policy, which may already lie outside it)
    done = _accumulate(model, batch, chunk, old_BL, recomputed_BL, ref_BL, cfg)
    metrics["ppo/kl_max"] = max(metrics.get("ppo/kl_max", 0.0), done.kl_start)
    if cfg.max_kl and done.kl_start > cfg.max_kl:
        return "stopped"
    torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip)
    lr = warmup_lr(cfg.lr, _steps_done(optimizer), cfg.warmup_steps)
    for group in optimizer.param_groups:
        group["lr"] = lr
    optimizer.step()
    if cfg.max_kl and not _inside_trust_region(model, optimizer, batch, chunk, recomputed_BL, cfg, metrics):
        return "reverted"
    metrics["ppo/loss"] += done.loss
    metrics["ppo/kl"] += done.kl
    metrics["ppo/clip_fraction"] += done.clip_fraction
    metrics["ppo/ref_kl"] = done.ref_kl
    metrics["ppo/kl_clamped_tokens"] = metrics.get("ppo/kl_clamped_tokens", 0.0) + done.clamped
    return "taken"


def _inside_trust_region(model: torch.nn.Module, optimizer: torch.optim.Optimizer, batch: Batch, chunk: Tensor,
                         start_BL: Tensor, cfg: PPOConfig, metrics: dict[str, float]) -> bool:
    """After a step: True if the KL to the update's starting weights is within ``cfg.max_kl`` — the
    minibatch's (``cfg.trust_region`` "minibatch") or the whole batch's ("batch": the mean over every
    sample of the update, TRPO's constraint; one more no-grad pass over the batch per try).
    Otherwise the step is undone and retried up to ``cfg.backtrack_steps`` times with the lr times
    ``cfg.backtrack_ratio`` each (the same gradients and moments: only the step length shrinks) —
    the backtracking line search of TRPO (Schulman et al. 2015, appendix C) on the KL constraint.
    False when no length was inside (the step is then undone). Counts ``ppo/backtracks``."""
    lr0 = optimizer.param_groups[0]["lr"]
    rows = chunk if cfg.trust_region == "minibatch" else torch.arange(len(batch.sample_ids))
    for retry in range(cfg.backtrack_steps + 1):
        kl_after = _batch_kl(model, batch, rows, start_BL, cfg)
        metrics["ppo/kl_max"] = max(metrics["ppo/kl_max"], kl_after)
        if kl_after <= cfg.max_kl:
            return True
        undo_adamw_step(optimizer)  # with the lr the step used
        if retry == cfg.backtrack_steps:
            break
        metrics["ppo/backtracks"] = metrics.get("ppo/backtracks", 0.0) + 1
        for group in optimizer.param_groups:
            group["lr"] = lr0 * cfg.backtrack_ratio ** (retry + 1)
        optimizer.step()
    for group in optimizer.param_groups:
        group["lr"] = lr0
    return False


def _summarise(metrics: dict[str, float], optimizer: torch.optim.Optimizer, taken: int, stopped: bool,
               reverted: int) -> None:
    """Phase 5: means over the steps taken, and the update's counts."""
    metrics["ppo/reverted_steps"] = float(reverted)
    metrics.setdefault("ppo/backtracks", 0.0)
    for key in ("ppo/loss", "ppo/kl", "ppo/clip_fraction"):
        metrics[key] /= max(1, taken)
    metrics["ppo/optimizer_steps"] = float(taken)
    metrics["ppo/lr"] = optimizer.param_groups[0]["lr"]
    metrics["ppo/early_stopped"] = float(stopped)
