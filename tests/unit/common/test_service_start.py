"""The one service starter: a process that exits before serving, and one that never serves."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from services.common.errors import ServiceFailedError
from services.common.nats_server import free_port
from services.common.service_start import Started, start_service, wait_serving


def test_a_service_that_exits_first_fails_the_wait_with_its_code_and_log(tmp_path: Path) -> None:
    log = tmp_path / "nope.log"
    proc = start_service("nope", tmp_path / "run.yaml", log)  # no module services.nope: python exits 1
    with pytest.raises(ServiceFailedError, match=r"(?s)service nope exited with code 1; log .*nope\.log:.*"
                                                 r"No module named services\.nope"):
        wait_serving([Started("nope", f"127.0.0.1:{free_port()}", proc, log)], timeout_s=30)


def test_a_service_that_never_serves_fails_the_wait_after_the_timeout(tmp_path: Path) -> None:
    proc = subprocess.Popen(["sleep", "30"])
    try:
        with pytest.raises(ServiceFailedError, match=r"not SERVING after 0\.3 s: quiet; see the logs"):
            wait_serving([Started("quiet", f"127.0.0.1:{free_port()}", proc, tmp_path / "quiet.log")], timeout_s=0.3,
                         probe_timeout_s=0.1, where="; see the logs")
    finally:
        proc.kill()
        proc.wait()
