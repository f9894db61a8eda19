"""Cold start of the judge: supervised steps on the environment's oracle step labels, made noisy.

The paper's judge starts competent-but-imperfect (47 % step accuracy on AlfWorld, arXiv
2602.02488 Table 1). Here the tiny judge is trained on ε-expert episodes played in-process
(`episodes.record_groups`): each labelled step becomes the judge's chat (`judge_prompt`) with the
target ``\\boxed{1}`` (GOOD) or ``\\boxed{-1}`` (BAD), and each label is flipped with probability
``label_noise`` so the judge learns a softened, imperfect verdict. Training is the policy's own
cross-entropy loop (`services.offline.policy_sft.supervised_train`) for a fixed step budget.

Accuracy before/after is measured on steps of held-out tasks (seeds disjoint from the training
seeds and from the pool's) with m votes at the vote temperature (`offline.judge_accuracy`: the
critic's ``reward/step_accuracy``).
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from rlanything.v1.events_pb2 import Trajectory

from services.common.config import FamilyConfig, JudgeSFTConfig, TinyModelConfig
from services.common.models.generation import HFGenerator
from services.env.disjoint import disjoint_specs
from services.env.families.base import TaskFamily, TaskSpec
from services.offline.expert import Demonstration
from services.offline.policy_sft import build_tiny_for, supervised_train
from services.offline.judge_episodes import record_groups
from services.reward.judge_prompt import BAD_VERDICT, GOOD_VERDICT, judge_chat
from services.reward.judges import JudgeSettings, LLMJudge
from services.offline.judge_eval import JudgeAccuracy, judge_accuracy, judge_trajectories
from services.reward.votes import label_vote

__all__ = ["JudgeSFTResult", "judge_examples", "build_tiny_judge", "judge_specs", "run_judge_sft",
           "TRAIN_SEED_BASE", "EVAL_SEED_BASE"]

TRAIN_SEED_BASE = 970_000_000
"""Task seeds of the judge's training episodes (disjoint from the pool's and the policy SFT's)."""
EVAL_SEED_BASE = 980_000_000
"""Task seeds of the held-out episodes that measure step accuracy."""


@dataclass(frozen=True)
class JudgeSFTResult:
    """What a judge cold start did."""

    model_dir: str
    before: JudgeAccuracy
    """Held-out accuracy of the starting weights."""
    after: JudgeAccuracy
    """Held-out accuracy after the supervised steps."""
    steps: int
    """Optimizer steps."""
    examples: int
    """Labelled training steps (judge chats)."""
    flipped: int
    """Training labels flipped by the label noise."""
    seconds: float


def judge_specs(cfg: FamilyConfig, n: int, base: int) -> list[TaskSpec]:
    """``n`` tasks with the family's knobs and seeds ``base + i``."""
    return [TaskSpec(cfg.type, {k: float(v) for k, v in cfg.knobs.items()}, base + i) for i in range(n)]


def judge_examples(trajectories: Sequence[Trajectory], label_noise: float, rng: random.Random,
                   settings: JudgeSettings = JudgeSettings()) -> tuple[list[Demonstration], int]:
    """(judge chat, verdict) pairs of every labelled step, labels flipped with prob. ``label_noise``.

    Returns:
        ``(examples, flipped)``: unlabelled steps are skipped; ``flipped`` counts noisy labels.
    """
    out, flipped = [], 0
    for t in trajectories:
        for s in t.steps:
            vote = label_vote(s.oracle_label)
            if vote == 0:
                continue
            if rng.random() < label_noise:
                vote, flipped = -vote, flipped + 1
            chat = judge_chat(t.task_text, s.prompt, s.response, s.next_observation, settings.prompt_chars,
                              settings.field_chars)
            out.append(Demonstration(chat, GOOD_VERDICT if vote > 0 else BAD_VERDICT))
    return out, flipped


def build_tiny_judge(trajectories: Sequence[Trajectory], out_dir: Path, tiny: TinyModelConfig,
                     settings: JudgeSettings = JudgeSettings(), seed: int = 0) -> Path:
    """A randomly initialised tiny judge whose tokenizer is trained on the judge chats of ``trajectories``
    (of their labelled steps; of every step when none is labelled, as in a family without an oracle).

    Raises:
        ValueError: ``trajectories`` hold no step at all.
    """
    examples, _ = judge_examples(trajectories, 0.0, random.Random(seed), settings)
    if not examples:  # a family without an oracle: the tokenizer only needs the chats' text
        examples = [Demonstration(judge_chat(t.task_text, s.prompt, s.response, s.next_observation,
                                             settings.prompt_chars, settings.field_chars),
                                  GOOD_VERDICT if k % 2 else BAD_VERDICT)
                    for t in trajectories for k, s in enumerate(t.steps)]
    if not examples:
        raise ValueError("no steps to build the judge's tokenizer from")
    return build_tiny_for(examples, out_dir, tiny, seed)


def run_judge_sft(family: TaskFamily, fam_cfg: FamilyConfig, sft: JudgeSFTConfig, tiny: TinyModelConfig,
                  out_dir: Path, settings: JudgeSettings = JudgeSettings(), votes: int = 3, temperature: float = 0.8,
                  source: str = "", seed: int = 0, history_steps: int = 2,
                  progress: Callable[[str, float], None] | None = None,
                  excluded: frozenset[str] = frozenset()) -> JudgeSFTResult:
    """The whole cold start; saves the trained judge to ``out_dir`` (a Hugging Face directory).

    Args:
        source: starting weights; '' builds a tiny judge (tokenizer trained on the judge chats).
        progress: called with ``("before", acc)``, ``("step", n)``, ``("after", acc)``.
        excluded: instance keys the training episodes skip (the run's held-out and OOD instances,
            `services.env.disjoint.disjoint_specs`).

    Raises:
        ValueError: the family gives no labelled steps (e.g. single-turn tasks).
        EvalInstanceError: too few seeds give an instance outside ``excluded``.
    """
    start = time.perf_counter()
    specs = disjoint_specs(family, fam_cfg.knobs, sft.episodes, TRAIN_SEED_BASE, excluded)
    train = record_groups(family, specs, 1, sft.expert_prob, seed, history_steps, prefix="sft")
    held_out = record_groups(family, judge_specs(fam_cfg, sft.eval_episodes, EVAL_SEED_BASE), 1, sft.expert_prob,
                             seed + 1, history_steps, prefix="eval")
    examples, flipped = judge_examples(train, sft.label_noise, random.Random(seed), settings)
    if not examples:
        raise ValueError(f"{fam_cfg.type} with knobs {fam_cfg.knobs} gives no labelled steps to train a judge on")
    base = source or str(build_tiny_judge(train, out_dir, tiny, settings, seed))
    generator = HFGenerator(base)
    judge = LLMJudge(generator, settings)
    before = judge_accuracy(judge_trajectories(judge, held_out, votes, temperature))
    if progress:
        progress("before", before.step_accuracy)
    supervised_train(generator, examples, sft, seed, (lambda n, loss: progress("step", n)) if progress else None)
    after = judge_accuracy(judge_trajectories(judge, held_out, votes, temperature))
    if progress:
        progress("after", after.step_accuracy)
    out_dir.mkdir(parents=True, exist_ok=True)
    generator.model.save_pretrained(out_dir)
    generator.tokenizer.save_pretrained(out_dir)
    return JudgeSFTResult(str(out_dir), before, after, sft.steps, len(examples), flipped, time.perf_counter() - start)
