"""The parent of `tests/integration/test_parent_watch.py`: starts services from short-lived threads
while gRPC calls are in flight, prints their pids (one JSON line), then waits to be killed.

``python tests/integration/parent_watch_child.py CONFIG_DIR COUNT``: CONFIG_DIR holds ``ingest-<i>.yaml``.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from concurrent import futures
from pathlib import Path

import grpc

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from services.common.service_start import start_service  # noqa: E402


def _slow(request: bytes, context: grpc.ServicerContext) -> bytes:
    time.sleep(0.05)  # a call in flight whenever a service is spawned
    return request


def main(config_dir: str, count: str) -> None:
    server = grpc.server(futures.ThreadPoolExecutor(4))
    server.add_generic_rpc_handlers([grpc.method_handlers_generic_handler(
        "probe.Probe", {"Echo": grpc.unary_unary_rpc_method_handler(_slow)})])
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    echo = channel.unary_unary("/probe.Probe/Echo")
    stop = threading.Event()

    def calls() -> None:
        while not stop.is_set():
            echo(b"x", timeout=5)

    callers = [threading.Thread(target=calls, daemon=True) for _ in range(3)]
    for t in callers:
        t.start()
    pids = []
    for i in range(int(count)):
        root = Path(config_dir)
        spawner = threading.Thread(target=lambda i=i: pids.append(start_service(
            "ingest", root / f"ingest-{i}.yaml", root / f"ingest-{i}.log", detached=True).pid))
        spawner.start()
        spawner.join(timeout=30)  # the thread that spawned the service is gone from here on
        assert not spawner.is_alive(), f"spawning service {i} hung"
    print(json.dumps(pids), flush=True)
    while True:
        time.sleep(1)


if __name__ == "__main__":
    main(*sys.argv[1:])
