"""Stable seeds derived from names (pure).

A sampled token must not depend on which other chats shared its generate call, or two runs of one
seed diverge as soon as timing merges different calls. So each chat gets its own seed, derived from
what identifies it (an episode's reset seed and the step index; a judged step's id and the vote
index) by `derive_seed`. Python's ``hash`` is salted per process, so BLAKE2b is used instead.
"""

from __future__ import annotations

import hashlib

__all__ = ["derive_seed", "SEED_BITS"]

SEED_BITS = 63
"""Derived seeds lie in [0, 2**63): a valid `torch.Generator.manual_seed` and vLLM/OpenAI seed."""


def derive_seed(*parts: int | str) -> int:
    """A seed in [0, 2**63) that depends only on ``parts`` (their values, types and order).

    Raises:
        TypeError: a part is neither an int nor a str (e.g. None or a float).
    """
    for p in parts:
        if isinstance(p, bool) or not isinstance(p, (int, str)):
            raise TypeError(f"seed parts must be int or str, got {type(p).__name__}: {p!r}")
    text = "\x1f".join(f"{'i' if isinstance(p, int) else 's'}:{p}" for p in parts)
    digest = hashlib.blake2b(text.encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") >> (64 - SEED_BITS)
