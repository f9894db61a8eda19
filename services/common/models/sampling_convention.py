"""One sampling convention for every backend: the request's settings, neutral values for the rest.

A checkpoint's ``generation_config.json`` may carry sampling defaults (a ``repetition_penalty``
1.1, ``top_k`` 20, ...). transformers applies them to every `generate` call that leaves the field
unset; vLLM applies them only to requests without sampling parameters. Either way two backends
would sample different policies from the same weights, and the behaviour log-probs the trainer
receives (at temperature 1, before any processor: `LOGPROBS_MODE`) would no longer describe what
was sampled. So no backend reads them: a request is sampled with its own ``temperature`` and
``top_p`` (and ``max_new_tokens``, ``stop``, seed) and `NEUTRAL` for every other field. The
checkpoint's end-of-turn ids (``eos_token_id``) are still honoured: they are no sampling setting.

Pure: no model is loaded here (transformers' `GenerationConfig` is a plain settings object, imported
only where one is built, so the CLI can describe the convention without loading transformers).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from transformers import GenerationConfig

__all__ = ["LOGPROBS_MODE", "NEUTRAL", "TOKEN_FIELDS", "sampling_fields", "hf_generate_kwargs",
           "vllm_sampling_kwargs", "token_ids_only", "describe"]

LOGPROBS_MODE = "raw_logprobs"
"""The behaviour log-prob of a sampled token: log-softmax of the model's own logits at temperature 1,
before temperature, top-p or any penalty (vLLM's ``logprobs_mode`` of that name; the `hf` backend
computes the same from the raw logits). The trainer's recomputation uses the same convention."""

NEUTRAL: dict[str, Any] = {
    "top_k": 0,
    "min_p": 0.0,
    "typical_p": 1.0,
    "repetition_penalty": 1.0,
    "presence_penalty": 0.0,
    "frequency_penalty": 0.0,
    "no_repeat_ngram_size": 0,
    "min_new_tokens": 0,
}
"""Every sampling field a run config does not set, at its no-op value (top_k 0 = off, min_p 0 = off,
typical_p 1 = off, penalties off, no n-gram ban, end of turn allowed from the first token)."""

TOKEN_FIELDS = ("bos_token_id", "eos_token_id", "pad_token_id", "decoder_start_token_id")
"""The fields of a checkpoint's generation config that are kept (token ids, not sampling settings)."""


def sampling_fields(temperature: float, top_p: float) -> dict[str, Any]:
    """The full sampling setting of a request: its ``temperature`` (0 = greedy) and ``top_p``,
    `NEUTRAL` for the rest (pure)."""
    return {"temperature": float(temperature), "top_p": float(top_p), **NEUTRAL}


def hf_generate_kwargs(temperature: float, top_p: float, sample: bool) -> dict[str, Any]:
    """transformers ``generate`` keyword arguments that fix every logits processor and warper.

    ``sample`` False: greedy (or our own `SeededSampler` picks the token), so temperature and top_p
    are not applied by transformers. Each field is given explicitly: a field left unset would be
    filled from the model's generation config, then from transformers' global defaults (top_k 50).
    """
    out: dict[str, Any] = {"do_sample": sample, "temperature": float(temperature) if sample else 1.0,
                           "top_p": float(top_p) if sample else 1.0}
    out.update(top_k=None, min_p=None, typical_p=1.0, repetition_penalty=1.0, no_repeat_ngram_size=0,
               min_new_tokens=None, min_length=0, epsilon_cutoff=0.0, eta_cutoff=0.0, encoder_repetition_penalty=1.0,
               bad_words_ids=None, sequence_bias=None, suppress_tokens=None, begin_suppress_tokens=None,
               forced_bos_token_id=None, forced_eos_token_id=None, exponential_decay_length_penalty=None,
               guidance_scale=None, num_beams=1, renormalize_logits=False)
    return out


def vllm_sampling_kwargs(temperature: float, top_p: float) -> dict[str, Any]:
    """vLLM ``SamplingParams`` keyword arguments of `sampling_fields` (vLLM has no n-gram ban or
    typical_p; top_k 0 is off there too)."""
    return {"temperature": max(float(temperature), 0.0), "top_p": float(top_p), "top_k": 0, "min_p": 0.0,
            "repetition_penalty": 1.0, "presence_penalty": 0.0, "frequency_penalty": 0.0, "min_tokens": 0}


def token_ids_only(config: GenerationConfig | None) -> GenerationConfig:
    """A generation config holding only ``config``'s token ids (`TOKEN_FIELDS`), every sampling
    field at transformers' unset value: what the `hf` backend installs as the model's own, so no
    checkpoint default can reach `generate`."""
    from transformers import GenerationConfig

    kept = {f: getattr(config, f, None) for f in TOKEN_FIELDS}
    return GenerationConfig(**{k: v for k, v in kept.items() if v is not None})


def describe(backend: str, temperature: float | None = None, top_p: float | None = None) -> dict[str, Any]:
    """What an engine logs once at start and a run report shows: the backend, the log-prob mode, the
    neutral fields, and (when known) the run's temperature and top_p (pure)."""
    out: dict[str, Any] = {"backend": backend, "logprobs_mode": LOGPROBS_MODE, "checkpoint_generation_config": "ignored"}
    if temperature is not None and top_p is not None:
        out.update(temperature=float(temperature), top_p=float(top_p))
    out.update(NEUTRAL)
    return out
