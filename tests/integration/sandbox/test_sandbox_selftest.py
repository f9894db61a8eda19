"""The start-up self-test's probes against both isolations, with real processes: bwrap contains every
check; fork, which shares the host's file system and PID namespace, fails the three it cannot hide (and
only warns), so the probes do find what they look for."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest

from services.common.config import SandboxConfig
from services.common.sandbox import Sandbox, SandboxStartError
from services.common.sandbox.selftest import CHECKS, CONTAINMENT, check_containment, require_containment

ROOT = Path(__file__).resolve().parents[3]
pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="the sandbox needs root (namespaces, per-run uids)")


@pytest.fixture
def private(tmp_path, monkeypatch):
    (tmp_path / "tests.json").write_text('{"outputs": ["42"]}')   # a cached ground-truth test under /tmp
    outside = Path(tempfile.mkdtemp(prefix="rla-selftest-", dir="/var/tmp"))   # and one outside /tmp, which
    os.chmod(outside, 0o755)                       # fork isolation leaves visible (it replaces /tmp only)
    (outside / "tests.json").write_text('{"outputs": ["42"]}')
    os.chmod(outside / "tests.json", 0o644)
    monkeypatch.setenv("RLA_TEST_API_KEY", "sk-selftest-0123456789")   # a secret of the service
    monkeypatch.delenv("RLANYTHING_SANDBOX_REFUSE_FORK", raising=False)
    yield [str(ROOT), str(outside), str(outside / "tests.json"), str(tmp_path), str(tmp_path / "tests.json")]
    shutil.rmtree(outside)


def test_bwrap_contains_every_probe(private):
    with Sandbox(SandboxConfig(isolation="bwrap", workers=1, memory_mb=128)) as sb:
        assert require_containment(sb, private) == dict.fromkeys(CHECKS, True)
    assert all(CONTAINMENT.labels(check)._value.get() == 1 for check in CHECKS)


def test_fork_fails_what_it_cannot_hide_and_only_warns(private, caplog):
    with Sandbox(SandboxConfig(isolation="fork", workers=1, memory_mb=128)) as sb:
        results = check_containment(sb, private)
        assert results == {"secrets": False, "processes": False, "host_files": False,
                           "network": True, "writes": True, "memory": True}
        with caplog.at_level("WARNING"):
            require_containment(sb, private)   # does not raise: fork is development-only, warned
    assert {"secrets", "processes", "host_files"} <= {m.split(": ")[1].split()[0] for m in caplog.messages
                                                       if m.startswith("sandbox self-test")}
    assert CONTAINMENT.labels("host_files")._value.get() == 0


def test_a_check_that_fails_under_bwrap_stops_the_start(private, monkeypatch):
    import services.common.sandbox.selftest as selftest
    monkeypatch.setattr(selftest, "judge_report", lambda *a, **k: {"secrets": True, "processes": True,
                                                                    "host_files": False, "network": True,
                                                                    "writes": True})
    with Sandbox(SandboxConfig(isolation="bwrap", workers=1, memory_mb=128)) as sb:
        with pytest.raises(SandboxStartError, match="self-test failed under bwrap: host_files not contained"):
            require_containment(sb, private)
