"""The sandbox: a pool of pre-started workers that run model-written programs under limits."""

from __future__ import annotations

import asyncio
import fcntl
import math
import os
import queue
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import IO

from services.common.config.sandbox import SandboxConfig
from services.common.sandbox import worker as protocol
from services.common.sandbox.errors import SandboxError, SandboxStartError
from services.common.sandbox.launch import WORKER_PATH, base_python, find_bwrap, refuse_fork, require_root, worker_command
from services.common.sandbox.results import RunResult, classify

__all__ = ["Job", "Sandbox"]

REPLY_GRACE_S = 10.0
"""Seconds past a run's timeout after which a silent worker counts as lost (its cleanup takes far less)."""
LOCK_DIR = os.path.join(tempfile.gettempdir(), "rlanything-sandbox-uids")
_SPAWNER = ThreadPoolExecutor(max_workers=1, thread_name_prefix="sandbox-spawner")
"""The one thread that starts every worker process. A worker dies with its parent (bwrap's
--die-with-parent, the worker's own parent-death signal), and Linux sends that signal when the *thread*
that forked it exits: a worker started from a short-lived thread (a run that replaced a lost worker,
an asyncio default executor's thread) would die with it. This thread lives as long as the process."""


@dataclass(frozen=True)
class Job:
    """One program for :meth:`Sandbox.run_many`: its source, its standard input, its wall-clock limit
    in seconds (None: the config's ``timeout_s``)."""

    program: str
    stdin: str = ""
    timeout_s: float | None = None


class _Worker:
    """One worker process and the uid it runs programs as (held under a lock file while in use)."""

    def __init__(self, config: SandboxConfig, uid: int, lock_fd: int, host_netns: int, bwrap: str | None) -> None:
        self.config = config
        self.uid = uid
        self.lock_fd = lock_fd
        self.command = worker_command(config, uid, host_netns, bwrap)
        self.proc: subprocess.Popen[bytes] | None = None
        self.stderr: IO[bytes] | None = None
        self.inner: list[int] = []
        self.start()

    def start(self) -> None:
        """Start the process and wait for its ready report; raises SandboxStartError with its reason."""
        if self.stderr is not None:
            self.stderr.close()
        self.stderr = tempfile.TemporaryFile()  # the worker's own diagnostics (bwrap's, a traceback)
        self.proc = _SPAWNER.submit(subprocess.Popen, self.command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                    stderr=self.stderr, env={"LANG": "C.UTF-8"}, start_new_session=True,
                                    close_fds=True).result()
        assert self.proc.stdout is not None
        try:
            ready = protocol.read_message(self.proc.stdout.fileno(), time.monotonic() + self.config.start_timeout_s)
        except (TimeoutError, EOFError, ValueError) as error:
            self.stop()
            raise SandboxStartError(f"sandbox worker (isolation {self.config.isolation}) did not start: {error}"
                                    f"{self.diagnostics()}") from error
        if ready is None or not ready.get("ready"):
            code = self.stop()
            reason = ready.get("error") if ready else f"exited with status {code} before reporting"
            raise SandboxStartError(f"sandbox isolation {self.config.isolation!r} cannot be set up: {reason}"
                                    f"{self.diagnostics()}")
        self.pid = int(ready["pid"]) if self.config.isolation == "fork" else self.proc.pid
        # bwrap's own child (PID 1 of the sandbox's namespace): when bwrap dies first, it is re-parented to
        # the nearest reaper, possibly this process (a pod's PID 1), and reaped in stop()
        self.inner = _children_of(self.proc.pid)

    def diagnostics(self) -> str:
        """The last 2000 characters the worker wrote to its stderr, as a suffix for an error message."""
        if self.stderr is None:
            return ""
        self.stderr.seek(0, os.SEEK_END)
        size = self.stderr.tell()
        self.stderr.seek(max(0, size - 2000))
        text = self.stderr.read().decode("utf-8", "replace").strip()
        return f" (worker stderr: {text})" if text else ""

    def stop(self, grace_s: float = 0.0) -> int | None:
        """Stop the worker: end of input first (an idle worker exits at once, its runs reaped) when
        ``grace_s`` > 0, then SIGKILL to its session (bubblewrap takes its PID namespace down with it); then
        every process still running as its uid is killed (a run's orphans when the worker died mid-run)."""
        if self.proc is None:
            return None
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        try:
            code: int | None = self.proc.wait(grace_s) if grace_s > 0 else None
        except subprocess.TimeoutExpired:
            code = None
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        if self.proc.stdout is not None:
            self.proc.stdout.close()
        code = self.proc.wait() if code is None else code
        for pid in self.inner:
            _reap_orphan(pid, time.monotonic() + 2.0)
        self.inner = []
        self.proc = None
        subprocess.run([base_python(), "-I", "-S", WORKER_PATH, "--kill-uid", str(self.uid)], env={}, check=True,
                       timeout=30)
        return code

    def execute(self, job: dict) -> dict:
        """Send one job and wait for its raw result. Raises SandboxError when the worker is lost."""
        assert self.proc is not None and self.proc.stdin is not None and self.proc.stdout is not None
        try:
            protocol.write_message(self.proc.stdin.fileno(), job)
            reply = protocol.read_message(self.proc.stdout.fileno(),
                                          time.monotonic() + job["timeout_s"] + REPLY_GRACE_S)
        except (OSError, TimeoutError, EOFError, ValueError) as error:
            raise SandboxError(f"sandbox worker for uid {self.uid} lost: {error}{self.diagnostics()}") from error
        if reply is None:
            raise SandboxError(f"sandbox worker for uid {self.uid} exited{self.diagnostics()}")
        if "fault" in reply:
            raise SandboxError(f"sandbox worker for uid {self.uid} failed: {reply['fault']}{self.diagnostics()}")
        return reply


def _children_of(pid: int) -> list[int]:
    """Process ids whose parent is ``pid`` (from /proc; [] when it has none or is gone)."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat", "rb") as f:
                    if int(f.read().rsplit(b")", 1)[1].split()[1]) == pid:
                        found.append(int(entry))
            except (OSError, IndexError, ValueError):
                continue
    return found


def _reap_orphan(pid: int, deadline: float) -> None:
    """Wait (until ``deadline``, time.monotonic seconds) for ``pid`` to be gone: reaped here if it became
    this process's child (its parent died and this process is the reaper, as a pod's PID 1 is), else by
    whoever reaps it."""
    while time.monotonic() < deadline:
        try:
            if os.waitpid(pid, os.WNOHANG)[0] == pid:
                return
        except ChildProcessError:
            if not os.path.exists(f"/proc/{pid}"):
                return
        time.sleep(0.01)


def _take_uids(config: SandboxConfig) -> list[tuple[int, int]]:
    """Lock ``config.workers`` free uids from the configured range: (uid, lock fd) pairs. The locks
    (flock) end with this process, so pools in other processes never share a uid."""
    os.makedirs(LOCK_DIR, mode=0o700, exist_ok=True)
    taken: list[tuple[int, int]] = []
    for uid in range(config.first_uid, config.first_uid + config.uid_count):
        fd = os.open(os.path.join(LOCK_DIR, str(uid)), os.O_CREAT | os.O_RDWR | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            continue
        taken.append((uid, fd))
        if len(taken) == config.workers:
            return taken
    for _, fd in taken:
        os.close(fd)
    raise SandboxStartError(f"sandbox: fewer than {config.workers} free uids in [{config.first_uid}, "
                            f"{config.first_uid + config.uid_count}) (sandbox.uid_base, sandbox.uid_count)")


class Sandbox:
    """Runs untrusted Python programs, each in a forked child of a pre-started worker, under the limits
    of ``config`` (see :class:`SandboxConfig` and docs/sandbox.md for what is and is not guaranteed).

    Thread-safe: up to ``config.workers`` runs go on at once, more wait for a free worker. Raises
    SandboxStartError at construction when the configured isolation cannot be set up (never falls back).
    Use as a context manager or call :meth:`close`."""

    def __init__(self, config: SandboxConfig | None = None) -> None:
        self.config = config or SandboxConfig()
        require_root()
        if self.config.isolation == "fork":
            refuse_fork()
        bwrap = find_bwrap(self.config.bwrap_path) if self.config.isolation == "bwrap" else None
        host_netns = os.stat("/proc/self/ns/net").st_ino
        self._idle: queue.Queue[_Worker] = queue.Queue()
        self._workers: list[_Worker] = []
        self._closed = False
        self._uids = _take_uids(self.config)
        try:
            for uid, fd in self._uids:
                self._workers.append(_Worker(self.config, uid, fd, host_netns, bwrap))
        except BaseException:
            self.close()
            raise
        for w in self._workers:
            self._idle.put(w)
        self._threads = ThreadPoolExecutor(max_workers=self.config.workers, thread_name_prefix="sandbox")
        self._lock = threading.Lock()

    @property
    def uids(self) -> list[int]:
        """The uids this pool's programs run as (one per worker)."""
        return [uid for uid, _ in self._uids]

    @property
    def worker_pids(self) -> list[int]:
        """Process ids of the workers as the host sees them (bwrap's process in bwrap isolation)."""
        return [w.proc.pid for w in self._workers if w.proc is not None]

    def run(self, program: str, stdin: str = "", timeout_s: float | None = None) -> RunResult:
        """Run ``program`` (Python source, as ``__main__``) with ``stdin`` as its standard input, stopped
        after ``timeout_s`` wall-clock seconds (default: the config's). Never raises for what the program
        does; raises ValueError for a bad timeout and SandboxError when the sandbox itself fails (the worker
        is then restarted for the next run)."""
        if self._closed:
            raise SandboxError("sandbox is closed")
        timeout = self.config.timeout_s if timeout_s is None else timeout_s
        if not (isinstance(timeout, (int, float)) and 0 < timeout <= 600):
            raise ValueError(f"timeout_s must be in (0, 600] seconds, got {timeout_s!r}")
        cpu_limit = max(1, math.ceil(timeout))
        job = {"program": program, "stdin": stdin, "timeout_s": float(timeout), "cpu_s": cpu_limit,
               "memory_bytes": self.config.memory_mb << 20,
               "address_space_bytes": self.config.process_address_space_mb << 20,
               "max_processes": self.config.max_processes,
               "max_file_bytes": self.config.max_file_mb << 20,
               "max_output_bytes": self.config.max_output_bytes}
        w = self._idle.get()
        try:
            raw = w.execute(job)
        except SandboxError:
            self._restart(w)
            raise
        finally:
            self._idle.put(w)
        try:
            verdict, detail = classify(
                exit_code=raw["exit_code"], signal_number=raw["signal"], timed_out=raw["timed_out"],
                output_exceeded=raw["output_exceeded"], cpu_s=raw["cpu_s"], cpu_limit_s=cpu_limit,
                timeout_s=timeout, max_output_bytes=self.config.max_output_bytes,
                memory_exceeded=raw["memory_exceeded"], memory_limit_bytes=self.config.memory_mb << 20,
                process_limit_hit=raw["process_limit_hit"], max_processes=self.config.max_processes)
        except ValueError as error:
            raise SandboxError(f"sandbox worker for uid {w.uid}: {error}") from error
        return RunResult(stdout=raw["stdout"], stderr=raw["stderr"], exit_code=raw["exit_code"],
                         signal=raw["signal"], verdict=verdict, detail=detail, wall_s=raw["wall_s"],
                         cpu_s=raw["cpu_s"], stdout_truncated=raw["stdout_truncated"],
                         stderr_truncated=raw["stderr_truncated"], peak_memory_bytes=raw["peak_memory_bytes"])

    def run_many(self, jobs: Iterable[Job]) -> list[RunResult]:
        """Run every job, up to ``config.workers`` at once; results in the order of ``jobs``. Raises as
        :meth:`run` does (the first failure)."""
        batch: Sequence[Job] = list(jobs)
        futures = [self._threads.submit(self.run, j.program, j.stdin, j.timeout_s) for j in batch]
        return [f.result() for f in futures]

    async def run_async(self, program: str, stdin: str = "", timeout_s: float | None = None) -> RunResult:
        """:meth:`run` in a thread, for asyncio services (the event loop keeps serving meanwhile)."""
        return await asyncio.get_running_loop().run_in_executor(self._threads, self.run, program, stdin, timeout_s)

    async def run_many_async(self, jobs: Iterable[Job]) -> list[RunResult]:
        """:meth:`run_many` for asyncio services."""
        return list(await asyncio.gather(*(self.run_async(j.program, j.stdin, j.timeout_s) for j in jobs)))

    def _restart(self, w: _Worker) -> None:
        w.stop()
        try:
            w.start()
        except SandboxStartError:
            self._closed = True
            raise

    def close(self) -> None:
        """Stop every worker (their runs' processes die with them) and release the uids."""
        self._closed = True
        for w in self._workers:
            w.stop(grace_s=2.0)
            if w.stderr is not None:
                w.stderr.close()
        if hasattr(self, "_threads"):
            self._threads.shutdown(wait=False)
        for _, fd in self._uids:
            os.close(fd)
        self._uids = []

    def __enter__(self) -> "Sandbox":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
