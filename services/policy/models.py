"""Which weights the policy starts from, and the generation backend that serves them."""

from __future__ import annotations

import os
from pathlib import Path

from services.common.config import FamilyConfig, ModelConfig
from services.common.models.generation import Generator, HFGenerator, OpenAIGenerator, VLLMGenerator

__all__ = ["initial_source", "build_generator"]


def initial_source(model: ModelConfig, family: FamilyConfig, history_steps: int, role: str = "policy") -> str:
    """``model.source``, or a tiny model for ``family`` built once into the cache (random weights).

    The tiny model's tokenizer is trained on 50 expert episodes' text of the family; run
    `rlanything sft` for a cold-started (competent) model instead.
    """
    if model.source:
        return model.source
    from services.env.families.registry import build_family
    from services.policy.sft import build_tiny_for, demonstrations

    t = model.tiny
    out = Path(model.cache_dir) / f"tiny-{role}-{family.type}-h{t.hidden_size}-l{t.layers}-v{t.vocab_size}"
    if not (out / "config.json").exists():
        fam = build_family(family, Path(model.cache_dir) / "env")
        build_tiny_for(demonstrations(fam, family, 50, history_steps), out, t)
    return str(out)


def build_generator(model: ModelConfig, source: str, version: int = 0) -> Generator:
    """The configured backend serving ``source``.

    Raises:
        ImportError: ``vllm`` chosen without the vllm extra installed.
        ValueError: ``openai`` chosen without ``openai_base_url``.
    """
    if model.backend == "hf":
        return HFGenerator(source, model.cache_dir, version, device=model.device, threads=model.threads or None)
    if model.backend == "vllm":
        return VLLMGenerator(source, model.cache_dir, version)
    if not model.openai_base_url:
        raise ValueError("model.openai_base_url is required for the openai backend")
    return OpenAIGenerator(model.openai_base_url, model.openai_model or source,
                           api_key=os.environ.get(model.openai_api_key_env, "EMPTY"))
