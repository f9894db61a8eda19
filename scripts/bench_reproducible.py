"""What ``loop.reproducible: true`` costs: the default config with and without it, started together
(side by side on the same machine, so both see the same load), ``ROUNDS`` rounds each, seed 1.

Usage: ``python scripts/bench_reproducible.py [OUT.md] [ROUNDS]`` (default
``bench/reproducible.md``, 4 rounds). Compares the mean wall time per round over rounds 1.. (round
0 also evaluates 300 maps) and the policy's and the judge's generation seconds per round
(``time/generate_s``, ``time/judge_s``): the switch generates one chat per call, so what it costs
is generation speed.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from services.run.report import read_rounds  # noqa: E402

KEYS = (("time/round_s", "round wall time"), ("time/generate_s", "policy generation"), ("time/judge_s", "judging"))


def main() -> None:
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else Path("bench/reproducible.md")
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 4
    cli = str(Path(sys.executable).parent / "rlanything")
    runs = {"batched (default)": Path("runs/bench-repro-batched"), "reproducible": Path("runs/bench-repro-one")}
    procs = []
    for name, run_dir in runs.items():
        subprocess.run(["rm", "-rf", str(run_dir)], check=True)
        cmd = [cli, "run", "configs/default.yaml", "--set", f"loop.rounds={rounds}", "--set", "seed=1",
               "--run-dir", str(run_dir)]
        if name == "reproducible":
            cmd += ["--set", "loop.reproducible=true"]
        procs.append(subprocess.Popen(cmd, stdout=subprocess.DEVNULL))
    if any(p.wait() != 0 for p in procs):
        raise SystemExit("a run failed; see runs/bench-repro-*/logs")
    means = {}
    for name, run_dir in runs.items():
        later = read_rounds(run_dir / "metrics.jsonl")[1:]
        means[name] = {k: statistics.fmean(r.get(k, 0.0) for r in later) for k, _ in KEYS}
    base, one = means["batched (default)"], means["reproducible"]
    lines = ["# The cost of `loop.reproducible`", "", __doc__.split("\n\n")[0].strip(), "",
             f"Means over rounds 1–{rounds - 1} (seconds per round):", "",
             "| | " + " | ".join(label for _, label in KEYS) + " |", "|---|" + "---:|" * len(KEYS)]
    for name, m in means.items():
        lines.append(f"| {name} | " + " | ".join(f"{m[k]:.1f}" for k, _ in KEYS) + " |")
    lines.append("| ratio | " + " | ".join(f"{one[k] / base[k]:.2f}×" if base[k] else "–" for k, _ in KEYS) + " |")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
