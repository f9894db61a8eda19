"""Write `scripts/gpu_check.sh`'s results file: the host, the times of each stage, the vLLM backend
tests' figures, and the loop's per-round metrics and hot-load lags from its run directory.

Usage: ``python scripts/gpu_check_summary.py OUT.md --gpu NAME --tests TESTS.md --tests-log LOG
--run-dir DIR --seconds INSTALL TESTS RUN --rc TESTS_RC RUN_RC``
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

COLUMNS = ("time/round_s", "time/generate_s", "policy/time/train_s", "reward/time/train_s", "policy/success_train",
           "reward/step_accuracy", "policy/response_tokens_mean", "counts/trajectories")


def round_rows(run_dir: Path) -> list[str]:
    """One markdown row per round of ``run_dir``/metrics.jsonl (empty when the run wrote none)."""
    path = run_dir / "metrics.jsonl"
    rows = [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []
    out = ["| round | " + " | ".join(COLUMNS) + " |", "|---:|" + "---:|" * len(COLUMNS)]
    for r in rows:
        out.append(f"| {int(r['round'])} | " + " | ".join(f"{r.get(k, float('nan')):.3g}" for k in COLUMNS) + " |")
    return out if rows else ["(the run wrote no round)"]


def hot_load_lags(run_dir: Path) -> list[float]:
    """Seconds from each announced version to the policy serving it ("serving new version" lines)."""
    lags = []
    for log in (run_dir / "logs").glob("policy*.log"):
        for line in log.read_text(errors="replace").splitlines():
            try:
                entry = json.loads(line)
            except ValueError:
                continue
            if entry.get("msg") == "serving new version" and "lag_s" in entry:
                lags.append(float(entry["lag_s"]))
    return lags


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("out")
    p.add_argument("--gpu", required=True)
    p.add_argument("--tests", required=True)
    p.add_argument("--tests-log", required=True)
    p.add_argument("--run-dir", required=True)
    p.add_argument("--seconds", nargs=3, type=int, required=True)
    p.add_argument("--rc", nargs=2, type=int, required=True)
    a = p.parse_args()
    run_dir, tests = Path(a.run_dir), Path(a.tests)
    lags = hot_load_lags(run_dir)
    tail = Path(a.tests_log).read_text(errors="replace").strip().splitlines()[-1:] if Path(a.tests_log).exists() else []
    lines = [f"# GPU check ({time.strftime('%Y-%m-%d')}, `scripts/gpu_check.sh`)", "",
             f"Host GPU: {a.gpu}", "",
             "| stage | seconds | exit code |", "|---|---:|---:|",
             f"| install (.venv-gpu) | {a.seconds[0]} | |",
             f"| tests/vllm_backend on the GPU | {a.seconds[1]} | {a.rc[0]} |",
             f"| configs/gpu-vllm.yaml, SmolLM2 | {a.seconds[2]} | {a.rc[1]} |", "",
             "## vLLM backend tests", "", f"pytest: {tail[0] if tail else '(no output)'}", "",
             *(tests.read_text().splitlines() if tests.exists() else ["(no figures: the tests did not get that far)"]),
             "", "## The loop", "",
             f"Announce → policy serving the new version (s): {', '.join(f'{x:.2f}' for x in lags) or '(none logged)'}",
             "", *round_rows(run_dir), ""]
    Path(a.out).write_text("\n".join(lines))


if __name__ == "__main__":
    main()
