"""End to end: `rlanything run` on the coding setting (family code, answers run in the sandbox, the
critic's program reward) for two rounds with a tiny policy, as separate processes over a real NATS
server. Checks the plumbing, not learning (docs/coding.md)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
import yaml

from tests.launch import RLANYTHING, rounds_of

pytestmark = [pytest.mark.system, pytest.mark.slow,
              pytest.mark.skipif(os.geteuid() != 0, reason="the code family's sandbox needs root")]
ROOT = Path(__file__).resolve().parents[2]


def tiny_coding(tmp: Path, cold: Path, writer: bool = True) -> Path:
    """configs/coding.yaml, made small: 4 train + 2 held-out + 2 OOD tasks, G = 4, 2 rounds, small cold
    starts; the preset's reward model is the tiny cold-started unit-test writer (reward.kind:
    unit_tests); ``writer`` False replaces it by the oracle backend (no tests)."""
    cfg = yaml.safe_load((ROOT / "configs" / "coding.yaml").read_text())
    cfg["loop"]["rounds"] = 2
    family = cfg["env"]["families"][0]
    family.update(train_slots=4, heldout_slots=2, ood_slots=2)
    cfg["env"]["scheduler"].update(tasks_per_round=4, group_size=4, eval_every=1, eval_group_size=2)
    cfg["policy"]["model"]["tiny"] = {"hidden_size": 64}
    cfg["policy"]["sft"] = {"episodes": 30, "steps": 30, "eval_episodes": 4}
    cfg["policy"]["ppo"]["optimizer_steps"] = 2
    cfg["critic"]["group_timeout_s"] = 120
    cfg["launcher"].update(coldstart_dir=str(cold), max_invalid_answer_rate=1.0)
    if writer:
        cfg["reward"]["model"]["tiny"] = {"hidden_size": 64}
        cfg["reward"]["sft"] = {"episodes": 30, "steps": 20, "eval_episodes": 4}
        cfg["reward"]["ppo"]["optimizer_steps"] = 2
    else:
        cfg["reward"] = {"backend": "oracle"}
        cfg["critic"].update(unit_tests=False)
    path = tmp / "coding.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def test_two_rounds_of_the_coding_setting(tmp_path: Path, tiny_cold: Path) -> None:
    run_dir = tmp_path / "run"
    result = subprocess.run([RLANYTHING, "run", str(tiny_coding(tmp_path, tiny_cold, writer=False)),
                             "--run-dir", str(run_dir)],
                            capture_output=True, text=True, timeout=1500)
    assert result.returncode == 0, result.stderr[-3000:]
    rounds = rounds_of(run_dir)
    assert [r["round"] for r in rounds] == [0, 1]
    for r in rounds:
        jobs = r["critic/jobs_in_round"]
        assert jobs == 4 + 4 + r["critic/groups_candidate"]  # 4 train + 2 held-out + 2 OOD (+ candidates)
        assert r["counts/jobs"] == jobs and r["critic/groups_complete"] == jobs
        assert r["counts/trajectories"] == r["critic/trajectories"] > 0
        assert r["counts/policy_batches"] == r["counts/reward_batches"] == jobs
        assert r["policy/version"] == r["round"] + 1
        assert r["eval/overlap"] == 0.0  # no train function is a held-out or OOD function
        for key in ("policy/success_train", "policy/success_heldout", "policy/success_ood"):
            assert 0.0 <= r[key] <= 1.0, key
    env_log = "\n".join(p.read_text() for p in run_dir.glob("**/env*.log"))
    assert "Traceback" not in env_log


def test_two_rounds_of_the_preset_with_its_cold_started_unit_test_writer(tmp_path: Path, tiny_cold: Path) -> None:
    """The preset as it is: the tiny writer is cold-started by SFT on tests of reference programs, writes
    unit tests, and the critic runs every program on every test in its sandbox and reports the accuracy."""
    run_dir = tmp_path / "run"
    result = subprocess.run([RLANYTHING, "run", str(tiny_coding(tmp_path, tiny_cold)),
                             "--run-dir", str(run_dir)], capture_output=True, text=True, timeout=1500)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "cold-started writer: test accuracy" in result.stdout + result.stderr
    rounds = rounds_of(run_dir)
    assert [r["round"] for r in rounds] == [0, 1]
    for r in rounds:
        assert r["counts/judged"] == r["counts/trajectories"] > 0
        assert r["counts/reward_batches"] == r["critic/jobs_in_round"] and r["reward/version"] == r["round"] + 1
        if "reward/unit_test_accuracy" in r:  # some train group had a correct program
            assert 0.0 <= r["reward/unit_test_accuracy"] <= 1.0
    critic_log = (run_dir / "logs" / "critic.log").read_text()
    assert "unit tests scored" in critic_log and "Traceback" not in critic_log
