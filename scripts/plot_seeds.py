"""Curves of several finished runs side by side (e.g. the seeds of one config).

Usage: ``python scripts/plot_seeds.py [--metric KEY=TITLE ...] OUT.png RUN_DIR [RUN_DIR ...]``. Reads
each run's ``metrics.jsonl`` and draws held-out success (evaluation rounds), RM step accuracy and the
in-band share per round (or the ``--metric`` panels given, e.g.
``--metric reward/unit_test_accuracy="unit-test accuracy"``), one line per run, with the runs' mean dashed.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

PANELS = (("policy/success_heldout", "held-out success"), ("reward/step_accuracy", "RM step accuracy"),
          ("env/in_band_share", "share of tasks in [0.2, 0.8]"))


def series(run: Path, key: str) -> tuple[list[float], list[float]]:
    """(rounds, values) of ``key`` in ``run``'s metrics.jsonl (rounds without it are skipped)."""
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines() if line.strip()]
    points = [(r["round"], r[key]) for r in rows if key in r]
    return [p[0] for p in points], [p[1] for p in points]


def main(out: Path, runs: list[Path], panels: tuple[tuple[str, str], ...] = PANELS) -> None:
    fig, axes = plt.subplots(1, len(panels), figsize=(4.2 * len(panels), 3.4), squeeze=False)
    axes = axes[0]
    for ax, (key, title) in zip(axes, panels):
        all_values = []
        for run in runs:
            xs, ys = series(run, key)
            ax.plot(xs, ys, marker="o" if key.startswith("policy/success") else None, label=run.name, alpha=0.8)
            all_values.append((xs, ys))
        common = sorted(set.intersection(*(set(xs) for xs, _ in all_values))) if all_values else []
        if len(runs) > 1 and common:
            mean = [sum(dict(zip(xs, ys))[x] for xs, ys in all_values) / len(all_values) for x in common]
            ax.plot(common, mean, "k--", label="mean")
        ax.set_title(title)
        ax.set_xlabel("round")
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=8)
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110)


if __name__ == "__main__":
    args, chosen = sys.argv[1:], []
    while len(args) >= 2 and args[0] == "--metric":
        key, _, title = args[1].partition("=")
        chosen.append((key, title or key))
        args = args[2:]
    if len(args) < 2:
        sys.exit("usage: plot_seeds.py [--metric KEY=TITLE ...] OUT.png RUN_DIR [RUN_DIR ...]")
    main(Path(args[0]), [Path(p) for p in args[1:]], tuple(chosen) or PANELS)
