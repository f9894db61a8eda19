"""Where a round's wall time goes in the default config: a per-round phase table and the
framework-overhead share.

Usage: ``python scripts/bench_phases.py [OUT.md] [RUN_DIR]`` (default ``bench/round_phases.md``).
Without RUN_DIR it runs ``rlanything run configs/default.yaml`` for 6 rounds into
``runs/bench-phases`` first (cold start cached); with RUN_DIR it reads that run's metrics.jsonl.

Work seconds are measured inside the services (policy generation and env calls by the rollout
worker, judge generation by the judge workers, training and checkpoint saving by each trainer);
"framework + waiting" is the rest of the round's wall time: event transport, (de)serialisation,
KV bookkeeping, hot-loading checkpoints, and waiting on the slowest stage. Policy generation is
each job's share of the merged generate calls (a worker plays several jobs at once), so it counts
each call once; env steps are the jobs' waits on env calls, which overlap across those jobs.
Processes overlap (rollouts of later jobs run while the judge votes on earlier ones), so the work
columns can add up to more than the wall time; the overhead is then reported as 0.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from services.run.progress import PHASES  # noqa: E402
from services.run.report import read_rounds  # noqa: E402

SPANS = [("time/span/wait_s", "wait for versions"), ("time/span/rollout_s", "release → last rollout"),
         ("time/span/judge_tail_s", "→ last judgement"), ("time/span/critic_tail_s", "→ last group"),
         ("time/span/train_tail_s", "→ both versions")]


def main() -> None:
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else Path("bench/round_phases.md")
    if len(sys.argv) > 2:
        run_dir = Path(sys.argv[2])
    else:
        run_dir = Path("runs/bench-phases")
        subprocess.run(["rm", "-rf", str(run_dir)], check=True)
        subprocess.run([str(Path(sys.executable).parent / "rlanything"), "run", "configs/default.yaml",
                        "--set", "loop.rounds=6", "--run-dir", str(run_dir)], check=True)
    rounds = read_rounds(run_dir / "metrics.jsonl")
    if not rounds:
        raise SystemExit(f"no rounds in {run_dir / 'metrics.jsonl'}")
    cols = [("time/round_s", "round s"), *PHASES, ("time/overhead_share", "overhead share")]
    lines = [f"# Where a round's wall time goes (`{run_dir}`)", "", __doc__.split("\n\n")[2].strip(), "",
             "Work per round (seconds):", "",
             "| round | " + " | ".join(label for _, label in cols) + " |", "|---:|" + "---:|" * len(cols)]
    for r in rounds:
        lines.append(f"| {int(r['round'])} | " + " | ".join(f"{r.get(k, 0.0):.2f}" for k, _ in cols) + " |")
    total = sum(r["time/round_s"] for r in rounds)
    lines += ["", "Share of all rounds' wall time (work columns overlap across processes):", ""]
    for key, label in PHASES:
        lines.append(f"- {label}: {sum(r.get(key, 0.0) for r in rounds) / total:.1%}")
    lines += ["", f"Framework overhead share (wall time outside model forward/backward and env steps), mean "
              f"over rounds: {statistics.fmean(r.get('time/overhead_share', 0.0) for r in rounds):.1%}.", "",
              "Wall-clock spans of each round (seconds, from the driver's event stamps):", "",
              "| round | " + " | ".join(label for _, label in SPANS) + " |", "|---:|" + "---:|" * len(SPANS)]
    for r in rounds:
        lines.append(f"| {int(r['round'])} | " + " | ".join(f"{r.get(k, 0.0):.2f}" for k, _ in SPANS) + " |")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("\n".join(lines) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
