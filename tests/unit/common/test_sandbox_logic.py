"""The sandbox's pure parts: output normalisation, verdicts from raw facts, bubblewrap's options, config."""

from __future__ import annotations

import signal

import pytest
from pydantic import ValidationError

from services.common.config import SandboxConfig
from services.common.sandbox import Verdict, classify, normalise_output, outputs_match, worker
from services.common.sandbox import results
from services.common.sandbox.errors import SandboxStartError
from services.common.sandbox.launch import SANDBOX_WORKER_PATH, bwrap_args, find_bwrap


def test_normalisation_drops_trailing_whitespace_and_final_newlines_only():
    assert normalise_output("1 2 \r\n3\t\n\n\n") == "1 2\n3"
    assert outputs_match("42", "42\n")
    assert outputs_match("a  \nb\n", "a\nb")
    assert not outputs_match(" 42", "42")          # leading whitespace counts
    assert not outputs_match("a\n\nb", "a\nb")      # an empty line inside counts
    assert not outputs_match("Yes", "yes")          # case counts
    assert outputs_match("", "\n\n")


def facts(**overrides):
    base = dict(exit_code=0, signal_number=None, timed_out=False, output_exceeded=None, cpu_s=0.1,
                cpu_limit_s=2, timeout_s=2.0, max_output_bytes=1024)
    base.update(overrides)
    return classify(**base)


@pytest.mark.parametrize("overrides, verdict", [
    ({}, Verdict.OK),
    ({"exit_code": 3}, Verdict.RE),
    ({"exit_code": None, "signal_number": signal.SIGSEGV}, Verdict.RE),
    ({"exit_code": None, "signal_number": signal.SIGKILL}, Verdict.RE),
    ({"exit_code": None, "signal_number": signal.SIGKILL, "cpu_s": 3.0}, Verdict.TLE),
    ({"exit_code": None, "signal_number": signal.SIGXCPU}, Verdict.TLE),
    ({"exit_code": None, "signal_number": signal.SIGKILL, "timed_out": True}, Verdict.TLE),
    ({"exit_code": results.MEMORY_EXIT}, Verdict.MLE),
    ({"exit_code": None, "signal_number": signal.SIGKILL, "memory_exceeded": True}, Verdict.MLE),
    ({"exit_code": None, "signal_number": signal.SIGKILL, "output_exceeded": "stdout"}, Verdict.OLE),
    # a fork bomb: the process limit reached, then the wall clock (the limit is the cause, not the time)
    ({"exit_code": None, "signal_number": signal.SIGKILL, "timed_out": True, "process_limit_hit": True}, Verdict.RE),
    # a program that used every allowed process and ended cleanly is OK
    ({"process_limit_hit": True}, Verdict.OK),
])
def test_verdicts(overrides, verdict):
    assert facts(**overrides)[0] is verdict


def test_reasons_name_the_limit():
    assert facts(timed_out=True, exit_code=None, signal_number=9)[1] == "wall-clock limit of 2 s reached"
    assert facts(output_exceeded="stderr", exit_code=None, signal_number=9)[1] == \
        "stderr passed the output cap of 1024 bytes"
    assert facts(exit_code=None, signal_number=signal.SIGSEGV)[1] == "ended by SIGSEGV"
    assert facts(exit_code=None, signal_number=9, memory_exceeded=True, memory_limit_bytes=256 << 20)[1] == \
        "the run's processes held more than 256 MiB resident"
    assert facts(exit_code=1, process_limit_hit=True, max_processes=8)[1] == \
        "the process limit of 8 (processes and threads) was reached"


def test_setup_failure_is_a_sandbox_fault_not_a_verdict():
    with pytest.raises(ValueError, match="set-up failed"):
        facts(exit_code=results.SETUP_EXIT)


def test_worker_and_results_agree_on_reserved_statuses():
    assert (worker.MEMORY_EXIT, worker.SETUP_EXIT) == (results.MEMORY_EXIT, results.SETUP_EXIT)


def test_bwrap_options_hide_the_host_and_drop_the_network():
    args = bwrap_args(python="/opt/py/bin/python3", prefix="/opt/py", worker_path="/src/worker.py",
                      scratch_bytes=1 << 20)
    for flag in ("--unshare-net", "--unshare-pid", "--die-with-parent", "--new-session", "--clearenv"):
        assert flag in args
    assert "--unshare-user" not in args and "--unshare-all" not in args   # the worker must keep setuid
    assert "--bind" not in args                                           # nothing of the host is writable
    pairs = {(args[i + 1], args[i + 2]) for i, a in enumerate(args) if a == "--ro-bind"}
    assert {("/opt/py", "/opt/py"), ("/src/worker.py", SANDBOX_WORKER_PATH), ("/usr", "/usr")} <= pairs
    assert args[args.index("--tmpfs") - 1] == str(1 << 20)


def test_bwrap_mounts_the_worker_and_a_prefix_under_tmp_over_its_tmpfs():
    """bwrap applies its options in order: a bind before ``--tmpfs /tmp`` of a path under /tmp is hidden by
    the tmpfs (a checkout under /tmp could not start a worker). Both binds come after it."""
    args = bwrap_args(python="/tmp/py/bin/python3", prefix="/tmp/py", worker_path="/tmp/my clone/worker.py",
                      scratch_bytes=1 << 20)
    tmpfs = args.index("--tmpfs")
    binds = [i for i, a in enumerate(args) if a == "--ro-bind" and args[i + 1].startswith("/tmp/")]
    assert len(binds) == 2 and all(i > tmpfs for i in binds)
    assert ("--dir", "/tmp") not in zip(args, args[1:])


def test_config_errors_name_the_field():
    with pytest.raises(ValidationError, match="isolation"):
        SandboxConfig(isolation="none")
    with pytest.raises(ValidationError, match="memory_mb"):
        SandboxConfig(memory_mb=8)
    with pytest.raises(ValidationError, match="sandbox.workers=4 needs as many uids"):
        SandboxConfig(workers=4, uid_count=2)


def test_a_configured_bwrap_that_is_not_executable_is_refused(tmp_path):
    with pytest.raises(SandboxStartError, match="bwrap_path"):
        find_bwrap(str(tmp_path / "nothing"))


def test_the_uid_range_is_the_configured_one_or_derived_from_the_host_name(monkeypatch):
    import socket as socket_module
    assert SandboxConfig(uid_base=61000).first_uid == 61000
    monkeypatch.setattr(socket_module, "gethostname", lambda: "env-7d9f-abcde")
    first = SandboxConfig().first_uid
    monkeypatch.setattr(socket_module, "gethostname", lambda: "env-7d9f-fghij")
    second = SandboxConfig().first_uid
    assert first != second and all(100_000 <= u < 100_000 + 8192 * 1024 for u in (first, second))
    assert first % 1024 == second % 1024 == 100_000 % 1024   # ranges of uid_count never overlap partly
