"""Comparing a program's output with the expected one after a documented normalisation (pure)."""

from __future__ import annotations

__all__ = ["normalise_output", "outputs_match"]


def normalise_output(text: str) -> str:
    """``text`` with Windows line ends made ``\\n``, trailing whitespace removed from every line and
    trailing empty lines dropped (so a missing or extra final newline does not matter). Leading
    whitespace, empty lines inside the text and letter case are kept."""
    lines = [line.rstrip() for line in text.replace("\r\n", "\n").split("\n")]
    while lines and not lines[-1]:
        lines.pop()
    return "\n".join(lines)


def outputs_match(actual: str, expected: str) -> bool:
    """True when ``actual`` equals ``expected`` after :func:`normalise_output` on both."""
    return normalise_output(actual) == normalise_output(expected)
