"""Per-token log-probabilities of given tokens under a causal LM (transformers)."""

from __future__ import annotations

import torch
from torch import Tensor

__all__ = ["token_logprobs"]


def token_logprobs(model: torch.nn.Module, input_ids_BL: Tensor, attention_mask_BL: Tensor) -> Tensor:
    """log p(token_t | tokens_<t) for every position, [B, L] (position 0 gets 0).

    Logits are taken at temperature 1 (the distribution the trainer optimises); the behaviour
    log-probs recorded at generation use the same convention.
    """
    logits_BLV = model(input_ids=input_ids_BL, attention_mask=attention_mask_BL).logits
    logp_BLV = torch.log_softmax(logits_BLV[:, :-1].float(), dim=-1)
    picked_BL = logp_BLV.gather(-1, input_ids_BL[:, 1:].unsqueeze(-1)).squeeze(-1)
    return torch.nn.functional.pad(picked_BL, (1, 0), value=0.0)
