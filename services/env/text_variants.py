"""Model-written variants of text tasks (the paper's environment model E, arXiv 2602.02488 §3.3),
pure parts: the request to the model, parsing its JSON answer, and the checks a variant must pass
before it may become a pending candidate.

A text task is a prompt, a reference answer and an optional hint (family ``live``). The model is
shown the task, the direction (harder / easier), the policy's success rate on it and the answers
the judge called bad, and answers one JSON object ``{"prompt": ..., "reference": ..., "hint": ...}``.
A variant is refused, with the reason, when it is no JSON object, lacks a field, is the parent
itself, or cannot be solved: its reference does not pass the family's own verifier
(`services.env.families.live.answer_matches` on the boxed reference).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass

from rlanything.v1.events_pb2 import DIRECTION_HARDER

from services.env.families.live import answer_matches

__all__ = ["TextTask", "VariantError", "variant_messages", "json_object", "parse_variant", "check_variant", "VARIANT_SYSTEM",
           "MAX_PROMPT_CHARS", "MAX_REFERENCE_CHARS"]

MAX_PROMPT_CHARS = 4000
MAX_REFERENCE_CHARS = 200
VARIANT_SYSTEM = ("You write training tasks for an AI assistant. Each task is a prompt and its reference "
                  "answer. Reply with one JSON object and nothing else.")
_FENCE = re.compile(r"^```(?:json)?\s*|\s*```$", re.IGNORECASE)


@dataclass(frozen=True)
class TextTask:
    """One text task: what the assistant is asked, the answer that wins, an optional hint."""

    prompt: str
    reference: str
    hint: str = ""


class VariantError(ValueError):
    """A model-written variant that may not become a candidate; the message is the reason that goes
    into the task-pool event."""


def variant_messages(parent: TextTask, direction: int, acc: float, failed_answers: Sequence[str] = (),
                     answer_chars: int = 300) -> list[dict[str, str]]:
    """The chat sent to the model (OpenAI message dicts): the task, what to change, the bad answers.

    ``acc`` is the policy's success rate on ``parent`` in [0, 1]; ``failed_answers`` are answers of
    failed rollouts whose step every judge vote called bad (critic feedback), each cut to
    ``answer_chars``.
    """
    harder = direction == DIRECTION_HARDER
    ask = ("It is too easy: write a HARDER task of the same kind (more steps, larger numbers, one more "
           "condition), still with one short, exact reference answer." if harder else
           "It is too hard: write an EASIER task of the same kind (fewer steps, smaller numbers, the key fact "
           "given), still with one short, exact reference answer.")
    lines = [f"The assistant answered this task correctly in {acc:.0%} of its attempts.", "",
             "[task prompt]", parent.prompt, "", "[reference answer]", parent.reference]
    if parent.hint:
        lines += ["", "[hint]", parent.hint]
    if failed_answers:
        lines += ["", "[wrong answers the assistant gave]"] + [f"- {a[:answer_chars]}" for a in failed_answers]
    lines += ["", ask, 'Reply with exactly: {"prompt": "...", "reference": "...", "hint": "..."} '
              "(hint: one sentence that helps, or an empty string)."]
    return [{"role": "system", "content": VARIANT_SYSTEM}, {"role": "user", "content": "\n".join(lines)}]


def json_object(text: str) -> dict:
    """The model's answer as one JSON object (a ```json fence around it is allowed).

    Raises:
        VariantError: not JSON, or JSON but not an object.
    """
    body = _FENCE.sub("", text.strip())
    try:
        data = json.loads(body)
    except json.JSONDecodeError as exc:
        raise VariantError(f"the model's answer is not JSON ({exc.msg} at char {exc.pos}): {text[:120]!r}") from None
    if not isinstance(data, dict):
        raise VariantError(f"the model's answer is JSON but not an object: {type(data).__name__}")
    return data


def parse_variant(text: str) -> TextTask:
    """The model's answer as a `TextTask`: one JSON object (a ```json fence around it is allowed).

    Raises:
        VariantError: not JSON, not an object, a field missing, empty, not a string or too long.
    """
    data = json_object(text)
    fields = {}
    for name, limit, required in (("prompt", MAX_PROMPT_CHARS, True), ("reference", MAX_REFERENCE_CHARS, True),
                                  ("hint", MAX_PROMPT_CHARS, False)):
        value = data.get(name, "" if not required else None)
        if value is None:
            raise VariantError(f"the model's variant has no {name!r} (keys: {sorted(data)})")
        if not isinstance(value, str):
            raise VariantError(f"the model's variant field {name!r} is a {type(value).__name__}, not a string")
        if required and not value.strip():
            raise VariantError(f"the model's variant field {name!r} is empty")
        if len(value) > limit:
            raise VariantError(f"the model's variant field {name!r} has {len(value)} characters (at most {limit})")
        fields[name] = value.strip()
    return TextTask(fields["prompt"], fields["reference"], fields["hint"])


def check_variant(parent: TextTask, variant: TextTask) -> None:
    """May ``variant`` become a candidate? It must differ from its parent and be solvable by the
    family's verifier (its own reference, boxed, wins).

    Raises:
        VariantError: the same prompt as the parent, or a reference the verifier cannot match.
    """
    if " ".join(variant.prompt.split()) == " ".join(parent.prompt.split()):
        raise VariantError("the variant is its parent task again (same prompt)")
    if not answer_matches(f"\\boxed{{{variant.reference}}}", variant.reference):
        raise VariantError(f"unsolvable: the reference {variant.reference!r} does not pass the family's verifier "
                           "(nothing could ever match it)")
