"""LoRA adapters on a transformers causal LM (peft): wrap a model for training, and run it as its base.

Under LoRA the trainer holds one model: the frozen base weights plus rank-r adapters (Hu et al. 2021,
"LoRA: Low-Rank Adaptation of Large Language Models"; the library is Hugging Face peft). Only the
adapters have gradients and AdamW state, a checkpoint is the adapter alone (``adapter_config.json`` +
``adapter_model.safetensors``, loaded by transformers over its base when peft is installed), and the
KL reference of ``ppo.ref_beta`` is the same model with its adapter disabled — no second model.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import cast

import torch
from transformers import PreTrainedModel

from services.common.config import LoraSettings
from services.common.errors import ConfigError

__all__ = ["with_lora", "adapter_disabled", "is_adapter_checkpoint", "tied_modules", "check_adapter_tensors",
           "check_adapter_loaded"]


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
        ConfigError: ``base_path`` is itself an adapter (its trained adapter would be replaced by a fresh
            one), or ``modules_to_save`` names a module whose weight is tied to another's (training it
            alone would untie them: `tied_modules`).
    """
    from peft import LoraConfig, get_peft_model

    if settings.rank <= 0:
        raise ValueError(f"lora.rank must be > 0 to add adapters, got {settings.rank}")
    if is_adapter_checkpoint(base_path):
        raise ConfigError(
            f"model.source {str(base_path)!r} is a LoRA adapter (it holds adapter_config.json), not a model: the "
            "trainer would put fresh adapters over the adapter's base and train from there, dropping the trained "
            "adapter, and the KL reference would be the bare base. To go on with a run, resume it (rlanything run "
            "--resume: the adapter and its optimizer state come back); to start a new run from it, merge it into its "
            "base first (peft's merge_and_unload, then save_pretrained) and give that directory.")
    tied = sorted(set(settings.modules_to_save) & tied_modules(model))
    if tied:
        raise ConfigError(
            f"lora.modules_to_save {tied}: tied to another module's weight in this model (tie_word_embeddings: "
            "the input embeddings and lm_head share one matrix); peft would train a copy of it alone and untie "
            "them in the trainer and in the served checkpoint while the config still says they are tied. Leave "
            "them out (the adapters carry the change), or train without LoRA.")
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


def tied_modules(model: torch.nn.Module) -> set[str]:
    """Short names (``lm_head``, ``embed_tokens``) of the modules whose weight is the same tensor as
    another module's (tied embeddings)."""
    owners: dict[int, set[str]] = {}
    for name, module in model.named_modules():
        weight = getattr(module, "weight", None)
        if isinstance(weight, torch.nn.Parameter):
            owners.setdefault(id(weight), set()).add(name.rsplit(".", 1)[-1])
    return {n for names in owners.values() if len(names) > 1 for n in names}


def check_adapter_tensors(tensors: Mapping[str, torch.Tensor], rank: int) -> None:
    """Check an adapter's tensors (pure), as saved by peft (``...lora_A.weight``: [r, in]; ``...lora_B.weight``:
    [out, r]): each LoRA matrix 2-D, non-empty, with ``rank`` on its inner side.

    Raises:
        ValueError: no LoRA tensor at all, or one of the wrong shape (the message names its key and shape).
    """
    lora = {k: v for k, v in tensors.items() if ".lora_A." in k or ".lora_B." in k}
    if not lora:
        raise ValueError(f"the adapter holds no LoRA tensor (keys: {sorted(tensors)[:5]}…)")
    for key, value in sorted(lora.items()):
        inner = value.shape[0] if ".lora_A." in key else (value.shape[1] if value.ndim == 2 else -1)
        if value.ndim != 2 or value.numel() == 0 or inner != rank:
            raise ValueError(f"adapter tensor {key} has shape {tuple(value.shape)}: a LoRA matrix of rank {rank} is "
                             f"2-D with {rank} {'rows' if '.lora_A.' in key else 'columns'}")


def _plain(key: str) -> str:
    """An adapter key as peft saves it: no ``base_model.model.`` prefix, no adapter name (``.default``)."""
    return key.removeprefix("base_model.model.").replace(".default.", ".")


def check_adapter_loaded(model: torch.nn.Module, adapter_dir: str | Path) -> int:
    """Check that every tensor of the adapter in ``adapter_dir`` landed in a module of ``model`` (loaded
    over its base by transformers or peft) with its saved values; returns how many did.

    Raises:
        ValueError: a tensor matched no module (e.g. a key with an inserted wrapper name), or the module
            holds another shape or other values (the message names up to 5 keys).
    """
    from safetensors.torch import load_file

    saved = load_file(Path(adapter_dir) / "adapter_model.safetensors")
    held = {_plain(k): v for k, v in model.state_dict().items()}
    missing = [k for k in saved if _plain(k) not in held]
    if missing:
        raise ValueError(f"{len(missing)} of the {len(saved)} tensors of the adapter {adapter_dir} matched no module of "
                         f"the model, so it would serve the base's outputs for them: {missing[:5]}")
    wrong = [k for k, v in saved.items() if held[_plain(k)].shape != v.shape
             or not torch.equal(held[_plain(k)].to(v.dtype).cpu(), v)]
    if wrong:
        raise ValueError(f"{len(wrong)} tensors of the adapter {adapter_dir} loaded with other shapes or values: "
                         f"{wrong[:5]}")
    return len(saved)


@contextmanager
def adapter_disabled(model: torch.nn.Module) -> Iterator[torch.nn.Module]:
    """``model`` (a peft model) computing with its base weights only, inside the ``with`` block."""
    with model.disable_adapter():  # type: ignore[operator]  # peft's PeftModel
        yield model


def is_adapter_checkpoint(directory: str | Path) -> bool:
    """Whether ``directory`` holds a LoRA adapter (peft's ``adapter_config.json``) rather than full weights."""
    return (Path(directory) / "adapter_config.json").is_file()
