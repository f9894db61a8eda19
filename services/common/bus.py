"""The event bus on NATS JetStream: stream set-up, de-duplicated publish, durable consumers.

Delivery is at-least-once. A `Consumer` acks a message only after its handler returned (the
handler awaits its own publishes, so its effect is durable first), naks it with backoff when the
handler fails, and moves it to the dead-letter stream, with the reason in headers and the payload
untouched, when the payload is malformed, when the handler raises `InvalidEventError` or
`MessageTooLargeError`, or when the message has failed `max_deliveries` times. Every message is
at most ``limits.max_message_bytes``: checked on publish, and against the server's max_payload
at connect. Patterns follow nats.py's JetStream tests.

Liveness: nats-py PINGs the server every ``nats.ping_interval_s`` seconds and drops a connection
with more than ``nats.max_outstanding_pings`` unanswered, then reconnects every
``nats.reconnect_time_wait_s`` seconds. `EventBus.link` follows its callbacks (gauge
``rla_nats_connected``, listeners such as the gRPC health of `services.common.runtime`), and
`EventBus.watch_link` raises `BusLostError` once the connection stayed lost for
``nats.reconnect_budget_s`` seconds.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Generic, TypeVar
from urllib.parse import urlsplit, urlunsplit

import nats
from google.protobuf.message import DecodeError, Message
from nats.aio.client import Client as NATS
from nats.aio.msg import Msg
from nats.js import JetStreamContext, api
from nats.js.errors import BadRequestError, FetchTimeoutError, ServiceUnavailableError

from services.common.bus_link import LinkState
from services.common.config import MAX_MESSAGE_BYTES, ConsumerConfig, NatsConfig
from services.common.contract_version import CONTRACT_VERSION, peer_version_problem
from services.common.contract_version import HEADER as CONTRACT_HEADER
from services.common.errors import (BusLostError, ConfigError, InvalidEventError, InvalidKeyError,
                                    MessageTooLargeError, ServiceFailedError)
from services.common.metrics import (CONSUMER_PENDING, EVENT_HANDLER_SECONDS, EVENTS_DEAD_LETTERED, EVENTS_HANDLED,
                                     NATS_CONNECTED)
from services.common.kv import MAX_KEY_CHARS
from services.common.streams import STREAMS, StreamSpec, dlq_subject

__all__ = ["EventBus", "Consumer", "ConcurrentConsumer", "Delivery", "DLQ_HEADERS", "CONNECTION_ERRORS", "safe_url",
           "server_urls"]

log = logging.getLogger("rlanything.bus")

M = TypeVar("M", bound=Message)

# Headers a dead-lettered message carries (the payload is the original bytes).
DLQ_HEADERS = (
    "Rla-Dlq-Reason",
    "Rla-Dlq-Stream",
    "Rla-Dlq-Consumer",
    "Rla-Dlq-Stream-Seq",
    "Rla-Dlq-Deliveries",
    "Rla-Dlq-Subject",
)
MAX_REASON_CHARS = 2048
"""Longest dead-letter reason kept in the ``Rla-Dlq-Reason`` header (NATS caps all headers at 64 KiB)."""
_STREAM_NAME_IN_USE = 10058  # JetStream: stream name already in use with a different configuration

CONNECTION_ERRORS: tuple[type[BaseException], ...] = (
    OSError,  # asyncio.TimeoutError (nats.errors.TimeoutError) is an OSError since Python 3.11
    asyncio.TimeoutError,
    nats.errors.ConnectionClosedError,
    nats.errors.ConnectionReconnectingError,
    nats.errors.ConnectionDrainingError,
    nats.errors.StaleConnectionError,
    nats.errors.OutboundBufferLimitError,
    nats.errors.NoServersError,
    ServiceUnavailableError,  # 503: in a cluster, a stream or consumer electing a new leader after a node was lost
    nats.js.errors.NoStreamResponseError,  # a publish while the stream has no leader (a cluster node was lost)
)
"""What a NATS call raises while the server is slow, hung or away (or, in a cluster, while a stream
elects a new leader): a periodic task retries these (the link watch decides when the process gives
up) instead of ending the process."""


def server_urls(url: str) -> list[str]:
    """The server URLs of ``nats.url``: one URL, or several comma-separated (the nodes of a cluster;
    the client connects to one of them and moves to another when that one is lost)."""
    return [part.strip() for part in url.split(",") if part.strip()]


def safe_url(url: str) -> str:
    """``url`` without its user and password (``nats://user:secret@nats:4222`` → ``nats://nats:4222``),
    for logs and error messages; each of several comma-separated URLs likewise."""
    if "," in url:
        return ",".join(safe_url(part) for part in server_urls(url))
    parts = urlsplit(url)
    if parts.username is None and parts.password is None:
        return url
    host = parts.hostname or ""
    host = f"[{host}]" if ":" in host else host  # an IPv6 address keeps its brackets
    return urlunsplit(parts._replace(netloc=f"{host}:{parts.port}" if parts.port else host))


@dataclass(frozen=True)
class Delivery:
    """Where a message came from, for handlers that need it (idempotency keys, logging)."""

    subject: str
    stream_seq: int
    num_delivered: int
    msg_id: str | None


class EventBus:
    """A NATS connection with its JetStream context and the project's streams.

    Create with `EventBus.connect(...)`; close with `await bus.close()`.
    """

    def __init__(self, nc: NATS, js: JetStreamContext, nats_cfg: NatsConfig, consumer_cfg: ConsumerConfig,
                 max_message_bytes: int = MAX_MESSAGE_BYTES, link: "_Link | None" = None):
        self.nc = nc
        self.js = js
        self.nats_cfg = nats_cfg
        self.consumer_cfg = consumer_cfg
        self.max_message_bytes = max_message_bytes
        self._link = link or _Link(nats_cfg)
        self._consumers: list[Consumer] = []

    @property
    def link(self) -> LinkState:
        """Whether the connection is up and since when it is lost (`LinkState`)."""
        return self._link.state

    def on_link_change(self, listener: Callable[[bool], Awaitable[None]]) -> None:
        """Call ``await listener(up)`` each time the connection is found lost (False) or is back (True)."""
        self._link.listeners.append(listener)

    async def watch_link(self) -> None:
        """Return never; raise when the connection must be given up (a task of the service).

        Raises:
            BusLostError: the connection stayed lost for ``nats.reconnect_budget_s`` seconds, or nats-py
                closed it for good; the message names the server, the cause and the setting.
        """
        period = min(1.0, self.nats_cfg.reconnect_budget_s / 4)
        while True:
            reason = self.link.verdict(time.monotonic())
            if reason:
                raise BusLostError(f"NATS at {safe_url(self.nats_cfg.url)}: {reason}")
            await asyncio.sleep(period)

    @classmethod
    async def connect(cls, nats_cfg: NatsConfig, consumer_cfg: ConsumerConfig, name: str,
                      max_message_bytes: int = MAX_MESSAGE_BYTES) -> "EventBus":
        """Connect to ``nats_cfg.url`` as client ``name`` (timeout ``connect_timeout_s`` seconds).

        Raises:
            ServiceFailedError: the server cannot be reached within 3 × ``connect_timeout_s`` seconds.
            ConfigError: the server's max_payload is below ``max_message_bytes``
                (``limits.max_message_bytes``): messages the run may send would be refused.
        """

        url = safe_url(nats_cfg.url)

        async def on_error(exc: Exception) -> None:  # one line per problem, not a traceback per retry
            log.warning("nats connection problem", extra={"url": url, "error": f"{type(exc).__name__}: {exc}"})

        link = _Link(nats_cfg)
        credentials = nats_cfg.credentials()
        try:
            # Unbounded reconnects here: the budget is a time (LinkState), kept by watch_link.
            nc = await asyncio.wait_for(nats.connect(
                server_urls(nats_cfg.url), name=name, connect_timeout=nats_cfg.connect_timeout_s, allow_reconnect=True,
                max_reconnect_attempts=-1, reconnect_time_wait=nats_cfg.reconnect_time_wait_s,
                ping_interval=nats_cfg.ping_interval_s, max_outstanding_pings=nats_cfg.max_outstanding_pings,
                drain_timeout=2 * nats_cfg.connect_timeout_s, error_cb=on_error,
                disconnected_cb=link.disconnected, reconnected_cb=link.reconnected, closed_cb=link.closed,
                **credentials),
                timeout=3 * nats_cfg.connect_timeout_s)
        except (asyncio.TimeoutError, OSError, nats.errors.NoServersError) as exc:
            raise ServiceFailedError(f"cannot reach NATS at {url} (nats.url) within "
                                     f"{3 * nats_cfg.connect_timeout_s:g} s: {type(exc).__name__}") from None
        link.state.up = True  # nats-py may report a failed first attempt before one succeeded
        link.state.lost_at_s = None
        NATS_CONNECTED.set(1)
        if nc.max_payload < max_message_bytes:
            server_max = nc.max_payload
            link.state.closing = True
            await nc.close()
            raise ConfigError(f"NATS at {url} accepts messages up to {server_max} bytes (its max_payload), "
                              f"below limits.max_message_bytes={max_message_bytes}: raise max_payload in the "
                              "server's config or lower limits.max_message_bytes")
        return cls(nc, nc.jetstream(), nats_cfg, consumer_cfg, max_message_bytes, link)

    async def ensure_streams(self, specs: tuple[StreamSpec, ...] = STREAMS) -> None:
        """Create each stream, or update it in place when its config changed (idempotent)."""
        for spec in specs:
            config = api.StreamConfig(
                name=spec.name,
                subjects=list(spec.subjects),
                retention=api.RetentionPolicy.WORK_QUEUE if spec.retention == "workqueue" else api.RetentionPolicy.LIMITS,
                storage=api.StorageType.FILE,
                max_age=spec.max_age_s or None,
                duplicate_window=self.nats_cfg.duplicate_window_s,
                num_replicas=self.nats_cfg.stream_replicas,
            )
            try:
                await self.js.add_stream(config)
            except BadRequestError as exc:
                if exc.err_code != _STREAM_NAME_IN_USE:
                    raise
                await self.js.update_stream(config)

    async def publish(self, subject: str, message: Message, msg_id: str,
                      headers: dict[str, str] | None = None) -> api.PubAck:
        """Publish ``message`` and wait for the stream's ack (the event is durable on return).

        A second publish with the same ``msg_id`` inside the duplicate window is stored once
        (the returned ack has ``duplicate=True``).

        Raises:
            ValueError: ``msg_id`` is empty.
            InvalidKeyError: ``subject`` or ``msg_id`` is longer than `MAX_KEY_CHARS` (built from an
                id in the input: NATS would close the connection over such a control line or header).
            MessageTooLargeError: the serialised message is over ``limits.max_message_bytes``.
            nats.js.errors.NoStreamResponseError: no stream captures ``subject``.
        """
        if not msg_id:
            raise ValueError(f"publish to {subject}: msg_id must be a non-empty stable id")
        for name, value in (("subject", subject), ("msg_id", msg_id)):
            if len(value) > MAX_KEY_CHARS:
                raise InvalidKeyError(f"publish: {name} of {len(value)} characters is over {MAX_KEY_CHARS} "
                                      f"(it starts {value[:60]!r})")
        data = message.SerializeToString()
        if len(data) > self.max_message_bytes:
            raise MessageTooLargeError(
                f"publish to {subject} (msg_id {msg_id!r}): {type(message).__name__} of {len(data)} bytes is over "
                f"limits.max_message_bytes={self.max_message_bytes}")
        return await self.js.publish(subject, data, headers={**(headers or {}), "Nats-Msg-Id": msg_id,
                                                             CONTRACT_HEADER: str(CONTRACT_VERSION)})

    def consumer(self, *, stream: str, durable: str, subject: str, message_type: type[M],
                 handler: Callable[[M, Delivery], Awaitable[None]],
                 config: ConsumerConfig | None = None, concurrent: bool = False,
                 fetch_batch: int | None = None) -> "Consumer[M]":
        """A durable pull consumer of ``subject`` on ``stream`` (call `setup()` then `run()`).

        ``concurrent``: the messages of one fetch are handled at the same time (`ConcurrentConsumer`).
        ``fetch_batch``: messages per pull request for this consumer, overriding the config's; use 1
        for long, sequential work (rollout jobs) so that idle replicas take the next message instead
        of one busy replica holding a batch.
        """
        kind = ConcurrentConsumer if concurrent else Consumer
        cfg = config or self.consumer_cfg
        if fetch_batch is not None:
            cfg = cfg.model_copy(update={"fetch_batch": fetch_batch})
        consumer = kind(self, stream, durable, subject, message_type, handler, cfg)
        self._consumers.append(consumer)
        return consumer

    async def close(self) -> None:
        """Flush and close the connection (just close it when the server is already gone or lost)."""
        self.link.closing = True
        if self.nc.is_closed:
            return
        if self.nc.is_connected and self.link.up:
            for consumer in self._consumers:  # a live pull subscription would hold drain() for 30 s
                with contextlib.suppress(*CONNECTION_ERRORS):
                    await consumer.unbind()
            with contextlib.suppress(*CONNECTION_ERRORS):
                await self.nc.drain()  # at most 2 x connect_timeout_s against a server that stopped answering
        if not self.nc.is_closed:
            await self.nc.close()


class _Link:
    """nats-py's connection callbacks → `LinkState`, the ``rla_nats_connected`` gauge, a log line, listeners."""

    def __init__(self, nats_cfg: NatsConfig) -> None:
        self.state = LinkState(nats_cfg.reconnect_budget_s)
        self.url = safe_url(nats_cfg.url)
        self.budget_s = nats_cfg.reconnect_budget_s
        self.listeners: list[Callable[[bool], Awaitable[None]]] = []

    async def _tell(self, up: bool) -> None:
        NATS_CONNECTED.set(1 if up else 0)
        for listener in self.listeners:
            await listener(up)

    async def disconnected(self) -> None:
        if self.state.lost(time.monotonic()) and not self.state.closing:
            log.warning("nats connection lost", extra={"url": self.url, "reconnect_budget_s": self.budget_s})
            await self._tell(False)

    async def reconnected(self) -> None:
        down_s = self.state.back(time.monotonic())
        if down_s is not None:
            log.info("nats connection back", extra={"url": self.url, "down_s": round(down_s, 3)})
            await self._tell(True)

    async def closed(self) -> None:
        was_up = self.state.up
        self.state.closed(time.monotonic())
        if was_up and not self.state.closing:
            await self._tell(False)


class Consumer(Generic[M]):
    """A durable pull consumer that decodes each message as ``message_type`` and runs a handler.

    Outcomes per message:
      * handler returned → ``ack`` (waited for);
      * payload cannot be decoded, or handler raised `InvalidEventError` → dead-letter stream, ack;
      * other exception → ``nak`` with ``backoff_s[n-1]`` seconds, or the dead-letter stream once
        the message has been delivered ``max_deliveries`` times;
      * a message already delivered more than ``max_deliveries`` times (its handler crashed the
        process each time) → dead-letter stream before the handler runs.
    While a handler runs, ``in_progress`` is sent every ack_wait/3 seconds so long work is not
    redelivered to another worker; the messages of one fetch that wait for their turn get the same
    heartbeat, so none expires (and runs twice) while this worker is healthy and busy with another.
    """

    def __init__(self, bus: EventBus, stream: str, durable: str, subject: str, message_type: type[M],
                 handler: Callable[[M, Delivery], Awaitable[None]], config: ConsumerConfig) -> None:
        self.bus = bus
        self.stream = stream
        self.durable = durable
        self.subject = subject
        self.message_type = message_type
        self.handler = handler
        self.config = config
        self._sub: JetStreamContext.PullSubscription | None = None

    async def setup(self) -> None:
        """Create the durable consumer, or update it to this config (idempotent), and bind to it."""
        cfg = api.ConsumerConfig(
            durable_name=self.durable,
            filter_subject=self.subject,
            ack_policy=api.AckPolicy.EXPLICIT,
            deliver_policy=api.DeliverPolicy.ALL,
            ack_wait=self.config.ack_wait_s,
            max_deliver=-1,  # the bound is enforced here, so the message reaches the DLQ
            max_ack_pending=max(1000, self.config.fetch_batch * 4),
        )
        await self.bus.js.add_consumer(self.stream, cfg)
        self._sub = await self.bus.js.pull_subscribe_bind(durable=self.durable, stream=self.stream)

    async def unbind(self) -> None:
        """Drop this process's pull subscription; the durable consumer stays on the server."""
        if self._sub is not None:
            sub, self._sub = self._sub, None
            await sub.unsubscribe()

    async def fetch(self) -> list[Msg]:
        """One pull request: up to ``fetch_batch`` messages, [] when none came in ``fetch_timeout_s``.

        Also [] (after waiting ``fetch_timeout_s``) when the server answers 503, no responders: in a
        cluster, while the consumer elects a new leader after its node was lost (a few seconds).
        """
        assert self._sub is not None, "call setup() first"
        try:
            return await self._sub.fetch(self.config.fetch_batch, timeout=self.config.fetch_timeout_s)
        except (FetchTimeoutError, asyncio.TimeoutError, nats.errors.TimeoutError):
            return []
        except ServiceUnavailableError:
            log.debug("consumer has no leader yet; retrying", extra={"stream": self.stream, "durable": self.durable})
            await asyncio.sleep(self.config.fetch_timeout_s)
            return []

    async def run(self, stop: asyncio.Event) -> None:
        """Fetch and process messages until ``stop`` is set (the current batch finishes first)."""
        if self._sub is None:
            await self.setup()
        while not stop.is_set():
            msgs = await self.fetch()
            if not msgs:
                continue
            waiting = list(msgs)  # fetched, not yet handed to process()
            keeper = asyncio.create_task(self._keep_waiting_alive(waiting))
            try:
                for msg in msgs:
                    waiting.remove(msg)  # process() heartbeats it from here on
                    await self.settle(msg)
            finally:
                keeper.cancel()

    async def settle(self, msg: Msg) -> str:
        """`process` ``msg``; when even that fails (NATS refused the dead letter, the connection
        dropped) log it and nak the message for a later retry, so the consumer goes on. Returns
        the outcome, ``unsettled`` for the latter."""
        try:
            return await self.process(msg)
        except Exception as exc:  # noqa: BLE001 - any failure to settle: retried later, never the consumer's end
            log.error("could not settle message; nak", extra={"consumer": self.durable, "error": repr(exc)[:500]})
            with contextlib.suppress(Exception):
                await msg.nak(delay=self.config.backoff_s[-1])
            return "unsettled"

    async def _keep_waiting_alive(self, waiting: list[Msg]) -> None:
        """Send ``in_progress`` every ack_wait/3 seconds for each message in ``waiting``."""
        period = self.config.ack_wait_s / 3
        while True:
            await asyncio.sleep(period)
            for msg in list(waiting):
                await msg.in_progress()

    async def process(self, msg: Msg) -> str:
        """Handle one message; returns the outcome: ``acked``, ``nacked`` or ``dead_lettered``."""
        meta = msg.metadata
        CONSUMER_PENDING.labels(meta.stream, self.durable).set(meta.num_pending)
        n = meta.num_delivered
        delivery = Delivery(msg.subject, meta.sequence.stream, n, (msg.headers or {}).get("Nats-Msg-Id"))
        max_n = self.config.max_deliveries
        if n > max_n:
            return await self._dead_letter(msg, n, "max_deliveries",
                                           f"delivered {n} times, over max_deliveries={max_n}; "
                                           "earlier attempts never finished (the worker died?)")
        skew = peer_version_problem((msg.headers or {}).get(CONTRACT_HEADER), "published under")
        if skew:
            return await self._dead_letter(msg, n, "contract_version", skew)
        try:
            event = self.message_type.FromString(msg.data)
        except DecodeError as exc:
            return await self._dead_letter(
                msg, n, "malformed",
                f"malformed payload: not a {self.message_type.DESCRIPTOR.full_name} ({exc})")
        heartbeat = asyncio.create_task(self._heartbeat(msg))
        start = time.perf_counter()
        try:
            await self.handler(event, delivery)
        except InvalidEventError as exc:
            return await self._dead_letter(msg, n, "invalid", f"invalid event: {exc}")
        except MessageTooLargeError as exc:  # a redelivery would build the same message again
            return await self._dead_letter(msg, n, "too_large", f"handler output too large: {exc}")
        except Exception as exc:  # noqa: BLE001 - turned into a nak or a dead-letter record
            error = f"{type(exc).__name__}: {exc}"
            if n >= max_n:
                return await self._dead_letter(
                    msg, n, "max_deliveries", f"failed {n} times (max_deliveries={max_n}); last error: {error}")
            delay = self.config.backoff_s[min(n, len(self.config.backoff_s)) - 1]
            log.warning("handler failed; nak", extra={"consumer": self.durable, "delivery": n,
                                                      "delay_s": delay, "error": error})
            await msg.nak(delay=delay)
            EVENTS_HANDLED.labels(self.durable, "nacked").inc()
            return "nacked"
        finally:
            heartbeat.cancel()
            EVENT_HANDLER_SECONDS.labels(self.durable).observe(time.perf_counter() - start)
        await msg.ack_sync()
        EVENTS_HANDLED.labels(self.durable, "acked").inc()
        return "acked"

    async def _heartbeat(self, msg: Msg) -> None:
        period = self.config.ack_wait_s / 3
        while True:
            await asyncio.sleep(period)
            await msg.in_progress()

    async def _dead_letter(self, msg: Msg, deliveries: int, kind: str, reason: str) -> str:
        meta = msg.metadata
        if len(reason) > MAX_REASON_CHARS:  # NATS headers hold at most 64 KiB; a reason may quote a huge field
            reason = reason[:MAX_REASON_CHARS - 40] + f"… ({len(reason)} characters, cut)"
        headers = {
            "Rla-Dlq-Reason": reason,
            "Rla-Dlq-Stream": meta.stream,
            "Rla-Dlq-Consumer": self.durable,
            "Rla-Dlq-Stream-Seq": str(meta.sequence.stream),
            "Rla-Dlq-Deliveries": str(deliveries),
            "Rla-Dlq-Subject": msg.subject,
            "Nats-Msg-Id": f"dlq/{meta.stream}/{self.durable}/{meta.sequence.stream}",  # one per consumer
        }
        await self.bus.js.publish(dlq_subject(msg.subject), msg.data, headers=headers)
        await msg.ack_sync()
        log.error("dead-lettered", extra={"consumer": self.durable, "seq": meta.sequence.stream, "reason": reason})
        EVENTS_DEAD_LETTERED.labels(self.durable, kind).inc()
        EVENTS_HANDLED.labels(self.durable, "dead_lettered").inc()
        return "dead_lettered"


class ConcurrentConsumer(Consumer[M]):
    """A durable pull consumer that processes the messages of one fetch concurrently.

    Each message keeps the base class's outcome rules (ack after the handler, nak with backoff,
    dead-letter); only their handlers overlap.
    """

    async def run(self, stop: asyncio.Event) -> None:
        if self._sub is None:
            await self.setup()
        while not stop.is_set():
            msgs: list[Msg] = await self.fetch()
            if msgs:
                await asyncio.gather(*(self.settle(m) for m in msgs))
