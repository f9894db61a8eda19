"""Model-rewritten instructions of web tasks (the environment model E of the paper's GUI setting,
RLAnything arXiv 2602.02488 §3.3: it rewrites a task's instruction), pure parts: the request to the
model, parsing its JSON answer, and the instruction *template* a rewrite becomes.

The page, its target and its reward stay MiniWoB++'s own; only the instruction the agent reads
changes (the page's ``#query`` text, `web_browser.Browser.begin`). The model is shown the task's
instruction, the direction and the policy's success rate, and answers one JSON object
``{"instruction": ..., "distractors": n}`` (``distractors`` optional: a harder rewrite may ask for
more inert elements on the page). The rewrite must keep every quoted text of the instruction
(the button to click, the text to type) exactly, in quotes: each becomes a placeholder
(`instruction_template`), so the template fits every page of the task, each page filling in its own
quoted texts (`fill_template`). Whether the rewrite still states the same goal is decided by
rollouts, not by this module: the scripted expert must win pages with it
(`services.env.families.web.WebFamily.check_instruction`), then the candidate's own group acc decides
as for any candidate.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass

from rlanything.v1.events_pb2 import DIRECTION_HARDER

from services.env.text_variants import VariantError, json_object

__all__ = ["WebRewrite", "web_variant_messages", "parse_web_variant", "instruction_template", "fill_template",
           "template_id", "WEB_VARIANT_SYSTEM", "MAX_INSTRUCTION_CHARS", "MAX_DISTRACTORS"]

MAX_INSTRUCTION_CHARS = 400
MAX_DISTRACTORS = 8
"""The ``distractors`` knob's upper bound (`WebFamily.knobs`)."""
WEB_VARIANT_SYSTEM = ("You write instructions for an AI agent that uses web pages. Each instruction tells the agent "
                      "what to click or type on one page. Reply with one JSON object and nothing else.")
_QUOTED = re.compile(r'"([^"]*)"')
_PLACEHOLDER = re.compile(r"\{(\d+)\}")


@dataclass(frozen=True)
class WebRewrite:
    """The model's rewrite: the new instruction and, optionally, the page's number of distractors."""

    instruction: str
    distractors: int | None = None


def web_variant_messages(instruction: str, task: str, direction: int, acc: float,
                         failed_actions: Sequence[str] = (), action_chars: int = 80) -> list[dict[str, str]]:
    """The chat sent to the model (OpenAI message dicts): the instruction, what to change, bad actions.

    ``acc`` is the policy's success rate on the task in [0, 1]; ``failed_actions`` are actions of
    failed rollouts whose step every judge vote called bad (critic feedback), each cut to ``action_chars``.
    """
    ask = ("It is too easy: rewrite the instruction so that it is HARDER to follow (longer, less direct wording, "
           "the goal stated after some context), and you may ask for more inert distractor elements on the page "
           f"(\"distractors\": 0 to {MAX_DISTRACTORS})." if direction == DIRECTION_HARDER else
           "It is too hard: rewrite the instruction so that it is EASIER to follow (short, direct, the element to "
           "use named plainly); you may ask for fewer distractor elements (\"distractors\": 0 or more).")
    lines = [f"The agent completed this web task ({task}) in {acc:.0%} of its attempts.", "",
             "[instruction]", instruction]
    if failed_actions:
        lines += ["", "[wrong actions the agent took]"] + [f"- {a[:action_chars]}" for a in failed_actions]
    lines += ["", ask, "The goal must stay exactly the same: keep every text in double quotes exactly as it is, "
              "in double quotes, in the same order, and add no other double quotes.",
              'Reply with exactly: {"instruction": "...", "distractors": n} (leave out "distractors" to keep the page).']
    return [{"role": "system", "content": WEB_VARIANT_SYSTEM}, {"role": "user", "content": "\n".join(lines)}]


def parse_web_variant(text: str) -> WebRewrite:
    """The model's answer as a `WebRewrite` (a ```json fence around the object is allowed).

    Raises:
        VariantError: not JSON, not an object, ``instruction`` missing, empty, not a string or longer
            than `MAX_INSTRUCTION_CHARS`, or ``distractors`` not an integer in [0, `MAX_DISTRACTORS`].
    """
    data = json_object(text)
    value = data.get("instruction")
    if not isinstance(value, str) or not value.strip():
        raise VariantError(f"the model's rewrite has no instruction text (keys: {sorted(data)})")
    instruction = " ".join(value.split())
    if len(instruction) > MAX_INSTRUCTION_CHARS:
        raise VariantError(f"the model's instruction has {len(instruction)} characters (at most {MAX_INSTRUCTION_CHARS})")
    distractors = data.get("distractors")
    if distractors is not None and (isinstance(distractors, bool) or not isinstance(distractors, int)
                                    or not 0 <= distractors <= MAX_DISTRACTORS):
        raise VariantError(f"the model's distractors={distractors!r} is not an integer in [0, {MAX_DISTRACTORS}]")
    return WebRewrite(instruction, distractors)


def instruction_template(parent: str, rewrite: str) -> str:
    """``rewrite`` with the parent's quoted texts replaced by placeholders ``{0}``, ``{1}``, … (in the
    parent's order); braces of the text itself are doubled (`str.format` escapes).

    Raises:
        VariantError: the rewrite is the parent again (up to spaces), or its quoted texts are not
            exactly the parent's, in the same order (a target changed, dropped or added).
    """
    if " ".join(rewrite.split()) == " ".join(parent.split()):
        raise VariantError("the rewrite is its parent instruction again")
    want, got = _QUOTED.findall(parent), _QUOTED.findall(rewrite)
    if got != want:
        raise VariantError(f"the rewrite's quoted texts {got} are not the instruction's {want} (same texts, same order)")
    pieces, at = [], 0
    for i, match in enumerate(_QUOTED.finditer(rewrite)):
        pieces += [_escape(rewrite[at:match.start()]), f'"{{{i}}}"']
        at = match.end()
    return "".join(pieces + [_escape(rewrite[at:])])


def fill_template(template: str, quoted: Sequence[str]) -> str:
    """The instruction of one page: ``template`` with placeholder ``{i}`` set to the page's ``quoted[i]``.

    Raises:
        VariantError: the template has a placeholder the page has no quoted text for.
    """
    used = [int(i) for i in _PLACEHOLDER.findall(template.replace("{{", "").replace("}}", ""))]
    if used and max(used) >= len(quoted):
        raise VariantError(f"the instruction template needs {max(used) + 1} quoted texts, the page has {len(quoted)}")
    return template.format(*quoted)


def template_id(template: str) -> int:
    """The template's number for the ``instruction`` knob: 31 bits of its SHA-256, never 0 (0 is the
    page's own instruction)."""
    return int.from_bytes(hashlib.sha256(template.encode()).digest()[:4], "big") % (2**31 - 1) + 1


def _escape(text: str) -> str:
    return text.replace("{", "{{").replace("}", "}}")
