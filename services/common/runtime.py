"""The shell every service process runs in: logging, /metrics, NATS, gRPC, consumers, SIGTERM.

A service subclasses `Service` and overrides only what it has: its gRPC servicers
(`grpc_services`), its event consumers (`consumers`), and start/stop hooks. `run_service`
does the rest, the same way for all four services, locally and in Kubernetes.
"""

from __future__ import annotations

import asyncio
import logging
import signal
from collections.abc import Callable

import grpc
from grpc_health.v1 import health_pb2

from services.common.bus import Consumer, EventBus
from services.common.config import RunConfig, ServiceConfig
from services.common.grpc_runtime import create_server
from services.common.metrics import SERVICE_UP, start_metrics_server

__all__ = ["Service", "run_service"]

SERVING = health_pb2.HealthCheckResponse.SERVING
NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING


class Service:
    """Base class of a service process; the defaults add nothing but health and metrics."""

    name: str = "service"

    def __init__(self, config: RunConfig) -> None:
        self.config = config
        self.log = logging.getLogger(f"rlanything.{self.name}")
        self.background: list[asyncio.Task[None]] = []
        """Tasks started by `on_start`; one that fails stops the process (exit 1), like a consumer."""

    @property
    def service_config(self) -> ServiceConfig:
        """This service's section of the run config."""
        section = getattr(self.config, self.name)
        assert isinstance(section, ServiceConfig)
        return section

    def grpc_services(self) -> list[tuple[str, Callable[[grpc.aio.Server], None]]]:
        """``(full service name, register function)`` for each gRPC service this process serves."""
        return []

    async def consumers(self, bus: EventBus) -> list[Consumer]:
        """Durable consumers to run while the process is up (called after streams exist)."""
        return []

    async def on_start(self, bus: EventBus) -> None:
        """Hook run after the bus is connected and before the gRPC server starts."""

    async def on_stop(self) -> None:
        """Hook run after consumers stopped and the gRPC server drained."""


async def run_service(service: Service) -> int:
    """Run ``service`` until SIGTERM/SIGINT or until one of its consumers fails.

    Returns:
        0 after a requested stop, 1 when a consumer task crashed (the error is logged).
    """
    cfg = service.service_config
    log = service.log
    metrics_port = start_metrics_server(cfg.server.host, cfg.server.metrics_port)
    max_bytes = service.config.limits.max_message_bytes
    bus = await EventBus.connect(service.config.nats, service.config.consumer, name=service.name,
                                 max_message_bytes=max_bytes)
    await bus.ensure_streams()
    await service.on_start(bus)
    grpc_parts = service.grpc_services()
    server, grpc_port, health = await create_server(
        cfg.server.host, cfg.server.grpc_port, [reg for _, reg in grpc_parts], [n for n, _ in grpc_parts],
        max_message_bytes=max_bytes)
    await server.start()
    for name in ["", *(n for n, _ in grpc_parts)]:
        await health.set(name, SERVING)
    SERVICE_UP.labels(service.name).set(1)

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    consumers = await service.consumers(bus)
    for c in consumers:
        await c.setup()
    tasks = [asyncio.create_task(c.run(stop), name=f"consumer:{c.durable}") for c in consumers]
    log.info("serving", extra={"grpc_port": grpc_port, "metrics_port": metrics_port,
                               "consumers": [c.durable for c in consumers]})

    stopper = asyncio.create_task(stop.wait())
    watched = [stopper, *tasks, *service.background]
    code = 0
    while not stop.is_set():
        done, _ = await asyncio.wait(watched, return_when=asyncio.FIRST_COMPLETED)
        for task in done:
            watched.remove(task)
            if task is not stopper and not task.cancelled() and task.exception() is not None:
                log.error("task crashed", exc_info=task.exception(), extra={"task": task.get_name()})
                code = 1
                stop.set()
    stop.set()
    log.info("stopping", extra={"grace_s": cfg.server.grace_s})
    await health.enter_graceful_shutdown()
    SERVICE_UP.labels(service.name).set(0)
    # In-flight event handlers are cancelled, not awaited: their messages were not acked, so
    # JetStream redelivers them to another worker (at-least-once); waiting could take minutes.
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    for task in service.background:
        task.cancel()
    await asyncio.gather(*service.background, return_exceptions=True)
    await server.stop(cfg.server.grace_s)
    await service.on_stop()
    await bus.close()
    log.info("stopped", extra={"exit_code": code})
    return code
