"""scripts/bench_live_value.py for one round on real servers: the scripted product talks to the
policy with capture headers while `rlanything run` trains, posts its users' thumbs, and the report
and the run's record hold what it measured."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.system, pytest.mark.slow]
ROOT = Path(__file__).resolve().parents[2]


def test_one_fed_round_of_the_scripted_product(tmp_path: Path, tiny_cold: Path) -> None:
    out = tmp_path / "live_value.md"
    smaller = ["policy.model.tiny={hidden_size: 64}", "reward.model.tiny={hidden_size: 64}",
               "policy.sft.episodes=30", "policy.sft.steps=30", "policy.sft.eval_episodes=4",
               "reward.sft.episodes=10", "reward.sft.steps=20", "reward.sft.eval_episodes=3",
               f"launcher.coldstart_dir={tiny_cold}"]
    result = subprocess.run([sys.executable, str(ROOT / "scripts" / "bench_live_value.py"), str(out), "--seeds", "0",
                             "--rounds", "1", "--arms", "fed", "--users", "2", "2", "2", "1",
                             "--runs-dir", str(tmp_path / "runs"), *[a for s in smaller for a in ("--set", s)]],
                            capture_output=True, text=True, timeout=1500, cwd=tmp_path)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    record = json.loads((tmp_path / "runs" / "fed-s0.json").read_text())
    first = record["product_rounds"][0]
    # 2 eval users × 1 position, 2 train users, 2 failure users × 1 position: every share measured
    assert all(first[f"success_{g}"] in (0.0, 0.5, 1.0) for g in ("eval", "train", "failure"))
    assert first["versions"] and all(v.startswith("v") for v in first["versions"])
    assert len(record["loop"]) == 1
    report = out.read_text()
    assert "| fed | product success, eval users (greedy) |" in report and "| fed | 0 |" in report
