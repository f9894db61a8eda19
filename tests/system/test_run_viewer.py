"""What a finished two-round run leaves for people to look at: the event log, TensorBoard event
files (read back with TensorBoard's own reader) and the `rlanything view` page, opened in headless
Chromium (Debian's `chromium`, driven by Playwright): it loads without console errors, lists every
trajectory, and a clicked trajectory shows its steps' votes and oracle labels."""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from services.run.recorder import read_events
from tests.launch import RLANYTHING, rounds_of

pytestmark = [pytest.mark.system, pytest.mark.slow]
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
SCREENSHOT = os.environ.get("RLA_VIEWER_SCREENSHOT", "")
"""Where to save the page's screenshot after a click (the README's picture); empty: a temp file."""


def judged(run_dir: Path) -> list[dict]:
    return list(read_events(run_dir / "events" / "judged.jsonl", "trajectory.trajectory_id"))


def n_votes(record: dict) -> int:
    """How many judge votes a logged trajectory holds, over all its steps."""
    return sum(len(j.get("votes", [])) for j in record["judgements"])


def test_the_event_log_holds_every_judged_trajectory_and_pool_decision(two_round_run: Path) -> None:
    rounds = rounds_of(two_round_run)
    records = judged(two_round_run)
    assert len(records) == sum(r["counts/judged"] for r in rounds) > 0
    first = records[0]
    assert first["trajectory"]["steps"] and len(first["judgements"]) == len(first["trajectory"]["steps"])
    assert "prompt_token_ids" not in json.dumps(first)  # token ids are left out of the log
    tasks = list(read_events(two_round_run / "events" / "tasks.jsonl", "job_id"))
    assert len(tasks) == sum(r["critic/groups_complete"] for r in rounds)
    pool = list(read_events(two_round_run / "events" / "pool.jsonl", "event_id"))
    assert sum(e["kind"] == "KIND_REQUESTED" for e in pool) == sum(
        v for r in rounds for k, v in r.items() if k.startswith("env/requested_"))


def test_tensorboard_event_files_hold_every_rounds_metrics(two_round_run: Path) -> None:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(two_round_run / "tensorboard"), size_guidance={"scalars": 0})
    acc.Reload()
    tags = set(acc.Tags()["scalars"])
    for r in rounds_of(two_round_run):
        for key, value in r.items():
            if key == "round" or not isinstance(value, (int, float)) or not math.isfinite(value):
                continue
            assert key in tags, key
            at_step = {e.step: e.value for e in acc.Scalars(key)}
            assert at_step[int(r["round"])] == pytest.approx(value, rel=1e-6, abs=1e-6), key
    assert "config" in " ".join(acc.Tags()["tensors"])  # the run config, as text


@pytest.mark.skipif(CHROMIUM is None, reason="needs Chromium (`apt-get install chromium`; "
                                             "make test-all and make test-system install it as root)")
def test_the_viewer_page_in_headless_chromium(two_round_run: Path, tmp_path: Path) -> None:
    from playwright.sync_api import sync_playwright

    page_path = tmp_path / "view.html"
    result = subprocess.run([RLANYTHING, "view", str(two_round_run), "--out", str(page_path)],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    records = judged(two_round_run)
    errors: list[str] = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto(page_path.as_uri())
        assert page.text_content("#traj-count") == str(len(records))
        assert page.locator("tr.traj").count() == min(50, len(records))  # the first page of rows
        assert page.locator("#pool tr").count() > 1  # the task pool's slots
        by_id = {r["trajectory"]["trajectory_id"]: r for r in records}
        # Evaluation trajectories are not voted on (`judge_eval` is off) and the log's order
        # depends on which job finished first: click the first listed row the judge voted on.
        row = next(r for r in page.locator("tr.traj").all() if n_votes(by_id[r.get_attribute("data-id")]) > 0)
        tid = row.get_attribute("data-id")
        row.click()
        record = by_id[tid]
        votes = n_votes(record)
        assert page.locator("#detail .step").count() == len(record["trajectory"]["steps"])
        assert page.locator("#detail .vote").count() == votes > 0
        labels = {"STEP_LABEL_GOOD": "good", "STEP_LABEL_BAD": "bad"}
        expected = [labels.get(s.get("oracle_label", ""), "none") for s in record["trajectory"]["steps"]]
        assert page.locator("#detail .oracle").all_text_contents() == expected
        page.select_option("#f-outcome", "1")  # filters narrow the list
        assert page.text_content("#traj-count") == str(sum(r["trajectory"]["outcome"] == 1 for r in records))
        page.select_option("#f-outcome", "")
        row.click()
        page.locator("#f-round").scroll_into_view_if_needed()
        page.screenshot(path=SCREENSHOT or str(tmp_path / "view.png"), full_page=False)
        browser.close()
    assert errors == []


def test_served_page_of_a_running_run_reloads_and_shows_new_rounds(two_round_run: Path, tmp_path: Path) -> None:
    import time

    import httpx

    from services.common.nats_server import free_port

    live = tmp_path / "live"
    shutil.copytree(two_round_run, live, ignore=shutil.ignore_patterns("nats", "checkpoints", "report.md"))
    lines = (live / "metrics.jsonl").read_text().splitlines()
    (live / "metrics.jsonl").write_text(lines[0] + "\n")  # as if round 1 were still running
    port = free_port()
    proc = subprocess.Popen([RLANYTHING, "view", str(live), "--serve", "--port", str(port), "--refresh", "7"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                first = httpx.get(f"http://127.0.0.1:{port}/", timeout=5)
                break
            except httpx.TransportError:
                assert proc.poll() is None and time.monotonic() < deadline, proc.stderr.read() if proc.stderr else ""
                time.sleep(0.3)
        assert first.status_code == 200
        assert '<meta http-equiv="refresh" content="7">' in first.text and "1 of 2 rounds, running" in first.text
        (live / "metrics.jsonl").write_text("\n".join(lines) + "\n")  # round 1 done
        assert "2 of 2 rounds" in httpx.get(f"http://127.0.0.1:{port}/", timeout=5).text
        assert httpx.get(f"http://127.0.0.1:{port}/other", timeout=5).status_code == 404
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_trace_prints_a_trajectorys_lineage(two_round_run: Path) -> None:
    record = next(r for r in judged(two_round_run)
                  if r["trajectory"]["round"] in (0, "0") and r["trajectory"].get("split", "train") == "train"
                  and not r["trajectory"].get("is_candidate"))
    tid, job = record["trajectory"]["trajectory_id"], record["trajectory"]["job_id"]
    out = subprocess.run([RLANYTHING, "trace", tid, "--run", str(two_round_run)], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0].startswith(f"trajectory {tid}: round 0, split train, ")
    assert f"  task      {record['trajectory']['task']['slot_id']} v0 (gym_text), the seed task" in lines
    assert "  policy    generated by policy v0" in lines
    assert any(line.startswith("  judge     reward model v0; votes per step: ") for line in lines)
    escaped = job.replace("/", "=2F").replace(".", "=2E")
    assert f"  training  its policy batch r0.{escaped}=2Fpolicy: trained into policy v1 (trained on round 0)" in lines
    assert f"  training  its reward batch r0.{escaped}=2Freward: trained into reward v1 (trained on round 0)" in lines
    missing = subprocess.run([RLANYTHING, "trace", "no/such/trajectory", "--run", str(two_round_run)],
                             capture_output=True, text=True, timeout=120)
    assert missing.returncode == 2 and "trajectory 'no/such/trajectory' is not in" in missing.stderr
