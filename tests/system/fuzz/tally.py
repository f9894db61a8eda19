"""Bounds and tallies of the fuzz tests, in a module of their own: pytest imports conftest.py
under another name than the tests' ``import``, so state kept there would exist twice."""

from __future__ import annotations

import os
import time
from collections import Counter
from pathlib import Path

__all__ = ["EXAMPLES", "EVENTS", "REPORT", "TALLIES", "tally", "write_report"]

EXAMPLES = int(os.environ.get("RLA_FUZZ_EXAMPLES", "40"))
"""Generated requests per gRPC method (three times as many for the HTTP endpoint)."""
EVENTS = int(os.environ.get("RLA_FUZZ_EVENTS", str(EXAMPLES)))
"""Generated payloads per consumed subject."""
REPORT = os.environ.get("RLA_FUZZ_REPORT", "")
"""Where `make fuzz` writes the tallies (markdown); empty: no file."""

TALLIES: dict[str, Counter[str]] = {}
"""target (``Service/Method``, ``subject``, ``POST /v1/chat/completions``) -> outcome -> count."""


def tally(target: str, outcome: str) -> None:
    TALLIES.setdefault(target, Counter())[outcome] += 1


def write_report() -> None:
    if not REPORT or not TALLIES:
        return
    lines = ["# Fuzzing the services (`make fuzz`)", "",
             f"Generated with hypothesis ({EXAMPLES} requests per gRPC method, {3 * EXAMPLES} HTTP requests, "
             f"{EVENTS} payloads per consumed subject), against one `rlanything up` on loopback "
             f"({time.strftime('%Y-%m-%d', time.gmtime())}). Outcomes are gRPC status codes, HTTP status codes, "
             "or for events what the consumer did with them. A crash or a hung handler ends the run.", "",
             "| target | inputs | outcomes |", "|---|---:|---|"]
    total = 0
    for target, counts in sorted(TALLIES.items()):
        n = sum(counts.values())
        total += n
        lines.append(f"| `{target}` | {n} | " + ", ".join(f"{k} {v}" for k, v in counts.most_common()) + " |")
    lines += ["", f"Total: {total} inputs; 0 crashes (the launcher ran with --fail-fast and every service "
              "answered SERVING at the end)."]
    Path(REPORT).write_text("\n".join(lines) + "\n")


