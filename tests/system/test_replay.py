"""`rlanything replay`: a finished run's stored trajectories judged again by another judge, no
rollout re-run. The same deterministic judge reproduces the stored votes exactly; another judge is
compared step by step."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from services.common.nats_server import NatsServer
from services.run.recorder import read_events
from tests.contract.conftest import _start, _stop
from tests.launch import RLANYTHING, write_config

pytestmark = [pytest.mark.system, pytest.mark.slow]


@pytest.fixture(scope="module")
def oracle_judge(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    where = tmp_path_factory.mktemp("oracle-judge")
    with NatsServer() as nats:
        proc = _start("reward", {"role": "judge", "backend": "oracle", "votes": 3}, nats, where)
        yield proc.address
        _stop(proc)


def replay(run_dir: Path, judge: str, out: Path) -> dict:
    result = subprocess.run([RLANYTHING, "replay", str(run_dir), "--judge", judge, "--out", str(out)],
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-2000:]
    figures = out.read_text().split("## Votes that differ")[0]  # the per-family table; the per-step one follows
    header, _, *rows = [line for line in figures.splitlines() if line.startswith("|")]
    keys = [k.strip() for k in header.strip("|").split("|")][1:]
    table = {cells[0]: dict(zip(keys, map(float, cells[1:])))
             for cells in ([c.strip() for c in row.strip("|").split("|")] for row in rows)}
    return table["all"]


def stored_steps(run_dir: Path) -> int:
    """Steps the run judged with votes (evaluation rollouts carry judgements without votes)."""
    return sum(1 for r in read_events(run_dir / "events" / "judged.jsonl", "trajectory.trajectory_id")
               for j in r["judgements"] if j.get("votes"))


def test_the_same_deterministic_judge_reproduces_the_stored_votes(tmp_path: Path, tiny_cold: Path,
                                                                  oracle_judge: str) -> None:
    run_dir = tmp_path / "run"
    done = subprocess.run([RLANYTHING, "run", str(write_config(tmp_path, 1, tiny_cold)), "--run-dir", str(run_dir),
                           "--set", "reward.backend=oracle"], capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    figures = replay(run_dir, oracle_judge, tmp_path / "replay.md")
    assert figures["steps"] == stored_steps(run_dir) > 0
    assert figures["identical_votes"] == 1.0 and figures["sign_agreement"] == 1.0
    # the same judge from a config file: started for the command, stopped after it
    config = tmp_path / "oracle-judge.yaml"
    config.write_text("reward: {backend: oracle, votes: 3}\n")
    again = replay(run_dir, str(config), tmp_path / "replay-config.md")
    assert {k: v for k, v in again.items() if v == v} == {k: v for k, v in figures.items() if v == v}  # NaN != NaN
    assert "the oracle judge (" in (tmp_path / "replay-config.md").read_text()


def test_another_judge_is_compared_step_by_step(two_round_run: Path, tmp_path: Path, oracle_judge: str) -> None:
    # The tiny run's policy rarely answers a valid \boxed{i}, so few steps carry an oracle label and
    # its 20-step judge mostly votes invalid: on this run the two judges may agree; the figures are
    # computed over every stored step either way.
    figures = replay(two_round_run, oracle_judge, tmp_path / "replay.md")
    assert figures["steps"] == stored_steps(two_round_run) > 0
    assert 0.0 <= figures["identical_votes"] <= figures["sign_agreement"] <= 1.0
    if figures["labelled_steps"] > 0:
        assert figures["step_accuracy_replayed"] == 1.0  # the oracle votes the labels


def test_the_cold_start_judge_from_the_run_config_against_the_trained_one(two_round_run: Path, tmp_path: Path,
                                                                           tiny_cold: Path) -> None:
    """``--judge CONFIG`` with the run's own config: its cold-started judge (version 0, cached) judges
    the trajectories that later versions judged; every stored step is compared."""
    config = write_config(tmp_path, 2, tiny_cold)
    out = tmp_path / "replay-v0.md"
    figures = replay(two_round_run, str(config), out)
    assert figures["steps"] == stored_steps(two_round_run) > 0
    assert 0.0 <= figures["identical_votes"] <= figures["sign_agreement"] <= 1.0
    assert 0.0 <= figures["invalid_vote_rate_replayed"] <= 1.0
    assert "the llm judge " in out.read_text() and str(config) in out.read_text()


def test_a_judge_config_that_does_not_validate_is_refused(two_round_run: Path, tmp_path: Path) -> None:
    config = tmp_path / "bad.yaml"
    config.write_text("reward: {backend: nope}\n")
    result = subprocess.run([RLANYTHING, "replay", str(two_round_run), "--judge", str(config)],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 2 and "reward.backend" in result.stderr


def replay_steps(run_dir: Path, judge: str, out: Path, *flags: str) -> list[dict]:
    """``rlanything replay`` with ``flags``; every compared step (``out`` with suffix .jsonl)."""
    result = subprocess.run([RLANYTHING, "replay", str(run_dir), "--judge", judge, "--out", str(out), *flags],
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-2000:]
    return [json.loads(line) for line in out.with_suffix(".jsonl").read_text().splitlines()]


def test_greedy_replay_ignores_the_judges_temperature_and_lists_the_votes_that_differ(
        two_round_run: Path, tmp_path: Path, tiny_cold: Path) -> None:
    """The run's judge (temperature 0.8 in its config) replayed with ``--greedy``: the m votes of a
    step are one greedy answer each, so they are equal; ``--temperature 0`` gives the same votes; the
    report lists, step by step, the votes that differ from the stored ones."""
    config = write_config(tmp_path, 2, tiny_cold)
    greedy = replay_steps(two_round_run, str(config), tmp_path / "greedy.md", "--greedy")
    assert len(greedy) == stored_steps(two_round_run) > 0
    assert all(len(set(s["replayed"])) == 1 for s in greedy), [s["replayed"] for s in greedy]
    # (this tiny judge votes almost only invalid, so equal values alone prove little: that a greedy
    # request gives equal vote *tokens* where the judge's temperature does not is checked in
    # tests/integration/reward/test_reward_service.py)
    zero = replay_steps(two_round_run, str(config), tmp_path / "zero.md", "--temperature", "0")
    assert [s["replayed"] for s in zero] == [s["replayed"] for s in greedy]
    report = (tmp_path / "greedy.md").read_text()
    assert "greedy votes" in report
    differ = [s for s in greedy if s["stored"] != s["replayed"]]
    assert f"{len(differ)} of {len(greedy)} steps have votes that differ" in report
    for s in differ[:20]:
        assert f"| {s['trajectory_id']} | {s['step']} | {s['family']} |" in report
    refused = subprocess.run([RLANYTHING, "replay", str(two_round_run), "--judge", str(config), "--greedy",
                              "--temperature", "0.5"], capture_output=True, text=True, timeout=120)
    assert refused.returncode == 2 and "--greedy means temperature 0" in refused.stderr + refused.stdout
