"""Benchmark: does consistency feedback (loop 2) raise the tiny judge's step accuracy?

Usage: python scripts/bench_judge_consistency.py [bench/judge_consistency.md] [--rounds N] [--sft-steps N] [--seed S]

1. Record FIXED ε-expert FrozenLake trajectories in-process (G rollouts per task, oracle step
   labels), plus held-out trajectories on other maps.
2. Cold-start a tiny judge with noisy labels (`services.offline.judge_sft.run_judge_sft`, label noise 0.3).
3. Rounds of loop 2 on the same fixed trajectories (`services.offline.judge_eval.consistency_round`):
   judge every step m times, consistency rewards by the critic's own group evaluation, one PPO
   update with the trainers' `ppo_update`. The oracle labels are never used for training.
4. Step accuracy (sign of S̄ vs the oracle label, ties wrong) of each round's votes on the fixed
   set, and on the held-out set before and after; written as a markdown table.
5. Control arm (``--control``, default on): the same rounds from the same cold-started weights,
   but with the outcomes permuted among the G rollouts of each task (same acc, same RM band, no
   link between a step and its outcome). A gain there would come from PPO sharpening the votes,
   not from consistency feedback.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import platform
import random
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from services.common.config import FamilyConfig, JudgeSFTConfig, PPOConfig, TinyModelConfig  # noqa: E402
from rlanything.v1.events_pb2 import Trajectory  # noqa: E402
from services.common.models.generation import HFGenerator  # noqa: E402
from services.env.families.frozenlake import FrozenLakeFamily  # noqa: E402
from services.offline.judge_episodes import record_groups  # noqa: E402
from services.reward.judges import JudgeSettings, LLMJudge  # noqa: E402
from services.offline.judge_eval import JudgeAccuracy, consistency_round, judge_accuracy, judge_trajectories  # noqa: E402
from services.offline.judge_sft import JudgeSFTResult, judge_specs, run_judge_sft  # noqa: E402

FAMILY = FamilyConfig(type="gym_text", knobs={"size": 4, "hole_prob": 0.2})
FIXED_SEED_BASE = 990_000_000
HELDOUT_SEED_BASE = 995_000_000


def permuted_outcomes(trajectories: list[Trajectory], seed: int) -> list[Trajectory]:
    """The trajectories with their outcomes shuffled among the rollouts of each job (same acc per job)."""
    rng = random.Random(seed)
    by_job: dict[str, list[int]] = {}
    for t in trajectories:
        by_job.setdefault(t.job_id, []).append(t.outcome)
    for outcomes in by_job.values():
        rng.shuffle(outcomes)
    out = []
    for t in trajectories:
        copy = Trajectory()
        copy.CopyFrom(t)
        copy.outcome = by_job[t.job_id].pop()
        out.append(copy)
    return out


def run_rounds(model_dir: str, settings: JudgeSettings, fixed: list[Trajectory], held: list[Trajectory], votes: int,
               temperature: float, ppo: PPOConfig, rounds: int, label: str) -> tuple[list[str], JudgeAccuracy,
                                                                                    JudgeAccuracy, JudgeAccuracy]:
    """``rounds`` of loop 2 on ``fixed``; returns table rows, held-out before, fixed after, held-out after."""
    judge = LLMJudge(HFGenerator(model_dir), settings)
    gen = judge.generator
    assert isinstance(gen, HFGenerator)
    optimizer = torch.optim.AdamW(gen.model.parameters(), lr=ppo.lr)
    held_before = judge_accuracy(judge_trajectories(judge, held, votes, temperature))
    rows = []
    for r in range(rounds):
        t0 = time.perf_counter()
        result = consistency_round(judge, optimizer, fixed, votes, temperature, ppo)
        m = result.metrics
        rows.append(row(f"{label}: round {r} votes", result.accuracy,
                        f" {result.samples} | {m['ppo/kl']:.4f} | {m['ppo/clip_fraction']:.3f} |"))
        print(rows[-1], f"{time.perf_counter() - t0:.0f} s", flush=True)
    fixed_after = judge_accuracy(judge_trajectories(judge, fixed, votes, temperature))
    held_after = judge_accuracy(judge_trajectories(judge, held, votes, temperature))
    return rows, held_before, fixed_after, held_after


def cold_start(work: Path, sft: JudgeSFTConfig, tiny: TinyModelConfig, settings: JudgeSettings, votes: int,
               temperature: float, seed: int) -> JudgeSFTResult:
    """`run_judge_sft`, or its cached result (the cold start is deterministic for these arguments)."""
    key = json.dumps([sft.model_dump(), tiny.model_dump(), dataclasses.asdict(settings), votes, temperature, seed],
                     sort_keys=True)
    out = work / f"sft-{seed}"
    cached = out / "bench-cold-start.json"
    if cached.exists() and json.loads(cached.read_text())["key"] == key:
        r = json.loads(cached.read_text())["result"]
        return JudgeSFTResult(**{**r, "before": JudgeAccuracy(**r["before"]), "after": JudgeAccuracy(**r["after"])})
    result = run_judge_sft(FrozenLakeFamily(), FAMILY, sft, tiny, out, settings, votes, temperature, seed=seed)
    cached.write_text(json.dumps({"key": key, "result": dataclasses.asdict(result)}))
    return result


def row(name: str, a: JudgeAccuracy, extra: str = "") -> str:
    return (f"| {name} | {a.step_accuracy:.3f} | {a.vote_accuracy:.3f} | {a.invalid_vote_rate:.3f} | "
            f"{a.good_share:.3f} | {a.labelled_steps} |{extra}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("out", nargs="?", default="bench/judge_consistency.md")
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--sft-steps", type=int, default=200)
    parser.add_argument("--tasks", type=int, default=16)
    parser.add_argument("--group", type=int, default=8)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--optimizer-steps", type=int, default=8)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--work", default=".cache/bench-judge")
    parser.add_argument("--no-control", dest="control", action="store_false", help="skip the permuted-outcome arm")
    args = parser.parse_args()
    torch.manual_seed(args.seed)
    start = time.perf_counter()
    family = FrozenLakeFamily()
    settings = JudgeSettings(prompt_chars=200, field_chars=120, max_new_tokens=8, max_batch=64)
    votes, temperature = 3, 0.8
    sft = JudgeSFTConfig(episodes=300, steps=args.sft_steps, eval_episodes=40, label_noise=0.3, expert_prob=0.5)
    tiny = TinyModelConfig()
    cold = cold_start(Path(args.work), sft, tiny, settings, votes, temperature, args.seed)
    print(f"cold start: {cold.before.step_accuracy:.3f} -> {cold.after.step_accuracy:.3f} ({cold.seconds:.0f} s)",
          flush=True)
    fixed = record_groups(family, judge_specs(FAMILY, args.tasks, FIXED_SEED_BASE), args.group, 0.5, args.seed,
                          prefix="fixed")
    held = record_groups(family, judge_specs(FAMILY, 40, HELDOUT_SEED_BASE), 1, 0.5, args.seed + 1, prefix="held")
    ppo = PPOConfig(lr=args.lr, optimizer_steps=args.optimizer_steps)
    torch.manual_seed(args.seed)
    rounds, held_before, final, held_after = run_rounds(cold.model_dir, settings, fixed, held, votes, temperature,
                                                        ppo, args.rounds, "consistency")
    control_rows: list[str] = []
    if args.control:
        torch.manual_seed(args.seed)
        control_rows, _, c_final, c_held = run_rounds(cold.model_dir, settings, permuted_outcomes(fixed, args.seed),
                                                      held, votes, temperature, ppo, args.rounds, "control")
        control_rows += [row(f"control: fixed set after {args.rounds} rounds", c_final, " | | |"),
                         row(f"control: held-out after {args.rounds} rounds", c_held, " | | |")]
    wins = sum(t.outcome == 1 for t in fixed) / len(fixed)
    first = rounds[0].split("|")[2].strip() if rounds else "–"
    header = ("| judged set | step acc (sign S̄) | vote acc | invalid votes | always-+1 acc | labelled steps |"
              " RM samples | KL | clip frac |\n|---|---|---|---|---|---|---|---|---|")
    lines = [
        "# Judge consistency training on fixed trajectories (loop 2, arXiv 2602.02488)",
        "",
        f"Measured by `scripts/bench_judge_consistency.py` in {time.perf_counter() - start:.0f} s on "
        f"{platform.processor() or platform.machine()} ({torch.get_num_threads()} torch threads, shared CPU), "
        f"plus {cold.seconds:.0f} s for the cold start (cached in --work between runs).",
        "",
        f"Setup: FrozenLake 4×4 (hole_prob 0.2). Fixed set: {args.tasks} tasks × G={args.group} ε-expert rollouts "
        f"(ε = 0.5 random actions; win rate {wins:.2f}). Held-out: 40 other maps. Tiny judge "
        f"(Qwen2-style, hidden {tiny.hidden_size}, {tiny.layers} layers, vocab {tiny.vocab_size}), cold-started by "
        f"{sft.steps} supervised steps on {cold.examples} steps of other maps with label noise {sft.label_noise} "
        f"({cold.flipped} labels flipped). Judge prompt: last {settings.prompt_chars} chars of the agent prompt, "
        f"{settings.field_chars} of response/next observation; m = {votes} votes at temperature {temperature}.",
        f"Loop 2 per round: judge every fixed step, consistency rewards and RM band [0.2, 0.8] by the critic's "
        f"`evaluate_group` (λ = 1, invalid vote = −2), one `ppo_update` (lr {ppo.lr}, {ppo.optimizer_steps} "
        f"optimizer steps, ε = {ppo.eps}, β = {ppo.beta}). The oracle labels only measure; they never train.",
        "",
        "Step accuracy = sign of the mean of the m sampled votes against the oracle label (a tie is wrong), the "
        "critic's `reward/step_accuracy`; vote acc = single votes equal to the label.",
        "",
        header,
        row("cold-start eval maps, random init", cold.before, " | | |"),
        row("cold-start eval maps, after cold start", cold.after, " | | |"),
        row("held-out maps, after cold start", held_before, " | | |"),
        *rounds,
        row(f"consistency: fixed set after {args.rounds} rounds", final, " | | |"),
        row(f"consistency: held-out after {args.rounds} rounds", held_after, " | | |"),
        *control_rows,
        "",
        f"Consistency feedback: fixed set {first} → {final.step_accuracy:.3f} "
        f"step accuracy; held-out {held_before.step_accuracy:.3f} → {held_after.step_accuracy:.3f}."
        + (f" Control (outcomes permuted within each task): fixed set → {c_final.step_accuracy:.3f}, held-out → "
           f"{c_held.step_accuracy:.3f}." if args.control else ""),
        "",
    ]
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
