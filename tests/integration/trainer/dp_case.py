"""The update compared on one process and on several (a tiny Qwen2 model, samples of mixed lengths)."""

from __future__ import annotations

import torch
from transformers import Qwen2ForCausalLM

from services.common.algo.batching import Sample
from services.common.config import LoraSettings, PPOConfig
from tests.support import tiny_causal_lm

CFG = PPOConfig(optimizer_steps=2, epochs=2, lr=1e-3, ref_beta=0.1, max_kl=10.0, merge_duplicates=False,
                micro_batch_tokens=40)
"""Two epochs of two minibatches, micro-batches, the reference anchor and the trust-region checks."""

LORA_CFG = CFG.model_copy(update={"lr": 2e-2, "lora": LoraSettings(rank=4, alpha=8)})
"""The same update training LoRA adapters (the reference: the base with the adapter disabled)."""


def model() -> Qwen2ForCausalLM:
    return tiny_causal_lm()


def samples() -> list[Sample]:
    g = torch.Generator().manual_seed(1)
    out = []
    for i in range(21):  # odd: the ranks get different numbers of rows and micro-batches
        p, r = 2 + i % 7, 1 + (i * 5) % 9
        ids = torch.randint(1, 40, (p + r,), generator=g).tolist()
        out.append(Sample(f"s{i}", tuple(ids[:p]), tuple(ids[p:]), float((i % 5) - 2) or 0.5, weight=1.0 + (i % 3)))
    return out


def lora_learner(model_dir: str, checkpoint_dir: str):
    """A LoRA `PPOLearner` over the saved tiny model ``model_dir``, sharded when a process group exists."""
    from services.common.data_parallel import current_shard
    from services.common.models.generation import HFGenerator
    from services.common.trainer import PPOLearner

    return PPOLearner(HFGenerator(model_dir), LORA_CFG, checkpoint_dir, seed=5, reference_source=model_dir,
                      shard=current_shard())
