"""The sandbox works from any checkout path: a clone under /tmp (bwrap mounts a fresh tmpfs there) and a
path with a space in it. Reproduces the bug where bwrap's tmpfs on /tmp hid the worker script of a
checkout under /tmp, so every bwrap run of a newcomer's clone failed at start."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from tests.integration.sandbox.test_sandbox_safety import _bwrap_missing

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="the sandbox needs root (namespaces, per-run uids)")

REPO = Path(__file__).resolve().parents[3]
PROGRAM = """
from services.common.config import SandboxConfig
from services.common.sandbox import Sandbox
import services.common.sandbox.launch as launch
assert launch.WORKER_PATH.startswith({root!r}), launch.WORKER_PATH
with Sandbox(SandboxConfig(isolation={isolation!r}, workers=1)) as sandbox:
    result = sandbox.run("print(int(input()) * 2)", "21\\n", timeout_s=5)
    print(result.verdict.value, result.stdout.strip())
"""


@pytest.mark.parametrize("isolation", ["bwrap", "fork"])
def test_a_checkout_under_tmp_with_a_space_in_its_path_runs_programs(isolation):
    if isolation == "bwrap" and (missing := _bwrap_missing()):
        pytest.skip(missing)
    with tempfile.TemporaryDirectory(prefix="rla clone ", dir="/tmp") as root:
        shutil.copytree(REPO / "services", Path(root) / "services",
                        ignore=shutil.ignore_patterns("__pycache__"))
        shutil.copytree(REPO / "rlanything", Path(root) / "rlanything", ignore=shutil.ignore_patterns("__pycache__"))
        env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
        env["PYTHONPATH"] = root
        done = subprocess.run([sys.executable, "-c", PROGRAM.format(root=root, isolation=isolation)], cwd=root,
                              env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["OK", "42"]
