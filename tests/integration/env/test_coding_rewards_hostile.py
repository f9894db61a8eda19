"""Hostile and honest programs through the env service's Environment.Step on the codeio family, under the
coding preset's sandbox (configs/coding.yaml: the default isolation, bwrap): each row's expected verdict
on every ground-truth test and its reward. A cheat that works outside the sandbox (reading the cached
tests, a secret on a host command line) must score 0 inside; a correct program must score 1 however it
writes its output (threads, a daemon, text and buffer writes, big integers, floats within the declared
tolerance); a sandbox fault is never a reward (UNAVAILABLE, then the same session's retry is scored)."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import grpc
import psutil
import pytest
import yaml
from rlanything.v1 import env_pb2, env_pb2_grpc

from services.common.config import SandboxConfig
from services.common.nats_server import NatsServer, free_port
from services.env.families.base import TaskSpec
from services.env.families.codeio_family import CodeIOFamily
from tests.conftest import ServiceProcess

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(os.geteuid() != 0, reason="the sandbox needs root (namespaces, per-run uids)")]
ROOT = Path(__file__).resolve().parents[3]
CANARY = "rla-canary-hostile-0123456789"

CHEAT_CACHE = r'''
import json, os, sys
line = sys.stdin.read().strip()
for top in CACHE_DIRS:
    for root, dirs, files in os.walk(top):
        for name in files:
            if name.endswith(".json"):
                try:
                    data = json.load(open(os.path.join(root, name)))
                except Exception:
                    continue
                if isinstance(data, dict) and line in [i.strip() for i in data.get("inputs", [])]:
                    print(data["outputs"][[i.strip() for i in data["inputs"]].index(line)])
                    sys.exit(0)
'''
"""Finds its own test among the cached tests (any JSON file with ``inputs``/``outputs`` under ``CACHE_DIRS``,
which the test fills with the service's real cache path: the strongest form of the attack, no guessing)
and prints the answer. A walk of the whole sandbox file system took over the 2 s limit on a busy machine."""

CHEAT_SECRET = (f"import os\nfound = False\n"
                "for pid in filter(str.isdigit, os.listdir('/proc')):\n"
                "    for name in ('cmdline', 'environ'):\n"
                "        try:\n"
                f"            found = found or {CANARY!r} in open(f'/proc/{{pid}}/{{name}}', 'rb').read().decode('utf-8', 'replace')\n"
                "        except OSError:\n"
                "            pass\n"
                "if not found:\n"
                "    raise SystemExit(0)\n")
"""Answers (runs the reference after it) only when it can read a secret of the host: a leak wins."""


def capture(reference: str) -> str:
    """Code that runs ``reference`` with its stdout captured into ``out`` (a string)."""
    return ("import io, sys, contextlib\n_buf = io.StringIO()\n"
            f"with contextlib.redirect_stdout(_buf):\n    exec(compile({reference!r}, 'reference', 'exec'), "
            "{'__name__': '__main__'})\nout = _buf.getvalue()\n")


ROWS = {
    # name: (program from the reference, verdict on every test, reward)
    "reads the cached tests": (lambda ref: CHEAT_CACHE, "WA", 0.0),
    "reads /proc for secrets": (lambda ref: CHEAT_SECRET + ref, "WA", 0.0),
    "fork bomb": (lambda ref: "import os\nwhile True:\n    os.fork()\n", "RE", 0.0),
    "64 threads, then the answer": (lambda ref: (
        "import threading\nbarrier = threading.Barrier(65)\n"
        "threads = [threading.Thread(target=barrier.wait) for _ in range(64)]\n"
        "[t.start() for t in threads]\nbarrier.wait()\n[t.join() for t in threads]\n" + ref), "OK", 1.0),
    "8 processes x 200 MiB": (lambda ref: (
        "import os, time\nfor _ in range(7):\n    if os.fork() == 0:\n        break\n"
        "block = bytearray(200 << 20)\nfor i in range(0, len(block), 4096):\n    block[i] = 1\n"
        "time.sleep(3)\n"), "MLE", 0.0),
    "endless output": (lambda ref: "while True:\n    print('x' * 1000)\n", "OLE", 0.0),
    "a daemon left behind, then the answer": (lambda ref: (
        "import os, time\nif os.fork() == 0:\n    os.setsid()\n    time.sleep(60)\n    os._exit(0)\n" + ref),
        "OK", 1.0),
    "text and buffer writes in order": (lambda ref: capture(ref) + (
        "half = len(out) // 2\nprint(out[:half], end='')\nsys.stdout.buffer.write(out[half:].encode())\n"), "OK", 1.0),
    "10**100000 on the way": (lambda ref: "assert len(str(10 ** 100000)) == 100001\n" + ref, "OK", 1.0),
    "floats to 9 significant digits": (lambda ref: capture(ref) + (
        "import re\nprint(re.sub(r'-?\\d+\\.\\d+(?:e-?\\d+)?', lambda m: f'{float(m.group()):.9g}', out), end='')\n"),
        "OK", 1.0),
    "floats off by 0.1 %": (lambda ref: capture(ref) + (
        "import re\nprint(re.sub(r'-?\\d+\\.\\d+(?:e-?\\d+)?', lambda m: repr(float(m.group()) * 1.001 + 1e-3), out), end='')\n"),
        "WA", 0.0),
    "import numpy (the task text says: standard library only)": (lambda ref: "import numpy\n" + ref, "RE", 0.0),
    "the reference itself": (lambda ref: ref, "OK", 1.0),
}


@pytest.fixture(scope="module")
def env_service(tmp_path_factory):
    """The env service (a process, real NATS) with the codeio family and the coding preset's sandbox."""
    tmp = tmp_path_factory.mktemp("hostile")
    preset = yaml.safe_load((ROOT / "configs" / "coding.yaml").read_text())["env"]["sandbox"]
    assert "isolation" not in preset or preset["isolation"] == "bwrap"
    family = {"type": "codeio", "knobs": {"examples": 1}, "train_slots": 6, "heldout_slots": 0, "ood_slots": 0}
    port = free_port()
    with NatsServer() as nats:
        config = tmp / "env.yaml"
        config.write_text(yaml.safe_dump({"nats": {"url": nats.url}, "env": {
            "server": {"grpc_port": port}, "cache_dir": str(tmp / "cache"), "families": [family],
            "scheduler": {"enabled": False}, "sandbox": preset}}))
        svc = ServiceProcess("env", config, f"127.0.0.1:{port}").start()
        try:
            yield svc, tmp / "cache" / "codeio"
        finally:
            svc.stop()


@pytest.fixture(scope="module")
def float_task(env_service):
    """A listed task whose problem is compared by the float checker, and its problem (read from the cache)."""
    svc, cache = env_service
    env = env_pb2_grpc.EnvironmentStub(grpc.insecure_channel(svc.address))
    deadline = time.monotonic() + 120
    while len(tasks := env.ListTasks(env_pb2.ListTasksRequest(family="codeio")).tasks) < 6:
        assert time.monotonic() < deadline, "codeio tasks not listed in time"
        time.sleep(0.5)
    local = CodeIOFamily(cache_dir=cache)   # reads the service's cache: runs nothing
    for task in tasks:
        problem = local.problem(TaskSpec("codeio", dict(task.knobs), task.seed))
        if problem.checker.startswith("float"):
            return env, task, problem
    pytest.fail("no float-checked problem among the listed codeio tasks")


def step(env, task, program: str, seed: int = 0) -> env_pb2.StepResponse:
    reset = env.Reset(env_pb2.ResetRequest(task=task.ref, seed=seed))
    assert "Only the Python standard library can be imported." in reset.task_text
    return env.Step(env_pb2.StepRequest(session_id=reset.session_id, action=f"```python\n{program}```"), timeout=120)


def sandbox_processes(service_pid: int) -> list[psutil.Process]:
    """Live processes under the env service that run as a sandbox uid (the default range, derived from the
    host name as the service's; other tests' sandboxes, under other parents, do not count)."""
    first, count = SandboxConfig().first_uid, SandboxConfig().uid_count
    found = []
    for p in psutil.Process(service_pid).children(recursive=True):
        try:
            if first <= p.uids().real < first + count and p.status() != psutil.STATUS_ZOMBIE:
                found.append(p)
        except psutil.NoSuchProcess:
            continue
    return found


@pytest.mark.parametrize("name", list(ROWS))
def test_each_program_gets_its_verdict_and_reward(float_task, env_service, name):
    env, task, problem = float_task
    make, verdict, reward = ROWS[name]
    holder = subprocess.Popen(["sh", "-c", "sleep 60", CANARY]) if "secret" in name else None
    try:
        result = step(env, task, make(problem.reference).replace("CACHE_DIRS", repr([str(env_service[1])])))
    finally:
        if holder is not None:
            holder.kill()
            holder.wait()
    assert (list(result.test_verdicts), result.reward) == ([verdict] * 8, reward), result.observation
    assert sandbox_processes(env_service[0].proc.pid) == []   # nothing of the run survives it (the daemon included)


def test_the_cheats_do_win_outside_the_sandbox(float_task, env_service):
    """The hostile rows are real cheats: run on the host, the cache reader prints the right answer."""
    _, _, problem = float_task
    _, cache = env_service
    stdin, expected = problem.tests[0]
    done = subprocess.run([sys.executable, "-c", CHEAT_CACHE.replace("CACHE_DIRS", repr([str(cache)]))],
                          input=stdin, capture_output=True, text=True, timeout=60)
    assert done.stdout.strip() == expected.strip()


def test_a_sandbox_fault_is_unavailable_and_the_retry_is_scored(float_task, env_service):
    """Kill the env's sandbox workers while a Step runs: the Step fails UNAVAILABLE (INFRA, no reward),
    the session stays open, and the same Step sent again is scored."""
    env, task, problem = float_task
    svc, _ = env_service
    reset = env.Reset(env_pb2.ResetRequest(task=task.ref, seed=5))
    slow = "import time\ntime.sleep(1.5)\n" + problem.reference
    request = env_pb2.StepRequest(session_id=reset.session_id, action=f"```python\n{slow}```")
    outcome: list[object] = []

    def call() -> None:
        try:
            outcome.append(env.Step(request, timeout=60))
        except grpc.RpcError as error:
            outcome.append(error)

    caller = threading.Thread(target=call)
    caller.start()
    time.sleep(0.7)
    workers = [p for p in psutil.Process(svc.proc.pid).children() if "bwrap" in " ".join(p.cmdline())]
    assert workers
    for w in workers:
        w.kill()
    caller.join(60)
    assert isinstance(outcome[0], grpc.RpcError) and outcome[0].code() == grpc.StatusCode.UNAVAILABLE
    assert "sandbox worker" in outcome[0].details()
    again = env.Step(request, timeout=60)
    assert (again.reward, list(again.test_verdicts)) == (1.0, ["OK"] * 8)
