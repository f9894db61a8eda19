"""A normalised view of a text for finding personal data that hides behind encodings (pure).

The view folds, in order:

1. every character by Unicode NFKC (``＠`` → ``@``, full-width digits and letters, ``﹫``, the
   mathematical alphabets), one character at a time so each folded character keeps its origin;
2. invisible format characters (Unicode category Cf: zero-width space U+200B, non-joiner U+200C,
   joiner U+200D, word joiner U+2060, soft hyphen U+00AD, BOM U+FEFF, bidi controls) removed;
3. percent-escapes of ASCII characters decoded, repeatedly (``%40`` → ``@``, ``%2540`` →
   ``%40`` → ``@``; at most `PERCENT_ROUNDS` rounds).

Each character of the view maps back to the span of the original text it came from, so a finding
in the view names the original characters to replace; nothing else of the text changes.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass

__all__ = ["NormalView", "normal_view", "normal_text", "PERCENT_ROUNDS"]

PERCENT_ROUNDS = 4
_HEX = "0123456789abcdefABCDEF"
_PERCENT = re.compile(r"%[0-7][0-9A-Fa-f]")


@dataclass(frozen=True)
class NormalView:
    """The folded ``text``; its i-th character came from ``original[starts[i]:ends[i]]``."""

    text: str
    starts: list[int]
    ends: list[int]

    def original_span(self, start: int, end: int) -> tuple[int, int]:
        """The span of the original text that ``text[start:end]`` (``start < end``) came from."""
        return self.starts[start], self.ends[end - 1]

    def changed_segments(self, original: str, margin: int = 256) -> list[tuple[int, int]]:
        """Spans of ``text`` around what folding changed: ``margin`` characters each side of each
        changed character (or of the place a removed one stood), widened to whitespace and merged.
        Outside them the view equals ``original``, so a finding that meets no change is found
        there already."""
        changed: list[int] = []
        previous_end = 0
        for i, (a, b) in enumerate(zip(self.starts, self.ends)):
            if a != previous_end or b - a != 1 or self.text[i] != original[a]:
                changed.append(i)
            previous_end = b
        if previous_end != len(original):
            changed.append(len(self.text) - 1)
        segments: list[tuple[int, int]] = []
        n = len(self.text)
        for i in changed:
            lo, hi = max(0, i - margin), min(n, i + margin + 1)
            while lo > 0 and not self.text[lo - 1].isspace():
                lo -= 1
            while hi < n and not self.text[hi].isspace():
                hi += 1
            if segments and lo <= segments[-1][1]:
                segments[-1] = (segments[-1][0], max(hi, segments[-1][1]))
            else:
                segments.append((lo, hi))
        return [(a, b) for a, b in segments if a < b]


def _folded(text: str) -> tuple[list[str], list[int], list[int]]:
    chars: list[str] = []
    starts: list[int] = []
    ends: list[int] = []
    for i, ch in enumerate(text):
        if ch.isascii():
            chars.append(ch)
            starts.append(i)
            ends.append(i + 1)
            continue
        if unicodedata.category(ch) == "Cf":
            continue
        for c in unicodedata.normalize("NFKC", ch):
            if unicodedata.category(c) != "Cf":
                chars.append(c)
                starts.append(i)
                ends.append(i + 1)
    return chars, starts, ends


def _percent_round(chars: list[str], starts: list[int], ends: list[int]) -> bool:
    """Decode each ``%XX`` of an ASCII character once, in place; whether anything changed."""
    out_c: list[str] = []
    out_s: list[int] = []
    out_e: list[int] = []
    i, n, changed = 0, len(chars), False
    while i < n:
        if chars[i] == "%" and i + 2 < n and chars[i + 1] in _HEX and chars[i + 2] in _HEX and chars[i + 1] <= "7":
            out_c.append(chr(int(chars[i + 1] + chars[i + 2], 16)))
            out_s.append(starts[i])
            out_e.append(ends[i + 2])
            i += 3
            changed = True
        else:
            out_c.append(chars[i])
            out_s.append(starts[i])
            out_e.append(ends[i])
            i += 1
    chars[:], starts[:], ends[:] = out_c, out_s, out_e
    return changed


def normal_view(text: str) -> NormalView | None:
    """The normalised view of ``text`` (see the module docstring), or None when it equals ``text``."""
    if text.isascii() and not _PERCENT.search(text):
        return None
    chars, starts, ends = _folded(text)
    for _ in range(PERCENT_ROUNDS):
        if "%" not in chars or not _percent_round(chars, starts, ends):
            break
    folded = "".join(chars)
    return None if folded == text else NormalView(folded, starts, ends)


def normal_text(text: str) -> str:
    """``text`` normalised (the view's text)."""
    view = normal_view(text)
    return text if view is None else view.text
