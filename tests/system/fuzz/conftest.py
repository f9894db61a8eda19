"""One `rlanything up --fail-fast` for the fuzz tests (any crash ends it, and the tests see it),
and the bound on generated inputs: ``RLA_FUZZ_EXAMPLES`` per method or subject (`make test-all`
keeps it small; `make fuzz` runs the large bound and writes ``bench/fuzz.md``)."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator

import pytest

from services.common.grpc_runtime import check_health_sync
from tests.system.fuzz.tally import write_report
from tests.launch import RLANYTHING, stop_launcher, wait_for

@pytest.fixture(scope="package")
def system(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict]:
    """The five services and NATS, started once for the fuzz tests (stopped after them, so the
    rest of the suite has the machine, and port 8000, to itself); the services.json manifest."""
    run_dir = tmp_path_factory.mktemp("fuzz") / "run"
    proc = subprocess.Popen([RLANYTHING, "up", "--fail-fast", "--run-dir", str(run_dir),
                             "--set", "policy.openai_port=0", "--set", "ingest.http_port=0",
                             "--set", "ingest.tenants.fuzz.key=fuzz-key-0123456789abcdef",
                             "--set", "ingest.tenants.fuzz.secret=fuzz-secret-0123456789abcdef",
                             # one small round, so the fuzzed requests do not queue behind a whole loop's work
                             "--set", "loop.rounds=1", "--set", "env.scheduler.tasks_per_round=1",
                             "--set", "env.scheduler.group_size=2", "--set", "env.scheduler.eval_every=0"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        manifest = wait_for(run_dir / "services.json", proc, timeout_s=120)
        manifest["proc"] = proc
        manifest["run_dir"] = run_dir
        yield manifest
        for name, svc in manifest["services"].items():  # nothing crashed or hung during the whole session
            assert proc.poll() is None, proc.stderr.read().decode()[-3000:]
            assert check_health_sync(svc["address"]) == "SERVING", name
    finally:
        stop_launcher(proc)
        write_report()
