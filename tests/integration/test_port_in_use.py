"""A gRPC port already in use is an error at start-up, naming the address (no silent second listener).

Found in the field: a second `python -m services.env` on the same port started without error (gRPC
sets SO_REUSEPORT on Linux by default); with two listeners the kernel spread the connections over
both processes and 11 of 30 `Environment.Step` calls got NOT_FOUND (their session lived in the other one).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import grpc
import pytest
import yaml

from rlanything.v1 import env_pb2, env_pb2_grpc
from services.common.errors import ServiceFailedError
from services.common.grpc_runtime import create_server
from tests.support import wait_for_tasks

pytestmark = pytest.mark.integration

ENV = "env: {scheduler: {enabled: false}, families: [{type: gym_text, knobs: {size: 4, hole_prob: 0.2}, train_slots: 2}]}\n"


async def test_a_second_server_on_a_taken_port_fails_naming_the_address() -> None:
    first, port, _ = await create_server("127.0.0.1", 0)
    await first.start()
    try:
        with pytest.raises(ServiceFailedError, match=rf"gRPC address 127\.0\.0\.1:{port} \(env\.server\.grpc_port\) "
                                                     r"is in use"):
            await create_server("127.0.0.1", port, setting="env.server.grpc_port")
    finally:
        await first.stop(None)


@pytest.mark.slow
def test_a_second_env_process_on_the_same_port_exits_naming_the_address(spawn_service, tmp_path: Path) -> None:
    first = spawn_service("env", ENV)
    port = int(first.address.rsplit(":", 1)[1])
    config = yaml.safe_load(first.config_path.read_text())
    config["env"]["server"]["metrics_port"] = 0
    second_config = tmp_path / "second.yaml"
    second_config.write_text(yaml.safe_dump(config))
    second = subprocess.Popen([sys.executable, "-m", "services.env", "--config", str(second_config)],
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        out, _ = second.communicate(timeout=60)
    finally:
        if second.poll() is None:
            second.kill()
            second.wait()
    assert second.returncode == 1, out[-2000:]
    assert f"gRPC address 127.0.0.1:{port} (env.server.grpc_port) is in use" in out, out[-2000:]
    # The first process is the only listener: every call on a new connection finds its session.
    task = wait_for_tasks(env_pb2_grpc.EnvironmentStub(grpc.insecure_channel(first.address)), 1)[0]
    found = 0
    for seed in range(30):
        with new_connection(first.address) as a, new_connection(first.address) as b:
            reset = env_pb2_grpc.EnvironmentStub(a).Reset(env_pb2.ResetRequest(task=task.ref, seed=seed), timeout=10)
            try:
                env_pb2_grpc.EnvironmentStub(b).Step(env_pb2.StepRequest(session_id=reset.session_id, action="up"),
                                                     timeout=10)
                found += 1
            except grpc.RpcError as exc:
                assert exc.code() == grpc.StatusCode.NOT_FOUND, exc
    assert found == 30


def new_connection(address: str) -> grpc.Channel:
    """A channel with its own TCP connection (gRPC channels share one per target by default)."""
    return grpc.insecure_channel(address, options=[("grpc.use_local_subchannel_pool", 1)])


@pytest.mark.parametrize(("name", "config", "setting", "what"), [
    ("ingest", "ingest: {http_port: PORT, tenants: {acme: {key: acme-key-0123456789}}}\n", "ingest.http_port", "HTTP"),
    ("env", ENV.replace("env: {", "env: {server: {metrics_port: PORT}, "), "env.server.metrics_port", "metrics"),
])
def test_a_taken_http_or_metrics_port_stops_the_service_with_one_line_naming_it(
        nats_server, tmp_path: Path, name: str, config: str, setting: str, what: str) -> None:
    """Not an `OSError: [Errno 98]` traceback from a server's task: one line, the address and the setting."""
    import socket

    from services.common.nats_server import free_port

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        data = yaml.safe_load(config.replace("PORT", str(port)))
        data["nats"] = {"url": nats_server.url}
        data[name].setdefault("server", {})["grpc_port"] = free_port()
        path = tmp_path / f"{name}.yaml"
        path.write_text(yaml.safe_dump(data))
        done = subprocess.run([sys.executable, "-m", f"services.{name}", "--config", str(path)],
                              capture_output=True, text=True, timeout=120)
    assert done.returncode == 1, done.stderr[-2000:]
    assert f"{what} address 127.0.0.1:{port} ({setting}) is in use" in done.stderr, done.stderr[-2000:]
    assert "Traceback" not in done.stderr, done.stderr[-3000:]
