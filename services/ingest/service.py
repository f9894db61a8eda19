"""The ingest service process: HTTP API for products, gRPC `Ingest` for services, a sweeper that
closes, settles and expires episodes (a thin shell over `shell.IngestShell`)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import grpc
from rlanything.v1 import ingest_pb2_grpc
from rlanything.v1.ingest_pb2 import CapturedCompletion

from services.common.bus import Consumer, EventBus
from services.common.config import IngestServiceConfig, RunConfig
from services.common.http_server import embedded_server
from services.common.nats_server import free_port
from services.common.runtime import Service
from services.common.topology import Consumers
from services.ingest.shell import IngestShell
from services.ingest.grpc_service import SERVICE_NAME, IngestServicer
from services.ingest.http_api import build_app

__all__ = ["IngestService"]


class IngestService(Service):
    """Ingest service: live conversations and feedback into durable, redacted episodes."""

    name = "ingest"

    def __init__(self, config: RunConfig) -> None:
        super().__init__(config)
        self.cfg: IngestServiceConfig = config.ingest
        self.shell: IngestShell | None = None

    async def on_start(self, bus: EventBus) -> None:
        if not self.cfg.tenants:
            self.log.warning("no tenants configured (ingest.tenants): every request gets 401")
        self.shell = await IngestShell.open(self.cfg, bus)
        await self.shell.sweep()  # open counts before the first request
        port = self.cfg.http_port or free_port()
        self.http = embedded_server(build_app(self.shell), self.cfg.server.host, port, setting="ingest.http_port")
        self.background.append(asyncio.create_task(self.http.serve(), name="ingest-http"))
        self.background.append(asyncio.create_task(self.shell.run_sweeper(), name="ingest-sweeper"))
        self.log.info("ingest endpoint", extra={"url": f"http://{self.cfg.server.host}:{port}/v1/ingest",
                                                "tenants": sorted(self.cfg.tenants)})

    async def consumers(self, bus: EventBus) -> list[Consumer]:
        assert self.shell is not None, "on_start first"
        return [bus.consumer(**Consumers.INGEST_CAPTURES.binding(), message_type=CapturedCompletion,
                             handler=self.shell.on_capture)]

    def grpc_services(self) -> list[tuple[str, Callable[[grpc.aio.Server], None]]]:
        assert self.shell is not None, "on_start first"
        servicer = IngestServicer(self.shell)
        return [(SERVICE_NAME, lambda s: ingest_pb2_grpc.add_IngestServicer_to_server(servicer, s))]

    async def on_stop(self) -> None:
        if getattr(self, "http", None) is not None:
            self.http.should_exit = True
