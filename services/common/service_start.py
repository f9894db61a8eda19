"""Start a service process and wait until it serves: the one way the launcher, the tests and the
scripts do it.

A service runs as ``python -m services.<module> --config FILE`` (as Kubernetes runs it), its
stdout and stderr appended to a log file. It serves once its gRPC health check
(`grpc_runtime.check_health_sync`) answers SERVING; a process that exits first fails the wait with
its exit code and the tail of its log.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from services.common.errors import ServiceFailedError
from services.common.grpc_runtime import check_health_sync
from services.common.parent_watch import child_env

__all__ = ["Started", "exited_error", "start_service", "wait_serving"]

LOG_TAIL_LINES = 15
"""Lines of a service's log quoted when it exits before serving."""


def start_service(module: str, config_path: Path, log_path: Path, detached: bool = False) -> subprocess.Popen[bytes]:
    """Start ``python -m services.<module> --config config_path``, output appended to ``log_path``.

    ``detached``: in its own session (a terminal's Ctrl-C reaches only the parent) and SIGTERMed
    when this process exits (the service watches it: `parent_watch`), as the launcher runs its
    services. No `preexec_fn`: the child is spawned without ``fork()``, so gRPC's fork handlers never
    run (one hung a run's launcher).
    """
    return subprocess.Popen([sys.executable, "-m", f"services.{module}", "--config", str(config_path)],
                            stdout=open(log_path, "ab"), stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                            start_new_session=detached, env=child_env() if detached else None)


@dataclass(frozen=True)
class Started:
    """A started service: its name, gRPC ``host:port``, process and log file."""

    name: str
    address: str
    proc: subprocess.Popen[bytes]
    log_path: Path


def exited_error(name: str, proc: subprocess.Popen[bytes], log_path: Path, why: str = "") -> ServiceFailedError | None:
    """The error for a service process that has exited (its code, ``why`` and the last lines of its
    log), or None while it runs."""
    code = proc.poll()
    if code is None:
        return None
    tail = log_path.read_text(errors="replace").splitlines()[-LOG_TAIL_LINES:] if log_path.exists() else []
    return ServiceFailedError(f"service {name} exited with code {code}{why}; log {log_path}:\n"
                              + "\n".join(f"  {line}" for line in tail))


def wait_serving(services: Sequence[Started], timeout_s: float, probe_timeout_s: float = 1.0,
                 on_pending: Callable[[list[str]], None] | None = None, where: str = "") -> None:
    """Wait until every service's health check answers SERVING, probing every 0.1 s;
    ``on_pending`` is called with the names still waited for whenever one becomes ready.

    Raises:
        ServiceFailedError: a process exited first (`exited_error`), or ``timeout_s`` seconds passed
            (``where`` is added to the message, e.g. where the logs are).
    """
    deadline = time.monotonic() + timeout_s
    pending = {s.name: s for s in services}
    while pending:
        for name, svc in list(pending.items()):
            error = exited_error(svc.name, svc.proc, svc.log_path)
            if error is not None:
                raise error
            if check_health_sync(svc.address, timeout_s=probe_timeout_s) == "SERVING":
                del pending[name]
                if on_pending is not None:
                    on_pending(list(pending))
        if pending and time.monotonic() > deadline:
            raise ServiceFailedError(f"not SERVING after {timeout_s} s: {', '.join(pending)}{where}")
        if pending:
            time.sleep(0.1)
