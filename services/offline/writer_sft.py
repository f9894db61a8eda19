"""Cold start of the unit-test writer (``reward.kind: unit_tests``): supervised steps on tests built
from the reference programs of the family's problems, as the policy's cold start learns from them.

For each training problem of family ``code`` (seeds `TRAIN_SEED_BASE` on, skipping the run's
held-out and OOD instances) the writer's chat is `unit_tests.unit_test_chat` on the problem's task
text (what the reward service shows it: the statement with its examples), and its target is one
test ``\\boxed{INPUT => OUTPUT}`` whose input is drawn from ``inputs`` (none of the shown examples'
inputs) and whose output is what the reference program prints on it, run in the family's sandbox;
or, for a share ``copy_share`` of the problems, one of the statement's shown examples copied (a
correct test that only catches programs failing the statement's own examples: the move a tiny
writer can learn, since computing ``f(x)`` for a new ``x`` is arithmetic it does not learn here).
Training is the policy's cross-entropy loop (`policy_sft.supervised_train`) for a fixed budget.

Accuracy before/after (`writer_accuracy`) is the share of written tests that are correct: in the
format, and the reference prints their output on their input, on problems of other seeds (the
functions may repeat the training ones': the writer writes tests for the training tasks of a run).
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from services.common.config import FamilyConfig, JudgeSFTConfig, TinyModelConfig
from services.common.models.generation import Generator, HFGenerator, Sampling
from services.common.sandbox import Job, outputs_match
from services.common.seeding import derive_seed
from services.common.unit_tests import SEPARATOR, parse_unit_test, unit_test_chat
from services.env.disjoint import disjoint_specs
from services.env.families.code_family import CodeFamily
from services.env.families.base import TaskSpec
from services.env.families.code_problems import TASK_TEXT
from services.offline.expert import Demonstration
from services.offline.policy_sft import build_tiny_for, supervised_train

__all__ = ["WriterSFTResult", "TRAIN_SEED_BASE", "EVAL_SEED_BASE", "TEST_INPUTS", "writer_target", "shown_examples", "shown_inputs", "writer_examples",
           "writer_accuracy", "run_writer_sft"]

TRAIN_SEED_BASE = 940_000_000
"""Task seeds of the writer's training problems (disjoint from the pool's and the other cold starts')."""
EVAL_SEED_BASE = 950_000_000
"""Task seeds of the held-out problems that measure test accuracy."""
TEST_INPUTS = range(-9, 10)
"""Inputs of the training tests (small integers: the output is still the function's, computed by
the reference, but a tiny writer can learn to predict it)."""


@dataclass(frozen=True)
class WriterSFTResult:
    """What a writer cold start did: test accuracy (share of written tests that are correct) before
    and after, on ``eval_tests`` tests of held-out problems."""

    model_dir: str
    accuracy_before: float
    accuracy_after: float
    eval_tests: int
    steps: int
    examples: int
    seconds: float


def writer_target(stdin: str, stdout: str) -> str:
    """The writer's answer for one test: ``\\boxed{INPUT => OUTPUT}``, line breaks inside written ``\\n``
    (the inverse of `unit_tests.parse_unit_test`)."""
    def one(text: str) -> str:
        return text.rstrip("\n").replace("\n", "\\n")
    return f"\\boxed{{{one(stdin)} {SEPARATOR} {one(stdout)}}}"


def shown_examples(statement: str) -> list[tuple[str, str]]:
    """(input, output) of the statement's ``input X -> output Y`` example lines, in order."""
    return [(line.split()[1], line.split(" -> ", 1)[1].split()[1]) for line in statement.splitlines()
            if line.startswith("input ") and " -> output " in line]


def shown_inputs(statement: str) -> set[str]:
    """Inputs of the statement's ``input X -> output Y`` example lines."""
    return {x for x, _ in shown_examples(statement)}


def writer_examples(family: CodeFamily, specs: Sequence[TaskSpec], rng: random.Random,
                    inputs: Sequence[int] = TEST_INPUTS, copy_share: float = 0.0) -> list[Demonstration]:
    """One (writer chat, test) pair per problem of ``specs``: an input from ``inputs`` that is not
    one of the problem's shown examples, and the reference's output on it (run in the sandbox); or,
    with probability ``copy_share`` (drawn from ``rng``), one shown example copied.

    Raises:
        ValueError: a reference program fails on its input (the run's verdict is not ``ok``), or
            ``copy_share`` > 0 and a statement shows no example.
    """
    problems = [family.problem(s) for s in specs]
    copied: dict[int, tuple[str, str]] = {}
    chosen: dict[int, str] = {}
    for i, p in enumerate(problems):
        if copy_share > 0 and rng.random() < copy_share:
            examples = shown_examples(p.statement)
            if not examples:
                raise ValueError(f"copy_share={copy_share} but the statement of {p.key} shows no example")
            copied[i] = rng.choice(examples)
        else:
            shown = shown_inputs(p.statement)
            chosen[i] = f"{rng.choice([x for x in inputs if str(x) not in shown])}\n"
    runs = family.sandbox.run_many([Job(problems[i].reference, stdin) for i, stdin in chosen.items()])
    computed = dict(zip(chosen, runs))
    out = []
    for i, p in enumerate(problems):
        if i in copied:
            stdin, stdout = copied[i]
        else:
            r = computed[i]
            if not r.ok:
                raise ValueError(f"the reference of {p.key} failed on input {chosen[i].strip()!r}: {r.verdict.value}")
            stdin, stdout = chosen[i], r.stdout
        out.append(Demonstration(unit_test_chat(_task_text(p.statement)), writer_target(stdin, stdout)))
    return out


def _task_text(statement: str) -> str:
    return f"{TASK_TEXT}\n{statement}"  # the code episode's task text, which the reward service shows


def writer_accuracy(generator: Generator, family: CodeFamily, specs: Sequence[TaskSpec], votes: int,
                  temperature: float, max_new_tokens: int, seed: int = 0) -> float:
    """Share of ``votes`` tests written per problem of ``specs`` that are correct: in the format, and
    the problem's reference prints the test's output (after `outputs_match`) on its input, in the
    sandbox. Vote v of problem i samples with ``derive_seed("writer-eval", seed, i, v)``."""
    problems = [family.problem(s) for s in specs]
    chats = [unit_test_chat(_task_text(p.statement)) for p in problems for _ in range(votes)]
    seeds = [derive_seed("writer-eval", seed, i, v) for i in range(len(problems)) for v in range(votes)]
    texts = [c.text for c in generator.generate(chats, Sampling(temperature, 1.0, max_new_tokens), seeds=seeds)]
    tests = [parse_unit_test(t) for t in texts]
    refs = [p.reference for p in problems for _ in range(votes)]
    runnable = [(ref, t) for ref, t in zip(refs, tests) if t is not None]
    results = family.sandbox.run_many([Job(ref, t[0]) for ref, t in runnable]) if runnable else []
    correct = sum(r.ok and outputs_match(r.stdout, t[1]) for r, (_, t) in zip(results, runnable))
    return correct / max(1, len(texts))


def run_writer_sft(family: CodeFamily, fam_cfg: FamilyConfig, sft: JudgeSFTConfig, tiny: TinyModelConfig,
                   out_dir: Path, votes: int = 2, temperature: float = 0.8, max_new_tokens: int = 16, seed: int = 0,
                   excluded: frozenset[str] = frozenset(),
                   progress: Callable[[str, float], None] | None = None) -> WriterSFTResult:
    """The whole cold start of a tiny writer; saves it to ``out_dir`` (a Hugging Face directory).

    ``sft.episodes`` training problems (a share ``sft.copy_share`` of them copying a shown example),
    ``sft.steps`` optimizer steps, accuracy on
    ``sft.eval_episodes`` held-out problems × ``votes`` tests (``label_noise`` and ``expert_prob``
    are the step judge's and unused here).

    Raises:
        EvalInstanceError: too few seeds give an instance outside ``excluded``.
    """
    start = time.perf_counter()
    rng = random.Random(seed)
    train_specs = disjoint_specs(family, fam_cfg.knobs, sft.episodes, TRAIN_SEED_BASE, excluded)
    eval_specs = disjoint_specs(family, fam_cfg.knobs, sft.eval_episodes, EVAL_SEED_BASE, excluded)
    examples = writer_examples(family, train_specs, rng, copy_share=sft.copy_share)
    generator = HFGenerator(str(build_tiny_for(examples, out_dir, tiny, seed)))
    before = writer_accuracy(generator, family, eval_specs, votes, temperature, max_new_tokens, seed)
    if progress:
        progress("before", before)
    supervised_train(generator, examples, sft, seed, (lambda n, loss: progress("step", n)) if progress else None)
    after = writer_accuracy(generator, family, eval_specs, votes, temperature, max_new_tokens, seed)
    if progress:
        progress("after", after)
    out_dir.mkdir(parents=True, exist_ok=True)
    generator.model.save_pretrained(out_dir)
    generator.tokenizer.save_pretrained(out_dir)
    return WriterSFTResult(str(out_dir), before, after, len(eval_specs) * votes, sft.steps, len(examples),
                           time.perf_counter() - start)
