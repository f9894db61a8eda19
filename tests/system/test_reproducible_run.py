"""Two runs of one seed with ``loop.reproducible: true`` are the same run: two 3-round
`rlanything run`s of the tiny config (seed 1) write the same ``metrics.jsonl`` — every value but the
wall-clock times equal, exactly, the task pool's per-round counts included — sample every answer and
every judge vote word for word, and make the same task-pool decisions, although which job finished
first differs between them (the env applies a round's reports in one order,
`services.env.held_reports`). (Without the
switch, chats that share a generate call change each other's float rounding: behaviour log-probs
moved by ~1e-8 and 2 of 2880 judge votes flipped between two such runs.)"""

from __future__ import annotations

import json
import math
import subprocess
from pathlib import Path

import pytest

from services.run.recorder import read_events
from tests.launch import RLANYTHING, rounds_of, write_config

pytestmark = [pytest.mark.system, pytest.mark.slow]

ROUNDS = 3


def comparable(row: dict) -> dict[str, object]:
    """A round's line without its wall-clock times (``time/…``, ``policy/time/…``; NaN as a string, so
    that equal NaNs compare equal)."""
    return {k: ("nan" if isinstance(v, float) and math.isnan(v) else v) for k, v in row.items()
            if "time" not in k.split("/")}


def sampled_text(run_dir: Path) -> dict[str, list[tuple[str, list[str]]]]:
    """Per trajectory id: each step's answer and the judge's vote texts."""
    out = {}
    for record in read_events(run_dir / "events" / "judged.jsonl", "trajectory.trajectory_id"):
        votes = [[v.get("response", "") for v in j.get("votes", [])] for j in record["judgements"]]
        steps = [s.get("response", "") for s in record["trajectory"]["steps"]]
        out[record["trajectory"]["trajectory_id"]] = list(zip(steps, votes))
    return out


def pool_decisions(run_dir: Path) -> dict[str, tuple]:
    """Per task-pool event id: its round, kind, direction, parent, candidate and measured accuracies."""
    return {e["event_id"]: (int(e.get("round", 0)), e.get("kind"), e.get("direction"), json.dumps(e.get("parent")),
                            json.dumps(e.get("candidate")), e.get("acc_prev"), e.get("acc_new"))
            for e in read_events(run_dir / "events" / "pool.jsonl", "event_id")}


def _run(tmp_path: Path, tiny_cold: Path, name: str) -> Path:
    run_dir = tmp_path / name
    result = subprocess.run([RLANYTHING, "run", str(write_config(tmp_path, ROUNDS, tiny_cold)), "--run-dir",
                             str(run_dir), "--set", "loop.reproducible=true"],
                            capture_output=True, text=True, timeout=1500)
    assert result.returncode == 0, result.stderr[-3000:]
    return run_dir


def test_two_runs_of_the_same_seed_write_the_same_metrics(tiny_cold: Path, tmp_path: Path) -> None:
    first, second = _run(tmp_path, tiny_cold, "first"), _run(tmp_path, tiny_cold, "second")
    a_rounds, b_rounds = rounds_of(first), rounds_of(second)
    assert len(a_rounds) == len(b_rounds) == ROUNDS
    assert sum(r["counts/judged"] for r in a_rounds) > 0
    for a, b in zip(a_rounds, b_rounds):
        assert comparable(a) == comparable(b), {k: (a.get(k), b.get(k)) for k in comparable(a).keys() | comparable(b).keys()
                                               if comparable(a).get(k) != comparable(b).get(k)}
    decided, redecided = pool_decisions(first), pool_decisions(second)
    assert decided and decided == redecided
    texts, repeated = sampled_text(first), sampled_text(second)
    assert texts == repeated
    answers = [step[0] for t in texts.values() for step in t]
    assert len(set(answers)) > 10  # answers were sampled, and vary
    assert sum(len(step[1]) for t in texts.values() for step in t) > 0  # so were judge votes
