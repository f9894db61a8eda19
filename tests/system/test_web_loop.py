"""Two rounds of the closed loop on the ``web`` family with a real headless Chromium (untrained tiny
models, no cold start: the plumbing): every job's rollouts are judged, both models train each round,
the pages reach the policy as text with refs, every step the env played carries the scripted
experts' label, and no chromedriver is left running afterwards. Skips where Chromium or chromedriver
is missing."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import yaml

from services.env.families.web_browser import BrowserMissingError, find_browser
from services.run.recorder import read_events
from tests.launch import RLANYTHING, rounds_of
from tests.system.untrained import untrained_config

pytestmark = [pytest.mark.system, pytest.mark.slow]

try:
    find_browser()
    MISSING = ""
except BrowserMissingError as exc:
    MISSING = str(exc)


def chromedrivers() -> int:
    out = subprocess.run(["pgrep", "-c", "-x", "chromedriver"], capture_output=True, text=True)
    return int(out.stdout.strip() or 0)


@pytest.mark.skipif(bool(MISSING), reason=MISSING)
def test_two_rounds_on_web_pages(tmp_path: Path) -> None:
    path = untrained_config(tmp_path, "web", "{type: web, knobs: {task: 0, distractors: 1}, train_slots: 4, "
                                             "heldout_slots: 2, ood_slots: 0, max_steps: 3, browsers: 4}")
    config = yaml.safe_load(path.read_text())
    config["policy"]["rollout"] = {"concurrent_jobs": 1}  # 4 episodes open at once: 4 browsers
    path.write_text(yaml.safe_dump(config))
    before = chromedrivers()
    run_dir = tmp_path / "run"
    result = subprocess.run([RLANYTHING, "run", str(path), "--run-dir", str(run_dir)],
                            capture_output=True, text=True, timeout=1200)
    assert result.returncode == 0, result.stderr[-3000:]
    rounds = rounds_of(run_dir)
    assert [r["round"] for r in rounds] == [0, 1]
    for r in rounds:
        assert r["counts/jobs"] == r["critic/jobs_in_round"] >= 4 + 2  # + the candidate variants' jobs
        assert r["counts/judged"] == r["counts/trajectories"] >= 4 * 4 + 2 * 2
        assert r["policy/version"] == r["reward/version"] == r["round"] + 1
        if r["reward/labelled_steps"] == 0:  # an untrained policy's answers are rarely a valid \boxed{i}
            assert "reward/step_accuracy" not in r
    judged = list(read_events(run_dir / "events" / "judged.jsonl", "trajectory.trajectory_id"))
    steps = [s for j in judged for s in j["trajectory"]["steps"]]
    assert all(s["oracle_label"] != "STEP_LABEL_UNSPECIFIED" for s in steps if s.get("valid"))
    first = judged[0]
    prompt = first["trajectory"]["steps"][0]["prompt"]
    assert 'Instruction: Click on the "' in prompt and "] button" in prompt
    assert "1. click " in prompt
    assert chromedrivers() == before
