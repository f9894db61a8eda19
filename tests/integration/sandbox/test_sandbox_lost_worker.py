"""A lost worker poisons nothing: a worker SIGKILLed in the middle of a run that forked, then 100 correct
programs that fork: every one OK, no zombie left. Run in a new PID namespace whose PID 1 is the process
that owns the sandbox (the env service as a pod's only process, with no init that reaps: the harshest
case). Zombies left there would count against the sandbox uid's process limit, so a correct program that
forks would fail on some runs and not others."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.skipif(os.geteuid() != 0, reason="the sandbox needs root (namespaces, per-run uids)"),
              pytest.mark.skipif(shutil.which("unshare") is None, reason="unshare (util-linux) makes the PID namespace")]
ROOT = Path(__file__).resolve().parents[3]

SCENARIO = r'''
import json, os, threading, time
from services.common.config import SandboxConfig
from services.common.sandbox import Sandbox, SandboxError

def zombies():
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            state = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if state == "Z":
            found.append(int(pid))
    return found

def uid_tasks(uids):
    return [p for p in filter(str.isdigit, os.listdir("/proc")) if os.stat(f"/proc/{p}").st_uid in uids]

assert os.getpid() == 1
with Sandbox(SandboxConfig(isolation=ISOLATION, workers=2, timeout_s=5.0, memory_mb=256, max_processes=8)) as sb:
    lost = []
    hog = ("import os, time\n"
           "for _ in range(4):\n"
           "    if os.fork() == 0:\n"
           "        time.sleep(60)\n"
           "print('forked', flush=True)\n"
           "time.sleep(60)\n")
    def run_hog():
        try:
            sb.run(hog, timeout_s=30)
        except SandboxError as error:
            lost.append(str(error))
    runner = threading.Thread(target=run_hog)
    runner.start()
    deadline = time.monotonic() + 10
    while len(uid_tasks(sb.uids)) < 5 and time.monotonic() < deadline:
        time.sleep(0.02)
    before = len(uid_tasks(sb.uids))
    busy = [w for w in sb._workers if not any(w is idle for idle in list(sb._idle.queue))]
    os.killpg(busy[0].proc.pid, 9)
    runner.join(20)
    program = ("import os\n"
               "children = [os.fork() for _ in range(3)]\n"
               "if 0 in children:\n"
               "    os._exit(0)\n"
               "for pid in children:\n"
               "    os.waitpid(pid, 0)\n"
               "print(int(input()) * 2)\n")
    verdicts = []
    for i in range(100):
        r = sb.run(program, f"{i}\n")
        verdicts.append(r.verdict.value if r.stdout == f"{2 * i}\n" else f"{r.verdict.value}:{r.stdout!r}:{r.stderr[-200:]}")
    time.sleep(0.2)
    print(json.dumps({"hog_tasks": before, "lost": lost, "verdicts": verdicts, "zombies": zombies()}))
'''


@pytest.mark.parametrize("isolation", ["bwrap"])
def test_a_worker_killed_mid_run_leaves_no_zombie_and_100_forking_programs_pass(isolation):
    done = subprocess.run(["unshare", "--pid", "--fork", "--mount-proc", sys.executable, "-c",
                           SCENARIO.replace("ISOLATION", repr(isolation))],
                          cwd=ROOT, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["hog_tasks"] >= 5                       # the run and its four children were up
    assert len(report["lost"]) == 1 and "sandbox worker" in report["lost"][0]
    assert report["verdicts"] == ["OK"] * 100
    assert report["zombies"] == []
