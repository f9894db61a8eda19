"""The content builder of a generator's answers (`services.common.models.detokenize.ContentBuilder`
with the served tokenizer's bytes, end-of-turn ids and the request's stop strings), shared by the
OpenAI-compatible endpoint and gRPC `Policy.GenerateStream`, so both release the same text."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from services.common.models.detokenize import ContentBuilder, token_bytes_of
from services.common.models.generation import Generator, Sampling, eos_ids

__all__ = ["content_builder"]

_BYTES_CACHE: dict[int, tuple[Any, Callable[[int], bytes]]] = {}


def content_builder(generator: Generator, sampling: Sampling) -> ContentBuilder | None:
    """The content builder for the generator's tokenizer (None: the backend has no tokenizer, e.g.
    a remote OpenAI-compatible server; its text is used as it is)."""
    tok = getattr(generator, "tokenizer", None)
    if tok is None:
        return None
    model = getattr(generator, "model", None)
    stop_ids = eos_ids(tok.eos_token_id, getattr(getattr(model, "generation_config", None), "eos_token_id", None))
    return ContentBuilder(_token_bytes(tok), stop_ids, sampling.stop)


def _token_bytes(tok: Any) -> Callable[[int], bytes]:
    """`token_bytes_of` for ``tok``, kept while that tokenizer is served (a new checkpoint's
    tokenizer gets its own)."""
    hit = _BYTES_CACHE.get(id(tok))
    if hit is None or hit[0] is not tok:
        _BYTES_CACHE.clear()
        hit = _BYTES_CACHE[id(tok)] = (tok, token_bytes_of(tok))
    return hit[1]
