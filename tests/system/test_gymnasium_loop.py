"""A Gymnasium id as the task family of a whole run (`type: gymnasium`, no knobs, no oracle): two
rounds complete, every trajectory is judged, both models train each round; the environment loop
asks for variants and records that none can be made; no step has an oracle label, so no RM step
accuracy is reported."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from services.run.recorder import read_events
from tests.launch import RLANYTHING, rounds_of
from tests.system.untrained import untrained_config

pytestmark = [pytest.mark.system, pytest.mark.slow]

def test_two_rounds_on_a_gymnasium_id(tmp_path: Path) -> None:
    config = untrained_config(tmp_path, "gymnasium-cliff",
                              "{type: gymnasium, env_id: CliffWalking-v1, won_when: terminated, knobs: {}, "
                              "train_slots: 4, heldout_slots: 2, ood_slots: 0, max_steps: 14}")
    run_dir = tmp_path / "run"
    result = subprocess.run([RLANYTHING, "run", str(config), "--run-dir", str(run_dir)],
                            capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, result.stderr[-3000:]
    rounds = rounds_of(run_dir)
    assert [r["round"] for r in rounds] == [0, 1]
    for r in rounds:
        assert r["counts/jobs"] == r["critic/jobs_in_round"] == 4 + 2
        assert r["counts/judged"] == r["counts/trajectories"] == 4 * 4 + 2 * 2
        assert r["policy/version"] == r["reward/version"] == r["round"] + 1
        assert r["env/accepted_total"] == 0
        if r["reward/labelled_steps"] == 0:  # only a winning step is labelled without an oracle
            assert "reward/step_accuracy" not in r
    pool = list(read_events(run_dir / "events" / "pool.jsonl", "event_id"))
    requested = [e for e in pool if e["kind"] == "KIND_REQUESTED"]
    refused = [e for e in pool if e["kind"] == "KIND_REJECTED_UNDEPLOYABLE"]
    assert requested and len(refused) == len(requested)
    assert {e["reason"] for e in refused} == {"the family has no difficulty knobs: no variant can be made"}
    first = next(read_events(run_dir / "events" / "judged.jsonl", "trajectory.trajectory_id"))
    prompt = first["trajectory"]["steps"][0]["prompt"]
    assert "x  C  C  C  C  C  C  C  C  C  C  T" in prompt  # the ansi grid: agent, cliff, target
    assert "1. up\n2. right\n3. down\n4. left" in prompt  # Gymnasium's action names
