"""Shared by the end-to-end tests: one cold start of the tiny config and one finished two-round
run of it (read by the loop, viewer and tracker tests, so the run happens once per session)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def tiny_cold(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny config's cold-start cache (SFT runs once)."""
    return tmp_path_factory.mktemp("coldstart")


@pytest.fixture(scope="session")
def two_round_run(tmp_path_factory: pytest.TempPathFactory, tiny_cold: Path) -> Path:
    """The run directory of a finished 2-round `rlanything run` of the tiny config, with an oracle
    shadow judge beside the running one (`test_run_loop` checks it changes nothing)."""
    from tests.e2e.test_run_loop import RLANYTHING, write_config

    tmp = tmp_path_factory.mktemp("two-rounds")
    run_dir = tmp / "run"
    result = subprocess.run([RLANYTHING, "run", str(write_config(tmp, 2, tiny_cold)), "--run-dir", str(run_dir),
                             "--set", "launcher.shadow_judge={shadow: oracle, backend: oracle}"],
                            capture_output=True, text=True, timeout=1500)
    assert result.returncode == 0, result.stderr[-3000:]
    return run_dir
