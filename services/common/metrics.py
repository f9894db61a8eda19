"""Prometheus metrics shared by every service, and the per-service `/metrics` endpoint."""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram, start_http_server

__all__ = [
    "EVENTS_HANDLED",
    "EVENTS_DEAD_LETTERED",
    "EVENT_HANDLER_SECONDS",
    "SERVICE_UP",
    "CONSUMER_PENDING",
    "NATS_CONNECTED",
    "start_metrics_server",
]

EVENTS_HANDLED = Counter(
    "rla_events_handled_total",
    "Events by consumer and outcome (acked, nacked, dead_lettered).",
    ["consumer", "outcome"],
)
EVENTS_DEAD_LETTERED = Counter(
    "rla_events_dead_lettered_total", "Events sent to the dead-letter stream, by consumer and reason kind.",
    ["consumer", "kind"],
)
EVENT_HANDLER_SECONDS = Histogram(
    "rla_event_handler_seconds", "Seconds spent in an event handler.", ["consumer"]
)
SERVICE_UP = Gauge("rla_service_up", "1 while the service is serving.", ["service"])
CONSUMER_PENDING = Gauge(
    "rla_consumer_pending", "Messages still waiting for this durable consumer (its lag), as of its last delivery.",
    ["stream", "consumer"],
)

NATS_CONNECTED = Gauge(
    "rla_nats_connected", "1 while this process's NATS connection is up; 0 from the moment it is found lost "
                          "(nats.ping_interval_s x (nats.max_outstanding_pings + 1) at most) until it is back.")


def start_metrics_server(host: str, port: int, setting: str = "server.metrics_port") -> int:
    """Serve `/metrics` for this process's default registry on ``host:port`` (0 = free port).

    Returns:
        The bound port.
    Raises:
        ServiceFailedError: the address is in use or cannot be bound (one line naming ``setting``).
    """
    from services.common.http_server import require_free_port

    require_free_port(host, port, setting, what="metrics")
    server, _thread = start_http_server(port, addr=host)
    return int(server.server_port)
