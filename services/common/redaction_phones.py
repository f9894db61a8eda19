"""Phone numbers in text (pure), found with `phonenumbers` (Google's libphonenumber metadata).

Two passes, both with `phonenumbers.PhoneNumberMatcher`:

* international forms (``+44 20 7946 0958``, ``(+33) 6 12 34 56 78``, ``+1 555 555 5555``) of any
  country, whatever the regions: a leading ``+`` and a length the country's plan allows
  (leniency POSSIBLE; a ``+`` in arithmetic such as ``3+4`` or ``+1500000`` is not taken);
* national forms of each configured region (``020 7946 0958`` for GB, ``06 12 34 56 78`` for FR),
  which must be valid numbers of that region's plan grouped as the region groups them (leniency
  STRICT_GROUPING: ``2026-000123`` is no US number) **and** be written as a phone number: with a
  space, dash, dot, slash or parenthesis between digits. A bare digit run (``4155550132``,
  ``1234567``) is left alone, since reasoning answers are bare digit runs.

The matcher runs on windows, not on the whole text: each maximal run of digits and phone
punctuation (``+ ( ) - . /``, spaces) that holds at least `MIN_DIGITS` digits, with one character
of context on each side (so a number glued to a word is still refused). Prose between numbers
costs nothing. The matcher takes digit groups that follow a number into its candidate and then
rejects the whole (``+44 20 7946 0958 24/7``), so a window of at most `MOST_GROUPS` digit groups
with no match is tried again without up to `MOST_DROPPED` groups at its ends, fewest first.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator

import phonenumbers
from phonenumbers import Leniency, PhoneNumberMatcher

__all__ = ["check_regions", "PhoneFinder"]

_FORMATTED = re.compile(r"\d[\s\-./()\[\]]+\d")
_WINDOW = re.compile(r"[+(]*[0-9][0-9+()\-./ \t\u00a0]*")
_GROUPS = re.compile(r"\(?\+?[0-9]+\)?")
MIN_DIGITS = 6
MOST_GROUPS = 10
MOST_DROPPED = 4


def check_regions(regions: Iterable[str]) -> list[str]:
    """The regions as upper-case ISO 3166-1 alpha-2 codes that libphonenumber has a plan for.

    Raises:
        ValueError: a code is not two letters or has no numbering plan (the message names it).
    """
    out = []
    for region in regions:
        code = region.upper() if isinstance(region, str) else region
        if not (isinstance(code, str) and len(code) == 2 and code.isascii() and code.isalpha()
                and code in phonenumbers.SUPPORTED_REGIONS):
            raise ValueError(f"phone region {region!r} is not an ISO 3166-1 alpha-2 country code with a "
                             "numbering plan (e.g. 'US', 'GB', 'FR', 'DE')")
        if code not in out:
            out.append(code)
    return out


class PhoneFinder:
    """Spans of phone numbers in a text (see the module docstring).

    Args:
        regions: ISO 3166-1 alpha-2 codes whose national forms are found.

    Raises:
        ValueError: an unknown region (see `check_regions`).
    """

    def __init__(self, regions: Iterable[str]) -> None:
        self.regions = check_regions(regions)

    def __call__(self, text: str) -> Iterator[tuple[int, int]]:
        """(start, end) of each phone number, in order, non-overlapping."""
        spans: list[tuple[int, int]] = []
        for window in _WINDOW.finditer(text):
            run = window.group().rstrip("-./ \t\u00a0(+")
            if sum(c.isdigit() for c in run) < MIN_DIGITS:
                continue
            start, end = window.start(), window.start() + len(run)
            lo, hi = max(0, start - 1), min(len(text), end + 1)
            found = self._matches(text[lo:hi], lo)
            if not found:
                groups = [(start + g.start(), start + g.end()) for g in _GROUPS.finditer(run)]
                if len(groups) <= MOST_GROUPS:
                    found = self._trimmed(text, groups)
            spans += found
        return iter(_disjoint(spans))

    def _matches(self, text: str, offset: int) -> list[tuple[int, int]]:
        """Matches in the window ``text`` (at ``offset`` in the whole text): ``+`` forms by country
        code alone, then, unless those cover every digit, national forms of each region."""
        spans: list[tuple[int, int]] = []
        if "+" in text:
            spans += [(m.start, m.end) for m in PhoneNumberMatcher(text, "ZZ", leniency=Leniency.POSSIBLE)]
        if not spans or _digits_outside(text, spans):
            for region in self.regions:
                spans += [(m.start, m.end) for m in PhoneNumberMatcher(text, region, leniency=Leniency.STRICT_GROUPING)
                          if _FORMATTED.search(m.raw_string)]
        return [(offset + a, offset + b) for a, b in spans]

    def _trimmed(self, text: str, groups: list[tuple[int, int]]) -> list[tuple[int, int]]:
        """Matches in the run of ``groups`` without its first and last few groups (fewest dropped
        first; only parts that keep `MIN_DIGITS` digits are tried)."""
        for dropped in range(1, min(MOST_DROPPED, len(groups) - 1) + 1):
            for lead in range(dropped + 1):
                kept = groups[lead:len(groups) - (dropped - lead)]
                part = text[kept[0][0]:kept[-1][1]]
                if sum(c.isdigit() for c in part) >= MIN_DIGITS:
                    found = self._matches(part, kept[0][0])
                    if found:
                        return found
        return []


def _digits_outside(text: str, spans: list[tuple[int, int]]) -> bool:
    covered: set[int] = set()
    for a, b in spans:
        covered.update(range(a, b))
    return any(c.isdigit() and i not in covered for i, c in enumerate(text))


def _disjoint(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Overlapping spans merged into one, in order."""
    out: list[tuple[int, int]] = []
    for start, end in sorted(spans):
        if out and start < out[-1][1]:
            out[-1] = (out[-1][0], max(end, out[-1][1]))
        else:
            out.append((start, end))
    return out
