"""Payment card numbers in text (pure): candidates, issuer prefixes and lengths, the Luhn check.

A number is a card when it has a known issuer prefix, a length that issuer uses, and passes Luhn.
Luhn alone is not enough: one number in ten passes it, so millisecond timestamps such as
``1748503543012`` and other long ids would be taken for cards.

Candidates are runs of ASCII digit groups joined by exactly one space or dash. A candidate never
starts or ends inside a run of digits (a digit right before or after it, with no separator, makes
it part of a longer number, which is then judged whole). The maximal run is tried first; when it
is no card, its sub-runs laid out as cards are printed (one group of 12-19 digits; groups of four
with a last group of 1-4; 4-6-5 as Amex; 4-6-4 as Diners) are tried, longest first, so a card
followed by its expiry group or preceded by a stray number is still found.

Issuer table (`ISSUERS`): IIN ranges and lengths from ISO/IEC 7812-1 as compiled in Wikipedia's
"Payment card number" article (IIN ranges table, revision of 2025), cross-checked with the
networks' published test numbers. Left out on purpose: UATP (prefix 1, 15 digits) and GPN's 1946
prefix, which would collide with epoch timestamps and numeric ids; no maintained PyPI package
provides this table.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

__all__ = ["Issuer", "ISSUERS", "luhn_valid", "issuer_of", "card_spans"]


@dataclass(frozen=True)
class Issuer:
    """One IIN range: numbers whose first ``len(str(low))`` digits lie in ``[low, high]`` and
    whose length is in ``lengths`` belong to ``name``."""

    name: str
    low: int
    high: int
    lengths: frozenset[int]

    def matches(self, digits: str) -> bool:
        """``digits`` (ASCII 0-9 only) starts in this range and has a length the issuer uses."""
        width = len(str(self.low))
        return len(digits) in self.lengths and self.low <= int(digits[:width]) <= self.high


def _r(a: int, b: int) -> frozenset[int]:
    return frozenset(range(a, b + 1))


ISSUERS: tuple[Issuer, ...] = (
    Issuer("Visa", 4, 4, frozenset({13, 16, 19})),
    Issuer("Mastercard", 51, 55, frozenset({16})),
    Issuer("Mastercard", 2221, 2720, frozenset({16})),
    Issuer("American Express", 34, 34, frozenset({15})),
    Issuer("American Express", 37, 37, frozenset({15})),
    Issuer("Discover", 6011, 6011, _r(16, 19)),
    Issuer("Discover", 644, 649, _r(16, 19)),
    Issuer("Discover", 65, 65, _r(16, 19)),
    Issuer("Diners Club", 36, 36, _r(14, 19)),
    Issuer("Diners Club", 300, 305, _r(14, 19)),
    Issuer("Diners Club", 3095, 3095, _r(14, 19)),
    Issuer("Diners Club", 38, 39, _r(14, 19)),
    Issuer("JCB", 3528, 3589, _r(16, 19)),
    Issuer("UnionPay", 62, 62, _r(16, 19)),
    Issuer("Maestro", 5018, 5018, _r(12, 19)),
    Issuer("Maestro", 5020, 5020, _r(12, 19)),
    Issuer("Maestro", 5038, 5038, _r(12, 19)),
    Issuer("Maestro", 5893, 5893, _r(12, 19)),
    Issuer("Maestro", 6304, 6304, _r(12, 19)),
    Issuer("Maestro", 6759, 6759, _r(12, 19)),
    Issuer("Maestro", 6761, 6763, _r(12, 19)),
    Issuer("Dankort", 5019, 5019, frozenset({16})),
    Issuer("Mir", 2200, 2204, _r(16, 19)),
    Issuer("RuPay", 60, 60, frozenset({16})),
    Issuer("RuPay", 81, 82, frozenset({16})),
    Issuer("RuPay", 508, 508, frozenset({16})),
    Issuer("InterPayment", 636, 636, _r(16, 19)),
    Issuer("InstaPayment", 637, 639, frozenset({16})),
    Issuer("Troy", 9792, 9792, frozenset({16})),
    Issuer("Verve", 506099, 506198, frozenset({16, 18, 19})),
)


def luhn_valid(digits: str) -> bool:
    """The Luhn (mod 10) checksum of ``digits`` (only ASCII 0-9) holds (ISO/IEC 7812-1 annex B)."""
    total = 0
    for i, ch in enumerate(reversed(digits)):
        d = ord(ch) - 48
        if i % 2:
            d = d * 2 - 9 if d > 4 else d * 2
        total += d
    return total % 10 == 0


def issuer_of(digits: str) -> str | None:
    """The issuer whose prefix and length ``digits`` has, when it also passes Luhn; else None."""
    if not 12 <= len(digits) <= 19 or not luhn_valid(digits):
        return None
    return next((i.name for i in ISSUERS if i.matches(digits)), None)


_GROUP = re.compile(r"[0-9]+")
_MOST_GROUPS = 5  # 4-4-4-4-3, the longest printed layout


def _printed_as_card(lengths: list[int]) -> bool:
    if len(lengths) == 1:
        return 12 <= lengths[0] <= 19
    if lengths in ([4, 6, 5], [4, 6, 4]):
        return True
    return len(lengths) >= 3 and all(n == 4 for n in lengths[:-1]) and 1 <= lengths[-1] <= 4


def _runs(text: str) -> Iterator[list[tuple[int, int]]]:
    """Maximal runs of digit groups joined by one space or dash, as (start, end) of each group."""
    run: list[tuple[int, int]] = []
    for m in _GROUP.finditer(text):
        if run and text[run[-1][1]:m.start()] not in (" ", "-"):
            yield run
            run = []
        run.append(m.span())
    if run:
        yield run


def card_spans(text: str) -> Iterator[tuple[int, int]]:
    """(start, end) of each card number in ``text``, in order, non-overlapping (see the module docstring)."""
    for run in _runs(text):
        def digits(i: int, j: int) -> str:
            return "".join(text[a:b] for a, b in run[i:j])
        if issuer_of(digits(0, len(run))):
            yield run[0][0], run[-1][1]
            continue
        i = 0
        while i < len(run):
            for j in range(min(len(run), i + _MOST_GROUPS), i, -1):
                if (i, j) != (0, len(run)) and _printed_as_card([b - a for a, b in run[i:j]]) \
                        and issuer_of(digits(i, j)):
                    yield run[i][0], run[j - 1][1]
                    i = j
                    break
            else:
                i += 1
