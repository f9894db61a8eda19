"""The sandbox's life: it refuses to start without its isolation, survives a lost worker, cleans up on
close, and serves asyncio callers. Real processes throughout."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil
import pytest

from services.common.config import SandboxConfig
from services.common.sandbox import Job, Sandbox, SandboxError, SandboxStartError, Verdict
from services.common.sandbox.launch import find_bwrap

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="the sandbox needs root (namespaces, per-run uids)")
ROOT = Path(__file__).resolve().parents[3]


def uid_processes(uids: list[int]) -> list[int]:
    """Live processes of ``uids``; zombies (dead, waiting for their new parent to reap them) do not count."""
    return [p.pid for p in psutil.process_iter(["uids", "status"])
            if p.info["uids"] and p.info["uids"].real in uids and p.info["status"] != psutil.STATUS_ZOMBIE]


@pytest.mark.skipif(shutil.which("setpriv") is None, reason="setpriv (util-linux) drops the capability")
@pytest.mark.parametrize("isolation", ["fork", "bwrap"])
def test_without_cap_sys_admin_the_sandbox_refuses_to_start(isolation):
    if isolation == "bwrap":
        find_bwrap(None)  # fails the test with the reason if bwrap is missing
    probe = ("from services.common.config import SandboxConfig\n"
             "from services.common.sandbox import Sandbox, SandboxStartError\n"
             "try:\n"
             f"    Sandbox(SandboxConfig(workers=1, isolation={isolation!r}))\n"
             "    print('STARTED')\n"
             "except SandboxStartError as error:\n"
             "    print('REFUSED', error)\n")
    done = subprocess.run(["setpriv", "--inh-caps=-sys_admin", "--bounding-set=-sys_admin", sys.executable, "-c",
                           probe], cwd=ROOT, capture_output=True, text=True, timeout=60,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.stdout.startswith("REFUSED"), done.stdout + done.stderr
    assert f"isolation {isolation!r} cannot be set up" in done.stdout
    assert ("unshare" in done.stdout) if isolation == "fork" else ("Creating new namespace failed" in done.stdout)


def test_a_lost_worker_is_replaced_and_its_orphans_killed():
    with Sandbox(SandboxConfig(workers=1)) as sb:
        uids = sb.uids
        outcome: list[object] = []
        program = ("import os, time\n"
                   "if os.fork() == 0:\n"
                   "    os.setsid()\n"
                   "print('started', flush=True)\n"
                   "time.sleep(30)\n")
        runner = threading.Thread(target=lambda: outcome.append(_capture(sb, program)))
        runner.start()
        deadline = time.monotonic() + 10
        while len(uid_processes(uids)) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(uid_processes(uids)) == 2
        os.killpg(sb.worker_pids[0], signal.SIGKILL)   # the worker dies under a running program
        runner.join(15)
        assert isinstance(outcome[0], SandboxError) and "exited" in str(outcome[0])
        assert uid_processes(uids) == []   # the new worker killed the old one's orphans at start
        assert sb.run("print('again')").stdout == "again\n"


def _capture(sb: Sandbox, program: str) -> object:
    try:
        return sb.run(program, timeout_s=20)
    except SandboxError as error:
        return error


def test_close_leaves_no_process():
    sb = Sandbox(SandboxConfig(workers=2))
    workers, uids = sb.worker_pids, sb.uids
    sb.run_many([Job("import time\ntime.sleep(0.1)")] * 2)
    sb.close()
    assert not any(psutil.pid_exists(pid) and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
                   for pid in workers)
    assert uid_processes(uids) == []
    with pytest.raises(SandboxError, match="closed"):
        sb.run("print(1)")


def test_two_pools_take_different_uids():
    with Sandbox(SandboxConfig(workers=2)) as first, Sandbox(SandboxConfig(workers=2)) as second:
        assert not set(first.uids) & set(second.uids)


async def test_asyncio_callers_run_batches_in_parallel():
    with Sandbox(SandboxConfig(workers=2)) as sb:
        start = time.monotonic()
        results = await sb.run_many_async([Job("import time\ntime.sleep(0.5)\nprint(input())", str(i))
                                           for i in range(4)])
        assert [r.stdout for r in results] == ["0\n", "1\n", "2\n", "3\n"]
        assert all(r.verdict is Verdict.OK for r in results)
        assert time.monotonic() - start < 1.9   # two at a time: about 1 s, not 2


def test_text_that_is_not_valid_unicode_is_run_not_fatal():
    with Sandbox(SandboxConfig(workers=1)) as sb:
        result = sb.run("import sys\nprint(len(sys.stdin.buffer.read()))\nprint('\\udc80')", stdin="a\udcff")
        assert result.stdout.splitlines()[0] == "2"
        assert sb.run("print('still here')").stdout == "still here\n"


def test_bwrap_is_the_default_and_fork_warns_or_is_refused(monkeypatch, caplog):
    """Fork isolation lets programs read host files (the cached ground-truth tests): bwrap is the default,
    fork logs a warning at every start, and where RLANYTHING_SANDBOX_REFUSE_FORK=1 (the pods) it is refused."""
    assert SandboxConfig().isolation == "bwrap"
    monkeypatch.delenv("RLANYTHING_SANDBOX_REFUSE_FORK", raising=False)
    with caplog.at_level("WARNING"), Sandbox(SandboxConfig(isolation="fork", workers=1)) as sb:
        assert sb.run("print(1)").stdout == "1\n"
    assert any("isolation=fork is for development only" in r.getMessage() for r in caplog.records)
    monkeypatch.setenv("RLANYTHING_SANDBOX_REFUSE_FORK", "1")
    with pytest.raises(SandboxStartError, match="isolation='fork' is refused here"):
        Sandbox(SandboxConfig(isolation="fork", workers=1))
    with Sandbox(SandboxConfig(workers=1)) as sb:   # bwrap still starts there
        assert sb.run("print(2)").stdout == "2\n"
