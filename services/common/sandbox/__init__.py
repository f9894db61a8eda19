"""The sandbox for model-written code: every path that runs a program a model wrote goes through it.

``Sandbox(config).run(program, stdin, timeout_s) -> RunResult`` (and ``run_many``, ``run_async``);
``outputs_match(actual, expected)`` compares after the documented normalisation. Modules: ``pool``
(the pool of workers), ``worker`` (the worker process, standard library only), ``launch`` (worker
command lines, bubblewrap's options), ``results`` (verdicts, pure), ``compare`` (normalisation, pure), ``checkers`` (exact, token, float, pure),
``errors``. What is and is not guaranteed: docs/sandbox.md.
"""

from services.common.sandbox.checkers import Checker, judge_output
from services.common.sandbox.compare import normalise_output, outputs_match
from services.common.sandbox.errors import SandboxError, SandboxStartError
from services.common.sandbox.pool import Job, Sandbox
from services.common.sandbox.results import RunResult, Verdict, classify

__all__ = ["Sandbox", "Job", "RunResult", "Verdict", "classify", "normalise_output", "outputs_match", "Checker", "judge_output",
           "SandboxError", "SandboxStartError"]
