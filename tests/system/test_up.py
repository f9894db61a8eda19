"""`rlanything up`: the whole system as real processes (NATS and the five services), real gRPC health,
metrics and HTTP endpoints; a clean stop on SIGINT, --fail-fast, and restarts within a budget."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path

import pytest

from services.common.grpc_runtime import check_health_sync
from tests.launch import RLANYTHING, stop_launcher, wait_for

pytestmark = [pytest.mark.system, pytest.mark.slow]

SERVICES = ("env", "policy", "reward", "critic", "ingest")


@pytest.fixture
def launched(tmp_path: Path, request: pytest.FixtureRequest):
    """`rlanything up` with the test's extra arguments (``@pytest.mark.parametrize("launched", [[...]],
    indirect=True)``)."""
    run_dir = tmp_path / "run"
    extra = getattr(request, "param", [])
    proc = subprocess.Popen([RLANYTHING, "up", "--run-dir", str(run_dir), *extra],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        manifest = wait_for(run_dir / "services.json", proc)
        yield proc, manifest, run_dir
    finally:  # also when the launcher never got ready: SIGINT stops it and its services
        stop_launcher(proc)


def test_up_serves_every_service_then_stops_cleanly_on_sigint(launched) -> None:
    proc, manifest, run_dir = launched
    assert set(manifest["services"]) == set(SERVICES)
    for name, svc in manifest["services"].items():
        assert check_health_sync(svc["address"]) == "SERVING", name
        body = urllib.request.urlopen(f"http://127.0.0.1:{svc['metrics_port']}/metrics", timeout=5).read().decode()
        assert f'rla_service_up{{service="{name}"}} 1.0' in body
    assert (run_dir / "config.yaml").read_text().count("grpc_port") == len(SERVICES)
    endpoints = manifest["endpoints"]
    assert urllib.request.urlopen(f"{endpoints['openai']}/models", timeout=5).status == 200
    assert urllib.request.urlopen(endpoints["ingest"].removesuffix("/v1/ingest") + "/healthz", timeout=5).status == 200
    import psutil

    for pid in [manifest["nats_pid"], *(svc["pid"] for svc in manifest["services"].values())]:
        listening = [c.laddr for c in psutil.Process(pid).net_connections(kind="inet") if c.status == psutil.CONN_LISTEN]
        loopback = {"127.0.0.1", "::ffff:127.0.0.1", "::1"}  # (an IPv4-mapped IPv6 socket on 127.0.0.1 too)
        assert listening and all(a.ip in loopback for a in listening), (pid, listening)  # loopback only
    proc.send_signal(signal.SIGINT)
    assert proc.wait(timeout=30) == 0
    for name in SERVICES:  # each service shut down gracefully, not killed
        lines = [json.loads(line) for line in (run_dir / "logs" / f"{name}.log").read_text().splitlines()
                 if line.startswith("{")]
        messages = [entry["msg"] for entry in lines]
        assert "stopping" in messages and messages[-1] == "stopped", name
        assert lines[-1]["exit_code"] == 0


@pytest.mark.parametrize("launched", [["--fail-fast"]], indirect=True)
def test_up_fail_fast_exits_non_zero_within_seconds_when_a_service_dies(launched) -> None:
    proc, manifest, run_dir = launched
    victim = manifest["services"]["reward"]["pid"]
    os.kill(victim, signal.SIGKILL)
    start = time.monotonic()
    code = proc.wait(timeout=20)
    elapsed = time.monotonic() - start
    assert code == 1
    assert elapsed < 5.0, f"took {elapsed:.1f} s"
    assert "service reward exited with code -9" in proc.stderr.read().decode()
    for name in ("env", "policy", "critic"):  # the others were stopped too
        pid = manifest["services"][name]["pid"]
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)


def _wait_manifest(run_dir: Path, proc: subprocess.Popen, ready: Callable[[dict], bool],
                   timeout_s: float = 30.0) -> dict:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.stderr.read().decode()
        manifest = json.loads((run_dir / "services.json").read_text())
        if ready(manifest):
            return manifest
        time.sleep(0.2)
    raise AssertionError(f"services.json did not change as expected in {timeout_s} s")


@pytest.mark.parametrize("launched", [["--set", "launcher.restart.max_restarts=1",
                                       "--set", "launcher.restart.backoff_s=0.5"]], indirect=True)
def test_up_restarts_a_killed_service_and_nats_then_stops_when_the_budget_is_spent(launched) -> None:
    import asyncio

    import nats as nats_client

    proc, manifest, run_dir = launched
    victim = manifest["services"]["critic"]
    os.kill(victim["pid"], signal.SIGKILL)
    after = _wait_manifest(run_dir, proc, lambda m: m["services"]["critic"]["pid"] != victim["pid"])
    deadline = time.monotonic() + 60
    while check_health_sync(victim["address"]) != "SERVING":  # the same port again
        assert time.monotonic() < deadline, "restarted critic never SERVING"
        time.sleep(0.2)
    assert "--- restarted by the launcher after exit code -9" in (run_dir / "logs" / "critic.log").read_text()

    os.kill(manifest["nats_pid"], signal.SIGKILL)  # the broker: same port, same store
    after = _wait_manifest(run_dir, proc, lambda m: m["nats_pid"] != manifest["nats_pid"])
    assert after["nats_url"] == manifest["nats_url"]

    async def streams() -> list[str]:
        nc = await nats_client.connect(after["nats_url"])
        names = [s.config.name for s in await nc.jetstream().streams_info()]
        await nc.close()
        return names

    assert {"JOBS", "TRAJ", "MODELS"} <= set(asyncio.run(streams()))  # the services' streams survived
    assert proc.poll() is None
    os.kill(after["services"]["critic"]["pid"], signal.SIGKILL)  # its budget (1) is spent: the run stops
    assert proc.wait(timeout=20) == 1
    err = proc.stderr.read().decode()
    assert "restarted critic after exit code -9 (restart 1 of 1 within 600 s)" in err
    assert "restarted nats after exit code -9" in err
    assert "service critic exited with code -9 (restarts used: 1)" in err
