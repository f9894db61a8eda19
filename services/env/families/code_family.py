"""`code`: the policy writes a program, the family runs it on ground-truth tests in the sandbox.

Tasks are the procedural integer-function problems of `code_problems` (knobs ``ops``: steps in the
chain; ``examples``: input/output pairs shown), plus problems the environment model rewrote
(`code_variants`), held in this process by their content hash (`add_written`). One episode is one
answer: the program (the first fenced code block of the answer, else all of it) is run once per
ground-truth test through :class:`services.common.sandbox.Sandbox` — nothing the model wrote runs
anywhere else — and the reward is the fraction of tests it passes (a test passes when the run ends
``OK`` and the problem's checker accepts its output: `judge_output`); the episode is won when it
passes all of them. Each test's verdict (OK, WA, TLE, MLE, RE, OLE) is in the step's result. When the
sandbox itself fails (verdict INFRA) the step raises `SandboxError` and the episode stays unanswered,
so the Step can be retried: an infrastructure fault is never a reward. The oracle's plan is the
reference solution.

The sandbox starts with `start` (the env service calls it at start-up, so a sandbox that cannot set
up its isolation stops the service from starting) or at the first run.
"""

from __future__ import annotations

import hashlib
import os
import threading
from collections.abc import Callable, Sequence

from rlanything.v1.events_pb2 import CodeCheck

from services.common.config.sandbox import SandboxConfig
from services.common.errors import InvalidArgumentError
from services.common.sandbox import Job, RunResult, Sandbox, Verdict
from services.common.sandbox.checkers import Checker, judge_output
from services.common.sandbox.selftest import require_containment
from services.env.families.base import Episode, Knob, StepResult, TaskFamily, TaskSpec
from services.env.families.code_problems import (MAX_CONSTANT, MAX_FACTOR, TASK_TEXT, CodeProblem, extract_program,
                                                 make_problem, written_key)

__all__ = ["CodeFamily", "CodeEpisode", "passes_test", "WRITTEN_BIT", "written_seed", "is_written"]

WRITTEN_BIT = 1 << 62
"""Seeds of written problems have this bit set (procedural seeds stay far below it)."""

TestRunner = Callable[[str, Sequence[tuple[str, str]]], list[RunResult]]


def passes_test(result: RunResult, expected: str, checker: Checker = Checker()) -> bool:
    """A ground-truth test passes: the run ended ``OK`` and ``checker`` accepts its output for ``expected``."""
    return judge_output(result, expected, checker) is Verdict.OK


def written_seed(problem: CodeProblem) -> int:
    """The task seed of a written problem: `WRITTEN_BIT` plus the first 60 bits of its content hash."""
    digest = hashlib.sha256("\x1f".join([problem.statement, problem.reference,
                                         *(f"{i}\x1e{o}" for i, o in problem.tests)]).encode()).hexdigest()
    return WRITTEN_BIT | int(digest[:15], 16)


def is_written(seed: int) -> bool:
    """Does ``seed`` name a written problem (not a procedural one)?"""
    return seed >= WRITTEN_BIT


class CodeEpisode(Episode):
    """One problem: the first step is the program, scored by its ground-truth tests."""

    single_turn = True

    def __init__(self, problem: CodeProblem, run_tests: TestRunner) -> None:
        self.problem = problem
        self.run_tests = run_tests
        self.task_text = f"{TASK_TEXT}\n{problem.statement}"  # a single-turn policy is shown the task text only
        self.code_check = CodeCheck(input_validator=problem.input_validator, reference=problem.reference,
                                    checker=problem.checker)
        self.observation = problem.statement
        self.admissible_actions = ()
        self.done = False
        self.passed: list[bool] = []
        """Which ground-truth tests the answer passed (after the step)."""

    def step(self, action: str) -> StepResult:
        """Run the answer's program on every ground-truth test (in the sandbox); reward = share passed.

        Raises:
            SandboxError: the sandbox itself failed (not the program).
        """
        if self.done:
            return StepResult("The problem was already answered.", (), 0.0, True, False, None)
        program = extract_program(action)
        results = self.run_tests(program, self.problem.tests)  # SandboxError: not answered, may be retried
        self.done = True
        checker = Checker.parse(self.problem.checker)
        verdicts = [judge_output(r, expected, checker) for r, (_, expected) in
                    zip(results, self.problem.tests, strict=True)]
        self.passed = [v is Verdict.OK for v in verdicts]
        share = sum(self.passed) / len(self.passed)
        won = all(self.passed)
        failed = next(((r, v) for r, v in zip(results, verdicts, strict=True) if v is not Verdict.OK), None)
        why = ("" if failed is None else " First failure: WA (wrong output)." if failed[1] is Verdict.WA  # inputs stay hidden
               else f" First failure: {failed[1].value} ({failed[0].detail}).")
        self.observation = f"Passed {sum(self.passed)} of {len(self.passed)} tests.{why}"
        return StepResult(self.observation, (), share, True, won, 0 if won else None,
                          test_verdicts=tuple(v.value for v in verdicts))

    def oracle_plan(self) -> list[str] | None:
        """The reference solution as a one-step plan ([] once answered)."""
        return [] if self.done else [self.problem.reference]


class CodeFamily(TaskFamily):
    """Procedural integer-function problems (and model-rewritten ones), programs run in the sandbox."""

    name = "code"
    max_steps = 1
    knobs: tuple[Knob, ...] = (
        Knob("ops", 1, 6, 1, description="Steps in the integer chain the program computes."),
        Knob("examples", 0, 4, 1, harder_is_higher=False, default=2, same_task=True,
             description="Input/output examples shown in the statement (same function)."),
        Knob("max_constant", 1, 99, 10, default=MAX_CONSTANT,
             description="Largest constant of an add/subtract step (how many distinct functions there are)."),
        Knob("max_factor", 2, 99, 10, default=MAX_FACTOR,
             description="Largest constant of a multiply step (2 up to it; how many distinct functions there are)."),
    )

    def __init__(self, sandbox: SandboxConfig | None = None) -> None:
        self.sandbox_config = sandbox or SandboxConfig()
        self._sandbox: Sandbox | None = None
        self._lock = threading.Lock()
        self.written: dict[int, CodeProblem] = {}

    def start(self) -> None:
        """Start the sandbox (idempotent) and run its self-test (`require_containment`) on the paths
        programs must not read (`private_paths`).

        Raises:
            SandboxStartError: the configured isolation cannot be set up (no fallback), or under bwrap a
                self-test check failed.
        """
        with self._lock:
            if self._sandbox is None:
                sandbox = Sandbox(self.sandbox_config)
                try:
                    require_containment(sandbox, self.private_paths())
                except BaseException:
                    sandbox.close()
                    raise
                self._sandbox = sandbox

    def private_paths(self) -> list[str]:
        """Host paths a program must not read: the working directory (the checkout, unless it is /)."""
        cwd = os.getcwd()
        return [cwd] if cwd != "/" else []

    @property
    def sandbox(self) -> Sandbox:
        """The running sandbox (started on first use)."""
        self.start()
        assert self._sandbox is not None
        return self._sandbox

    def close(self) -> None:
        """Stop the sandbox's workers."""
        with self._lock:
            if self._sandbox is not None:
                self._sandbox.close()
                self._sandbox = None

    def run_tests(self, program: str, tests: Sequence[tuple[str, str]]) -> list[RunResult]:
        """Run ``program`` once per test's standard input in the sandbox (``sandbox.workers`` at once)."""
        return self.sandbox.run_many([Job(program, stdin) for stdin, _ in tests])

    def add_written(self, problem: CodeProblem) -> int:
        """Make a written (rewritten) problem available in this process (idempotent); returns its seed."""
        seed = written_seed(problem)
        self.written[seed] = problem
        return seed

    def problem(self, spec: TaskSpec) -> CodeProblem:
        """The problem of ``spec``: a written one by its seed, else the procedural one.

        Raises:
            InvalidArgumentError: bad knobs, or a written problem not loaded in this process.
        """
        self.validate(spec)
        if is_written(spec.seed):
            problem = self.written.get(spec.seed)
            if problem is None:
                raise InvalidArgumentError(f"code: written problem with seed {spec.seed} is not loaded in this process")
            return problem
        return make_problem(int(spec.knobs["ops"]), int(spec.knobs.get("examples", 2)), spec.seed,
                            int(spec.knobs.get("max_constant", MAX_CONSTANT)),
                            int(spec.knobs.get("max_factor", MAX_FACTOR)))

    def instance_key(self, spec: TaskSpec) -> str:
        """``code:<a>*x<+b>``: the function a procedural problem asks for (other seeds, step chains or
        example counts asking for the same function are the same instance); for a written problem its
        content's key (`code_problems.written_key`: the same function when its tests are one, else
        ``code:written:<hash of the normalised statement>``).

        Raises:
            InvalidArgumentError: knobs out of bounds (`validate`), or a written problem not loaded here.
        """
        if is_written(spec.seed):
            return f"{self.name}:{written_key(self.problem(spec))}"
        return f"{self.name}:{self.problem(spec).key}"

    def make_episode(self, spec: TaskSpec, episode_seed: int) -> CodeEpisode:
        """An episode of the task's problem; its answer runs in this family's sandbox."""
        return CodeEpisode(self.problem(spec), self.run_tests)

    def knob_preference(self, harder: bool, bad_step_share: float) -> list[str]:
        """``ops``, then ``examples``: the parametric proposer never moves ``max_constant`` or
        ``max_factor`` (the size of the function set, not a difficulty the plan length measures)."""
        return ["ops", "examples"]

    def oracle_plan_length(self, spec: TaskSpec) -> int | None:
        """The chain's length, knob ``ops`` (the reference's number of operations), as the difficulty the
        parametric proposer checks a variant by (harder: more operations). An answer is one step, so
        there is no multi-step plan to measure; every problem is solvable by its reference
        (procedural: by construction; written: checked when it was accepted, `code_variants`).

        Raises:
            InvalidArgumentError: bad knobs, or a written problem not loaded in this process.
        """
        self.problem(spec)
        return int(spec.knobs["ops"])
