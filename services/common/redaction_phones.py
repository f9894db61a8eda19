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

The matcher takes digit groups that follow a number into its candidate and then rejects the whole
(``+44 20 7946 0958 24/7``). So each run of digit groups joined by phone separators that holds 7
or more digits and no match is tried again without up to `MOST_DROPPED` groups at its ends.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator

import phonenumbers
from phonenumbers import Leniency, PhoneNumberMatcher

__all__ = ["check_regions", "PhoneFinder"]

_FORMATTED = re.compile(r"\d[\s\-./()\[\]]+\d")
_GROUP = r"\(?\+?[0-9]+\)?"
_CHAIN = re.compile(rf"{_GROUP}(?:(?:[ \t\u00a0]?[-./][ \t\u00a0]?|[ \t\u00a0]){_GROUP})*")
_GROUPS = re.compile(_GROUP)
MOST_DROPPED = 4
_MIN_DIGITS = 7


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
        if not any(c.isdigit() for c in text):
            return iter(())
        spans = self._matches(text, 0)
        for chain in _CHAIN.finditer(text):
            start, end = chain.span()
            if sum(c.isdigit() for c in chain.group()) < _MIN_DIGITS or any(s < end and start < e for s, e in spans):
                continue
            spans += self._trimmed(text, [(start + g.start(), start + g.end()) for g in _GROUPS.finditer(chain.group())])
        return iter(_disjoint(spans))

    def _matches(self, text: str, offset: int) -> list[tuple[int, int]]:
        spans = [(offset + m.start, offset + m.end) for m in PhoneNumberMatcher(text, "ZZ", leniency=Leniency.POSSIBLE)]
        for region in self.regions:
            spans += [(offset + m.start, offset + m.end)
                      for m in PhoneNumberMatcher(text, region, leniency=Leniency.STRICT_GROUPING)
                      if _FORMATTED.search(m.raw_string)]
        return spans

    def _trimmed(self, text: str, groups: list[tuple[int, int]]) -> list[tuple[int, int]]:
        """Matches in the run of ``groups`` without its first and last few groups (fewest dropped first)."""
        for dropped in range(1, min(MOST_DROPPED, len(groups) - 1) + 1):
            for lead in range(dropped + 1):
                kept = groups[lead:len(groups) - (dropped - lead)]
                found = self._matches(text[kept[0][0]:kept[-1][1]], kept[0][0]) if kept else []
                if found:
                    return found
        return []


def _disjoint(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Overlapping spans merged into one, in order."""
    out: list[tuple[int, int]] = []
    for start, end in sorted(spans):
        if out and start < out[-1][1]:
            out[-1] = (out[-1][0], max(end, out[-1][1]))
        else:
            out.append((start, end))
    return out
