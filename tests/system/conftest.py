"""Shared by the system tests: one finished two-round run of the tiny config (read by the loop, viewer,
shadow-judge and reproducibility tests, so the run happens once per session). The cold start it uses,
``tiny_cold``, is the session's (tests/conftest.py), shared with the heavy tier."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def two_round_run(tmp_path_factory: pytest.TempPathFactory, tiny_cold: Path) -> Path:
    """The run directory of a finished 2-round `rlanything run` of the tiny config, with an oracle
    shadow judge beside the running one (`test_run_loop` checks it changes nothing)."""
    from tests.launch import RLANYTHING, write_config

    tmp = tmp_path_factory.mktemp("two-rounds")
    run_dir = tmp / "run"
    result = subprocess.run([RLANYTHING, "run", str(write_config(tmp, 2, tiny_cold)), "--run-dir", str(run_dir),
                             "--set", "launcher.shadow_judge={shadow: oracle, backend: oracle}"],
                            capture_output=True, text=True, timeout=1500)
    assert result.returncode == 0, result.stderr[-3000:]
    return run_dir
