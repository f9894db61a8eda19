"""Turn training samples into padded tensors (pure; shared by the policy and RM trainers).

**Fix over the reference** (docs/algorithm.md): a sample dropped for being too long is dropped
together with its advantage, so advantages stay aligned with their samples.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

__all__ = ["Sample", "Batch", "make_batch"]


@dataclass(frozen=True)
class Sample:
    """One (prompt, response, advantage) training sample."""

    sample_id: str
    prompt_ids: tuple[int, ...]
    response_ids: tuple[int, ...]
    advantage: float
    behaviour_logprobs: tuple[float, ...] = ()
    """log π of each response token when it was generated (nats); may be empty."""


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
    sample_ids: tuple[str, ...]
    dropped_ids: tuple[str, ...]
    """Samples left out for exceeding ``max_length`` (their advantages are left out too)."""


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
                 tuple(s.sample_id for s in kept), tuple(s.sample_id for s in dropped))
