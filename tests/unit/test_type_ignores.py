"""A `type: ignore` in the services names its error code and says why."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
_IGNORE = re.compile(r"#\s*type:\s*ignore(\[[\w\-, ]+\])?(.*)$")


def unexplained(text: str) -> list[int]:
    """Line numbers of ``type: ignore`` comments without an error code or without a reason after it."""
    bad = []
    for number, line in enumerate(text.splitlines(), start=1):
        m = _IGNORE.search(line)
        if m and (not m.group(1) or not re.match(r"\s*(#|-)\s*\S", m.group(2))):
            bad.append(number)
    return bad


def test_every_type_ignore_in_the_services_has_a_code_and_a_reason() -> None:
    found = {str(p.relative_to(ROOT)): unexplained(p.read_text()) for p in sorted((ROOT / "services").rglob("*.py"))}
    assert {path: lines for path, lines in found.items() if lines} == {}


def test_the_rule_itself() -> None:
    assert unexplained("x = f()  # type: ignore[arg-type]  # a device string") == []
    assert unexplained("x = f()  # type: ignore[arg-type]") == [1]
    assert unexplained("x = f()  # type: ignore  # why") == [1]
