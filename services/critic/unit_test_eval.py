"""The unit-test writer's rewards for one group of a code task (CURE, arXiv 2506.03136; formulas in
`services.common.algo.coding_rewards`): the pure part, and the shell that runs the tests.

With ``reward.kind: unit_tests`` every vote of a code trajectory's judgement is one test the reward
model wrote (`services.common.unit_tests`). At group close each of the group's N programs runs on
each of the K parseable tests in the critic's sandbox (`score_tests`, outside the critic's lock), giving
``passes_NK``. A test is rejected (`rejection_reasons`, counted per reason in the group's statistics)
when the writer did not format it — it gets ``critic.invalid_vote_penalty`` as its raw reward (a format
penalty, as for an unparseable vote) — or when it repeats an earlier test of the group (the same input
and output after the sandbox's normalisation): a duplicate is neither run nor trained on, so one test
written twice is not two samples. The raw rewards of the group's other tests are z-scored together,
and each non-zero one is an RM sample.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from rlanything.v1.events_pb2 import JudgedTrajectory, TrainingSample

from services.common.algo.coding_rewards import raw_unit_test_rewards, unit_tests_correct
from services.common.algo.zscore import zscore
from services.common.sandbox import Job, Sandbox, normalise_output, outputs_match
from services.common.unit_tests import extract_program, parse_unit_test

__all__ = ["GeneratedTest", "generated_tests", "rejection_reasons", "kept_tests", "programs_of", "correct_programs_of",
           "unit_test_samples", "score_tests", "REJECTION_REASONS"]

REJECTION_REASONS = ("unparseable", "duplicate")
"""Why a generated test is not scored as written: not in the format; the same as an earlier test of the group."""

ZERO = 1e-9


@dataclass(frozen=True)
class GeneratedTest:
    """One test the reward model wrote: the rollout it was written for, its judgement and vote, the
    parsed test (None: not in the format)."""

    rollout: int
    judgement: int
    vote: int
    test: tuple[str, str] | None


def generated_tests(recs: Sequence[JudgedTrajectory]) -> list[GeneratedTest]:
    """Every vote of every judgement of ``recs`` (in order) as a generated test."""
    return [GeneratedTest(n, j, v, parse_unit_test(vote.response))
            for n, rec in enumerate(recs) for j, judgement in enumerate(rec.judgements)
            for v, vote in enumerate(judgement.votes)]


def rejection_reasons(tests: Sequence[GeneratedTest]) -> list[str | None]:
    """Per test: None (kept), ``"unparseable"`` (no test in the writer's format) or ``"duplicate"`` (its
    input and output equal an earlier test's after `normalise_output`)."""
    seen: set[tuple[str, str]] = set()
    out: list[str | None] = []
    for t in tests:
        if t.test is None:
            out.append("unparseable")
            continue
        key = (normalise_output(t.test[0]), normalise_output(t.test[1]))
        out.append("duplicate" if key in seen else None)
        seen.add(key)
    return out


def kept_tests(tests: Sequence[GeneratedTest]) -> list[tuple[str, str]]:
    """The tests that are run and scored (`rejection_reasons` None), in order."""
    return [t.test for t, why in zip(tests, rejection_reasons(tests)) if why is None and t.test is not None]


def programs_of(recs: Sequence[JudgedTrajectory]) -> list[str]:
    """Each rollout's program: its last step's action ('' for none), as the env ran it."""
    return [extract_program(r.trajectory.steps[-1].action) if r.trajectory.steps else "" for r in recs]


def correct_programs_of(recs: Sequence[JudgedTrajectory]) -> list[bool]:
    """Which programs passed every ground-truth test (the rollout was won)."""
    return [r.trajectory.outcome == 1 for r in recs]


def unit_test_samples(recs: Sequence[JudgedTrajectory], tests: Sequence[GeneratedTest],
                      passes_NK: Sequence[Sequence[bool]], invalid_penalty: float
                      ) -> tuple[list[TrainingSample], dict[str, float]]:
    """The RM samples of one group's tests and its statistics: ``sum/unit_tests``, tests written;
    ``sum/unit_tests_checked``, tests written for a group with at least one correct program (only there
    does "every correct program passes it" say anything: with none every test would count as
    correct); ``sum/unit_tests_correct``, kept tests of such a group that every correct program
    passes; ``sum/unit_tests_rejected_<reason>``, tests rejected per `REJECTION_REASONS`.

    ``passes_NK[n][k]``: program n passes the k-th *kept* test of ``tests`` (`kept_tests`).

    Raises:
        ValueError: ``passes_NK`` does not have one row per rollout and one column per kept test.
    """
    why = rejection_reasons(tests)
    kept = [t for t, w in zip(tests, why) if w is None]
    correct_N = correct_programs_of(recs)
    if len(passes_NK) != len(recs) or any(len(row) != len(kept) for row in passes_NK):
        raise ValueError(f"passes_NK must be {len(recs)} x {len(kept)} (rollouts x kept tests)")
    raw_kept = iter(raw_unit_test_rewards(passes_NK, correct_N) if kept else [])
    correct_K = unit_tests_correct(passes_NK, correct_N) if kept else []
    scored = [(t, next(raw_kept) if w is None else invalid_penalty) for t, w in zip(tests, why) if w != "duplicate"]
    samples = []
    for (t, _), a in zip(scored, zscore([r for _, r in scored])):
        if abs(a) <= ZERO:
            continue
        rec = recs[t.rollout]
        judgement = rec.judgements[t.judgement]
        vote = judgement.votes[t.vote]
        samples.append(TrainingSample(sample_id=f"{rec.trajectory.trajectory_id}/{judgement.step_index}/{t.vote}",
                                      prompt_token_ids=judgement.prompt_token_ids,
                                      response_token_ids=vote.response_token_ids,
                                      behaviour_logprobs=vote.behaviour_logprobs, advantage=a,
                                      model_version=rec.reward_model_version))
    checked = any(correct_N)
    stats = {"sum/unit_tests": float(len(tests)), "sum/unit_tests_checked": float(len(tests) * checked),
             "sum/unit_tests_correct": float(sum(correct_K) * checked)}
    for reason in REJECTION_REASONS:
        stats[f"sum/unit_tests_rejected_{reason}"] = float(why.count(reason))
    return samples, stats


async def score_tests(sandbox: Sandbox, recs: Sequence[JudgedTrajectory]) -> list[list[bool]]:
    """``passes_NK``: each rollout's program run on each kept generated test (`kept_tests`), in the sandbox.

    Raises:
        SandboxError: the sandbox itself failed.
    """
    tests = kept_tests(generated_tests(recs))
    programs = programs_of(recs)
    results = await sandbox.run_many_async([Job(p, stdin) for p in programs for stdin, _ in tests])
    flat = [r.ok and outputs_match(r.stdout, expected) for r, (_, expected) in
            zip(results, [t for _ in programs for t in tests], strict=True)]
    return [flat[n * len(tests):(n + 1) * len(tests)] for n in range(len(programs))]
