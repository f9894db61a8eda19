"""Judging with and without the shared prefill of repeated prompts, side by side in one run.

Usage: ``python scripts/bench_shared_prefill.py [OUT.md]`` (default ``bench/shared_prefill.md``).
Records ε-expert FrozenLake groups (window view, as in ``configs/default.yaml``), builds the tiny
judge of the default (untrained weights: speed does not depend on them), and judges the same steps
with m = 3 votes through `LLMJudge` twice per repetition — with `HFGenerator`'s shared prefill, and
with it switched off — alternating, so both see the same machine load. Greedy votes must agree.
"""

from __future__ import annotations

import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path
from unittest import mock

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402

from services.common.config import FamilyConfig, TinyModelConfig  # noqa: E402
from services.common.models import generation  # noqa: E402
from services.common.models.generation import HFGenerator  # noqa: E402
from services.env.families.registry import build_family  # noqa: E402
from services.env.families.base import TaskSpec  # noqa: E402
from services.offline.judge_episodes import record_groups  # noqa: E402
from services.offline.judge_sft import build_tiny_judge  # noqa: E402
from services.reward.judges import JudgeSettings, LLMJudge, steps_of  # noqa: E402

VOTES = 3
REPEATS = 5


def main(out: Path) -> None:
    torch.set_num_threads(1)
    cfg = FamilyConfig(type="gym_text", knobs={"size": 4, "hole_prob": 0.2}, observation="window", train_slots=1)
    with tempfile.TemporaryDirectory() as tmp:
        family = build_family(cfg, Path(tmp) / "cache")
        specs = [TaskSpec("gym_text", {"size": 4.0, "hole_prob": 0.2}, 7000 + i) for i in range(8)]
        trajectories = record_groups(family, specs, 8, expert_prob=0.7, seed=0, history_steps=0)
        settings = JudgeSettings(max_new_tokens=12)
        judge_dir = build_tiny_judge(trajectories, Path(tmp) / "judge", TinyModelConfig(), settings)
        judge = LLMJudge(HFGenerator(str(judge_dir)), settings)
        steps = [s for t in trajectories for s in steps_of(t)]
        timings: dict[str, list[float]] = {"shared": [], "plain": []}
        answers: dict[str, list[list[int]]] = {}
        for _ in range(REPEATS):
            for mode in ("shared", "plain"):
                patch = mock.patch.object(generation, "shared_prefill", lambda *a, **k: None) if mode == "plain" \
                    else mock.patch.object(generation, "shared_prefill", generation.shared_prefill)
                with patch:
                    start = time.perf_counter()
                    judged = judge.judge(steps, VOTES, 0.0)
                    timings[mode].append(time.perf_counter() - start)
                answers[mode] = [[v.value for v in j.votes] for j in judged]
    shared, plain = statistics.median(timings["shared"]), statistics.median(timings["plain"])
    agree = sum(a == b for a, b in zip(answers["shared"], answers["plain"]))
    lines = [
        "# Judging with the shared prefill of repeated prompts",
        "",
        f"`python scripts/bench_shared_prefill.py` on {platform.machine()}, Python {platform.python_version()}, "
        f"torch {torch.__version__}, 1 thread. {len(steps)} FrozenLake steps (window view, 8 maps × 8 ε-expert "
        f"rollouts) judged with m = {VOTES} greedy votes by the default's tiny judge, in generate batches of "
        f"{settings.max_batch} chats; median of {REPEATS} repetitions, the two modes alternating.",
        "",
        "| mode | seconds per judging pass | steps/s |",
        "|---|---:|---:|",
        f"| plain (every chat prefilled) | {plain:.2f} | {len(steps) / plain:.0f} |",
        f"| shared prefill (each distinct prompt once) | {shared:.2f} | {len(steps) / shared:.0f} |",
        "",
        f"Speed-up: **{plain / shared:.2f}×**. Steps whose {VOTES} votes are identical in both modes: "
        f"{agree} of {len(steps)}.",
        "",
    ]
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else Path("bench/shared_prefill.md"))
