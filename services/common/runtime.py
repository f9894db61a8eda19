"""The shell every service process runs in: logging, /metrics, NATS, gRPC, consumers, SIGTERM.

A service subclasses `Service` and overrides only what it has: its gRPC servicers
(`grpc_services`), its event consumers (`consumers`), and start/stop hooks. `run_service`
does the rest, the same way for all five services, locally and in Kubernetes.
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
from services.common.errors import BusLostError
from services.common.grpc_runtime import add_services, bind_server
from services.common.metrics import SERVICE_UP, start_metrics_server
from services.common.task_stop import STOP_TASKS_S, cancel_until_done

__all__ = ["Service", "run_service", "EXIT_NATS_LOST"]

SERVING = health_pb2.HealthCheckResponse.SERVING
NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING
EXIT_NATS_LOST = 69
"""Exit code of a process whose NATS connection stayed lost for ``nats.reconnect_budget_s`` seconds
(sysexits' EX_UNAVAILABLE: a service it needs is unavailable); its supervisor restarts it."""


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
    """Run ``service`` until SIGTERM/SIGINT, until one of its consumers fails, or until its NATS
    connection stays lost for ``nats.reconnect_budget_s`` seconds.

    gRPC health (the server and every named service) says NOT_SERVING from the moment the NATS
    connection is found lost until it is back.

    Returns:
        0 after a requested stop, 1 when a consumer or background task crashed, `EXIT_NATS_LOST`
        when the NATS connection was given up (each logged with its cause).
    """
    cfg = service.service_config
    log = service.log
    max_bytes = service.config.limits.max_message_bytes
    # The port first: a second process on a taken port stops here, before it touches NATS.
    server, grpc_port = bind_server(cfg.server.host, cfg.server.grpc_port, max_bytes,
                                    setting=f"{service.name}.server.grpc_port")
    metrics_port = start_metrics_server(cfg.server.host, cfg.server.metrics_port,
                                        setting=f"{service.name}.server.metrics_port")
    bus = await EventBus.connect(service.config.nats, service.config.consumer, name=service.name,
                                 max_message_bytes=max_bytes)
    await bus.ensure_streams()
    await service.on_start(bus)
    grpc_parts = service.grpc_services()
    health = await add_services(server, [reg for _, reg in grpc_parts], [n for n, _ in grpc_parts])
    await server.start()
    names = ["", *(n for n, _ in grpc_parts)]

    async def health_follows_bus(up: bool) -> None:
        for name in names:  # ignored once shutting down (the servicer keeps NOT_SERVING then)
            await health.set(name, SERVING if up else NOT_SERVING)

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    consumers = await service.consumers(bus)
    for c in consumers:
        await c.setup()
    tasks = [asyncio.create_task(c.run(stop), name=f"consumer:{c.durable}") for c in consumers]
    # SERVING only now: start-up talks to NATS without retries (a failure there ends the process).
    bus.on_link_change(health_follows_bus)
    await health_follows_bus(bus.link.up)  # the connection may have dropped during start-up
    SERVICE_UP.labels(service.name).set(1)
    log.info("serving", extra={"grpc_port": grpc_port, "metrics_port": metrics_port,
                               "consumers": [c.durable for c in consumers]})

    stopper = asyncio.create_task(stop.wait())
    link_watch = asyncio.create_task(bus.watch_link(), name="nats-link")
    watched = [stopper, link_watch, *tasks, *service.background]
    code = 0
    while not stop.is_set():
        done, _ = await asyncio.wait(watched, return_when=asyncio.FIRST_COMPLETED)
        for task in done:
            watched.remove(task)
            if task is stopper or task.cancelled() or task.exception() is None:
                continue
            exc = task.exception()
            if isinstance(exc, BusLostError):
                log.error("nats connection lost for good", extra={"reason": str(exc), "exit_code": EXIT_NATS_LOST})
                code = code or EXIT_NATS_LOST
            else:
                log.error("task crashed", exc_info=exc, extra={"task": task.get_name()})
                code = 1
            stop.set()
    stop.set()
    log.info("stopping", extra={"grace_s": cfg.server.grace_s})
    await health.enter_graceful_shutdown()
    SERVICE_UP.labels(service.name).set(0)
    # In-flight event handlers are cancelled, not awaited: their messages were not acked, so
    # JetStream redelivers them to another worker (at-least-once); waiting could take minutes.
    # Cancelled again until they end: a NATS call can lose a cancellation (`cancel_until_done`).
    for group in (tasks, [*service.background, link_watch]):
        running = await cancel_until_done(group, STOP_TASKS_S)
        if running:
            log.error("tasks still running after being cancelled; stopping without them",
                      extra={"tasks": sorted(t.get_name() for t in running), "waited_s": STOP_TASKS_S})
    await server.stop(cfg.server.grace_s)
    await service.on_stop()
    await bus.close()
    log.info("stopped", extra={"exit_code": code})
    return code
