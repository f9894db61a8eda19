"""A hung broker (`SIGSTOP` of the real nats-server) under real service processes.

Each service must find the dead connection within ``(nats.max_outstanding_pings + 1) x
nats.ping_interval_s`` seconds, say NOT_SERVING on gRPC health and ``rla_nats_connected 0`` while
the bus is down, and SERVING again once it reconnects after `SIGCONT`, in the same process. When
the connection stays lost for ``nats.reconnect_budget_s`` seconds the process exits non-zero
naming the cause, so its supervisor restarts it. (Found in the field: a 60 s SIGSTOP crashed the
policy and the reward model twice each, while the critic, the env and ingest kept answering
SERVING with no bus.)
"""

from __future__ import annotations

import os
import re
import signal
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from services.common.config import FamilyConfig, ModelConfig
from services.common.grpc_runtime import check_health_sync
from services.common.nats_server import NatsServer, free_port
from services.common.runtime import EXIT_NATS_LOST

pytestmark = [pytest.mark.integration, pytest.mark.slow]

PING_S, PINGS = 1.0, 2
DETECT_BOUND_S = (PINGS + 1) * PING_S
"""The configured bound on finding a hung server (nats-py's ping timer; see NatsConfig)."""
SLACK_S = 3.0
"""Scheduling slack on this shared 2-core machine (a health poll every 0.1 s, a loaded event loop)."""
PROBE_S = 3.0
"""How long one health check waits: an answer can take over a second while another test's process
loads a model on the same two cores; a process that does not answer at all still fails the check."""
FAMILY = "families: [{type: gym_text, knobs: {size: 4, hole_prob: 0.2}, train_slots: 2}]"


def nats_yaml(budget_s: float) -> str:
    return (f"nats: {{ping_interval_s: {PING_S}, max_outstanding_pings: {PINGS}, reconnect_time_wait_s: 0.5, "
            f"connect_timeout_s: 2, reconnect_budget_s: {budget_s}}}\n")


@pytest.fixture(scope="module")
def tiny_policy_dir(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A tiny policy model (random weights) for the policy process."""
    from services.offline.bootstrap import tiny_policy

    model = ModelConfig(cache_dir=str(tmp_path_factory.mktemp("models")), tiny={"hidden_size": 64})
    return tiny_policy(model, FamilyConfig(type="gym_text", knobs={"size": 4, "hole_prob": 0.2}), 2)


def service_yaml(name: str, metrics_port: int, tmp_path: Path, policy_dir: str, judge_dir: Path) -> str:
    """The smallest config of service ``name`` that runs its bus-facing background work."""
    server = f"server: {{metrics_port: {metrics_port}}}"
    body = {
        "critic": f"critic: {{{server}}}",
        "env": f"env: {{{server}, scheduler: {{enabled: false}}, {FAMILY}}}",
        "ingest": f"ingest: {{{server}, http_port: {free_port()}}}",
        # the rollout role follows the trainer's versions (a KV poll every 0.5 s)
        "policy": (f"policy: {{{server}, role: rollout, openai_port: {free_port()}, checkpoint_dir: '{tmp_path / 'ckpt'}', "
                   f"model: {{source: '{policy_dir}'}}, rollout: {{env_address: '127.0.0.1:1'}}}}\n"
                   f"env: {{scheduler: {{enabled: false}}, {FAMILY}}}"),
        # a trainable judge follows the reward trainer's versions the same way
        "reward": (f"reward: {{{server}, role: judge, backend: llm, votes: 2, max_new_tokens: 6, prompt_chars: 200, "
                   f"field_chars: 120, checkpoint_dir: '{tmp_path / 'ckpt'}', model: {{source: '{judge_dir}'}}}}"),
    }[name]
    return body + "\n"


def gauge(metrics_port: int, name: str) -> float | None:
    """The value of an unlabelled gauge on the process's /metrics (None when absent)."""
    body = urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=5).read().decode()
    match = re.search(rf"^{name} (\S+)$", body, re.M)
    return float(match.group(1)) if match else None


@pytest.fixture
def frozen_later(nats_server: NatsServer) -> Iterator[NatsServer]:
    """The test's nats-server, continued at teardown whatever the test did to it."""
    yield nats_server
    assert nats_server.proc is not None
    os.kill(nats_server.proc.pid, signal.SIGCONT)


def wait_health(svc, want: str, timeout_s: float) -> float:
    """Seconds until service process ``svc`` reports ``want``; fails (with its log) when it exits or
    stops answering."""
    start = time.monotonic()
    while True:
        status = check_health_sync(svc.address, timeout_s=PROBE_S)
        if status == want:
            return time.monotonic() - start
        log = svc.log_path.read_text()[-3000:]
        assert svc.proc.poll() is None, f"exited with {svc.proc.returncode} while waiting for {want}:\n{log}"
        assert status != "UNREACHABLE" or want == "UNREACHABLE", f"health unanswered while waiting for {want}:\n{log}"
        assert time.monotonic() - start < timeout_s, f"still {status} after {timeout_s} s (waiting for {want}):\n{log}"
        time.sleep(0.1)


@pytest.mark.parametrize("name", ["critic", "env", "ingest", "policy", "reward"])
def test_a_hung_broker_turns_health_not_serving_then_serving_again(
        name: str, spawn_service, frozen_later: NatsServer, tmp_path: Path, tiny_policy_dir: str,
        tiny_judge_dir: Path) -> None:
    metrics_port = free_port()
    svc = spawn_service(name, nats_yaml(budget_s=120) + service_yaml(name, metrics_port, tmp_path, tiny_policy_dir,
                                                                     tiny_judge_dir))
    pid = svc.proc.pid
    assert gauge(metrics_port, "rla_nats_connected") == 1.0
    os.kill(frozen_later.proc.pid, signal.SIGSTOP)
    stopped_at = time.monotonic()
    detect_s = wait_health(svc, "NOT_SERVING", timeout_s=DETECT_BOUND_S + SLACK_S)
    assert gauge(metrics_port, "rla_nats_connected") == 0.0
    # Stay hung past the 5 s request timeouts: the KV polls, fetches and publishes under way fail
    # (what crashed the policy and the reward model), yet the process stays up and answers.
    while time.monotonic() - stopped_at < 12.0:
        status = check_health_sync(svc.address, timeout_s=PROBE_S)
        assert status == "NOT_SERVING", (f"{status} {time.monotonic() - stopped_at:.1f} s into the hang:\n"
                                         + svc.log_path.read_text()[-4000:])
        assert svc.proc.poll() is None, f"{name} exited with {svc.proc.returncode} during the hang"
        time.sleep(0.5)
    os.kill(frozen_later.proc.pid, signal.SIGCONT)
    back_s = wait_health(svc, "SERVING", timeout_s=20.0)
    assert gauge(metrics_port, "rla_nats_connected") == 1.0
    assert svc.proc.poll() is None and svc.proc.pid == pid  # the same process, not a restart
    print(f"{name}: NOT_SERVING {detect_s:.1f} s after SIGSTOP (bound {DETECT_BOUND_S:g} s); "
          f"SERVING {back_s:.1f} s after SIGCONT")
    messages = [m["msg"] for m in svc.log_messages()]
    assert "nats connection lost" in messages and "nats connection back" in messages


@pytest.mark.parametrize("name", ["critic", "policy"])
def test_a_broker_hung_past_the_reconnect_budget_ends_the_process_naming_the_cause(
        name: str, spawn_service, frozen_later: NatsServer, tmp_path: Path, tiny_policy_dir: str,
        tiny_judge_dir: Path) -> None:
    budget_s = 4.0
    svc = spawn_service(name, nats_yaml(budget_s) + service_yaml(name, free_port(), tmp_path, tiny_policy_dir,
                                                                 tiny_judge_dir))
    os.kill(frozen_later.proc.pid, signal.SIGSTOP)
    stopped_at = time.monotonic()
    code = svc.proc.wait(timeout=DETECT_BOUND_S + budget_s + 30)
    took_s = time.monotonic() - stopped_at
    assert code == EXIT_NATS_LOST, svc.log_path.read_text()[-3000:]
    # found dead, then the budget, then a stop that does not wait on the hung server
    assert took_s < DETECT_BOUND_S + budget_s + SLACK_S + 5.0, took_s
    errors = [m for m in svc.log_messages() if m["level"] == "ERROR"]
    assert any(m["msg"] == "nats connection lost for good" and "nats.reconnect_budget_s=4" in m["reason"]
               for m in errors), errors
    print(f"{name}: exit {code} {took_s:.1f} s after SIGSTOP")
