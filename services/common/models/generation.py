"""One generation interface, three backends: `hf` (transformers), `vllm` (`vllm_engine`), `openai`.

Every backend takes a batch of chats and returns, per chat, the completion text, its token ids
and the behaviour log-probs of those tokens (at temperature 1, the convention the trainer uses),
plus the model version that produced it. `hf` and `vllm` swap in a new checkpoint without a
restart (`load_version`).

Sampling can be seeded per chat: ``generate(..., seeds=[...])`` makes chat i's tokens depend only
on its prompt, the model and ``seeds[i]``, not on the other chats of the batch (`hf`: a per-row
`torch.Generator`; `vllm` and `openai`: the per-request ``seed``). A rollout worker merges the
steps of concurrent jobs into shared calls whose make-up depends on timing; with per-chat seeds a
run of one seed still samples the same episodes.

A call can be cancelled: ``generate(..., cancel=event)`` returns early with `GenerationCancelled`
once ``event`` is set (the `hf` backend checks it before every new token and while it waits for the
model); `generate_async` sets it when the awaiting task is cancelled (a gRPC deadline, a client
that hung up), so abandoned work stops within one token and no later request waits behind it.

One chat can be streamed: ``generate_stream(chat, sampling, on_token, ...)`` calls
``on_token(row, token_id, logprob)`` for each token as it is generated (`hf`: from inside the
decoding loop, before the next token is computed; `vllm`: after each engine step, from the
engine's incremental outputs; `openai`: after the whole completion) and returns the same
`Completion` as `generate`.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from transformers import LogitsProcessor, LogitsProcessorList, PreTrainedModel, StoppingCriteria, StoppingCriteriaList
from transformers.utils import logging as hf_logging

from services.common.errors import ContextLengthError
from services.common.models.loading import load_model
from services.common.models.sampling_convention import describe, hf_generate_kwargs, token_ids_only
from services.common.seeding import derive_seed

__all__ = ["Sampling", "Completion", "Generator", "HFGenerator", "OpenAIGenerator", "Chat", "eos_ids",
           "cut_at_eos", "GenerationCancelled", "generate_async", "check_context", "encode_chat", "shared_rows",
           "shared_prefill", "Seeds", "check_seeds", "SeededSampler", "OnToken", "acquire_unless_cancelled"]

hf_logging.disable_progress_bar()
log = logging.getLogger("rlanything.models")
Chat = Sequence[dict[str, str]]
"""A chat: ``[{"role": "user", "content": "..."}, ...]``."""
Seeds = Sequence[int | None] | None
"""Per-chat sampling seeds (one per chat; None in the list: that chat is not seeded), or None."""
OnToken = Callable[[int, int, float], None]
"""Called as ``on_token(row, token_id, logprob)`` for each generated token (log-prob in nats, at
temperature 1; NaN when the backend has none); an exception it raises ends the generation."""


def check_seeds(chats: Sequence[Chat], seeds: Seeds) -> None:
    """Raise ValueError unless ``seeds`` is None or holds one entry per chat, each None or in [0, 2**63)."""
    if seeds is None:
        return
    if len(seeds) != len(chats):
        raise ValueError(f"seeds must hold one seed per chat: {len(seeds)} seeds for {len(chats)} chats")
    for i, s in enumerate(seeds):
        if s is not None and not 0 <= s < 2**63:
            raise ValueError(f"seeds[{i}] must be in [0, 2**63), got {s}")


@dataclass(frozen=True)
class Sampling:
    """Sampling settings of one request."""

    temperature: float = 1.0
    """0 = greedy."""
    top_p: float = 1.0
    max_new_tokens: int = 64
    """Tokens."""
    stop: tuple[str, ...] = ()
    """Stop strings (the text is cut before them)."""
    seed: int | None = None
    """A call-level seed: the `hf` backend seeds row i with ``derive_seed("call", seed, i)`` unless
    per-chat ``seeds`` are given (it never touches torch's global generator)."""


@dataclass(frozen=True)
class Completion:
    """One generated answer."""

    text: str
    prompt_token_ids: tuple[int, ...]
    token_ids: tuple[int, ...]
    logprobs: tuple[float, ...]
    """Behaviour log-prob of each token in ``token_ids`` (nats; empty when the backend has none)."""
    finish_reason: str
    """``"stop"`` (end of turn or stop string) or ``"length"``."""
    model_version: int | None = None
    """Version of the weights that generated it (None when the backend cannot tell, e.g. a remote
    OpenAI-compatible server): weights are swapped between calls, so a caller reading the
    generator's ``model_version`` afterwards may see a newer one."""


class GenerationCancelled(Exception):
    """A generation stopped because its ``cancel`` event was set (nobody waits for its result)."""


class Generator(ABC):
    """A text generator serving one model version at a time."""

    model_version: int = 0

    @abstractmethod
    def generate(self, chats: Sequence[Chat], sampling: Sampling,
                 cancel: threading.Event | None = None, seeds: Seeds = None) -> list[Completion]:
        """One completion per chat, in order.

        ``seeds[i]`` (when given and not None) seeds chat i alone: its completion does not depend on
        the other chats of the call.

        Raises:
            ValueError: ``seeds`` does not hold one seed per chat (`check_seeds`).
            GenerationCancelled: ``cancel`` was set before the completions were done (a backend
                checks it as often as it can: every token for `hf`, between chats for `openai`).
        """

    def load_version(self, path: str, version: int) -> None:
        """Serve checkpoint ``path`` as ``version`` from the next call on (default: no weights)."""
        self.model_version = version

    def close(self) -> None:
        """Free what the backend holds outside this process's memory (vLLM: its engine-core process);
        called once when the serving service stops. Default: nothing to free."""

    def generate_stream(self, chat: Chat, sampling: Sampling, on_token: OnToken,
                        cancel: threading.Event | None = None, seed: int | None = None,
                        logprobs: bool = True) -> Completion:
        """One chat's completion, reporting each token to ``on_token`` (row 0) as it is generated.

        ``logprobs`` False: ``on_token`` may get NaN for the log-prob (the completion's own
        ``logprobs`` are unaffected). Default: the whole completion is generated, then its tokens
        are reported (a backend that decodes step by step overrides this). Raises what `generate`
        raises, and what ``on_token`` raises.
        """
        (c,) = self.generate([chat], sampling, cancel, None if seed is None else [seed])
        values = list(c.logprobs) if len(c.logprobs) == len(c.token_ids) else [float("nan")] * len(c.token_ids)
        for token, logprob in zip(c.token_ids, values):
            on_token(0, token, logprob)
        return c


def eos_ids(tokenizer_eos: int | None, generation_eos: int | Sequence[int] | None) -> list[int]:
    """Every end-of-turn token id: the tokenizer's and each of ``generation_config.eos_token_id``
    (an int or a list: instruct models such as Llama 3 and Qwen2 end turns on several), in order."""
    out: list[int] = []
    extra = [generation_eos] if isinstance(generation_eos, int) else list(generation_eos or [])
    for i in [tokenizer_eos, *extra]:
        if i is not None and i not in out:
            out.append(int(i))
    return out


def cut_at_eos(ids: Sequence[int], stop_ids: Sequence[int]) -> tuple[int, str]:
    """(tokens kept, finish reason) of generated ``ids``: up to and including the first end-of-turn
    id ("stop"), else all of them ("length": cut by max_new_tokens)."""
    for k, i in enumerate(ids):
        if i in stop_ids:
            return k + 1, "stop"
    return len(ids), "length"


def encode_chat(tokenizer: Any, chat: Chat) -> list[int]:
    """Token ids of ``chat`` under ``tokenizer``'s chat template, generation prompt appended.

    Every backend that reports token ids builds its prompts here, so the ids a trainer receives are
    the ids the model was conditioned on (the template adds whatever BOS the model expects; nothing
    is added a second time).
    """
    ids = tokenizer.apply_chat_template(list(chat), add_generation_prompt=True, tokenize=True)
    return [int(i) for i in (ids["input_ids"] if isinstance(ids, dict) or hasattr(ids, "keys") else ids)]


async def generate_async(generator: Generator, chats: Sequence[Chat], sampling: Sampling,
                         seeds: Seeds = None) -> list[Completion]:
    """``generator.generate`` in a worker thread; cancelling the awaiting task cancels the generation.

    asyncio cannot stop a thread, so the task's cancellation sets the call's ``cancel`` event and
    the backend stops at its next check; the `asyncio.CancelledError` propagates as usual.
    """
    cancel = threading.Event()
    try:
        return await asyncio.to_thread(generator.generate, chats, sampling, cancel, seeds)
    except asyncio.CancelledError:
        cancel.set()
        raise


GENERATING = threading.local()
"""``GENERATING.version``: the model version the calling thread's current (or last) generation uses, set
by a backend when the call picks its model, so a token callback can name the version that generates
its tokens (a sync may swap the served model between a request's arrival and its generation)."""


@dataclass
class _Loaded:
    # transformers' model and tokenizer classes are dynamic (AutoModel*, fast/slow tokenizers):
    # typed Any so calls like generate() and apply_chat_template() are not mis-typed.
    model: Any
    tokenizer: Any
    version: int
    lock: threading.Lock = field(default_factory=threading.Lock)


class HFGenerator(Generator):
    """transformers `generate` with left padding, sampling and per-token log-probs (CPU or GPU).

    Sampling follows `sampling_convention`: the request's temperature and top_p, neutral values for
    every other field; the checkpoint's ``generation_config.json`` contributes its token ids only
    (its sampling defaults are dropped at load, and every field is passed to ``generate``).
    """

    def __init__(self, source: str, cache_dir: str | Path = ".cache/models", version: int = 0,
                 device: str = "cpu", threads: int | None = None) -> None:
        if threads:
            torch.set_num_threads(threads)
        self.cache_dir = cache_dir
        self.device = device
        model, tokenizer = _load_neutral(source, cache_dir, device)
        self._loaded = _Loaded(model, tokenizer, version)
        self.model_version = version
        log.info("sampling convention", extra=describe("hf"))

    @property
    def model(self) -> PreTrainedModel:
        """The model currently served."""
        return self._loaded.model

    @property
    def tokenizer(self):
        """The tokenizer of the model currently served."""
        return self._loaded.tokenizer

    def load_version(self, path: str, version: int) -> None:
        """Serve checkpoint ``path`` as ``version``, once it scored its trainer's canary probe.

        Raises:
            CanaryError: it scores the probe other than its trainer did (`services.common.models.canary`);
                the version served before stays served.
            ValueError: an adapter's tensor matched no module (`services.common.models.loading.load_model`).
        """
        from services.common.models.canary import check_canary

        model, tokenizer = _load_neutral(path, self.cache_dir, self.device)
        check_canary(path, model)
        self._loaded = _Loaded(model, tokenizer, version)  # atomic swap: in-flight calls finish on the old one
        self.model_version = version

    def encode_chat(self, chat: Chat) -> list[int]:
        """Token ids of ``chat`` with the generation prompt appended (the chat template)."""
        return encode_chat(self._loaded.tokenizer, chat)

    def generate_stream(self, chat: Chat, sampling: Sampling, on_token: OnToken,
                        cancel: threading.Event | None = None, seed: int | None = None,
                        logprobs: bool = True) -> Completion:
        """`Generator.generate_stream`: each token is reported from inside the decoding loop."""
        (c,) = self.generate([chat], sampling, cancel, None if seed is None else [seed], on_token=on_token,
                             on_token_logprobs=logprobs)
        return c

    @torch.no_grad()
    def generate(self, chats: Sequence[Chat], sampling: Sampling,
                 cancel: threading.Event | None = None, seeds: Seeds = None,
                 on_token: OnToken | None = None, on_token_logprobs: bool = True) -> list[Completion]:
        """`Generator.generate`; ``on_token`` (optional) is called for each row's tokens as they are
        generated, up to and including its end-of-turn token, with their log-probs unless
        ``on_token_logprobs`` is False (NaN then: the per-step log-softmax is skipped)."""
        check_seeds(chats, seeds)
        loaded = self._loaded
        GENERATING.version = loaded.version
        tok = loaded.tokenizer
        prompts = [self.encode_chat(c) for c in chats]
        if not prompts:
            return []
        width = max(len(p) for p in prompts)
        check_context(width, sampling.max_new_tokens, getattr(loaded.model.config, "max_position_embeddings", None))
        pad = tok.pad_token_id
        input_ids = torch.tensor([[pad] * (width - len(p)) + p for p in prompts], device=self.device)
        attention = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in prompts], device=self.device)
        if seeds is None and sampling.seed is not None:  # a call-level seed seeds each row, never the global generator
            seeds = [derive_seed("call", sampling.seed, i) for i in range(len(prompts))]
        greedy = sampling.temperature <= 0
        processors = None
        if seeds is not None and not greedy:  # our own sampler picks each row's token; generate takes it greedily
            row_seeds = [int(torch.randint(2**62, ())) if x is None else x for x in seeds]
            processors = LogitsProcessorList([SeededSampler(row_seeds, sampling.temperature, sampling.top_p)])
        sample = not greedy and processors is None
        stop_ids = eos_ids(tok.eos_token_id, getattr(loaded.model.generation_config, "eos_token_id", None))
        criteria: list[StoppingCriteria] = [_StopOnText(tok, sampling.stop, width)] if sampling.stop else []
        if cancel is not None:
            criteria.append(_StopOnEvent(cancel))
        if on_token is not None:  # after `sample` is decided: the tap is no sampler
            tap = _TokenTap(on_token, width, stop_ids)
            if on_token_logprobs:
                processors = LogitsProcessorList([tap.logits, *(processors or [])])
            criteria.append(tap)
        acquire_unless_cancelled(loaded.lock, cancel)
        try:
            cache = shared_prefill(loaded.model, input_ids, attention, prompts)
            out = loaded.model.generate(
                input_ids=input_ids, attention_mask=attention, max_new_tokens=sampling.max_new_tokens,
                **({"cache": cache} if cache is not None else {}),
                **hf_generate_kwargs(sampling.temperature, sampling.top_p, sample), logits_processor=processors,
                stopping_criteria=StoppingCriteriaList(criteria) if criteria else None,
                return_dict_in_generate=True, output_logits=True, pad_token_id=pad,
                eos_token_id=stop_ids)
        finally:
            loaded.lock.release()
        if cancel is not None and cancel.is_set():
            raise GenerationCancelled("generation cancelled by its caller")
        new_tokens = out.sequences[:, width:]
        logp = torch.stack(out.logits, dim=1).float().log_softmax(-1)  # [B, T, V] at temperature 1
        picked = logp.gather(-1, new_tokens.unsqueeze(-1)).squeeze(-1)
        results = []
        for i, prompt in enumerate(prompts):
            ids = new_tokens[i].tolist()
            n, finish = cut_at_eos(ids, stop_ids)
            text = tok.decode(ids[:n], skip_special_tokens=True)
            for s in sampling.stop:
                if s in text:
                    text, finish = text[: text.index(s)], "stop"
                    cut = self._tokens_covering(ids[:n], text + s)
                    n = min(n, cut)
            results.append(Completion(text, tuple(prompt), tuple(ids[:n]), tuple(picked[i, :n].tolist()), finish,
                                      loaded.version))
        return results

    def _tokens_covering(self, ids: list[int], text: str) -> int:
        """The fewest leading tokens of ``ids`` whose decoding contains ``text``."""
        tok = self._loaded.tokenizer
        for k in range(1, len(ids) + 1):
            if text in tok.decode(ids[:k], skip_special_tokens=True):
                return k
        return len(ids)


def _load_neutral(source: str, cache_dir: str | Path, device: str) -> tuple[Any, Any]:
    """`load_model`, the model's generation config reduced to its token ids (`token_ids_only`)."""
    model, tokenizer = load_model(source, cache_dir, device=device)
    model.generation_config = token_ids_only(model.generation_config)
    return model, tokenizer


def shared_rows(prompts: Sequence[Sequence[int]]) -> tuple[list[int], list[int]]:
    """Which rows of a batch to prefill, and for each row the prefilled row it copies (pure).

    Returns ``(unique, source)``: ``unique`` holds the index of the first row of every distinct
    prompt, in order; ``source[i]`` is the position in ``unique`` of row ``i``'s prompt.
    """
    first: dict[tuple[int, ...], int] = {}
    unique: list[int] = []
    source: list[int] = []
    for i, p in enumerate(prompts):
        key = tuple(p)
        if key not in first:
            first[key] = len(unique)
            unique.append(i)
        source.append(first[key])
    return unique, source


@torch.no_grad()
def shared_prefill(model: PreTrainedModel, input_ids_BW: torch.Tensor, attention_BW: torch.Tensor,
                   prompts: Sequence[Sequence[int]]) -> Any | None:
    """A KV cache of every row's prompt but its last token, computed once per *distinct* prompt and
    copied to the rows that repeat it; None when no prompt repeats (plain generation is as fast).

    The judge asks for m votes on the same step prompt and the G rollouts of a task start from the
    same observation, so a batch often holds each prompt several times; the prompt's forward pass
    (the prefill) is most of a short generation's cost. Measured on the tiny judge, 64 chats of
    22 distinct step prompts (3 votes each): 1.9–2.5 s → 0.5–0.7 s, identical greedy answers and
    first-token log-probs. `generate` then feeds only each row's last prompt token (transformers
    skips the positions a given cache already holds), so sampling and log-probs are unchanged.

    Args:
        input_ids_BW, attention_BW: ``[B, W]`` left-padded prompt ids and mask.
        prompts: the ``B`` unpadded prompts (token ids) in the same order.
    """
    unique, source = shared_rows(prompts)
    if len(unique) == len(prompts) or input_ids_BW.shape[1] < 2:
        return None
    rows = torch.tensor(unique, device=input_ids_BW.device)
    ids_UW, att_UW = input_ids_BW[rows], attention_BW[rows]
    position_UW = (att_UW.cumsum(-1) - 1).clamp(min=0)  # left padding: positions as generate computes them
    out = model(input_ids=ids_UW[:, :-1], attention_mask=att_UW[:, :-1], position_ids=position_UW[:, :-1],
                use_cache=True, logits_to_keep=1)
    cache = getattr(out, "cache", None)
    if cache is None or not hasattr(cache, "reorder_cache"):  # a model without a reorderable cache: plain path
        return None
    cache.reorder_cache(torch.tensor(source, device=input_ids_BW.device))  # [U, ...] -> [B, ...]
    return cache


def check_context(prompt_tokens: int, max_new_tokens: int, window: int | None) -> None:
    """Refuse a generation that cannot fit the model's context window of ``window`` positions
    (None: unknown, nothing checked); all counts in tokens.

    Raises:
        ContextLengthError: ``prompt_tokens`` alone fill the window (param ``messages``), or with
            ``max_new_tokens`` they exceed it (param ``max_tokens``).
    """
    if window is None:
        return
    if prompt_tokens >= window:
        raise ContextLengthError(f"the prompt is {prompt_tokens} tokens; this model's context window is {window} "
                                 "tokens: shorten the messages", "messages")
    if prompt_tokens + max_new_tokens > window:
        raise ContextLengthError(f"the prompt ({prompt_tokens} tokens) plus max_tokens ({max_new_tokens}) exceed this "
                                 f"model's context window of {window} tokens: ask for at most "
                                 f"{window - prompt_tokens} tokens", "max_tokens")


def acquire_unless_cancelled(lock: threading.Lock, cancel: threading.Event | None, poll_s: float = 0.05) -> None:
    """Take ``lock``, giving up with `GenerationCancelled` as soon as ``cancel`` is set."""
    while not lock.acquire(timeout=poll_s):
        if cancel is not None and cancel.is_set():
            raise GenerationCancelled("generation cancelled while waiting for the model")
    if cancel is not None and cancel.is_set():
        lock.release()
        raise GenerationCancelled("generation cancelled while waiting for the model")


class SeededSampler(LogitsProcessor):
    """Sample each row's next token with that row's own `torch.Generator` (per-chat seeds).

    At every step, row b draws one uniform number u from its generator and takes the token where
    the cumulative distribution of softmax(scores_b / temperature), restricted to the top-p nucleus
    (Holtzman et al. 2020) in descending order, first reaches u. The returned scores are 0 at that
    token and -inf elsewhere, so `generate` run greedily emits it. Row b's k-th token then depends
    only on its seed, its prompt and the model — not on the other rows (up to float rounding of
    the logits, which moves a draw only when u lies within that rounding of a boundary).

    Args:
        seeds: one seed per row of the batch, each in [0, 2**63).
        temperature: > 0.
        top_p: nucleus mass in (0, 1].
    """

    def __init__(self, seeds: Sequence[int], temperature: float, top_p: float = 1.0) -> None:
        if temperature <= 0:
            raise ValueError(f"temperature must be > 0 for sampling, got {temperature}")
        if not 0 < top_p <= 1:
            raise ValueError(f"top_p must be in (0, 1], got {top_p}")
        self.generators = [torch.Generator().manual_seed(int(s)) for s in seeds]
        self.temperature = temperature
        self.top_p = top_p

    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        """``scores`` [B, V] -> [B, V]: 0 at each row's sampled token, -inf elsewhere."""
        if scores.shape[0] != len(self.generators):
            raise ValueError(f"{len(self.generators)} seeds for a batch of {scores.shape[0]} rows")
        probs_BV = torch.softmax(scores.float() / self.temperature, dim=-1)
        sorted_BV, order_BV = probs_BV.sort(dim=-1, descending=True, stable=True)
        before_BV = sorted_BV.cumsum(-1) - sorted_BV  # mass ranked above each token
        sorted_BV = sorted_BV.masked_fill(before_BV >= self.top_p, 0.0)  # outside the nucleus (the top token stays)
        cdf_BV = sorted_BV.cumsum(-1)
        u_B1 = torch.stack([torch.rand((), generator=g, dtype=torch.float64) for g in self.generators]).view(-1, 1)
        rank_B1 = torch.searchsorted(cdf_BV.double(), u_B1 * cdf_BV[:, -1:].double()).clamp(max=scores.shape[1] - 1)
        token_B1 = order_BV.gather(1, rank_B1.to(order_BV.device))
        out = torch.full_like(scores, float("-inf"))
        return out.scatter_(1, token_B1, 0.0)


class _TokenTap(StoppingCriteria):
    """Reports each row's new token to ``on_token`` as it is generated (a stopping criterion is
    called right after the token is appended) with its log-prob at temperature 1, from the logits
    `logits` (a logits processor placed first) saw at that step — NaN when `logits` is not
    installed. Never stops a row itself."""

    def __init__(self, on_token: OnToken, prompt_width: int, stop_ids: Sequence[int]) -> None:
        self.on_token = on_token
        self.width = prompt_width
        self.stop_ids = set(stop_ids)
        self.logp_BV: torch.Tensor | None = None
        self.done: set[int] = set()
        self.never: torch.Tensor | None = None
        tap = self

        class _Logits(LogitsProcessor):
            def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
                tap.logp_BV = scores.float().log_softmax(-1)
                return scores

        self.logits = _Logits()

    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor, **kwargs: object) -> torch.Tensor:
        if self.never is None:
            self.never = torch.zeros(input_ids.shape[0], dtype=torch.bool, device=input_ids.device)
        if input_ids.shape[1] > self.width:
            tokens = input_ids[:, -1].tolist()
            logprobs = [float("nan")] * len(tokens) if self.logp_BV is None else \
                self.logp_BV.gather(-1, input_ids[:, -1:]).squeeze(-1).tolist()
            for row, token in enumerate(tokens):
                if row not in self.done:
                    if token in self.stop_ids:
                        self.done.add(row)
                    self.on_token(row, token, logprobs[row])
        return self.never


class _StopOnEvent(StoppingCriteria):
    """Stop every row once ``event`` is set (checked after each generated token)."""

    def __init__(self, event: threading.Event) -> None:
        self.event = event

    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor, **kwargs: object) -> torch.Tensor:
        return torch.full((input_ids.shape[0],), self.event.is_set(), dtype=torch.bool, device=input_ids.device)


class _StopOnText(StoppingCriteria):
    """Stop a row once its *generated* text contains a stop string (transformers' own
    ``stop_strings`` also matches across the prompt boundary, e.g. a prompt ending in a newline)."""

    def __init__(self, tokenizer, stops: Sequence[str], prompt_width: int) -> None:
        self.tokenizer = tokenizer
        self.stops = tuple(stops)
        self.width = prompt_width

    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor, **kwargs: object) -> torch.Tensor:
        texts = self.tokenizer.batch_decode(input_ids[:, self.width:], skip_special_tokens=True)
        return torch.tensor([any(s in t for s in self.stops) for t in texts], device=input_ids.device)


class OpenAIGenerator(Generator):
    """Any OpenAI-compatible chat-completions server (token ids are not available: inference only)."""

    def __init__(self, base_url: str, model: str, api_key: str = "EMPTY", timeout_s: float = 60.0,
                 max_parallel: int = 8) -> None:
        from openai import OpenAI

        self.client = OpenAI(base_url=base_url, api_key=api_key, timeout=timeout_s)
        self.model = model
        self.max_parallel = max_parallel

    def _one(self, chat: Chat, sampling: Sampling, seed: int | None = None) -> Completion:
        response = self.client.chat.completions.create(
            model=self.model, messages=list(chat),  # type: ignore[arg-type]  # plain role/content dicts
            temperature=sampling.temperature, top_p=sampling.top_p,
            max_tokens=sampling.max_new_tokens, stop=list(sampling.stop) or None, logprobs=True,
            seed=sampling.seed if seed is None else seed)
        choice = response.choices[0]
        logprobs = tuple(t.logprob for t in (choice.logprobs.content or [])) if choice.logprobs else ()
        return Completion(choice.message.content or "", (), (), logprobs, choice.finish_reason or "stop")

    def generate(self, chats: Sequence[Chat], sampling: Sampling,
                 cancel: threading.Event | None = None, seeds: Seeds = None) -> list[Completion]:
        check_seeds(chats, seeds)
        row_seeds = list(seeds) if seeds is not None else [None] * len(chats)

        def one(i: int) -> Completion:
            if cancel is not None and cancel.is_set():
                raise GenerationCancelled("generation cancelled by its caller")
            return self._one(chats[i], sampling, row_seeds[i])

        with ThreadPoolExecutor(self.max_parallel) as pool:
            return list(pool.map(one, range(len(chats))))
