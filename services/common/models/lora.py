"""LoRA adapters on a transformers causal LM (peft): wrap a model for training, and run it as its base.

Under LoRA the trainer holds one model: the frozen base weights plus rank-r adapters (Hu et al. 2021,
"LoRA: Low-Rank Adaptation of Large Language Models"; the library is Hugging Face peft). Only the
adapters have gradients and AdamW state, a checkpoint is the adapter alone (``adapter_config.json`` +
``adapter_model.safetensors``, loaded by transformers over its base when peft is installed), and the
KL reference of ``ppo.ref_beta`` is the same model with its adapter disabled — no second model.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import cast

import torch
from transformers import PreTrainedModel

from services.common.config import LoraSettings

__all__ = ["with_lora", "adapter_disabled", "is_adapter_checkpoint"]


def with_lora(model: PreTrainedModel, settings: LoraSettings, base_path: str | Path, seed: int = 0) -> PreTrainedModel:
    """``model`` wrapped with fresh LoRA adapters (peft `get_peft_model`): the base frozen, the adapters
    (and ``modules_to_save``) trainable, their second matrix at zero, so the wrapped model computes
    exactly what the base does until it is trained. The first matrices' random start is drawn from
    ``seed`` alone (torch's global generator is left as it was): every rank of a sharded trainer, and a
    restarted trainer, starts from the same adapters.

    ``base_path`` (the base model's local directory) is written into the adapter's config, so a saved
    adapter loads over its base offline, from any working directory.

    Raises:
        ValueError: ``settings.rank`` is 0, or no ``target_modules`` name matches a layer of ``model``
            (peft's message names the modules).
    """
    from peft import LoraConfig, get_peft_model

    if settings.rank <= 0:
        raise ValueError(f"lora.rank must be > 0 to add adapters, got {settings.rank}")
    config = LoraConfig(r=settings.rank,
                        lora_alpha=settings.alpha,  # type: ignore[arg-type]  # peft types it int; floats work
                        lora_dropout=settings.dropout,
                        target_modules=list(settings.target_modules),
                        modules_to_save=list(settings.modules_to_save) or None, task_type="CAUSAL_LM")
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        wrapped = get_peft_model(model, config)
    wrapped.peft_config["default"].base_model_name_or_path = str(Path(base_path).resolve())
    return cast(PreTrainedModel, wrapped)  # a PeftModel: it forwards the PreTrainedModel API it wraps


@contextmanager
def adapter_disabled(model: torch.nn.Module) -> Iterator[torch.nn.Module]:
    """``model`` (a peft model) computing with its base weights only, inside the ``with`` block."""
    with model.disable_adapter():  # type: ignore[operator]  # peft's PeftModel
        yield model


def is_adapter_checkpoint(directory: str | Path) -> bool:
    """Whether ``directory`` holds a LoRA adapter (peft's ``adapter_config.json``) rather than full weights."""
    return (Path(directory) / "adapter_config.json").is_file()
