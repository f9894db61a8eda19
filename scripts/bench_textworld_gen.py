"""Measure TextWorld game generation time (``tw-make custom`` + Inform7 compile) per difficulty.

Usage: ``python scripts/bench_textworld_gen.py [OUT.md]`` (default ``bench/textworld_generation.md``).
For each level, three seeds are generated one after another into a fresh temporary cache through
`TextWorldFamily.prepare`; the table reports the median and range in seconds and the median
oracle plan length.
"""

from __future__ import annotations

import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from services.env.families.base import TaskSpec  # noqa: E402
from services.env.families.textworld_family import TextWorldFamily  # noqa: E402

LEVELS = [(2, 3, 1), (4, 6, 3), (6, 10, 5)]
"""(world_size, nb_objects, quest_length) per difficulty level."""
SEEDS = [1, 2, 3]


def main(out: Path) -> None:
    """Generate ``len(SEEDS)`` games per level and write the markdown table to ``out``."""
    rows = []
    with tempfile.TemporaryDirectory(prefix="tw-bench-") as cache:
        family = TextWorldFamily(cache)
        for ws, no, ql in LEVELS:
            times_s, plans = [], []
            for seed in SEEDS:
                spec = TaskSpec("textworld", {"world_size": ws, "nb_objects": no, "quest_length": ql}, seed)
                start = time.perf_counter()
                family.prepare(spec)
                times_s.append(time.perf_counter() - start)
                plans.append(family.oracle_plan_length(spec))
            rows.append(f"| {ws} | {no} | {ql} | {statistics.median(times_s):.2f} | "
                        f"{min(times_s):.2f}–{max(times_s):.2f} | {statistics.median(plans):g} |")
            print(rows[-1], flush=True)
    header = [
        "# TextWorld game generation time",
        "",
        f"`tw-make custom` (TextWorld 1.7.0) through `TextWorldFamily.prepare`, one game at a time, "
        f"seeds {SEEDS}, fresh cache; {platform.processor() or platform.machine()}, "
        f"{os.cpu_count()} CPUs, Python {platform.python_version()}.",
        "",
        "| world_size | nb_objects | quest_length | median (s) | range (s) | median oracle plan |",
        "|---:|---:|---:|---:|---:|---:|",
    ]
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("\n".join(header + rows) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else Path("bench/textworld_generation.md"))
