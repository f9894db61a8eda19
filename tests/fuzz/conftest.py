"""One `rlanything up --fail-fast` for the fuzz tests (any crash ends it, and the tests see it),
and the bound on generated inputs: ``RLA_FUZZ_EXAMPLES`` per method or subject (`make test`
keeps it small; `make fuzz` runs the large bound and writes ``bench/fuzz.md``)."""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from services.common.grpc_runtime import check_health_sync
from tests.integration.test_launcher import RLANYTHING, stop_launcher, wait_for

EXAMPLES = int(os.environ.get("RLA_FUZZ_EXAMPLES", "40"))
"""Generated requests per gRPC method (three times as many for the HTTP endpoint)."""
EVENTS = int(os.environ.get("RLA_FUZZ_EVENTS", str(EXAMPLES)))
"""Generated payloads per consumed subject."""
REPORT = os.environ.get("RLA_FUZZ_REPORT", "")
"""Where `make fuzz` writes the tallies (markdown); empty: no file."""

TALLIES: dict[str, Counter[str]] = {}
"""target (``Service/Method``, ``subject``, ``POST /v1/chat/completions``) -> outcome -> count."""


@pytest.fixture(scope="package")
def system(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict]:
    """The five services and NATS, started once for the fuzz tests (stopped after them, so the
    rest of the suite has the machine, and port 8000, to itself); the services.json manifest."""
    run_dir = tmp_path_factory.mktemp("fuzz") / "run"
    proc = subprocess.Popen([RLANYTHING, "up", "--fail-fast", "--run-dir", str(run_dir),
                             "--set", "policy.openai_port=0", "--set", "ingest.http_port=0",
                             "--set", "ingest.tenants.fuzz.key=fuzz-key-0123456789abcdef",
                             "--set", "ingest.tenants.fuzz.secret=fuzz-secret-0123456789abcdef",
                             # one small round, so the fuzzed requests do not queue behind a whole loop's work
                             "--set", "loop.rounds=1", "--set", "env.scheduler.tasks_per_round=1",
                             "--set", "env.scheduler.group_size=2", "--set", "env.scheduler.eval_every=0"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        manifest = wait_for(run_dir / "services.json", proc, timeout_s=120)
        manifest["proc"] = proc
        manifest["run_dir"] = run_dir
        yield manifest
        for name, svc in manifest["services"].items():  # nothing crashed or hung during the whole session
            assert proc.poll() is None, proc.stderr.read().decode()[-3000:]
            assert check_health_sync(svc["address"]) == "SERVING", name
    finally:
        stop_launcher(proc)
        _write_report()


def tally(target: str, outcome: str) -> None:
    TALLIES.setdefault(target, Counter())[outcome] += 1


def _write_report() -> None:
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


def manifest_services(system: dict) -> dict[str, dict]:
    return json.loads((system["run_dir"] / "services.json").read_text())["services"]
