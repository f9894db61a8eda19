"""`rlanything bench table1`: run the four ablation rows × seeds and write bench/table1.md.

Each run is a separate ``rlanything run`` process (its own NATS store and services), so one run's
crash cannot leak into another; a finished run in the bench folder is reused (an interrupted table
continues where it stopped) when its ``table1.json`` says it was started from the same base config
(path and content) and the same overrides; any other finished run stops the table before it starts. The rows of one seed share
that seed's cached cold start (the cache key leaves out the ablation switches; it holds the seed
where the held-out maps depend on it), so rows compare seed by seed: `paired_gains` writes each
row's gain over the row above with a Student-t interval over the paired seeds (none under 3).
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from services.run.report import read_rounds  # noqa: E402
from services.run.table1 import (  # noqa: E402
    ROWS, comparisons_markdown, curve_bands, paired_gains, summarize_run, table_markdown)

__all__ = ["run_table1", "run_origin", "EARLIER", "ORIGIN_FILE"]

EARLIER = "\n## Earlier measurements"
"""A heading in the table file from which on the text is kept when the table is written again (earlier
tables, kept for comparison)."""


ORIGIN_FILE = "table1.json"
"""In each run folder: what the run was started from (`run_origin`), so that a table never counts a run
of another base config or other overrides."""


def _run_dir(out_dir: Path, row: str, seed: int) -> Path:
    return out_dir / f"{row}-seed{seed}"


def run_origin(config: Path, overrides: Sequence[str]) -> dict[str, object]:
    """What one run of the table is started from: the base config's path and SHA-256 (of its text),
    and every ``--set`` it gets (the table's, the row's, the seed), in order.

    Raises:
        OSError: the config cannot be read.
    """
    return {"config": str(config), "config_sha256": hashlib.sha256(config.read_bytes()).hexdigest(),
            "overrides": list(overrides)}


def _origin_of(run_dir: Path) -> dict[str, object] | None:
    try:
        return json.loads((run_dir / ORIGIN_FILE).read_text())
    except (OSError, ValueError):
        return None


def _check_reused(config: Path, seeds: Sequence[int], overrides: Sequence[str], out_dir: Path) -> None:
    """Refuse to count a finished run that was started from something else than this table would start it from.

    Raises:
        ValueError: names each such run folder and what it was started from.
    """
    foreign = []
    for seed in seeds:
        for row in ROWS:
            run_dir = _run_dir(out_dir, row.key, seed)
            if not (run_dir / "report.md").exists():
                continue  # not finished: it would be started over anyway
            had = _origin_of(run_dir)
            if had != run_origin(config, _run_overrides(overrides, row.overrides, seed)):
                foreign.append(f"{run_dir} ({'started from ' + json.dumps(had) if had else f'no {ORIGIN_FILE}'})")
    if foreign:
        raise ValueError(f"{len(foreign)} finished run(s) in {out_dir} were not started from {config} with these "
                         f"settings, so the table would mix experiments: {'; '.join(foreign)}. Pass another "
                         "--out-dir, or move those runs away")


def _run_overrides(table: Sequence[str], row: Sequence[str], seed: int) -> list[str]:
    return [f"seed={seed}", *table, *row]


def run_table1(config: Path, seeds: Sequence[int], overrides: Sequence[str], out_dir: Path, table_path: Path,
               say: Callable[[str], None], rows: Sequence[str] = ()) -> int:
    """Run every (row, seed) not yet complete, then write the table and the curves.

    ``rows`` (row keys; empty: all) limits which rows this call runs, so that streams side by side can
    share one seed's rows; the table is written from every complete run in ``out_dir`` of ``seeds``.
    Returns the number of runs that failed (their rows count the runs that completed).

    Raises:
        ValueError: a key in ``rows`` names no row of `ROWS`.
    """
    unknown = sorted(set(rows) - {r.key for r in ROWS})
    if unknown:
        raise ValueError(f"--rows: unknown row(s) {unknown}; the rows are {[r.key for r in ROWS]}")
    _check_reused(config, seeds, overrides, out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    per_row: dict[str, list[dict[str, float]]] = {}
    per_seed: dict[str, dict[int, dict[str, float]]] = {}
    curves: dict[str, list[list[dict[str, float]]]] = {}
    failed = 0
    started = time.monotonic()
    total = len(ROWS) * len(seeds)
    done = 0
    for seed in seeds:  # seed by seed: an interrupted table has every row of its finished seeds
        for row in ROWS:
            run_dir = _run_dir(out_dir, row.key, seed)
            records = read_rounds(run_dir / "metrics.jsonl")
            complete = (run_dir / "report.md").exists() and records
            if not complete and rows and row.key not in rows:
                records = []  # another stream's row: left alone, counted only once complete
            elif not complete:
                sets = _run_overrides(overrides, row.overrides, seed)
                cmd = [sys.executable, "-m", "services.cli", "run", str(config), "--run-dir", str(run_dir)]
                for item in sets:
                    cmd += ["--set", item]
                say(f"[{done + 1}/{total}] {row.key} seed {seed}: {' '.join(cmd[3:])}")
                shutil.rmtree(run_dir, ignore_errors=True)  # an incomplete run starts over
                run_dir.mkdir(parents=True)
                (run_dir / ORIGIN_FILE).write_text(json.dumps(run_origin(config, sets), indent=1) + "\n")
                with open(out_dir / f"{row.key}-seed{seed}.log", "w") as log:
                    code = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT).returncode
                records = read_rounds(run_dir / "metrics.jsonl")
                if code != 0:
                    failed += 1
                    say(f"  exit {code}; see {out_dir / f'{row.key}-seed{seed}.log'}")
            done += 1
            if records:
                per_row.setdefault(row.key, []).append(summarize_run(records))
                per_seed.setdefault(row.key, {})[seed] = per_row[row.key][-1]
                curves.setdefault(row.key, []).append(records)
            say(f"  done {done}/{total} ({time.monotonic() - started:.0f} s elapsed)")
    header = (f"# Table 1 at CPU scale\n\nBase config `{config}`" + (f" with {' '.join(overrides)}" if overrides else "")
              + f"; seeds {', '.join(map(str, seeds))}; mean ± std (population) over the runs of each row. "
              "Held-out/OOD: the last evaluation round (round 0's evaluation is the cold start). Train pool and RM "
              "step accuracy: mean of the last 3 rounds. In-band share: mean over the run. Written by "
              "`rlanything bench table1`.")
    comparisons = ("\n## Each row against the row above, paired by seed\n\nThe final held-out success of a row minus "
                   "that of the row above, per seed (both runs share the seed's cold start, held-out maps and round-0 "
                   "draw); mean over seeds and its 95% Student-t interval over whole runs (none under 3 "
                   "paired seeds).\n\n" + comparisons_markdown(paired_gains(per_seed)))
    earlier = ""
    if table_path.exists() and EARLIER in table_path.read_text():
        earlier = table_path.read_text()[table_path.read_text().index(EARLIER):]
    table_path.parent.mkdir(parents=True, exist_ok=True)
    table_path.write_text(table_markdown(per_row, header) + comparisons + earlier)
    _plot(curves, table_path.with_suffix(".png"))
    return failed


def _plot(curves: dict[str, list[list[dict[str, float]]]], path: Path) -> None:
    fig, axes = plt.subplots(1, 3, figsize=(13, 3.6))
    for ax, (key, title) in zip(axes, [("policy/success_heldout", "held-out success"),
                                       ("reward/step_accuracy", "RM step accuracy"),
                                       ("env/in_band_share", "in-band share")]):
        for row in ROWS:
            bands = curve_bands(curves.get(row.key, []), key)
            if not bands:
                continue
            xs = [b[0] for b in bands]
            mean = [b[1] for b in bands]
            std = [b[2] for b in bands]
            ax.plot(xs, mean, marker="o", label=row.key)
            ax.fill_between(xs, [m - s for m, s in zip(mean, std)], [m + s for m, s in zip(mean, std)], alpha=0.2)
        ax.set_title(title)
        ax.set_xlabel("round")
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
