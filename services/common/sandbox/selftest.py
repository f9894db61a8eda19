"""The sandbox's start-up self-test: hostile probes run in the sandbox itself before a service serves.

`check_containment` runs two programs in a started :class:`Sandbox` and reports one pass/fail per check
(also the Prometheus gauge ``rla_sandbox_containment{check}``):

- ``secrets``: no secret of the service (values of its environment variables named like a password,
  token or key, and a canary put on the command line of a host process for the test) is readable in the
  program's environment, in any ``/proc/<pid>/cmdline`` or ``/proc/<pid>/environ`` it can see;
- ``processes``: it sees no process of another uid but the sandbox's own (bubblewrap's init, the worker);
- ``host_files``: none of the service's private paths (its working directory, the ground-truth test
  cache) can be listed or read;
- ``network``: a TCP connection to a port this process listens on at 127.0.0.1 fails;
- ``writes``: nothing outside the run's scratch directory can be written;
- ``memory``: two processes of one run holding 60 % of ``memory_mb`` each are stopped (verdict MLE).

`require_containment` raises `SandboxStartError` when a check fails under bwrap (a service using it does
not start); under fork isolation, which cannot hide host files or processes, each failed check is a
logged warning. Judging a probe's report is pure (`judge_report`).
"""

from __future__ import annotations

import json
import logging
import os
import re
import secrets
import socket
import subprocess
from collections.abc import Sequence

from prometheus_client import Gauge

from services.common.sandbox.errors import SandboxStartError
from services.common.sandbox.pool import Sandbox
from services.common.sandbox.results import Verdict

__all__ = ["CHECKS", "PROBE", "check_containment", "require_containment", "judge_report", "service_secrets"]

log = logging.getLogger(__name__)
CONTAINMENT = Gauge("rla_sandbox_containment", "1 when the sandbox's start-up self-test check passed, 0 when it "
                                               "failed (secrets, processes, host_files, network, writes, memory).",
                    ["check"])
CHECKS = ("secrets", "processes", "host_files", "network", "writes", "memory")
_SECRET_NAME = re.compile(r"PASS|SECRET|TOKEN|KEY|CREDENTIAL", re.IGNORECASE)

PROBE = r'''
import json, os, socket, sys
ask = json.loads(sys.stdin.read())
seen, others, readable, wrote = [dict(os.environ)], 0, [], []
for pid in filter(str.isdigit, os.listdir("/proc")):
    try:
        if os.stat(f"/proc/{pid}").st_uid != os.getuid():
            others += 1
    except OSError:
        continue
    for name in ("cmdline", "environ"):
        try:
            seen.append(open(f"/proc/{pid}/{name}", "rb").read().decode("utf-8", "replace"))
        except OSError:
            pass
for path in ask["paths"]:
    try:
        os.listdir(path) if os.path.isdir(path) else open(path, "rb").read(1)
        readable.append(path)
    except OSError:
        pass
for path in ["/tmp/probe", "/probe", "/dev/shm/probe", "/var/tmp/probe", "/run/probe", *[p + "/probe" for p in ask["paths"]]]:
    try:
        open(path, "w").write("x")
        wrote.append(path)
    except OSError:
        pass
try:
    socket.create_connection(("127.0.0.1", ask["port"]), timeout=1).close()
    connected = True
except OSError:
    connected = False
print(json.dumps({"seen": json.dumps(seen), "others": others, "readable": readable, "wrote": wrote,
                  "connected": connected}))
'''
"""The probe program: reads its stdin (JSON: ``paths``, ``port``) and prints what it could reach."""

MEMORY_PROBE = ("import os, time\n"
                "size = int(input())\n"
                "os.fork()\n"
                "block = bytearray(size)\n"
                "for i in range(0, len(block), 4096):\n"
                "    block[i] = 1\n"
                "time.sleep(5)\n")


def service_secrets(environ: dict[str, str] | None = None) -> list[str]:
    """Values of the environment variables whose names look secret (PASS, SECRET, TOKEN, KEY, CREDENTIAL)
    and that are at least 6 characters long: what a probe must not find."""
    env = os.environ if environ is None else environ
    return [value for name, value in env.items() if _SECRET_NAME.search(name) and len(value) >= 6]


def judge_report(report: dict, secret_values: Sequence[str], max_other_processes: int) -> dict[str, bool]:
    """Pass/fail per check (but ``memory``) from the probe's ``report`` (pure): no secret in what it saw,
    at most ``max_other_processes`` processes of other uids, no private path readable, no connection, no
    write outside its scratch directory."""
    return {"secrets": not any(s in report["seen"] for s in secret_values),
            "processes": report["others"] <= max_other_processes,
            "host_files": not report["readable"],
            "network": not report["connected"],
            "writes": not report["wrote"]}


def check_containment(sandbox: Sandbox, private_paths: Sequence[str] = (),
                      secret_values: Sequence[str] | None = None) -> dict[str, bool]:
    """Run the probes in ``sandbox``; one bool per check of `CHECKS` (True: contained), also set on
    the gauge ``rla_sandbox_containment``. ``secret_values`` default: `service_secrets()`; a canary is
    always added, on the command line of a host process that lives for the probe's run.

    Raises:
        SandboxError: the sandbox itself failed while probing.
    """
    canary = f"rla-canary-{secrets.token_hex(8)}"
    holder = subprocess.Popen(["sh", "-c", "sleep 30", canary], stdin=subprocess.DEVNULL,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    listener = socket.socket()
    try:
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)
        ask = json.dumps({"paths": [p for p in private_paths if os.path.exists(p)], "port": listener.getsockname()[1]})
        probe = sandbox.run(PROBE, ask, timeout_s=10)
    finally:
        listener.close()
        holder.kill()
        holder.wait()
    try:
        report = json.loads(probe.stdout)
    except ValueError:
        raise SandboxStartError(f"sandbox self-test: the probe ended {probe.verdict.value} ({probe.detail}): "
                                f"{probe.stderr[-500:]}") from None
    # bwrap's init and the worker, both root, are the sandbox's own; fork isolation sees the host
    results = judge_report(report, [*(service_secrets() if secret_values is None else secret_values), canary], 2)
    limit = sandbox.config.memory_mb << 20
    memory = sandbox.run(MEMORY_PROBE, f"{int(limit * 0.6)}\n", timeout_s=5)
    results["memory"] = memory.verdict is Verdict.MLE
    for check, ok in results.items():
        CONTAINMENT.labels(check).set(1 if ok else 0)
    return results


def require_containment(sandbox: Sandbox, private_paths: Sequence[str] = ()) -> dict[str, bool]:
    """`check_containment`, then: under bwrap any failed check raises SandboxStartError naming it; under
    fork each failed check is logged as a warning (fork cannot hide host files or processes).

    Raises:
        SandboxStartError: a check failed under bwrap, or the probe could not run.
        SandboxError: the sandbox itself failed while probing.
    """
    results = check_containment(sandbox, private_paths)
    failed = [check for check, ok in results.items() if not ok]
    if failed and sandbox.config.isolation == "bwrap":
        raise SandboxStartError(f"sandbox self-test failed under bwrap: {', '.join(failed)} not contained")
    for check in failed:
        log.warning("sandbox self-test: %s not contained under isolation %s", check, sandbox.config.isolation)
    return results
