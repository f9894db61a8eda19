"""Services started by a launcher end with it, and only with it: started (without a fork) from
threads that exit at once while gRPC calls are in flight, they keep running and serve; the launcher
killed with SIGKILL, they are all gone within 5 s. NATS, through its exec wrapper, keeps its pid."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from services.common.grpc_runtime import check_health_sync
from services.common.nats_server import free_port

pytestmark = [pytest.mark.integration, pytest.mark.slow]

CHILD = Path(__file__).with_name("parent_watch_child.py")
STARTS = int(os.environ.get("RLA_PARENT_WATCH_STARTS", "10"))
"""Services the test starts (50 when measuring; 10 keep the tier's time)."""


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, IndexError):
        return False
    return state != "Z"


def test_services_live_past_the_thread_that_started_them_and_die_with_the_process(nats_server, tmp_path) -> None:
    ports = []
    for i in range(STARTS):
        port = free_port()
        ports.append(port)
        (tmp_path / f"ingest-{i}.yaml").write_text(yaml.safe_dump({
            "nats": {"url": nats_server.url},
            "ingest": {"server": {"grpc_port": port, "metrics_port": 0}, "http_port": 0}}))
    parent = subprocess.Popen([sys.executable, str(CHILD), str(tmp_path), str(STARTS)], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
    pids: list[int] = []
    try:
        line = parent.stdout.readline()
        assert line, parent.stderr.read()[-3000:]
        pids = json.loads(line)
        assert len(pids) == STARTS
        deadline = time.monotonic() + 30 + 3 * STARTS
        waiting = set(ports)
        while waiting and time.monotonic() < deadline:
            waiting = {p for p in waiting if check_health_sync(f"127.0.0.1:{p}", timeout_s=0.5) != "SERVING"}
            time.sleep(0.2)
        assert not waiting, f"{len(waiting)} of {STARTS} services not SERVING (their spawning threads exited)"
        assert all(_alive(p) for p in pids)
        parent.send_signal(signal.SIGKILL)
        parent.wait(timeout=10)
        deadline = time.monotonic() + 5
        while any(_alive(p) for p in pids) and time.monotonic() < deadline:
            time.sleep(0.1)
        left = [p for p in pids if _alive(p)]
        assert not left, f"{len(left)} services outlived their launcher by 5 s"
    finally:
        parent.kill()
        for pid in pids:
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)


def test_nats_keeps_its_pid_through_the_wrapper_and_stops_with_its_parent(tmp_path) -> None:
    script = ("import sys, time; sys.path.insert(0, sys.argv[1]);"
              "from services.common.nats_server import NatsServer;"
              "s = NatsServer(store_dir=sys.argv[2]).start(); print(s.proc.pid, flush=True); time.sleep(60)")
    parent = subprocess.Popen([sys.executable, "-c", script, str(Path(__file__).resolve().parents[2]),
                               str(tmp_path / "store")], stdout=subprocess.PIPE, text=True)
    pid = int(parent.stdout.readline())
    try:
        assert Path(f"/proc/{pid}/exe").resolve().name.startswith("nats-server")  # the wrapper exec'd in place
        parent.send_signal(signal.SIGKILL)
        parent.wait(timeout=10)
        deadline = time.monotonic() + 5
        while _alive(pid) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not _alive(pid), "nats-server outlived its parent"
    finally:
        parent.kill()
        if _alive(pid):
            os.kill(pid, signal.SIGKILL)


def test_a_process_whose_parent_is_already_gone_stops_at_once(tmp_path) -> None:
    """The watch checks its parent as it starts: a pid that no longer exists stops the process."""
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    code = ("import sys, time; sys.path.insert(0, sys.argv[1]); from services.common.parent_watch import "
            f"watch_parent; watch_parent({gone.pid}); time.sleep(30)")
    done = subprocess.run([sys.executable, "-c", code, str(Path(__file__).resolve().parents[2])], timeout=20)
    assert done.returncode == -signal.SIGTERM
