"""Your own Environment server joined to a run by address (`type: remote`): the one-file template
`examples/env_server.py` serves the tasks of two rounds of the whole loop."""

from __future__ import annotations

import importlib.util
import subprocess
from pathlib import Path

import pytest

from services.run.recorder import read_events
from tests.launch import RLANYTHING, rounds_of
from tests.system.untrained import untrained_config

pytestmark = [pytest.mark.system, pytest.mark.slow]
ROOT = Path(__file__).resolve().parents[2]

def test_two_rounds_on_the_example_environment_server(tmp_path: Path) -> None:
    spec = importlib.util.spec_from_file_location("env_server_example", ROOT / "examples" / "env_server.py")
    assert spec is not None and spec.loader is not None
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    server = example.serve(0)
    try:
        family = (f'{{type: remote, address: "127.0.0.1:{server.port}", knobs: {{}}, train_slots: 4, heldout_slots: 2, '
                  'ood_slots: 0, max_steps: 10}')
        config = untrained_config(tmp_path, "remote-count", family)
        run_dir = tmp_path / "run"
        result = subprocess.run([RLANYTHING, "run", str(config), "--run-dir", str(run_dir)],
                                capture_output=True, text=True, timeout=900)
    finally:
        server.stop(None)
    assert result.returncode == 0, result.stderr[-3000:]
    rounds = rounds_of(run_dir)
    assert [r["round"] for r in rounds] == [0, 1]
    for r in rounds:
        assert r["counts/jobs"] == 4 + 2 and r["counts/judged"] == r["counts/trajectories"] > 0
        assert r["policy/version"] == r["reward/version"] == r["round"] + 1
    first = next(read_events(run_dir / "events" / "judged.jsonl", "trajectory.trajectory_id"))
    step = first["trajectory"]["steps"][0]
    assert step["observation"].startswith("The number is ") and "1. +1\n2. -1" in step["prompt"]
    # the untrained tiny policy's answers are not yet a valid \boxed{i}: such steps carry no label (the
    # server's own labels reaching a step are checked in tests/integration/env/test_remote_family.py)
