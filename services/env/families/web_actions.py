"""The `web` family's action language, parsed strictly (pure).

Two forms, nothing else (surrounding whitespace is ignored, nothing more):

* ``click <ref>``: click the page element with reference ``<ref>`` (a positive integer shown in
  the observation as ``[ref]``);
* ``type <ref> "<text>"``: replace the text of the field ``<ref>`` with ``<text>``; inside the
  quotes ``\\"`` stands for a quote and ``\\\\`` for a backslash, and no other escape is allowed.

`parse_action` raises `ActionSyntaxError` with a message that names what was wrong, so the
episode can show it to the agent; `format_action` writes the canonical text of an action, and
``parse_action(format_action(a)) == a`` for every action.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from services.common.errors import InvalidArgumentError

__all__ = ["WebAction", "ActionSyntaxError", "parse_action", "format_action", "MAX_TEXT_CHARS"]

MAX_TEXT_CHARS = 200
"""Longest text a ``type`` action may carry (characters); MiniWoB fields hold a few words."""

_CLICK = re.compile(r"click ([1-9][0-9]{0,5})")
_TYPE = re.compile(r'type ([1-9][0-9]{0,5}) "((?:[^"\\]|\\["\\])*)"')


class ActionSyntaxError(InvalidArgumentError):
    """An action text that is neither ``click <ref>`` nor ``type <ref> "<text>"``."""


@dataclass(frozen=True)
class WebAction:
    """One parsed action: ``kind`` is ``click`` or ``type``; ``text`` is "" for a click."""

    kind: Literal["click", "type"]
    ref: int
    text: str = ""


def parse_action(raw: str) -> WebAction:
    """Parse one action text.

    Raises:
        ActionSyntaxError: anything but exactly ``click <ref>`` or ``type <ref> "<text>"`` (a ref is
            a positive integer of at most 6 digits, the text at most `MAX_TEXT_CHARS` characters
            and escapes only ``\\"`` and ``\\\\``); the message quotes the input.
    """
    text = raw.strip()
    if m := _CLICK.fullmatch(text):
        return WebAction("click", int(m.group(1)))
    if m := _TYPE.fullmatch(text):
        typed = re.sub(r"\\([\"\\])", r"\1", m.group(2))
        if len(typed) > MAX_TEXT_CHARS:
            raise ActionSyntaxError(f"action {raw[:80]!r}: text has {len(typed)} characters, at most {MAX_TEXT_CHARS}")
        return WebAction("type", int(m.group(1)), typed)
    raise ActionSyntaxError(f"action {raw[:80]!r} is not 'click <ref>' or 'type <ref> \"<text>\"' "
                            "(ref: a positive integer from the page; text in double quotes, \\\" for a quote)")


def format_action(action: WebAction) -> str:
    """The canonical text of ``action`` (quotes and backslashes in its text escaped)."""
    if action.kind == "click":
        return f"click {action.ref}"
    escaped = action.text.replace("\\", "\\\\").replace('"', '\\"')
    return f'type {action.ref} "{escaped}"'
