"""Checkers: does a program's output answer a test? (pure). The kinds programming-contest judges use
(Codeforces' and DMOJ's standard checkers): ``exact`` (after `normalise_output`), ``token`` (the same
whitespace-separated tokens), and ``float`` (the same tokens, numbers equal within a declared tolerance,
``math.isclose``'s rule: ``|a - b| <= max(rel * max(|a|, |b|), abs)``).

A problem declares its checker as text (`CodeProblem.checker`): ``"exact"``, ``"token"``, or
``"float:rel=1e-6,abs=1e-9"`` (either tolerance may be left out: 0).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from services.common.sandbox.compare import normalise_output
from services.common.sandbox.results import RunResult, Verdict

__all__ = ["Checker", "judge_output", "FLOAT_DEFAULT"]

_TOKEN = re.compile(r"[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?|[^\s\d.+-]+|[.+-]")
_INT = re.compile(r"[-+]?\d+")
_NUMBER = re.compile(r"[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?")


@dataclass(frozen=True)
class Checker:
    """One way of comparing an output with the expected one: ``kind`` exact, token or float; for float,
    ``rel`` and ``abs`` the relative and absolute tolerance (dimensionless; integers still compare exactly)."""

    kind: str = "exact"
    rel: float = 0.0
    abs: float = 0.0

    def __post_init__(self) -> None:
        if self.kind not in ("exact", "token", "float"):
            raise ValueError(f"checker kind must be exact, token or float, got {self.kind!r}")
        if not (math.isfinite(self.rel) and math.isfinite(self.abs) and self.rel >= 0 and self.abs >= 0):
            raise ValueError(f"checker tolerances must be finite and >= 0, got rel={self.rel!r} abs={self.abs!r}")

    @classmethod
    def parse(cls, text: str) -> "Checker":
        """The checker ``text`` declares (``exact``, ``token``, ``float:rel=R,abs=A``).

        Raises:
            ValueError: an unknown kind, option or a tolerance that is not a number >= 0 (naming the text).
        """
        kind, _, options = text.strip().partition(":")
        values = {"rel": 0.0, "abs": 0.0}
        for option in filter(None, (o.strip() for o in options.split(","))):
            name, _, value = option.partition("=")
            if kind != "float" or name not in values:
                raise ValueError(f"checker {text!r}: option {option!r} is not rel=... or abs=... of a float checker")
            try:
                values[name] = float(value)
            except ValueError:
                raise ValueError(f"checker {text!r}: {name}={value!r} is not a number") from None
        try:
            return cls(kind, values["rel"], values["abs"])
        except ValueError as error:
            raise ValueError(f"checker {text!r}: {error}") from None

    def __str__(self) -> str:
        return f"float:rel={self.rel:g},abs={self.abs:g}" if self.kind == "float" else self.kind

    def matches(self, actual: str, expected: str) -> bool:
        """Does ``actual`` answer a test whose expected output is ``expected``?"""
        if self.kind == "exact":
            return normalise_output(actual) == normalise_output(expected)
        if self.kind == "token":
            return actual.split() == expected.split()
        got, want = _TOKEN.findall(actual), _TOKEN.findall(expected)
        return len(got) == len(want) and all(self._same(a, b) for a, b in zip(got, want))

    def _same(self, got: str, want: str) -> bool:
        if _INT.fullmatch(got) and _INT.fullmatch(want):
            return int(got) == int(want)
        if _NUMBER.fullmatch(got) and _NUMBER.fullmatch(want):
            a, b = float(got), float(want)
            return math.isclose(a, b, rel_tol=self.rel, abs_tol=self.abs) if math.isfinite(a) else a == b
        return got == want


FLOAT_DEFAULT = Checker("float", rel=1e-6, abs=1e-9)
"""The float checker problems with floating-point answers declare: relative 1e-6, absolute 1e-9."""


def judge_output(result: RunResult, expected: str, checker: Checker) -> Verdict:
    """One test's verdict: the run's own (TLE, MLE, RE, OLE) unless it ended OK; then OK when
    ``checker`` accepts its stdout for ``expected``, else WA."""
    if not result.ok:
        return result.verdict
    return Verdict.OK if checker.matches(result.stdout, expected) else Verdict.WA


