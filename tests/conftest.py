"""Shared fixtures: a real nats-server per test (temp store, free port) and a connected bus."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
import yaml

from services.common.bus import EventBus
from services.common.config import ConsumerConfig, NatsConfig
from services.common.grpc_runtime import check_health_sync
from services.common.nats_server import NatsServer, free_port


@pytest.fixture
def nats_server() -> Iterator[NatsServer]:
    """A `nats-server -js` on a free loopback port with a temporary JetStream store."""
    with NatsServer() as server:
        yield server


@pytest.fixture
def consumer_config() -> ConsumerConfig:
    """Fast delivery settings for tests (short ack wait and backoff)."""
    return ConsumerConfig(ack_wait_s=1.0, max_deliveries=3, backoff_s=[0.05], fetch_batch=8, fetch_timeout_s=0.3)


@pytest.fixture
async def bus(nats_server: NatsServer, consumer_config: ConsumerConfig) -> AsyncIterator[EventBus]:
    """An `EventBus` connected to ``nats_server`` with every project stream created."""
    b = await EventBus.connect(NatsConfig(url=nats_server.url), consumer_config, name="test")
    await b.ensure_streams()
    yield b
    await b.close()


class ServiceProcess:
    """A service started as `python -m services.<name> --config FILE`, as Kubernetes runs it."""

    def __init__(self, name: str, config_path: Path, address: str) -> None:
        self.name = name
        self.config_path = config_path
        self.address = address
        self.log_path = config_path.with_suffix(f".{name}.log")
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, timeout_s: float = 90.0) -> "ServiceProcess":
        """Start the process and wait until its gRPC health check says SERVING."""
        self.proc = subprocess.Popen([sys.executable, "-m", f"services.{self.name}", "--config", str(self.config_path)],
                                     stdout=open(self.log_path, "ab"), stderr=subprocess.STDOUT)
        deadline = time.monotonic() + timeout_s
        while check_health_sync(self.address) != "SERVING":
            if self.proc.poll() is not None:
                raise AssertionError(f"{self.name} exited {self.proc.returncode}:\n{self.log_path.read_text()[-3000:]}")
            if time.monotonic() > deadline:
                raise AssertionError(f"{self.name} not SERVING after {timeout_s} s")
            time.sleep(0.1)
        return self

    def log_messages(self) -> list[dict]:
        """The JSON log lines written so far."""
        return [json.loads(line) for line in self.log_path.read_text().splitlines() if line.startswith("{")]

    def stop(self, sig: int = signal.SIGTERM) -> int:
        """Send ``sig`` and wait; returns the exit code."""
        assert self.proc is not None
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        return self.proc.wait(timeout=30)


@pytest.fixture
def spawn_service(tmp_path: Path, nats_server: NatsServer) -> Iterator:
    """Factory: ``spawn_service("env", "yaml text")`` starts a service against ``nats_server``."""
    started: list[ServiceProcess] = []

    def spawn(name: str, config_yaml: str, start: bool = True) -> ServiceProcess:
        port = free_port()
        path = tmp_path / f"{name}-{len(started)}.yaml"
        data = yaml.safe_load(config_yaml) or {}
        data.setdefault("nats", {})["url"] = nats_server.url
        data.setdefault(name, {}).setdefault("server", {})["grpc_port"] = port
        path.write_text(yaml.safe_dump(data))
        svc = ServiceProcess(name, path, f"127.0.0.1:{port}")
        started.append(svc)
        return svc.start() if start else svc

    yield spawn
    for svc in started:
        if svc.proc is not None and svc.proc.poll() is None:
            svc.proc.kill()
            svc.proc.wait()
