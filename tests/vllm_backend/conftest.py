"""tests/vllm_backend: the figures its tests measure, written to ``RLA_VLLM_REPORT`` (markdown) at the end."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

FIGURES: dict[str, str] = {}
"""Measured figure → value, in the order the tests measured them."""


@pytest.fixture(scope="session")
def figures() -> dict[str, str]:
    return FIGURES


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    report = os.environ.get("RLA_VLLM_REPORT", "")
    if report and FIGURES:
        lines = ["| measured | value |", "|---|---|", *(f"| {k} | {v} |" for k, v in FIGURES.items())]
        Path(report).write_text("\n".join(lines) + "\n")
