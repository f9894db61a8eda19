"""Runs inside vLLM's worker process: loads a checkpoint into the running model in place.

vLLM imports this module in each worker (``worker_extension_cls``) before the model is built, and
`VLLMGenerator.load_version` calls `InPlaceWeights.rla_load_checkpoint` on every worker through
``LLM.collective_rpc``. The checkpoint's safetensors are fed to the model's own ``load_weights``,
whose per-parameter weight loaders copy each tensor into the existing storage (fusing q/k/v and
gate/up as at start-up), so CUDA graphs and the KV cache stay valid: the method TRL uses to sync
vLLM with its trainer. An engine started with LoRA (its linear layers wrapped by vLLM's LoRA layers)
loads full weights the same way: they reach the wrapped base layers (tests/vllm_backend/
test_vllm_lora.py: a full-weight version on a LoRA engine answers as transformers does). LoRA
adapters themselves are not loaded here but through vLLM's own ``add_lora`` (`VLLMGenerator`).

CPU build only: vLLM repacks each linear layer's weight for oneDNN at start-up and frees the
original, and its own in-place reload then leaves the packed copies stale (measured: greedy output
no longer matched transformers after `reload_weights`). On CPU this module therefore keeps the
weights as plain tensors multiplied by ``torch.nn.functional.linear`` (vLLM's fallback for
unpackable layers) — slower matmuls, weights that a reload really changes. GPUs are untouched.
"""

from __future__ import annotations

from pathlib import Path

import torch
from safetensors.torch import safe_open
from vllm.platforms import current_platform

__all__ = ["InPlaceWeights"]


def _plain_cpu_linear(layer: torch.nn.Module, remove_weight: bool) -> None:
    """vLLM's CPU GEMM dispatch, replaced: the layer keeps its weight and uses `F.linear`."""
    setattr(layer, "cpu_linear", torch.nn.functional.linear)  # noqa: B010  # a torch Module attribute


if current_platform.is_cpu():
    import vllm.model_executor.layers.utils as _layer_utils

    _layer_utils.dispatch_cpu_unquantized_gemm = _plain_cpu_linear  # linear.py imports it at call time
    import vllm.model_executor.layers.vocab_parallel_embedding as _embedding

    if hasattr(_embedding, "dispatch_cpu_unquantized_gemm"):
        _embedding.dispatch_cpu_unquantized_gemm = _plain_cpu_linear


class InPlaceWeights:
    """Mixed into vLLM's worker class (``self`` is the worker)."""

    def rla_load_checkpoint(self, path: str) -> int:
        """Copy every tensor of ``path``/*.safetensors into the served model; returns how many.

        Raises:
            FileNotFoundError: ``path`` holds no safetensors file.
        """
        files = sorted(Path(path).glob("*.safetensors"))
        if not files:
            raise FileNotFoundError(f"checkpoint {path!r} holds no *.safetensors weights")
        model = self.model_runner.model  # type: ignore[attr-defined]  # the vLLM worker's

        def tensors():
            for file in files:
                with safe_open(str(file), framework="pt") as f:
                    for name in f.keys():
                        yield name, f.get_tensor(name)

        loaded = model.load_weights(tensors())
        return len(loaded) if loaded is not None else 0
