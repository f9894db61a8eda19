"""PII redaction at first touch: find personal data in text and replace it by typed placeholders.

Pure (no I/O). The first RLAnything process that sees a product's raw text (the ingest API, the
policy's capture hook) runs `redact_texts` on it before anything is published, stored or logged.

The built-in `RegexRedactor` finds, each confirmed where a checksum exists:

| kind | what | check |
|---|---|---|
| ``SECRET`` | bearer tokens, JWTs, API-key-shaped strings (``sk-…``, ``ghp_…``, ``AKIA…``, ``xox?-…``) | — |
| ``URL_SECRET`` | a URL's ``user:password@`` and ``?token=``/``key=``/``password=``… values | — |
| ``EMAIL`` | ``local@domain.tld`` | — |
| ``IBAN`` | ``DE89 3704 0044 0532 0130 00`` | ISO 13616 mod-97 |
| ``CARD`` | 13–19 digits, spaces or dashes allowed | Luhn |
| ``PHONE`` | ``+`` country code forms (E.164) and ``(555) 123-4567`` / ``555-123-4567`` forms, 7–15 digits | — |
| ``IP`` | IPv4 and IPv6 addresses | `ipaddress` parses it |
| custom | ``patterns`` given by the operator (kind → regular expression), and literal deny-list terms | — |

Placeholders are typed and numbered per episode in order of first appearance (``<EMAIL_1>``,
``<EMAIL_2>``; the same value is the same placeholder throughout one episode), so a judge can
still tell "the same address" from "another one" while nothing links two episodes. Regex
redaction does not find names or free-text identifiers; consent and tenant isolation stay the
primary controls.

Raises `RedactionError` for any failure inside a redactor: callers refuse the request (fail
closed) rather than keep raw text.
"""

from __future__ import annotations

import ipaddress
import re
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

__all__ = ["Finding", "Redactor", "RegexRedactor", "RedactionError", "Placeholders", "RedactedText",
           "redact_texts", "luhn_valid", "iban_valid"]


class RedactionError(RuntimeError):
    """A redactor failed; the caller must not keep, publish or log the raw text."""


@dataclass(frozen=True)
class Finding:
    """One piece of personal data: ``text[start:end]`` is a ``kind``."""

    kind: str
    start: int
    end: int


class Redactor(Protocol):
    """What a redaction backend provides (the built-in regex one, or an optional library)."""

    def find(self, text: str) -> list[Finding]:
        """Non-overlapping findings in ``text``, sorted by start.

        Raises:
            RedactionError: the backend failed.
        """
        ...


def luhn_valid(digits: str) -> bool:
    """The Luhn checksum of a card number (``digits``: only 0-9) holds."""
    total = 0
    for i, ch in enumerate(reversed(digits)):
        d = ord(ch) - 48
        if i % 2:
            d = d * 2 - 9 if d > 4 else d * 2
        total += d
    return total % 10 == 0


def iban_valid(iban: str) -> bool:
    """ISO 13616: move the first four characters to the end, letters to 10..35, value mod 97 == 1."""
    s = iban.replace(" ", "").upper()
    if not 15 <= len(s) <= 34 or not s[:2].isalpha() or not s[2:4].isdigit():
        return False
    rearranged = s[4:] + s[:4]
    try:
        return int("".join(str(int(c, 36)) for c in rearranged)) % 97 == 1
    except ValueError:
        return False


def _phone_ok(value: str) -> bool:
    return 7 <= sum(c.isdigit() for c in value) <= 15


def _ip_ok(value: str) -> bool:
    try:
        ipaddress.ip_address(value)
    except ValueError:
        return False
    return True


Matcher = Callable[[str], Iterator[tuple[int, int]]]


def _regex(pattern: str, check: Callable[[str], bool] | None = None, flags: int = 0) -> Matcher:
    """Spans of ``pattern`` (of its group "v" when it has one) whose text passes ``check``."""
    regex = re.compile(pattern, flags)
    group = "v" if "v" in regex.groupindex else 0

    def spans(text: str) -> Iterator[tuple[int, int]]:
        for m in regex.finditer(text):
            if m.end(group) > m.start(group) and (check is None or check(m.group(group))):
                yield m.start(group), m.end(group)
    return spans


_DIGIT_GROUP = re.compile(r"\d+")


def _cards(text: str) -> Iterator[tuple[int, int]]:
    """Card numbers: runs of digit groups joined by one space or dash, 13-19 digits, Luhn-valid.
    Every start group is tried, longest first, so a digit that happens to stand before a card
    number ("1 4111 1111 1111 1111") does not hide it."""
    groups = [(m.start(), m.end()) for m in _DIGIT_GROUP.finditer(text)]
    i = 0
    while i < len(groups):
        chain = [groups[i]]
        for g in groups[i + 1:]:
            gap = text[chain[-1][1]:g[0]]
            if gap not in (" ", "-"):
                break
            chain.append(g)
        found = None
        for j in range(len(chain), 0, -1):
            digits = "".join(text[a:b] for a, b in chain[:j])
            if 13 <= len(digits) <= 19 and luhn_valid(digits):
                found = j
                break
        if found:
            yield chain[0][0], chain[found - 1][1]
            i += found
        else:
            i += 1


# Earlier kinds win where findings overlap.
_BUILTIN: tuple[tuple[str, Matcher], ...] = (
    ("SECRET", _regex(r"(?i:bearer)\s+[A-Za-z0-9._~+/-]{16,}=*")),
    ("SECRET", _regex(r"\beyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}")),
    ("SECRET", _regex(r"\b(?:sk|pk|rk)-[A-Za-z0-9_-]{16,}|\bgh[pousr]_[A-Za-z0-9]{20,}|\bAKIA[0-9A-Z]{16}\b"
                      r"|\bxox[abpr]-[A-Za-z0-9-]{10,}")),
    ("URL_SECRET", _regex(r"://(?P<v>[^\s/:@]+:[^\s/@]+)@")),
    ("URL_SECRET", _regex(r"[?&](?:token|key|api_key|apikey|access_token|secret|password|sig|signature)"
                          r"=(?P<v>[^&#\s]+)", flags=re.IGNORECASE)),
    ("EMAIL", _regex(r"[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}")),
    ("IBAN", _regex(r"\b[A-Z]{2}\d{2}(?: ?[A-Z0-9]){11,30}\b", iban_valid)),
    ("CARD", _cards),
    ("PHONE", _regex(r"(?<![\w+])\+\d{1,3}(?:[ .-]?\(?\d{1,4}\)?){1,5}(?:[ .-]?\d{2,4})(?!\d)", _phone_ok)),
    ("PHONE", _regex(r"(?<!\d)(?:\(\d{3}\)\s?|\d{3}[ .-])\d{3}[ .-]\d{4}(?!\d)", _phone_ok)),
    ("IP", _regex(r"(?<![\d.])(?:\d{1,3}\.){3}\d{1,3}(?![\d.])", _ip_ok)),
    ("IP", _regex(r"(?<![\w:])(?:[0-9A-Fa-f]{1,4}:){2,7}[0-9A-Fa-f]{0,4}(?::[0-9A-Fa-f]{1,4})*(?![\w:])", _ip_ok)),
)


@dataclass
class RegexRedactor:
    """The built-in redactor (no dependencies): see the module docstring for what it finds.

    Args:
        patterns: extra ``kind → regular expression`` the operator adds (e.g. order numbers).
        deny: literal terms always redacted as ``DENY`` (case-insensitive), e.g. a customer list.

    Raises:
        ValueError: a custom pattern does not compile (the message names its kind).
    """

    patterns: Mapping[str, str] = field(default_factory=dict)
    deny: Sequence[str] = ()

    def __post_init__(self) -> None:
        rules = list(_BUILTIN)
        for kind, pattern in self.patterns.items():
            try:
                rules.append((kind.upper(), _regex(pattern)))
            except re.error as exc:
                raise ValueError(f"redaction pattern {kind!r} does not compile: {exc}") from None
        terms = [re.escape(t) for t in sorted(self.deny, key=len, reverse=True) if t]
        if terms:
            rules.append(("DENY", _regex("|".join(terms), flags=re.IGNORECASE)))
        self._rules = rules

    def find(self, text: str) -> list[Finding]:
        try:
            taken: list[Finding] = []
            for kind, spans in self._rules:
                for start, end in spans(text):
                    if not any(start < f.end and f.start < end for f in taken):
                        taken.append(Finding(kind, start, end))
            return sorted(taken, key=lambda f: f.start)
        except Exception as exc:  # noqa: BLE001 - any failure must fail closed
            raise RedactionError(f"regex redactor failed: {type(exc).__name__}: {exc}") from exc


class Placeholders:
    """Typed placeholders of one episode: the n-th distinct value of a kind is ``<KIND_n>``."""

    def __init__(self) -> None:
        self._by_value: dict[tuple[str, str], str] = {}
        self._count: Counter[str] = Counter()

    def of(self, kind: str, value: str) -> str:
        """The placeholder of ``value`` (the same one each time it appears in this episode)."""
        key = (kind, value)
        if key not in self._by_value:
            self._count[kind] += 1
            self._by_value[key] = f"<{kind}_{self._count[kind]}>"
        return self._by_value[key]


@dataclass(frozen=True)
class RedactedText:
    """Texts after redaction, in order, and how many findings of each kind were replaced."""

    texts: list[str]
    counts: dict[str, int]


def redact_texts(texts: Iterable[str], redactor: Redactor, placeholders: Placeholders | None = None) -> RedactedText:
    """Redact each text of one episode with shared placeholders (pure).

    Args:
        texts: the episode's texts in order (messages, then feedback text).
        redactor: the backend.
        placeholders: the episode's numbering (a new one when None).

    Raises:
        RedactionError: the redactor failed, or returned findings that do not fit the text.
    """
    places = placeholders or Placeholders()
    out: list[str] = []
    counts: Counter[str] = Counter()
    for text in texts:
        findings = redactor.find(text)
        pieces, pos = [], 0
        for f in findings:
            if not pos <= f.start < f.end <= len(text):
                raise RedactionError(f"redactor returned an overlapping or out-of-range finding {f}")
            pieces.append(text[pos:f.start])
            pieces.append(places.of(f.kind, text[f.start:f.end]))
            counts[f.kind] += 1
            pos = f.end
        pieces.append(text[pos:])
        out.append("".join(pieces))
    return RedactedText(out, dict(counts))
