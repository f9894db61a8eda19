"""An ASGI app served on loopback for a test (the OpenAI-compatible endpoint under the `hf` and the
`vllm` backends; the vLLM virtualenv has uvicorn but not every test dependency of the project)."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator

import uvicorn

from services.common.nats_server import free_port

__all__ = ["serving"]


@contextlib.contextmanager
def serving(app: object) -> Iterator[str]:
    """Serve the ASGI ``app`` with uvicorn on a free loopback port (a thread); yields its ``/v1`` URL."""
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        assert time.monotonic() < deadline, "server did not start"
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        server.should_exit = True
        thread.join(timeout=10)
