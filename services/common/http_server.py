"""HTTP endpoints inside a service process (uvicorn on the service's own event loop)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import uvicorn

__all__ = ["EmbeddedServer", "embedded_server"]


class EmbeddedServer(uvicorn.Server):
    """A uvicorn server inside a service's event loop: the service owns SIGTERM, not uvicorn."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


def embedded_server(app: object, host: str, port: int) -> EmbeddedServer:
    """An `EmbeddedServer` for ASGI ``app`` on ``host:port``; run it with ``await server.serve()``."""
    return EmbeddedServer(uvicorn.Config(app, host=host, port=port, log_level="warning", lifespan="off"))  # type: ignore[arg-type]  # any ASGI app
