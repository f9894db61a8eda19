"""A child process that ends with the process that started it, without a `preexec_fn`.

A `preexec_fn` makes CPython start the child with a real ``fork()``, which runs gRPC's
``pthread_atfork`` handlers and can block while gRPC threads are busy (grpc/grpc#37259: a run's
launcher hung there). Without one, CPython starts children with ``vfork``/``posix_spawn`` and no
fork handlers run. So the child arranges its own end:

* a service (Python) started with ``RLA_PARENT_PID`` in its environment watches that process with a
  pidfd (`watch_parent`): when the *process* exits (not merely the thread that spawned the child,
  which is when ``PR_SET_PDEATHSIG`` fires) the service gets SIGTERM and stops as on Ctrl-C; if the
  parent is already gone when the watch starts, it stops at once;
* a program we cannot change (``nats-server``) is started through this module as a small exec
  wrapper (`wrap_command`): it sets ``PR_SET_PDEATHSIG`` (kept across ``execve``), checks that its
  parent is still the process that started it, then execs the program under the same pid.

Source: Linux ``pidfd_open(2)`` (``os.pidfd_open``) and ``prctl(2)``.
"""

from __future__ import annotations

import ctypes
import os
import select
import signal
import sys
import threading
import time

__all__ = ["PARENT_ENV", "child_env", "watch_parent", "wrap_command"]

PARENT_ENV = "RLA_PARENT_PID"
_PR_SET_PDEATHSIG = 1


def child_env(base: dict[str, str] | None = None) -> dict[str, str]:
    """The environment for a child that must end with this process (``RLA_PARENT_PID`` = this pid)."""
    return {**(os.environ if base is None else base), PARENT_ENV: str(os.getpid())}


def _parent_gone(parent: int) -> None:
    os.kill(os.getpid(), signal.SIGTERM)


def watch_parent(parent: int | None = None, poll_s: float = 1.0) -> threading.Thread | None:
    """Start a daemon thread that SIGTERMs this process once process ``parent`` (default: the pid in
    ``RLA_PARENT_PID``; nothing when unset) has exited; returns it. With no pidfd support the thread
    polls ``os.getppid()`` every ``poll_s`` seconds instead."""
    if parent is None:
        value = os.environ.get(PARENT_ENV, "")
        if not value.isdigit():
            return None
        parent = int(value)
    try:
        fd = os.pidfd_open(parent)
    except ProcessLookupError:  # it exited before we looked
        _parent_gone(parent)
        return None
    except (OSError, AttributeError):
        fd = -1

    def wait() -> None:
        if fd >= 0:
            select.select([fd], [], [])  # readable once the process has exited
            os.close(fd)
        else:
            while os.getppid() == parent:
                time.sleep(poll_s)
        _parent_gone(parent)

    thread = threading.Thread(target=wait, name="parent-watch", daemon=True)
    thread.start()
    return thread


def wrap_command(cmd: list[str]) -> list[str]:
    """``cmd`` run through this module's exec wrapper: it dies with this process (SIGTERM)."""
    return [sys.executable, "-m", "services.common.parent_watch", str(os.getpid()), *cmd]


def _exec_wrapped(argv: list[str]) -> None:
    """``python -m services.common.parent_watch PARENT_PID PROGRAM ARGS...``."""
    parent, program = int(argv[0]), argv[1:]
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
    except OSError:
        pass
    if os.getppid() != parent:  # the parent died before the signal was armed
        raise SystemExit(0)
    os.execv(program[0], program)


if __name__ == "__main__":
    _exec_wrapped(sys.argv[1:])
