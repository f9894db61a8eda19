"""Per-token log-probabilities of given tokens under a causal LM (transformers)."""

from __future__ import annotations

import torch
from torch import Tensor

__all__ = ["token_logprobs"]


def token_logprobs(model: torch.nn.Module, input_ids_BL: Tensor, attention_mask_BL: Tensor,
                   keep_last: int = 0) -> Tensor:
    """log p(token_t | tokens_<t) for every position, [B, L] (position 0 gets 0).

    Logits are taken at temperature 1 (the distribution the trainer optimises); the behaviour
    log-probs recorded at generation use the same convention.

    ``keep_last`` = K > 0 computes logits only for the last K positions (transformers'
    ``logits_to_keep``), so only the last K − 1 tokens get their log-prob and the others 0: the
    [B, L, V] logits are the largest activation of a small model's update (V = 49,152 for
    SmolLM2), and a trainer needs them only over the responses at the end of each row.
    """
    length = input_ids_BL.shape[1]
    if 0 < keep_last < length:
        logits_BKV = model(input_ids=input_ids_BL, attention_mask=attention_mask_BL, logits_to_keep=keep_last).logits
        logp_BKV = torch.log_softmax(logits_BKV[:, :-1].float(), dim=-1)
        picked_BK = logp_BKV.gather(-1, input_ids_BL[:, length - keep_last + 1:].unsqueeze(-1)).squeeze(-1)
        return torch.nn.functional.pad(picked_BK, (length - keep_last + 1, 0), value=0.0)
    logits_BLV = model(input_ids=input_ids_BL, attention_mask=attention_mask_BL).logits
    logp_BLV = torch.log_softmax(logits_BLV[:, :-1].float(), dim=-1)
    picked_BL = logp_BLV.gather(-1, input_ids_BL[:, 1:].unsqueeze(-1)).squeeze(-1)
    return torch.nn.functional.pad(picked_BL, (1, 0), value=0.0)
