"""The sync canary: a backend that loads a new version scores a fixed probe and must get the
log-probs the trainer got from the weights it saved, before it serves the version.

The trainer scores the probe (`CANARY_CHAT` under the chat template, then `CANARY_REPLY`, teacher
forced) with its own model when it saves a checkpoint and writes ``canary.json`` beside the weights
(`write_canary`). A backend that loads the checkpoint scores the same token ids (`check_canary`) and
refuses the version when one log-prob differs by more than the tolerance: an adapter whose tensors
landed nowhere, weights saved in another order, another tokenizer — whatever makes the served model
not the trained one. The largest difference is exported per role (``rla_model_canary_max_abs_diff``).
Backends that cannot score a given sequence (the vLLM and OpenAI backends here) skip it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch
from prometheus_client import Gauge

from services.common.errors import ServiceFailedError
from services.common.models.logprobs import token_logprobs

__all__ = ["CANARY_CHAT", "CANARY_REPLY", "CANARY_FILE", "TOLERANCE", "CanaryError", "probe_ids", "probe_logprobs",
           "write_canary", "check_canary", "CANARY_DIFF"]

CANARY_CHAT = ({"role": "user", "content": "Canary check: repeat the sentence about the fox."},)
CANARY_REPLY = " The quick brown fox jumps over the lazy dog. \\boxed{2}"
CANARY_FILE = "canary.json"
TOLERANCE = 1e-3
"""Largest |Δ log-prob| (nats) a backend in float32 may show on the probe: the same weights differ by
~1e-6 between the trainer's and a loader's forward passes; an adapter not applied by 0.1 or more."""
CANARY_DIFF = Gauge("rla_model_canary_max_abs_diff", "Largest |log-prob difference| between the loaded version and "
                                                     "its trainer on the canary probe, by role (nats).", ["role"])


class CanaryError(ServiceFailedError):
    """Raised when a loaded version scores the canary probe other than its trainer did."""


def probe_ids(tokenizer: Any) -> tuple[list[int], int]:
    """The probe's token ids under ``tokenizer`` and how many of them (at the end) are scored."""
    from services.common.models.generation import encode_chat

    prompt = encode_chat(tokenizer, list(CANARY_CHAT))
    reply = [int(i) for i in tokenizer.encode(CANARY_REPLY, add_special_tokens=False)]
    return prompt + reply, len(reply)


@torch.no_grad()
def probe_logprobs(model: torch.nn.Module, ids: list[int], scored: int) -> list[float]:
    """log p of the last ``scored`` tokens of ``ids`` under ``model`` in eval mode (its mode restored).
    On a sharded trainer every rank must call it (a forward pass is a collective)."""
    was_training = model.training
    model.eval()
    try:
        device = next(model.parameters()).device
        ids_1L = torch.tensor([ids], device=device)
        logp_1L = token_logprobs(model, ids_1L, torch.ones_like(ids_1L))
    finally:
        model.train(was_training)
    return [float(v) for v in logp_1L[0, len(ids) - scored:]]


def write_canary(directory: str | Path, ids: list[int], logprobs: list[float]) -> None:
    """Write ``canary.json`` (the probe's ids and the trainer's log-probs of its scored tokens)."""
    Path(directory, CANARY_FILE).write_text(json.dumps({"ids": ids, "logprobs": logprobs}))


def check_canary(directory: str | Path, model: torch.nn.Module, tolerance: float = TOLERANCE) -> float | None:
    """Score the probe of ``directory``'s ``canary.json`` with ``model`` (just loaded from it); returns
    the largest |Δ log-prob|, or None when the checkpoint has no canary (written before it existed, or
    by a judge without local weights). The metric's role is the checkpoint's (``<role>/v<N>``).

    Raises:
        CanaryError: a difference above ``tolerance`` (the message names the version's directory,
            the token and both values).
    """
    path = Path(directory, CANARY_FILE)
    role = Path(directory).parent.name
    if not path.exists():
        return None
    want = json.loads(path.read_text())
    ids, expected = [int(i) for i in want["ids"]], [float(v) for v in want["logprobs"]]
    got = probe_logprobs(model, ids, len(expected))
    diffs = [abs(a - b) for a, b in zip(got, expected, strict=True)]
    worst = max(diffs, default=0.0)
    CANARY_DIFF.labels(role).set(worst)
    if worst > tolerance:
        i = diffs.index(worst)
        raise CanaryError(f"{role}: the version in {directory} scores the canary probe other than its trainer did "
                          f"(token {i} of {len(diffs)}: log-prob {got[i]:.5f}, the trainer's {expected[i]:.5f}; "
                          f"|Δ| {worst:.5f} > {tolerance}): the loaded model is not the trained one, so it is not "
                          "served")
    return worst
