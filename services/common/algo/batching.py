"""Turn training samples into padded tensors (pure; shared by the policy and RM trainers).

**Fix over the reference** (docs/algorithm.md): a sample dropped for being too long is dropped
together with its advantage, so advantages stay aligned with their samples.

`merge_duplicates` trains identical samples once: the G rollouts of a task often share their first
steps (same observation, same answer), and the m votes of a step often say the same thing, so a
round's policy batch held 27 % distinct (prompt, response) pairs and its RM batch 38 % (measured on
a default run). Merged with their count as weight, the loss is unchanged (see the function).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

__all__ = ["Sample", "Batch", "make_batch", "merge_duplicates", "micro_batches"]


@dataclass(frozen=True)
class Sample:
    """One (prompt, response, advantage) training sample."""

    sample_id: str
    prompt_ids: tuple[int, ...]
    response_ids: tuple[int, ...]
    advantage: float
    behaviour_logprobs: tuple[float, ...] = ()
    """log π of each response token when it was generated (nats); may be empty."""
    weight: float = 1.0
    """How many original samples this one stands for (`merge_duplicates`); the loss weighs it so."""


@dataclass(frozen=True)
class Batch:
    """Right-padded tensors of kept samples, in input order."""

    input_ids_BL: Tensor
    """[B, L] prompt + response token ids, padded with ``pad_id``."""
    attention_mask_BL: Tensor
    """[B, L] 1 on real tokens."""
    response_mask_BL: Tensor
    """[B, L] 1.0 on response tokens (the positions whose log-prob is trained)."""
    advantage_B: Tensor
    """[B] advantages of the kept samples."""
    behaviour_logprobs_BL: Tensor
    """[B, L] behaviour log-probs at response positions (0 elsewhere or when unknown)."""
    weight_B: Tensor
    """[B] how many original samples each kept sample stands for (1 unless merged)."""
    sample_ids: tuple[str, ...]
    dropped_ids: tuple[str, ...]
    """Samples left out for exceeding ``max_length`` (their advantages are left out too)."""

    def to(self, device: torch.device | str) -> "Batch":
        """The same batch with every tensor on ``device`` (the trained model's: a GPU trainer's batches are
        built on the CPU)."""
        return dataclasses.replace(self, **{f.name: getattr(self, f.name).to(device)
                                            for f in dataclasses.fields(self) if isinstance(getattr(self, f.name), Tensor)})


def make_batch(samples: Sequence[Sample], max_length: int, pad_id: int) -> Batch:
    """Pad ``samples`` into a `Batch`, dropping those longer than ``max_length`` tokens.

    Raises:
        ValueError: ``max_length`` < 2, or a sample has an empty response.
    """
    if max_length < 2:
        raise ValueError(f"max_length must be >= 2, got {max_length}")
    kept: list[Sample] = []
    dropped: list[Sample] = []
    for s in samples:
        if not s.response_ids:
            raise ValueError(f"sample {s.sample_id} has an empty response")
        (kept if len(s.prompt_ids) + len(s.response_ids) <= max_length else dropped).append(s)
    length = max((len(s.prompt_ids) + len(s.response_ids) for s in kept), default=1)
    ids = torch.full((len(kept), length), pad_id, dtype=torch.long)
    attn = torch.zeros((len(kept), length), dtype=torch.long)
    resp = torch.zeros((len(kept), length))
    behaviour = torch.zeros((len(kept), length))
    for i, s in enumerate(kept):
        p, r = len(s.prompt_ids), len(s.response_ids)
        ids[i, : p + r] = torch.tensor(s.prompt_ids + s.response_ids)
        attn[i, : p + r] = 1
        resp[i, p: p + r] = 1.0
        if s.behaviour_logprobs:
            behaviour[i, p: p + r] = torch.tensor(s.behaviour_logprobs[:r])
    return Batch(ids, attn, resp, torch.tensor([s.advantage for s in kept], dtype=torch.float32), behaviour,
                 torch.tensor([s.weight for s in kept], dtype=torch.float32),
                 tuple(s.sample_id for s in kept), tuple(s.sample_id for s in dropped))


def merge_duplicates(samples: Sequence[Sample], by_behaviour: bool = False) -> list[Sample]:
    """Samples with the same prompt, the same response and advantages of the same sign, as one
    sample each: its advantage is their weighted mean, its weight their summed weight, its id and
    behaviour log-probs the first one's. Order: by first occurrence.

    Why the PPO loss (`ppo_loss.ppo_clip_loss`, weighted) is unchanged: identical token sequences
    have the same ratio ρ_t at every token, and min(ρA, clip(ρ)A) — with the dual clip too — is
    A·f(ρ) with an f that depends only on the sign of A; so Σ_i A_i·f(ρ) over same-sign
    duplicates is (Σ_i A_i)·f(ρ) = weight · mean advantage · f(ρ). The k3 terms are equal across
    duplicates and count ``weight`` times. Samples of opposite signs stay apart.

    Args:
        samples: the round's samples.
        by_behaviour: also require equal behaviour log-probs (when they are used as π_old, as in
            asynchronous mode, where identical texts may come from different policy versions).
    """
    merged: dict[tuple, list[Sample]] = {}
    for s in samples:
        key = (s.prompt_ids, s.response_ids, s.advantage > 0) + ((s.behaviour_logprobs,) if by_behaviour else ())
        merged.setdefault(key, []).append(s)
    out = []
    for group in merged.values():
        first = group[0]
        if len(group) == 1:
            out.append(first)
            continue
        weight = sum(s.weight for s in group)
        advantage = sum(s.advantage * s.weight for s in group) / weight
        out.append(Sample(first.sample_id, first.prompt_ids, first.response_ids, advantage, first.behaviour_logprobs,
                          weight))
    return out


def micro_batches(lengths: Sequence[int], token_budget: int) -> list[list[int]]:
    """Cut rows of the given lengths (tokens) into micro-batches of at most ``token_budget`` padded
    tokens each (rows × the longest row in it); a row longer than the budget goes alone.

    Rows are taken longest first, so rows of similar length share a micro-batch and little padding is
    computed. Every position ``0..len(lengths)-1`` appears exactly once. ``token_budget`` 0 gives one
    micro-batch of every row (in order).

    Raises:
        ValueError: ``token_budget`` < 0, or a length < 1.
    """
    if token_budget < 0:
        raise ValueError(f"token_budget must be >= 0, got {token_budget}")
    if any(n < 1 for n in lengths):
        raise ValueError(f"every length must be >= 1, got {list(lengths)}")
    if token_budget == 0 or not lengths:
        return [list(range(len(lengths)))] if lengths else []
    out: list[list[int]] = []
    current: list[int] = []
    for i in sorted(range(len(lengths)), key=lambda i: (-lengths[i], i)):
        longest = lengths[current[0]] if current else lengths[i]
        if current and (len(current) + 1) * longest > token_budget:
            out.append(current)
            current = []
        current.append(i)
    out.append(current)
    return out
