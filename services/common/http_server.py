"""HTTP endpoints inside a service process (uvicorn on the service's own event loop)."""

from __future__ import annotations

import contextlib
import errno
import socket
from collections.abc import Iterator

import uvicorn

from services.common.errors import ServiceFailedError

__all__ = ["EmbeddedServer", "embedded_server", "require_free_port"]


class EmbeddedServer(uvicorn.Server):
    """A uvicorn server inside a service's event loop: the service owns SIGTERM, not uvicorn."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


def require_free_port(host: str, port: int, setting: str, what: str = "HTTP") -> None:
    """Check that ``host:port`` can be bound now (0: any free port can), so that a taken port stops the
    service at start-up with one line naming ``setting`` instead of a traceback from the server's task.

    Raises:
        ServiceFailedError: the address is in use or cannot be bound.
    """
    if not port:
        return
    try:
        family, kind, proto, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
        with socket.socket(family, kind, proto) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn and prometheus bind
            probe.bind(address)
    except OSError as exc:
        why = "is in use" if exc.errno == errno.EADDRINUSE else f"cannot be bound ({exc.strerror or exc})"
        raise ServiceFailedError(f"{what} address {host}:{port} ({setting}) {why}: another process serves it; "
                                 f"choose another {setting} (0 = a free port)") from None


def embedded_server(app: object, host: str, port: int, setting: str = "") -> EmbeddedServer:
    """An `EmbeddedServer` for ASGI ``app`` on ``host:port``; run it with ``await server.serve()``.

    Raises:
        ServiceFailedError: ``port`` is taken (`require_free_port`, naming ``setting``).
    """
    require_free_port(host, port, setting or "its port")
    return EmbeddedServer(uvicorn.Config(app, host=host, port=port, log_level="warning", lifespan="off"))  # type: ignore[arg-type]  # any ASGI app
