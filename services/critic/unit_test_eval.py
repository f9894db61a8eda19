"""The unit-test writer's rewards for one group of a code task (CURE, arXiv 2506.03136; formulas in
`services.common.algo.coding_rewards`): the pure part, and the shell that runs the tests.

With ``reward.kind: unit_tests`` every vote of a code trajectory's judgement is one test the reward
model wrote (`services.common.unit_tests`). At group close each of the group's N programs runs on
each of the K parseable tests in the critic's sandbox (`score_tests`, outside the critic's lock), giving
``passes_NK``. A test is rejected (`rejection_reasons`, counted per reason in the group's statistics)
when the writer did not format it — it gets ``critic.invalid_vote_penalty`` as its raw reward (a format
penalty, as for an unparseable vote) —, when it repeats an earlier test of the group (the same input
and output after the sandbox's normalisation: a duplicate is neither run nor trained on, so one test
written twice is not two samples), or when the task's input validator (`CodeCheck.input_validator`,
from the env) refuses its input: a test outside the problem's inputs gets the format penalty too. When
the task carries its reference solution (`CodeCheck.reference`), a test the reference fails is not a
correct test whatever the group's programs do (CURE's reference row). The raw rewards of the group's
other tests are z-scored together, and each non-zero one is an RM sample.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from rlanything.v1.events_pb2 import JudgedTrajectory, TrainingSample

from services.common.algo.coding_rewards import raw_unit_test_rewards, unit_tests_correct
from services.common.algo.zscore import zscore
from services.common.sandbox import Checker, Job, Sandbox, normalise_output
from services.common.unit_tests import extract_program, parse_unit_test

__all__ = ["GeneratedTest", "TaskChecks", "generated_tests", "rejection_reasons", "kept_tests", "programs_of", "correct_programs_of",
           "unit_test_samples", "score_tests", "REJECTION_REASONS"]

REJECTION_REASONS = ("unparseable", "duplicate", "invalid_input")
"""Why a generated test is not scored as written: not in the format; the same as an earlier test of the
group; an input the task's validator refuses."""


@dataclass(frozen=True)
class TaskChecks:
    """What the task's own check said of a group's tests (`score_tests`): ``invalid_inputs[i]``, the
    i-th test that passed the format and duplicate checks has an input the validator refused;
    ``reference_K[k]``, the task's reference passes the k-th kept test (None: the task has no reference)."""

    invalid_inputs: tuple[bool, ...] = ()
    reference_K: tuple[bool, ...] | None = None



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


def rejection_reasons(tests: Sequence[GeneratedTest], invalid_inputs: Sequence[bool] = ()) -> list[str | None]:
    """Per test: None (kept), ``"unparseable"`` (no test in the writer's format), ``"duplicate"`` (its
    input and output equal an earlier test's after `normalise_output`) or ``"invalid_input"`` (the i-th
    test left by the first two checks has ``invalid_inputs[i]`` True; missing entries count as valid)."""
    seen: set[tuple[str, str]] = set()
    out: list[str | None] = []
    candidate = 0
    for t in tests:
        if t.test is None:
            out.append("unparseable")
            continue
        key = (normalise_output(t.test[0]), normalise_output(t.test[1]))
        if key in seen:
            out.append("duplicate")
            continue
        seen.add(key)
        out.append("invalid_input" if candidate < len(invalid_inputs) and invalid_inputs[candidate] else None)
        candidate += 1
    return out


def kept_tests(tests: Sequence[GeneratedTest], invalid_inputs: Sequence[bool] = ()) -> list[tuple[str, str]]:
    """The tests that are run and scored (`rejection_reasons` None), in order."""
    return [t.test for t, why in zip(tests, rejection_reasons(tests, invalid_inputs))
            if why is None and t.test is not None]


def programs_of(recs: Sequence[JudgedTrajectory]) -> list[str]:
    """Each rollout's program: its last step's action ('' for none), as the env ran it."""
    return [extract_program(r.trajectory.steps[-1].action) if r.trajectory.steps else "" for r in recs]


def correct_programs_of(recs: Sequence[JudgedTrajectory]) -> list[bool]:
    """Which programs passed every ground-truth test (the rollout was won)."""
    return [r.trajectory.outcome == 1 for r in recs]


def unit_test_samples(recs: Sequence[JudgedTrajectory], tests: Sequence[GeneratedTest],
                      passes_NK: Sequence[Sequence[bool]], invalid_penalty: float,
                      checks: TaskChecks = TaskChecks()) -> tuple[list[TrainingSample], dict[str, float]]:
    """The RM samples of one group's tests and its statistics: ``sum/unit_tests``, tests written;
    ``sum/unit_tests_checked``, tests written for a group with at least one correct program (only there
    does "every correct program passes it" say anything: with none every test would count as
    correct); ``sum/unit_tests_correct``, kept tests of such a group that every correct program
    passes; ``sum/unit_tests_rejected_<reason>``, tests rejected per `REJECTION_REASONS`.

    ``passes_NK[n][k]``: program n passes the k-th *kept* test of ``tests`` (`kept_tests` with
    ``checks.invalid_inputs``); ``checks.reference_K`` the reference row (CURE), when the task has one.

    Raises:
        ValueError: ``passes_NK`` does not have one row per rollout and one column per kept test, or
            ``checks.reference_K`` not one entry per kept test.
    """
    why = rejection_reasons(tests, checks.invalid_inputs)
    kept = [t for t, w in zip(tests, why) if w is None]
    correct_N = correct_programs_of(recs)
    if len(passes_NK) != len(recs) or any(len(row) != len(kept) for row in passes_NK):
        raise ValueError(f"passes_NK must be {len(recs)} x {len(kept)} (rollouts x kept tests)")
    reference_K = checks.reference_K
    if reference_K is not None and len(reference_K) != len(kept):
        raise ValueError(f"reference_K must have one entry per kept test ({len(kept)}), got {len(reference_K)}")
    raw_kept = iter(raw_unit_test_rewards(passes_NK, correct_N, reference_K) if kept else [])
    correct_K = unit_tests_correct(passes_NK, correct_N, reference_K) if kept else []
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


async def score_tests(sandbox: Sandbox, recs: Sequence[JudgedTrajectory]) -> tuple[list[list[bool]], TaskChecks]:
    """``passes_NK`` (each rollout's program run on each kept generated test, in the sandbox) and the
    task's own checks: its input validator run on each test's input, its reference on each kept test
    (`TaskChecks`; both from the group's `CodeCheck`, when the env sent one). Outputs are compared by
    the task's checker (exact when none is named).

    Raises:
        SandboxError: the sandbox itself failed.
    """
    generated = generated_tests(recs)
    check = recs[0].trajectory.code_check if recs else None
    checker = Checker.parse(check.checker) if check is not None and check.checker else Checker()
    invalid: tuple[bool, ...] = ()
    if check is not None and check.input_validator:
        candidates = kept_tests(generated)
        runs = await sandbox.run_many_async([Job(check.input_validator, stdin) for stdin, _ in candidates])
        invalid = tuple(not r.ok for r in runs)
    tests = kept_tests(generated, invalid)
    reference_K = None
    if check is not None and check.reference:
        runs = await sandbox.run_many_async([Job(check.reference, stdin) for stdin, _ in tests])
        reference_K = tuple(checker.matches(r.stdout, expected) and r.ok for r, (_, expected) in zip(runs, tests))
    programs = programs_of(recs)
    results = await sandbox.run_many_async([Job(p, stdin) for p in programs for stdin, _ in tests])
    flat = [r.ok and checker.matches(r.stdout, expected) for r, (_, expected) in
            zip(results, [t for _ in programs for t in tests], strict=True)]
    return [flat[n * len(tests):(n + 1) * len(tests)] for n in range(len(programs))], TaskChecks(invalid, reference_K)
