"""A bad config fails `rlanything up` and a service at start-up; one service starts alone, as Kubernetes runs
it (the whole system's launches are in tests/system/test_up.py)."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from services.common.grpc_runtime import check_health_sync
from services.common.nats_server import NatsServer, free_port
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
        proc = subprocess.Popen([sys.executable, "-m", "services.critic", "--config", str(config)],
                                stderr=subprocess.PIPE)
        try:
            deadline = time.monotonic() + 60
            while check_health_sync(f"127.0.0.1:{port}") != "SERVING":
                assert proc.poll() is None, proc.stderr.read().decode()
                assert time.monotonic() < deadline
                time.sleep(0.1)
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(timeout=20) == 0
            assert b'"msg": "stopped"' in proc.stderr.read()
        finally:
            if proc.poll() is None:
                proc.kill()
