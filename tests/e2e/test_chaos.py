"""Faults under a running loop: `kill -9` of services and of the NATS server mid-run, and of the
whole machine (launcher and everything under it) followed by `--resume`. The run completes and
every round's counts are what an uninterrupted run gives: every job's trajectories judged once,
every group closed once, every round trained exactly once by each model."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.e2e.test_run_loop import RLANYTHING, rounds_of, write_config

pytestmark = [pytest.mark.integration, pytest.mark.slow]


@pytest.fixture(scope="module")
def cold(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("coldstart-chaos")


def _wait_rounds(run_dir: Path, proc: subprocess.Popen, n: int, timeout_s: float = 600.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not ((run_dir / "metrics.jsonl").exists() and len(rounds_of(run_dir)) >= n):
        assert proc.poll() is None, proc.stderr.read()[-3000:] if proc.stderr else proc.returncode
        assert time.monotonic() < deadline, f"fewer than {n} rounds after {timeout_s} s"
        time.sleep(0.2)


def _manifest(run_dir: Path) -> dict:
    return json.loads((run_dir / "services.json").read_text())


def assert_exact_counts(rounds: list[dict]) -> None:
    """What every round of an uninterrupted run of the tiny config shows (`test_run_loop`)."""
    for r in rounds:
        jobs = r["critic/jobs_in_round"]
        assert jobs == 4 + 4 + r["critic/groups_candidate"], r  # 4 train + 2 held-out + 2 OOD (+ candidates)
        assert r["counts/jobs"] == jobs, r
        assert r["counts/trajectories"] == r["critic/trajectories"] == 4 * 4 + 4 * 2 + 4 * r["critic/groups_candidate"], r
        assert r["counts/judged"] == r["counts/trajectories"], r   # each trajectory judged once
        assert r["critic/groups_complete"] == jobs and r.get("critic/groups_partial", 0) == 0, r  # closed once, whole
        assert r["counts/policy_batches"] == r["counts/reward_batches"] == jobs, r  # every batch in one update
        assert r["policy/version"] == r["round"] + 1 and r["reward/version"] == r["round"] + 1, r  # trained once


def test_run_survives_kill_9_of_services_and_nats(tmp_path: Path, cold: Path) -> None:
    run_dir = tmp_path / "run"
    proc = subprocess.Popen([RLANYTHING, "run", str(write_config(tmp_path, 3, cold)), "--run-dir", str(run_dir),
                             "--set", "launcher.restart.backoff_s=0.2"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        _wait_rounds(run_dir, proc, 1)  # round 1 in flight
        os.kill(_manifest(run_dir)["services"]["critic"]["pid"], signal.SIGKILL)
        time.sleep(2.0)
        os.kill(_manifest(run_dir)["services"]["reward"]["pid"], signal.SIGKILL)
        _wait_rounds(run_dir, proc, 2)  # round 2 in flight
        os.kill(_manifest(run_dir)["nats_pid"], signal.SIGKILL)
        time.sleep(1.0)
        os.kill(_manifest(run_dir)["services"]["policy"]["pid"], signal.SIGKILL)
        assert proc.wait(timeout=900) == 0, proc.stderr.read()[-3000:]
    finally:
        if proc.poll() is None:
            proc.kill()
    err = proc.stderr.read()
    rounds = rounds_of(run_dir)
    assert [r["round"] for r in rounds] == [0, 1, 2]
    assert sum(r["launcher/restarts"] for r in rounds) == 4, err[-3000:]
    for name in ("critic", "reward", "nats", "policy"):
        assert f"restarted {name} after exit code -9" in err
    assert_exact_counts(rounds)


def test_resume_after_kill_9_of_the_whole_machine(tmp_path: Path, cold: Path) -> None:
    run_dir = tmp_path / "run"
    proc = subprocess.Popen([RLANYTHING, "run", str(write_config(tmp_path, 3, cold)), "--run-dir", str(run_dir)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        _wait_rounds(run_dir, proc, 1)
        time.sleep(3.0)  # into round 1
        manifest = _manifest(run_dir)
        for pid in [proc.pid, manifest["nats_pid"], *(s["pid"] for s in manifest["services"].values())]:
            os.kill(pid, signal.SIGKILL)  # no process gets to clean up or flush anything
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    before = rounds_of(run_dir)
    result = subprocess.run([RLANYTHING, "run", "--resume", str(run_dir)], capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, result.stderr[-3000:]
    rounds = rounds_of(run_dir)
    assert rounds[:len(before)] == before
    assert [r["round"] for r in rounds] == [0, 1, 2]  # none lost, none repeated
    assert_exact_counts(rounds)
