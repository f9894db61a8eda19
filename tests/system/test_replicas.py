"""`launcher.replicas`: two env processes, two rollout workers and two judges (the env, policy and
reward services plus one env replica, one process of role rollout and one of role judge, each on its
own ports) share the work of a run, and every round's counts are those of a run with one of each."""

from __future__ import annotations

import json
import re
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest

from tests.launch import RLANYTHING, rounds_of, write_config

pytestmark = [pytest.mark.system, pytest.mark.slow]

REPLICAS = ["--set", "launcher.replicas.env=2", "--set", "launcher.replicas.rollout=2",
            "--set", "launcher.replicas.judge=2", "--set", "policy.openai_port=0",
            "--set", "launcher.health_timeout_s=300"]  # nine processes load torch at once on 2 cores
ENVS = ("env", "env-2")
WORKERS = {"policy": "policy-rollout-workers", "rollout-2": "policy-rollout-workers",
           "reward": "reward-judges", "judge-2": "reward-judges"}
"""Process → the durable consumer whose events it handles (shared by the replicas of a role)."""


@pytest.fixture(scope="module")
def cold(tiny_cold: Path) -> Path:
    """The cold-start cache of the session (SFT runs once)."""
    return tiny_cold


def _handled(metrics_port: int, consumer: str) -> float | None:
    """``rla_events_handled_total{consumer, outcome="acked"}`` of one process; None when it does not answer."""
    try:
        text = urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=1).read().decode()
    except OSError:
        return None
    found = re.search(rf'^rla_events_handled_total\{{consumer="{consumer}",outcome="acked"\}} (\S+)$', text, re.M)
    return float(found.group(1)) if found else 0.0


def _log_lines(run_dir: Path, name: str, msg: str) -> list[dict]:
    """The JSON log lines of process ``name`` whose message is ``msg``."""
    lines = (run_dir / "logs" / f"{name}.log").read_text().splitlines()
    return [record for record in (json.loads(line) for line in lines if line.startswith("{")) if record.get("msg") == msg]


def test_two_envs_two_rollout_workers_and_two_judges_share_the_work_with_exact_counts(tmp_path: Path, cold: Path) -> None:
    run_dir = tmp_path / "run"
    proc = subprocess.Popen([RLANYTHING, "run", str(write_config(tmp_path, 3, cold)), "--run-dir", str(run_dir),
                             *REPLICAS], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    handled: dict[str, float] = {}
    try:
        deadline = time.monotonic() + 1200
        while proc.poll() is None:  # each process's count, read while it runs (the run stops them at the end)
            assert time.monotonic() < deadline, "run did not finish in 1200 s"
            manifest = run_dir / "services.json"
            if manifest.exists():
                services = json.loads(manifest.read_text())["services"]
                for name, consumer in WORKERS.items():
                    if name in services:
                        value = _handled(services[name]["metrics_port"], consumer)
                        if value is not None:
                            handled[name] = max(handled.get(name, 0.0), value)
            time.sleep(0.5)
        assert proc.returncode == 0, proc.stderr.read()[-3000:] if proc.stderr else proc.returncode
    finally:
        if proc.poll() is None:
            proc.kill()
    services = json.loads((run_dir / "services.json").read_text())["services"]
    assert set(WORKERS) <= set(services), services
    assert len({services[n]["address"] for n in [*WORKERS, *ENVS]}) == 6  # each a process on its own port
    for name in ("env-2", "rollout-2", "judge-2"):
        assert (run_dir / f"config.{name}.yaml").exists()
    rounds = rounds_of(run_dir)
    assert [r["round"] for r in rounds] == [0, 1, 2]
    for r in rounds:  # as with one rollout worker and one judge (tests/heavy/test_chaos.py: assert_exact_counts)
        jobs = r["critic/jobs_in_round"]
        assert jobs == 4 + 4 + r["critic/groups_candidate"], r
        assert r["counts/jobs"] == jobs, r
        assert r["counts/trajectories"] == r["critic/trajectories"] == 4 * 4 + 4 * 2 + 4 * r["critic/groups_candidate"], r
        assert r["counts/judged"] == r["counts/trajectories"], r   # each trajectory judged once, by one of the two
        assert r["critic/groups_complete"] == jobs and r.get("critic/groups_partial", 0) == 0, r
        assert r["counts/policy_batches"] == r["counts/reward_batches"] == jobs, r
        assert r["policy/version"] == r["round"] + 1 and r["reward/version"] == r["round"] + 1, r
        assert r["launcher/restarts"] == 0, r
    assert all(handled.get(name, 0) > 0 for name in WORKERS), f"a replica handled nothing: {handled}"
    jobs = sum(r["counts/jobs"] for r in rounds)
    trajectories = sum(r["counts/trajectories"] for r in rounds)
    # a job or trajectory is acked by the one process that handled it (no restarts, so no redelivery)
    assert handled["policy"] + handled["rollout-2"] == jobs, handled
    # the judges' counts from their logs, one "judged" line per trajectory a judge handled (the polled
    # counters can miss the last judgements: the run stops its processes right after them)
    judged = {name: [json.loads(line)["trajectory_id"] for line in (run_dir / "logs" / f"{name}.log").read_text().splitlines()
                     if line.startswith("{") and json.loads(line).get("msg") == "judged"]
              for name in ("reward", "judge-2")}
    assert all(judged.values()), {name: len(ids) for name, ids in judged.items()}
    every = judged["reward"] + judged["judge-2"]
    assert len(every) == len(set(every)) == trajectories, {name: len(ids) for name, ids in judged.items()}
    # the env replicas: one released every round (each job published once, by the lease holder) and
    # both served episodes, each Step and Close reaching the replica that opened the session (Reset,
    # Step and Close calls by outcome, in the line each env process logs when it stops). Steps are few
    # here: the cold-started tiny policy rarely writes a valid action, and an invalid one ends the
    # episode without a Step; Close takes the same route as Step, once per episode.
    released = {name: _log_lines(run_dir, name, "round released") for name in ENVS}
    assert sorted(r["round"] for lines in released.values() for r in lines) == [0, 1, 2], released
    assert sum(r["jobs"] for lines in released.values() for r in lines) == jobs, released
    stopped = {name: _log_lines(run_dir, name, "env replica stopped") for name in ENVS}
    assert all(len(lines) == 1 for lines in stopped.values()), stopped
    calls = {name: lines[0]["calls"] for name, lines in stopped.items()}
    assert all(c["Reset"]["ok"] > 0 and c["Close"]["ok"] == c["Reset"]["ok"] for c in calls.values()), calls
    assert all(c[m]["not_found"] == 0 and c[m]["error"] == 0 for c in calls.values() for m in c), calls
    assert sum(c["Reset"]["ok"] for c in calls.values()) == trajectories, calls  # one episode per trajectory
    assert sum(lines[0]["scheduler_leases_taken"] for lines in stopped.values()) == 1, stopped  # no failover
