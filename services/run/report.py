"""What a run leaves in ``runs/<id>/``: metrics.jsonl, report.md, PNG curves, a summary table."""

from __future__ import annotations

import json
import math
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from rich.table import Table  # noqa: E402

__all__ = ["append_round", "read_rounds", "write_plots", "write_report", "write_phase_plot", "summary_table",
           "SUMMARY_KEYS"]

SUMMARY_KEYS = [
    ("policy/success_train", "success (train)"),
    ("policy/success_heldout", "held-out"),
    ("policy/success_ood", "OOD"),
    ("reward/step_accuracy", "RM step acc"),
    ("env/in_band_share", "in band"),
    ("env/accepted_total", "accepted"),
    ("policy/invalid_answer_rate", "invalid answers"),
    ("policy/advantage_oracle_agreement", "advantage vs oracle"),
    ("policy/ppo/kl", "KL (policy)"),
    ("time/round_s", "round s"),
    ("time/overhead_share", "overhead"),
]
PLOTS = [
    ("success.png", "Policy success", ["policy/success_train", "policy/success_heldout", "policy/success_ood"]),
    ("rm_step_accuracy.png", "RM step accuracy vs oracle labels", ["reward/step_accuracy", "reward/outcome_accuracy"]),
    ("in_band.png", "Share of train tasks with acc in [0.2, 0.8]", ["env/in_band_share"]),
    ("accepted_variants.png", "Accepted task variants (cumulative)", ["env/accepted_total"]),
    ("kl.png", "KL (k3) of the update", ["policy/ppo/kl", "reward/ppo/kl"]),
]


def append_round(path: Path, record: dict[str, float]) -> None:
    """Append one round's record to metrics.jsonl."""
    with open(path, "a") as f:
        f.write(json.dumps(record, sort_keys=True) + "\n")


def read_rounds(path: Path) -> list[dict[str, float]]:
    """Every round record of metrics.jsonl (last record per round wins), in round order."""
    if not path.exists():
        return []
    by_round: dict[int, dict[str, float]] = {}
    for line in path.read_text().splitlines():
        if line.strip():
            rec = json.loads(line)
            by_round[int(rec["round"])] = rec
    return [by_round[r] for r in sorted(by_round)]


def _fmt(v: float | None) -> str:
    return "–" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{v:.3f}".rstrip("0").rstrip(".")


def write_plots(rounds: list[dict[str, float]], out_dir: Path) -> list[Path]:
    """One PNG per curve group; a metric missing in a round is a gap."""
    written = []
    for name, title, keys in PLOTS:
        fig, ax = plt.subplots(figsize=(6, 3.5))
        for key in keys:
            xs = [r["round"] for r in rounds if key in r]
            ys = [r[key] for r in rounds if key in r]
            if xs:
                ax.plot(xs, ys, marker="o", label=key)
        ax.set_title(title)
        ax.set_xlabel("round")
        ax.grid(alpha=0.3)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=8)
        fig.tight_layout()
        fig.savefig(out_dir / name, dpi=100)
        plt.close(fig)
        written.append(out_dir / name)
    written.append(write_phase_plot(rounds, out_dir))
    return written


def write_phase_plot(rounds: list[dict[str, float]], out_dir: Path) -> Path:
    """phases.png: one stacked bar per round of where its wall time went (`progress.PHASES`)."""
    from services.run.progress import PHASES

    fig, ax = plt.subplots(figsize=(7, 3.8))
    xs = [int(r["round"]) for r in rounds]
    bottom = [0.0] * len(rounds)
    for key, label in PHASES:
        ys = [float(r.get(key, 0.0)) for r in rounds]
        ax.bar(xs, ys, bottom=bottom, label=label)
        bottom = [b + y for b, y in zip(bottom, ys)]
    ax.set_title("Where each round's wall time went")
    ax.set_xlabel("round")
    ax.set_ylabel("seconds")
    ax.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    path = out_dir / "phases.png"
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def summary_table(rounds: list[dict[str, float]], title: str) -> Table:
    """The per-round table printed at the end of a run."""
    table = Table(title=title)
    table.add_column("round", justify="right")
    for _, label in SUMMARY_KEYS:
        table.add_column(label, justify="right")
    for r in rounds:
        table.add_row(str(int(r["round"])), *(_fmt(r.get(k)) for k, _ in SUMMARY_KEYS))
    return table


def restarts_line(rounds: list[dict[str, float]]) -> str:
    """One sentence on the processes the launcher restarted, by round (pure)."""
    hit = [(int(r["round"]), int(r["launcher/restarts"])) for r in rounds if r.get("launcher/restarts")]
    if not hit:
        return "No process was restarted during the run."
    total = sum(n for _, n in hit)
    where = ", ".join(f"{n} in round {r}" for r, n in hit)
    return (f"The launcher restarted {total} process{'es' if total > 1 else ''} ({where}); each round's counts "
            "come from the streams, so they are those of an uninterrupted run (see logs/ for each exit).")


def eval_set_line(rounds: list[dict[str, float]]) -> str:
    """One sentence on the run's evaluation set (pure): its size and digest (``eval/set_digest``, the
    env's hash of the held-out and OOD instance keys); two runs compare on held-out success only when
    their digests are equal (`services.run.table1.paired_gains` refuses otherwise)."""
    digests = {int(r["eval/set_digest"]) for r in rounds if not math.isnan(r.get("eval/set_digest", math.nan))}
    if not digests:
        return "The evaluation set's digest was not recorded (no round released train jobs)."
    sizes = {int(r["eval/set_instances"]) for r in rounds if "eval/set_instances" in r}
    listed = ", ".join(f"{d:012x}" for d in sorted(digests))
    if len(digests) > 1:
        return f"The evaluation set changed during the run (digests {listed}): held-out rounds are not comparable."
    return (f"Evaluation set: {', '.join(map(str, sorted(sizes)))} held-out and OOD instances, digest {listed} "
            "(runs compare on held-out success only with the same digest).")


def write_report(rounds: list[dict[str, float]], run_dir: Path, header: str,
                 sections: list[str] | None = None) -> Path:
    """report.md: the setting, the per-round table, ``sections`` (markdown lines, e.g. the sampling
    section), and the curves."""
    lines = [f"# RLAnything run `{run_dir.name}`", "", header, "",
             "| round | " + " | ".join(label for _, label in SUMMARY_KEYS) + " |",
             "|---:|" + "---:|" * len(SUMMARY_KEYS)]
    for r in rounds:
        lines.append(f"| {int(r['round'])} | " + " | ".join(_fmt(r.get(k)) for k, _ in SUMMARY_KEYS) + " |")
    lines += ["", "Held-out and OOD success are measured on evaluation rounds only (`env.scheduler.eval_every`).", ""]
    lines += [restarts_line(rounds), "", eval_set_line(rounds), ""]
    lines += sections or []
    lines += [f"![{title}]({name})" for name, title, _ in PLOTS]
    lines += ["", "![Where each round's wall time went](phases.png)"]
    path = run_dir / "report.md"
    path.write_text("\n".join(lines) + "\n")
    return path
