"""Write the run viewer's page to a file, or serve it on loopback rebuilt from the run directory
on every request (so a running run's page shows its latest rounds and trajectories)."""

from __future__ import annotations

from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from rich.console import Console

from services.run.view_data import build_view
from services.run.view_page import render_page

__all__ = ["write_view", "serve_view"]


def write_view(run_dir: Path, out: Path, limit: int) -> Path:
    """Write the page for ``run_dir`` to ``out``; returns ``out``."""
    out.write_text(render_page(build_view(run_dir, limit)), encoding="utf-8")
    return out


def serve_view(run_dir: Path, port: int, limit: int, refresh_s: int, console: Console) -> None:
    """Serve the page at http://127.0.0.1:PORT/ until Ctrl-C (loopback only)."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - http.server's name
            if self.path not in ("/", "/index.html"):
                self.send_error(404, "only / is served")
                return
            body = render_page(build_view(run_dir, limit), refresh_s).encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - http.server's signature
            return

    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    console.print(f"serving {run_dir} at http://127.0.0.1:{server.server_address[1]}/ (Ctrl-C stops)")
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
