"""What one sandboxed run returns, and how the raw facts of its end become a verdict (pure)."""

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
    """How a run ended: ``ok`` (exit status 0), ``timeout`` (wall-clock or CPU-time limit), ``memory``
    (the address-space limit: MemoryError), ``crashed`` (non-zero exit status, an uncaught exception,
    a fatal signal such as SIGSEGV), ``killed`` (a kill signal the sandbox did not send for a limit, e.g.
    the program killing its own group, or the sandbox stopping it because an output passed its cap)."""

    OK = "ok"
    TIMEOUT = "timeout"
    MEMORY = "memory"
    CRASHED = "crashed"
    KILLED = "killed"


@dataclass(frozen=True)
class RunResult:
    """One program run in the sandbox. ``stdout``/``stderr`` are decoded as UTF-8 (invalid bytes replaced)
    and cut at the output cap (``*_truncated`` says so); ``exit_code`` is None when a signal ended the
    run (``signal`` then names it); ``wall_s`` is seconds from start to end (or to the timeout), ``cpu_s``
    the user + system CPU seconds of the program and every process it started; ``detail`` says in words
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
             cpu_s: float, cpu_limit_s: float, timeout_s: float, max_output_bytes: int) -> tuple[Verdict, str]:
    """The verdict and its reason from the raw facts a worker reports, checked in this order: an output
    over ``max_output_bytes`` (killed), the wall clock past ``timeout_s`` (timeout), SIGXCPU or a SIGKILL
    after ``cpu_limit_s`` CPU seconds (timeout: RLIMIT_CPU's soft then hard limit), the MemoryError exit
    status (memory), any other signal (killed for SIGKILL/SIGTERM/SIGINT/SIGHUP/SIGQUIT, else crashed),
    a non-zero exit status (crashed), else ok. Raises ValueError for the set-up-failed status, which is a
    sandbox fault and not the program's."""
    if output_exceeded is not None:
        return Verdict.KILLED, f"{output_exceeded} passed the output cap of {max_output_bytes} bytes"
    if timed_out:
        return Verdict.TIMEOUT, f"wall-clock limit of {timeout_s:g} s reached"
    if signal_number == signal.SIGXCPU or (signal_number == signal.SIGKILL and cpu_s >= cpu_limit_s):
        return Verdict.TIMEOUT, f"CPU-time limit of {cpu_limit_s:g} s reached"
    if exit_code == MEMORY_EXIT:
        return Verdict.MEMORY, "MemoryError: the address-space limit was reached"
    if signal_number is not None:
        name = _signal_name(signal_number)
        if signal_number in (signal.SIGKILL, signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT):
            return Verdict.KILLED, f"ended by {name}"
        return Verdict.CRASHED, f"ended by {name}"
    if exit_code == SETUP_EXIT:
        raise ValueError(f"sandbox set-up failed in the child (exit status {SETUP_EXIT})")
    if exit_code:
        return Verdict.CRASHED, f"exit status {exit_code}"
    return Verdict.OK, "exit status 0"
