"""`rlanything up`: the embedded system on one machine, each service in its own process.

Starts `nats-server -js` on a free loopback port with a temporary store (or, with
``launcher.nats_cluster_size`` 3 or 5, a JetStream cluster of that many servers joined by routes,
each on its own free ports and store, and each node supervised like a service), writes the resolved
config (with the chosen ports) into the run directory, starts `python -m services.<name>
--config runs/<id>/config.yaml` for each service with its output in `runs/<id>/logs/`, waits for
every gRPC health check to say SERVING, then supervises: a service (or the NATS server) that
exits is started again with the same command, config and ports after a back-off, within a
restart budget (`launcher.restart`, `services.run.supervision`); JetStream redelivers the work it
had not acknowledged. A service that runs but answers no health check for
``launcher.restart.unresponsive_s`` seconds (frozen) is stopped (SIGTERM, SIGKILL after
``launcher.stop_timeout_s``) and, once its process is gone, restarted the same way. With
``fail_fast`` (or ``launcher.restart.enabled: false``) the first exit stops everything with a
non-zero code. SIGINT/SIGTERM stops everything cleanly (SIGTERM, wait, SIGKILL).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType

from rich.console import Console
from rich.table import Table

from services.common.config import RunConfig, dump_config
from services.common.errors import ConfigError, ServiceFailedError
from services.common.grpc_runtime import check_health_sync
from services.common.nats_server import NatsCluster, NatsServer, free_port
from services.common.service_start import Started, exited_error, start_service, wait_serving
from services.run.sources import fill_tiny_sources
from services.run.supervision import HealthWatch, Restart, RestartBook

__all__ = ["Launcher", "ServiceProcess", "new_run_dir", "REPLICATED"]

REPLICATED = {"env": "env", "rollout": "policy", "judge": "reward"}
"""Roles ``launcher.replicas`` can run several processes of → the service each is a role of."""

def new_run_dir(runs_dir: str | Path, name: str) -> Path:
    """Create ``runs_dir/<name>-<UTC timestamp>/`` (with a ``logs/`` sub-folder) and return it."""
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
    path = Path(runs_dir) / f"{name}-{stamp}"
    suffix = 1
    while path.exists():
        suffix += 1
        path = Path(runs_dir) / f"{name}-{stamp}-{suffix}"
    (path / "logs").mkdir(parents=True)
    return path


@dataclass
class ServiceProcess:
    """One launched service process."""

    name: str
    address: str
    """gRPC ``host:port``."""
    metrics_port: int
    log_path: Path
    proc: subprocess.Popen[bytes]
    watch: HealthWatch | None = None
    """Its health answers (None until the launcher saw it SERVING once after `start`)."""
    next_check_s: float = 0.0
    stopping: tuple[float, str] | None = field(default=None)
    """(when, why) the launcher sent SIGTERM to this frozen process; SIGKILL follows after stop_timeout_s."""


class Launcher:
    """Starts NATS and the services of ``config.launcher.services``, watches them, stops them."""

    def __init__(self, config: RunConfig, run_dir: Path, console: Console | None = None,
                 persistent_nats: bool = False, fail_fast: bool = False) -> None:
        self.config = config
        self.run_dir = run_dir
        self.persistent_nats = persistent_nats
        """Keep the JetStream store in ``run_dir/nats`` (so `rlanything run --resume` finds its state)."""
        self.console = console or Console(stderr=True)
        self.cluster: NatsCluster | None = None
        """The NATS server(s): one node, or the ``launcher.nats_cluster_size`` nodes of a cluster."""
        self.services: list[ServiceProcess] = []
        self._stop_requested: int | None = None
        policy = config.launcher.restart.model_copy(update={"enabled": False} if fail_fast else {})
        self.book = RestartBook(policy)
        """Every restart so far (`RestartBook.restarts`), for the progress display and the report."""
        self._config_path: Path | None = None
        self._config_paths: dict[str, Path] = {}
        """Config files of processes that do not read the run's (the shadow judge, role replicas)."""
        self._modules: dict[str, str] = {"shadow": "reward"}
        """Process name → the service module it runs, where they differ (``python -m services.<module>``)."""

    @property
    def nats(self) -> NatsServer | None:
        """The first NATS node (the only one unless ``launcher.nats_cluster_size`` > 1); None before `start_nats`."""
        return self.cluster.nodes[0] if self.cluster else None

    @property
    def nats_url(self) -> str:
        """Every NATS node's URL, comma-separated (what the services get as ``nats.url``)."""
        assert self.cluster is not None, "start_nats() first"
        return self.cluster.url

    def _node_name(self, node: NatsServer) -> str:
        """``nats`` for a single server, ``nats-n<i>`` for a cluster's node (restarts, logs, the manifest)."""
        return f"nats-{node.server_name}" if node.server_name else "nats"

    def start(self) -> None:
        """Start NATS and every service, then wait until all report SERVING.

        Raises:
            ServiceFailedError: a process exited or was not healthy within ``health_timeout_s``.
        """
        self.start_nats()
        self.start_services()

    def start_nats(self) -> str:
        """Start the NATS server, or the nodes of a cluster (``launcher.nats_cluster_size``); returns the
        URL(s) the services connect with (comma-separated for a cluster).

        Raises:
            ConfigError: ``nats.stream_replicas`` is larger than ``launcher.nats_cluster_size`` (JetStream
                could not place the replicas: every stream would fail to be created).
            ServiceFailedError: a node did not start, or the cluster elected no JetStream leader in time.
        """
        size, replicas = self.config.launcher.nats_cluster_size, self.config.nats.stream_replicas
        if replicas > size:
            raise ConfigError(f"nats.stream_replicas={replicas} is more than launcher.nats_cluster_size={size}: "
                              "a stream cannot have more replicas than the cluster has servers")
        store = self.run_dir / "nats" if self.persistent_nats else None
        self.cluster = NatsCluster(size, store_root=store, log_dir=self.run_dir / "logs",
                                   max_payload=self.config.limits.max_message_bytes,
                                   sync_interval=self.config.launcher.nats_sync_interval).start()
        return self.cluster.url

    def start_services(self) -> None:
        """Write the resolved config and start every service; wait until all report SERVING."""
        assert self.cluster is not None, "start_nats() first"
        fill_tiny_sources(self.config, list(self.config.launcher.services))
        data = self.config.model_dump(mode="json")
        data["nats"]["url"] = self.cluster.url
        for name in self.config.launcher.services:
            server = data[name]["server"]
            server["host"] = "127.0.0.1"
            server["grpc_port"] = server["grpc_port"] or free_port()
            server["metrics_port"] = server["metrics_port"] or free_port()
        self._env_ports: list[tuple[int, int]] = []
        """(gRPC, metrics) ports of the env replicas env-2..N (``launcher.replicas.env``)."""
        if "env" in self.config.launcher.services:  # rollout workers reach the env over gRPC
            self._env_ports = [(free_port(), free_port()) for _ in range(self.config.launcher.replicas.get("env", 1) - 1)]
            addresses = [f"127.0.0.1:{p}" for p in [data["env"]["server"]["grpc_port"]] + [g for g, _ in self._env_ports]]
            if self._env_ports:  # Reset round-robin over every replica; Step to the replica in the session id
                data["env"]["advertise_address"] = addresses[0]
                data["policy"]["rollout"]["env_address"] = "ipv4:" + ",".join(addresses)
            else:
                data["policy"]["rollout"]["env_address"] = addresses[0]
        data["policy"]["checkpoint_dir"] = str(self.run_dir / "checkpoints")
        if "checkpoint_dir" in data["reward"]:
            data["reward"]["checkpoint_dir"] = str(self.run_dir / "checkpoints")
        data["policy"]["openai_port"] = data["policy"]["openai_port"] or free_port()
        data["ingest"]["http_port"] = data["ingest"]["http_port"] or free_port()
        resolved = RunConfig.model_validate(data)
        self.resolved = resolved
        config_path = self.run_dir / "config.yaml"
        config_path.write_text(dump_config(resolved))
        self._config_path = config_path
        for name in self.config.launcher.services:
            server_cfg = getattr(resolved, name).server
            log_path = self.run_dir / "logs" / f"{name}.log"
            self.services.append(ServiceProcess(name, f"127.0.0.1:{server_cfg.grpc_port}",
                                                server_cfg.metrics_port, log_path, self._spawn(name, log_path)))
        if self.config.launcher.shadow_judge:
            self._start_shadow(data)
        self._start_replicas(resolved)
        self._wait_healthy(self.config.launcher.health_timeout_s)
        now = time.monotonic()
        for svc in self.services:
            svc.watch = self._new_watch(now)
            svc.watch.answered(now)
        self._write_manifest()

    def _new_watch(self, started_s: float) -> HealthWatch:
        return HealthWatch(self.book.policy.unresponsive_s, self.config.launcher.health_timeout_s, started_s)

    def _start_shadow(self, data: dict) -> None:
        """Start the shadow judge (``launcher.shadow_judge``) as process ``shadow``: the reward
        service with its own config file (``config.shadow.yaml``) and ports."""
        shadow = self.resolved.shadow_reward()
        if shadow.backend == "llm" and not shadow.model.source:
            shadow.model.source = self.resolved.reward.model.source  # the running judge's starting weights
        shadow.server.host = "127.0.0.1"
        shadow.server.grpc_port, shadow.server.metrics_port = free_port(), free_port()
        path = self.run_dir / "config.shadow.yaml"
        path.write_text(dump_config(RunConfig.model_validate({**data, "reward": shadow.model_dump(mode="json"),
                                                              "launcher": {**data["launcher"], "shadow_judge": {}}})))
        self._config_paths["shadow"] = path
        log_path = self.run_dir / "logs" / "shadow.log"
        self.services.append(ServiceProcess("shadow", f"127.0.0.1:{shadow.server.grpc_port}",
                                            shadow.server.metrics_port, log_path, self._spawn("shadow", log_path)))

    def _start_replicas(self, resolved: RunConfig) -> None:
        """Start the extra processes of ``launcher.replicas``: ``env-<i>`` (env, advertising its own
        address), ``rollout-<i>`` (policy, role rollout) and ``judge-<i>`` (reward, role judge) for
        i = 2..N, each on free gRPC, metrics (and OpenAI) ports, with its own config file beside the run's.

        Raises:
            ConfigError: a role is replicated whose service is not in ``launcher.services``.
        """
        base = resolved.model_dump(mode="json")
        for role, count in sorted(self.config.launcher.replicas.items()):
            module = REPLICATED[role]
            if count > 1 and module not in self.config.launcher.services:
                raise ConfigError(f"launcher.replicas.{role}={count} needs {module} in launcher.services")
            for i in range(2, count + 1):
                name = f"{role}-{i}"
                grpc_port, metrics_port = self._env_ports[i - 2] if module == "env" else (free_port(), free_port())
                section = {**base[module], "server": {**base[module]["server"], "grpc_port": grpc_port,
                                                      "metrics_port": metrics_port}}
                if module == "env":
                    section["advertise_address"] = f"127.0.0.1:{grpc_port}"
                else:
                    section["role"] = role
                if module == "policy":
                    section["openai_port"] = free_port()
                path = self.run_dir / f"config.{name}.yaml"
                path.write_text(dump_config(RunConfig.model_validate({**base, module: section})))
                self._config_paths[name], self._modules[name] = path, module
                log_path = self.run_dir / "logs" / f"{name}.log"
                self.services.append(ServiceProcess(name, f"127.0.0.1:{section['server']['grpc_port']}",
                                                    section["server"]["metrics_port"], log_path,
                                                    self._spawn(name, log_path)))

    def _spawn(self, name: str, log_path: Path) -> subprocess.Popen[bytes]:
        """Start ``python -m services.<module>`` on its config (the shadow judge and a judge replica run
        ``services.reward``, a rollout replica ``services.policy``)."""
        assert self._config_path is not None
        return start_service(self._modules.get(name, name), self._config_paths.get(name, self._config_path),
                             log_path, detached=True)

    def _wait_healthy(self, timeout_s: float) -> None:
        names = [s.name for s in self.services]
        with self.console.status(f"waiting for {', '.join(names)} to be SERVING") as status:
            wait_serving([Started(s.name, s.address, s.proc, s.log_path) for s in self.services], timeout_s,
                         probe_timeout_s=0.5, where=f"; see {self.run_dir / 'logs'}",
                         on_pending=lambda left: status.update(
                             f"waiting for {', '.join(left) or 'nothing'} to be SERVING"))

    def check_alive(self) -> None:
        """Raise `ServiceFailedError` when a service process has exited (no restart)."""
        for svc in self.services:
            self._raise_if_exited(svc)

    def supervise(self, now_s: float | None = None) -> list[Restart]:
        """Start again every exited service (and the NATS server) whose back-off has passed; check the
        health of the running ones and stop a frozen one (`HealthWatch`) so that it is restarted too,
        after its process is gone. The NATS server is watched for exits only.

        Returns the restarts made by this call (also kept in ``self.book``).

        Raises:
            ServiceFailedError: a process exited and the restart policy allows no restart (disabled,
                ``fail_fast``, or its ``max_restarts`` used up).
        """
        now = time.monotonic() if now_s is None else now_s
        made: list[Restart] = []
        for node in self.cluster.nodes if self.cluster else []:
            if node.proc is None or node.proc.poll() is None:
                continue
            code, name = node.proc.returncode, self._node_name(node)
            at = self.book.exited(name, code, now)
            if at is None:
                raise ServiceFailedError(f"nats-server {name} exited with code {code} "
                                         f"(restarts used: {self.book.count(name)}); log {node.log_path}")
            if now >= at:  # same ports, same store: clients reconnect; a cluster node catches up from its peers
                node.start()
                made.append(self._note(self.book.restarted(name, now)))
        for svc in self.services:
            code = svc.proc.poll()  # reaps an exited process: from here on its PID is gone
            if code is None:
                self._check_health(svc, now)
                continue
            cause = svc.stopping[1] if svc.stopping else ""
            at = self.book.exited(svc.name, code, now, cause)
            if at is None:
                self._raise_if_exited(svc, f" (restarts used: {self.book.count(svc.name)})")
            elif now >= at:
                with open(svc.log_path, "ab") as log:
                    log.write(f"--- restarted by the launcher after exit code {code}\n".encode())
                svc.proc = self._spawn(svc.name, svc.log_path)
                svc.watch, svc.stopping, svc.next_check_s = self._new_watch(now), None, 0.0
                made.append(self._note(self.book.restarted(svc.name, now)))
        if made:
            self._write_manifest(quiet=True)
        return made

    def _check_health(self, svc: ServiceProcess, now: float) -> None:
        """One health check of a running service when its period is due; SIGTERM it once it counts as
        frozen, SIGKILL it ``launcher.stop_timeout_s`` seconds later if it is still there."""
        if svc.stopping is not None:
            if now - svc.stopping[0] >= self.config.launcher.stop_timeout_s:
                svc.proc.kill()  # a SIGSTOPped process never acts on SIGTERM
            return
        if svc.watch is None or now < svc.next_check_s:
            return
        policy = self.book.policy
        svc.next_check_s = now + policy.health_period_s
        if check_health_sync(svc.address, timeout_s=policy.health_check_timeout_s) != "UNREACHABLE":
            svc.watch.answered(now)
            return
        reason = svc.watch.frozen(now)
        if reason is None:
            return
        with open(svc.log_path, "ab") as log:
            log.write(f"--- killed by the launcher: {reason}; SIGTERM, then SIGKILL after "
                      f"{self.config.launcher.stop_timeout_s:g} s (launcher.stop_timeout_s)\n".encode())
        self.console.print(f"[yellow]{svc.name} is frozen[/yellow] (pid {svc.proc.pid}): {reason}; stopping it",
                           highlight=False)
        svc.proc.terminate()
        svc.stopping = (now, reason)

    def _window(self) -> str:
        window = self.book.policy.restart_window_s
        return f"{window:g} s" if window else "the run"  # launcher.restart.restart_window_s

    def _note(self, restart: Restart) -> Restart:
        cause = f"; {restart.cause}" if restart.cause else ""
        self.console.print(f"[yellow]restarted {restart.name}[/yellow] after exit code {restart.exit_code} "
                           f"(restart {restart.recent} of {self.book.policy.max_restarts} within "
                           f"{self._window()}{cause})", highlight=False, soft_wrap=True)
        return restart

    def _raise_if_exited(self, svc: ServiceProcess, why: str = "") -> None:
        error = exited_error(svc.name, svc.proc, svc.log_path, why)
        if error is not None:
            raise error

    def endpoints(self) -> dict[str, str]:
        """HTTP endpoints for products: the policy's OpenAI API and the ingest API (when started)."""
        names = {s.name for s in self.services}
        out = {}
        if "policy" in names:
            out["openai"] = f"http://127.0.0.1:{self.resolved.policy.openai_port}/v1"
        if "ingest" in names:
            out["ingest"] = f"http://127.0.0.1:{self.resolved.ingest.http_port}/v1/ingest"
        return out

    def _write_manifest(self, quiet: bool = False) -> None:
        assert self.cluster is not None and self.nats is not None
        manifest = {
            "run_dir": str(self.run_dir),
            "nats_url": self.cluster.url,
            "nats_pid": self.nats.proc.pid if self.nats.proc else None,
            "nats_nodes": {self._node_name(n): {"url": n.url, "pid": n.proc.pid if n.proc else None,
                                                "server_name": n.server_name, "monitor_port": n.monitor_port,
                                                "log": str(n.log_path)} for n in self.cluster.nodes},
            "launcher_pid": os.getpid(),
            "services": {s.name: {"address": s.address, "metrics_port": s.metrics_port,
                                  "pid": s.proc.pid, "log": str(s.log_path)} for s in self.services},
            "endpoints": self.endpoints(),
        }
        tmp = self.run_dir / "services.json.tmp"  # readers (tools, tests polling for pids) never see half a file
        tmp.write_text(json.dumps(manifest, indent=2))
        os.replace(tmp, self.run_dir / "services.json")
        if quiet:
            return
        table = Table(title=f"RLAnything up — {self.run_dir}")
        for col in ("service", "gRPC", "metrics", "pid", "log"):
            table.add_column(col)
        for node in self.cluster.nodes:
            table.add_row(self._node_name(node), node.url, "", str(node.proc.pid if node.proc else ""), str(node.log_path))
        for s in self.services:
            table.add_row(s.name, s.address, f"http://127.0.0.1:{s.metrics_port}/metrics", str(s.proc.pid),
                          str(s.log_path))
        self.console.print(table)
        for name, url in self.endpoints().items():
            self.console.print(f"{name}: {url}")
        how = ("the first exit stops everything" if not self.book.policy.enabled else
               f"an exited process restarts (at most {self.book.policy.max_restarts} times each within "
               f"{self._window()})")
        self.console.print(f"[green]all services SERVING[/green] — {how}; Ctrl-C stops everything")

    def _on_signal(self, signum: int, _frame: FrameType | None) -> None:
        self._stop_requested = signum

    def watch(self, poll_s: float = 0.2) -> None:
        """Block until a stop signal (returns), restarting exited processes (`supervise`); raises
        `ServiceFailedError` when one exits that the restart policy does not restart."""
        previous = {sig: signal.signal(sig, self._on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
        try:
            while self._stop_requested is None:
                self.supervise()
                time.sleep(poll_s)
            self.console.print(f"received {signal.Signals(self._stop_requested).name}; stopping")
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)

    def stop(self) -> None:
        """SIGTERM every live service, SIGKILL what is left after ``stop_timeout_s``; stop NATS."""
        live = [s for s in self.services if s.proc.poll() is None]
        for s in live:
            s.proc.terminate()
        deadline = time.monotonic() + self.config.launcher.stop_timeout_s
        for s in live:
            try:
                s.proc.wait(max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                self.console.print(f"[yellow]{s.name} did not stop in time; killing[/yellow]")
                s.proc.kill()
                s.proc.wait()
        if self.cluster:
            self.cluster.stop()
