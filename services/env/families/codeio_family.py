"""`codeio`: reasoning-gym's CodeI/O problems; the policy writes the program, scored as family ``code``.

A task's seed picks a problem of `codeio_problems.load_entries` (standard-library problems of the data
file reasoning-gym ships); its ground-truth tests are built offline, in the sandbox: the dataset's input
generator draws `MAX_EXAMPLES` + `TESTS` inputs from a fixed seed, and the reference solution runs on
each of them. Both are run twice; a problem whose generator or reference fails, times out, prints
something else the second time (unseeded randomness, set order), or whose input or output is longer
than `MAX_IO_CHARS` is not used, and the seed draws another problem (`entry`). The outcome is
stored in ``<cache_dir>/<content hash>.json`` (the tests, or why the problem is not used), so a task's
tests are built once per cache and stay the same.

Everything else is `CodeFamily`'s: an answer's program runs once per test in the sandbox, its reward
is the share of tests passed (a test passes when the run ends ``OK`` and the problem's checker accepts
its output: the JSON text must be the reference's up to trailing whitespace, and when the reference
prints floating-point numbers each may differ by a relative 1e-6, `codeio_problems.checker_for`);
rewritten problems (`add_written`) are played and checked (`code_variants.check_code_variant`) the
same way.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
from pathlib import Path

from services.common.config.sandbox import SandboxConfig
from services.common.errors import InvalidArgumentError
from services.common.sandbox import Job
from services.common.seeding import derive_seed
from services.env.families.base import Knob, TaskSpec
from services.env.families.code_family import CodeFamily, is_written
from services.env.families.code_problems import CodeProblem
from services.env.families.codeio_problems import (MAX_EXAMPLES, MAX_IO_CHARS, TESTS, CodeIOEntry, generator_program,
                                                   load_entries, problem_from_runs, reference_program)

__all__ = ["CodeIOFamily", "MAX_SKIPS"]

MAX_SKIPS = 64
"""Problems a seed may move past (not usable) before its task is refused."""
Built = tuple[list[str], list[str]] | str
"""A problem's tests (inputs, reference outputs), or why it is not used."""


class CodeIOFamily(CodeFamily):
    """CodeI/O problems from reasoning-gym, tests built by running the reference in the sandbox."""

    name = "codeio"
    library = "reasoning-gym"
    knobs = (
        Knob("examples", 0, MAX_EXAMPLES, 1, harder_is_higher=False, default=1, same_task=True,
             description="Input/output examples shown in the statement (same problem, same tests)."),
    )

    def __init__(self, sandbox: SandboxConfig | None = None, cache_dir: str | Path = ".cache/env/codeio") -> None:
        super().__init__(sandbox)
        self.cache_dir = Path(cache_dir)
        self._built: dict[str, tuple[list[str], list[str]]] = {}
        self._entry_of_seed: dict[int, CodeIOEntry] = {}
        self._build_lock = threading.Lock()

    def private_paths(self) -> list[str]:
        """The working directory and the test cache (`cache_dir`, made if missing): the ground-truth
        outputs are there, and a program that read them would win without solving its problem."""
        self.cache_dir.mkdir(parents=True, exist_ok=True)
        return [*super().private_paths(), str(self.cache_dir.resolve())]

    def build(self, entry: CodeIOEntry) -> Built:
        """The tests of ``entry`` (from the cache, else built in the sandbox and cached), or why it is not used.

        Raises:
            SandboxError: the sandbox itself failed (nothing is cached then).
        """
        programs = generator_program(entry, MAX_EXAMPLES + TESTS) + "\x1f" + reference_program(entry)
        path = self.cache_dir / f"{hashlib.sha256(programs.encode()).hexdigest()[:24]}.json"
        try:
            stored = json.loads(path.read_text())
            return stored["unused"] if "unused" in stored else (stored["inputs"], stored["outputs"])
        except (OSError, ValueError, KeyError, TypeError):
            pass
        built = self._run(entry)
        self.cache_dir.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.{threading.get_ident()}.tmp")
        tmp.write_text(json.dumps({"unused": built} if isinstance(built, str)
                                  else {"problem_id": entry.problem_id, "inputs": built[0], "outputs": built[1]}))
        os.replace(tmp, path)
        return built

    def _run(self, entry: CodeIOEntry) -> Built:
        """Run the generator twice, then the reference twice on each input, all in the sandbox."""
        count = MAX_EXAMPLES + TESTS
        gen = generator_program(entry, count)
        first, second = self.sandbox.run_many([Job(gen, ""), Job(gen, "")])
        if not first.ok:
            return f"its input generator ended {first.verdict.value} ({first.detail})"
        inputs = first.stdout.splitlines()
        if second.stdout != first.stdout:
            return "its input generator drew other inputs the second time"
        if len(inputs) != count:
            return f"its input generator printed {len(inputs)} lines, not {count}"
        if max(len(i) for i in inputs) > MAX_IO_CHARS:
            return f"an input is longer than {MAX_IO_CHARS} characters"
        ref = reference_program(entry)
        runs = self.sandbox.run_many([Job(ref, i + "\n") for i in inputs] * 2)
        for k, result in enumerate(runs[:count]):
            if not result.ok:
                return f"its reference ended {result.verdict.value} ({result.detail}) on input {k}"
        outputs = [r.stdout.strip() for r in runs[:count]]
        if outputs != [r.stdout.strip() for r in runs[count:]]:
            return "its reference printed other outputs the second time"
        if any(not o or "\n" in o or len(o) > MAX_IO_CHARS for o in outputs):
            return f"an output is empty, more than one line or longer than {MAX_IO_CHARS} characters"
        return inputs, outputs

    def entry(self, seed: int) -> tuple[CodeIOEntry, tuple[list[str], list[str]]]:
        """The problem a task seed plays and its tests: entry ``derive_seed("codeio", seed, k) mod n`` of
        `load_entries` for the first k = 0, 1, ... that gives a usable one.

        Raises:
            InvalidArgumentError: `MAX_SKIPS` problems from there on are all unusable.
            SandboxError: the sandbox itself failed.
        """
        with self._build_lock:
            known = self._entry_of_seed.get(seed)
            if known is not None:
                return known, self._built[known.problem_id]
            entries = load_entries()
            reasons = []
            for skip in range(MAX_SKIPS):
                candidate = entries[derive_seed(self.name, int(seed), skip) % len(entries)]
                built = self._built.get(candidate.problem_id) or self.build(candidate)
                if isinstance(built, str):
                    reasons.append(f"{candidate.problem_id}: {built}")
                    continue
                self._built[candidate.problem_id] = built
                self._entry_of_seed[seed] = candidate
                return candidate, built
        raise InvalidArgumentError(f"codeio: none of the {MAX_SKIPS} problems from seed {seed} on is usable "
                                   f"(first: {reasons[0]})")

    def problem(self, spec: TaskSpec) -> CodeProblem:
        """The problem of ``spec``: a written one by its seed, else the CodeI/O problem of its seed with
        knob ``examples`` of its tests shown.

        Raises:
            InvalidArgumentError: bad knobs, a written problem not loaded here, or no usable problem (`entry`).
        """
        if is_written(spec.seed):
            return super().problem(spec)
        self.validate(spec)
        entry, (inputs, outputs) = self.entry(spec.seed)
        return problem_from_runs(entry, inputs, outputs, int(spec.knobs.get("examples", 1)))

    def prepare(self, spec: TaskSpec) -> None:
        """Build (or load) the task's tests off the request path."""
        self.problem(spec)

    def instance_key(self, spec: TaskSpec) -> str:
        """``codeio:<problem id>``: the problem's content (its description's hash), whatever the seed or
        the examples shown; for a written problem its content's key (`code_problems.written_key`).

        Raises:
            InvalidArgumentError: as `problem`.
        """
        if is_written(spec.seed):
            return super().instance_key(spec)
        return f"{self.name}:{self.problem(spec).key}"

    def oracle_plan_length(self, spec: TaskSpec) -> int | None:
        """1: an answer is one program, and every served problem's reference passes its tests (they are
        its own outputs, reproduced twice; written problems: checked when accepted).

        Raises:
            InvalidArgumentError: as `problem`.
        """
        self.problem(spec)
        return 1
