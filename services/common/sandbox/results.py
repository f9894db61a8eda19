"""What one sandboxed run returns, and how the raw facts of its end become a verdict (pure).

The verdict classes are those of programming-contest judges (and SandboxFusion's): ``OK``, ``WA``,
``TLE``, ``MLE``, ``RE``, ``OLE``, and ``INFRA`` for a fault of the sandbox itself. A run in the sandbox
ends in one of ``OK``/``TLE``/``MLE``/``RE``/``OLE`` (:func:`classify`); ``WA`` is given by a checker
comparing an ``OK`` run's output with the expected one (`services.common.sandbox.checkers`), and
``INFRA`` by the caller when the sandbox raised `SandboxError` (never a reward: the step is retried).
"""

from __future__ import annotations

import enum
import signal
from dataclasses import dataclass

__all__ = ["Verdict", "RunResult", "classify", "MEMORY_EXIT", "SETUP_EXIT"]

MEMORY_EXIT = 197
"""Exit status the sandbox child uses when the program raised MemoryError (worker.MEMORY_EXIT)."""
SETUP_EXIT = 198
"""Exit status of a child whose sandbox set-up failed before the program ran (worker.SETUP_EXIT)."""


class Verdict(str, enum.Enum):
    """How a run (or a test) ended.

    ``OK``: exit status 0 within every limit (and, for a test, the right output); ``WA``: exit status 0,
    wrong output (a checker's verdict, not :func:`classify`'s); ``TLE``: the wall-clock or CPU-time limit;
    ``MLE``: the run's memory (the sum of its processes' resident sets) past the limit, or a
    ``MemoryError`` at the per-process address-space limit; ``RE``: a non-zero exit status, an uncaught
    exception, a fatal signal, or the process limit reached; ``OLE``: stdout or stderr past the output cap;
    ``INFRA``: the sandbox itself failed (the program's fault is not known)."""

    OK = "OK"
    WA = "WA"
    TLE = "TLE"
    MLE = "MLE"
    RE = "RE"
    OLE = "OLE"
    INFRA = "INFRA"


@dataclass(frozen=True)
class RunResult:
    """One program run in the sandbox. ``stdout``/``stderr`` are decoded as UTF-8 (invalid bytes replaced)
    and cut at the output cap (``*_truncated`` says so); ``exit_code`` is None when a signal ended the
    run (``signal`` then names it); ``wall_s`` is seconds from start to end (or to the timeout), ``cpu_s``
    the user + system CPU seconds of the program and every process it started; ``peak_memory_bytes``
    the largest sum of the run's resident sets the sandbox saw (sampled, bytes); ``detail`` says in words
    why the verdict is what it is."""

    stdout: str
    stderr: str
    exit_code: int | None
    signal: int | None
    verdict: Verdict
    detail: str
    wall_s: float
    cpu_s: float
    stdout_truncated: bool = False
    stderr_truncated: bool = False
    peak_memory_bytes: int = 0

    @property
    def ok(self) -> bool:
        """True when the program exited with status 0 within every limit."""
        return self.verdict is Verdict.OK


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def classify(*, exit_code: int | None, signal_number: int | None, timed_out: bool, output_exceeded: str | None,
             cpu_s: float, cpu_limit_s: float, timeout_s: float, max_output_bytes: int,
             memory_exceeded: bool = False, memory_limit_bytes: int = 0, process_limit_hit: bool = False,
             max_processes: int = 0) -> tuple[Verdict, str]:
    """The verdict and its reason from the raw facts a worker reports, checked in this order: an output
    over ``max_output_bytes`` (OLE); the process limit reached during a run that did not end cleanly
    (``process_limit_hit``: RE, e.g. a fork bomb, or more threads than ``max_processes``: the cause,
    whatever stopped it); the run's summed memory past ``memory_limit_bytes`` (``memory_exceeded``,
    MLE); the MemoryError exit status (MLE); the wall clock past ``timeout_s`` (TLE); SIGXCPU or a SIGKILL after
    ``cpu_limit_s`` CPU seconds (TLE: RLIMIT_CPU's soft then hard limit); any other signal (RE, naming
    it); a non-zero exit status (RE); else OK. A run that exited 0 within the time and output limits is
    OK even if it touched the process limit on the way. Raises ValueError for the set-up-failed status,
    which is a sandbox fault and not the program's."""
    if output_exceeded is not None:
        return Verdict.OLE, f"{output_exceeded} passed the output cap of {max_output_bytes} bytes"
    clean = exit_code == 0 and not timed_out and not memory_exceeded
    if process_limit_hit and not clean:
        return Verdict.RE, f"the process limit of {max_processes} (processes and threads) was reached"
    if memory_exceeded:
        return Verdict.MLE, f"the run's processes held more than {memory_limit_bytes >> 20} MiB resident"
    if exit_code == MEMORY_EXIT:
        return Verdict.MLE, "MemoryError: the address-space limit of a process was reached"
    if timed_out:
        return Verdict.TLE, f"wall-clock limit of {timeout_s:g} s reached"
    if signal_number == signal.SIGXCPU or (signal_number == signal.SIGKILL and cpu_s >= cpu_limit_s):
        return Verdict.TLE, f"CPU-time limit of {cpu_limit_s:g} s reached"
    if signal_number is not None:
        return Verdict.RE, f"ended by {_signal_name(signal_number)}"
    if exit_code == SETUP_EXIT:
        raise ValueError(f"sandbox set-up failed in the child (exit status {SETUP_EXIT})")
    if exit_code:
        return Verdict.RE, f"exit status {exit_code}"
    return Verdict.OK, "exit status 0"
