"""A bad config fails `rlanything up` and a service at start-up; one service starts alone, as Kubernetes runs
it (the whole system's launches are in tests/system/test_up.py)."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from services.common.nats_server import NatsServer, free_port
from services.common.service_start import Started, start_service, wait_serving
from tests.launch import RLANYTHING

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def test_bad_config_fails_at_start_up_naming_the_field(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("consumer:\n  max_deliveries: lots\npolicy:\n  lr: 0.1\n")
    result = subprocess.run([RLANYTHING, "up", str(bad), "--run-dir", str(tmp_path / "r")],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 2
    assert "consumer.max_deliveries" in result.stderr and '"lots"' in result.stderr
    assert "policy.lr: unknown key" in result.stderr
    assert not (tmp_path / "r").exists()  # no work was done
    alone = subprocess.run([sys.executable, "-m", "services.critic", "--config", str(bad)],
                           capture_output=True, text=True, timeout=60)
    assert alone.returncode == 2
    assert "consumer.max_deliveries" in alone.stderr


def test_service_starts_alone_like_kubernetes_runs_it(tmp_path: Path) -> None:
    port = free_port()
    with NatsServer() as nats:
        config = tmp_path / "run.yaml"
        config.write_text(f"nats: {{url: '{nats.url}'}}\ncritic:\n  server: {{grpc_port: {port}}}\n")
        log = tmp_path / "critic.log"
        proc = start_service("critic", config, log)
        try:
            wait_serving([Started("critic", f"127.0.0.1:{port}", proc, log)], 60)
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(timeout=20) == 0
            assert '"msg": "stopped"' in log.read_text()
        finally:
            if proc.poll() is None:
                proc.kill()


def test_a_frozen_service_is_killed_and_restarted_after_its_old_pid_is_gone(tmp_path: Path) -> None:
    """Supervision on health, not only on exit: a SIGSTOPped critic answers no health check; after
    launcher.restart.unresponsive_s the launcher stops it (SIGTERM, which a stopped process does not
    act on, then SIGKILL after launcher.stop_timeout_s) and starts the replacement only once the old
    process is gone."""
    import psutil

    from services.common.config import load_config
    from services.run.launcher import Launcher

    unresponsive_s, stop_timeout_s = 3.0, 2.0
    config_path = tmp_path / "run.yaml"
    config_path.write_text(
        "launcher:\n  services: [critic]\n"
        f"  stop_timeout_s: {stop_timeout_s}\n"
        f"  restart: {{backoff_s: 0.1, unresponsive_s: {unresponsive_s}, health_period_s: 0.5, "
        "health_check_timeout_s: 0.5}\n")
    launcher = Launcher(load_config(config_path, []), tmp_path / "run")
    (tmp_path / "run" / "logs").mkdir(parents=True)
    try:
        launcher.start()
        critic = launcher.services[0]
        old = psutil.Process(critic.proc.pid)
        for _ in range(5):  # a healthy service is left alone
            assert launcher.supervise() == []
            time.sleep(0.2)
        old.suspend()  # SIGSTOP
        frozen_at = time.monotonic()
        restarts = []
        while not restarts:
            restarts = launcher.supervise()
            if restarts:
                assert not psutil.pid_exists(old.pid), "replacement started while the old process still exists"
            assert time.monotonic() - frozen_at < 30, "the frozen critic was not restarted"
            time.sleep(0.1)
        took_s = time.monotonic() - frozen_at
        (restart,) = restarts
        assert (restart.name, restart.exit_code, restart.number) == ("critic", -signal.SIGKILL, 1)
        # found within unresponsive_s (+ one check period and timeout), then SIGTERM ignored, SIGKILL
        assert unresponsive_s + stop_timeout_s <= took_s < unresponsive_s + stop_timeout_s + 5.0, took_s
        assert critic.proc.pid != old.pid
        wait_serving([Started("critic", critic.address, critic.proc, critic.log_path)], 60)
        log = critic.log_path.read_text()
        assert "--- killed by the launcher: no health answer for" in log and "launcher.restart.unresponsive_s=3" in log
        print(f"frozen critic restarted {took_s:.1f} s after SIGSTOP")
    finally:
        launcher.stop()
