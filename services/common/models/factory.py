"""The generation backend for a model config (shared by the policy and the reward model)."""

from __future__ import annotations

import os

from services.common.config import ModelConfig
from services.common.models.generation import Generator, HFGenerator, OpenAIGenerator

__all__ = ["build_generator"]


def build_generator(model: ModelConfig, source: str, version: int = 0) -> Generator:
    """The configured backend serving ``source``.

    Raises:
        ImportError: ``vllm`` chosen without the vllm extra installed.
        ValueError: ``openai`` chosen without ``openai_base_url``.
    """
    if model.backend == "hf":
        return HFGenerator(source, model.cache_dir, version, device=model.device, threads=model.threads or None)
    if model.backend == "vllm":
        from services.common.models.vllm_engine import VLLMGenerator  # the optional extra

        v = model.vllm
        return VLLMGenerator(source, model.cache_dir, version, dtype=v.dtype,
                             gpu_memory_utilization=v.gpu_memory_utilization,
                             max_model_len=v.max_model_len or None, enforce_eager=v.enforce_eager,
                             max_lora_rank=v.max_lora_rank)
    if not model.openai_base_url:
        raise ValueError("model.openai_base_url is required for the openai backend")
    return OpenAIGenerator(model.openai_base_url, model.openai_model or source,
                           api_key=os.environ.get(model.openai_api_key_env, "EMPTY"))
