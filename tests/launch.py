"""Helpers for the tests that start the whole system (`rlanything up` / `rlanything run`): the CLI's
path, the tiny run config they share, reading a run's rounds, waiting for a launcher's manifest and
stopping a launcher."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

__all__ = ["RLANYTHING", "TINY", "write_config", "rounds_of", "wait_for", "stop_launcher"]

RLANYTHING = str(Path(sys.executable).parent / "rlanything")
"""The `rlanything` console script of the interpreter running the tests."""

TINY = """
run_name: e2e
seed: 1
loop: {rounds: ROUNDS}
env:
  families:
    - {type: gym_text, knobs: {size: 4, hole_prob: 0.2}, train_slots: 4, heldout_slots: 2,
       ood_knobs: {size: 5, hole_prob: 0.25}, ood_slots: 2}
  scheduler: {tasks_per_round: 4, group_size: 4, eval_every: 1, eval_group_size: 2,
              max_new_tokens: 12}
policy:
  openai_port: 0                  # a free port: runs side by side must not share 8000
  model: {threads: 1, tiny: {hidden_size: 64}}
  sft: {episodes: 30, steps: 30, eval_episodes: 4}
  ppo: {optimizer_steps: 2}
reward:
  model: {threads: 1, tiny: {hidden_size: 64}}
  max_new_tokens: 12
  prompt_chars: 300
  field_chars: 150
  sft: {episodes: 10, steps: 20, eval_episodes: 3}
critic: {group_timeout_s: 120}
# The 30-step cold start rarely writes a valid \\boxed{i} yet: these tests check the plumbing, not learning,
# so the format-collapse guard is off here (its own test in tests/system/test_run_loop.py turns it on).
launcher: {coldstart_dir: COLD, round_timeout_s: 600, max_invalid_answer_rate: 1.0}
"""
"""The tiny run config of the system and heavy tests (4 train + 2 held-out + 2 OOD tasks a round, G=4);
ROUNDS and COLD (the cold-start cache) are filled in by `write_config`."""


def write_config(tmp_path: Path, rounds: int, cold: Path) -> Path:
    """Write the tiny config for ``rounds`` rounds with cold-start cache ``cold`` to ``tmp_path/tiny.yaml``."""
    path = tmp_path / "tiny.yaml"
    path.write_text(TINY.replace("ROUNDS", str(rounds)).replace("COLD", str(cold)))
    return path


def rounds_of(run_dir: Path) -> list[dict]:
    """The round lines of ``run_dir/metrics.jsonl``, oldest first."""
    return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines() if line.strip()]


def wait_for(path: Path, proc: subprocess.Popen, timeout_s: float = 60.0) -> dict:
    """The JSON at ``path`` once a launcher wrote it (its ``services.json``).

    Raises:
        AssertionError: the launcher exited first (with its stderr), or ``timeout_s`` seconds passed.
    """
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if path.exists():
            return json.loads(path.read_text())
        if proc.poll() is not None:
            raise AssertionError(f"launcher exited {proc.returncode}: {proc.stderr.read().decode()}")
        time.sleep(0.1)
    raise AssertionError(f"{path} not written in {timeout_s} s")


def stop_launcher(proc: subprocess.Popen) -> None:
    """SIGINT a running `rlanything up` (it stops its services), SIGKILL it after 30 s."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
