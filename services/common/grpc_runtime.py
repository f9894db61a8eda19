"""gRPC runtime: grpc.aio servers with health and reflection, error mapping, client helpers.

Follows the grpc Python examples: `create_server` returns the bound port, the standard
`grpc.health.v1.Health` service reports per-service status, and `stop(grace)` lets in-flight
RPCs finish on SIGTERM. Servers bind without SO_REUSEPORT (gRPC sets it on Linux by default), so
a port already served by another process is an error at start-up instead of a second listener
that the kernel hands half the connections to.
"""

from __future__ import annotations

import collections
import errno
import functools
import inspect
import socket
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import Any, TypeVar

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection

from services.common.config.base import MAX_MESSAGE_BYTES
from services.common.contract_version import CONTRACT_VERSION, GRPC_METADATA_KEY, peer_version_problem
from services.common.errors import BusyError, InvalidArgumentError, NotFoundError, ServiceFailedError, UnavailableError

__all__ = [
    "create_server",
    "bind_server",
    "add_services",
    "SERVER_OPTIONS",
    "MalformedRequestGuard",
    "message_options",
    "channel",
    "aio_channel",
    "map_errors",
    "check_health",
    "check_health_sync",
    "DEFAULT_DEADLINE_S",
]

DEFAULT_DEADLINE_S = 10.0
"""Seconds a client call waits by default before DEADLINE_EXCEEDED."""

R = TypeVar("R")


def message_options(max_message_bytes: int = MAX_MESSAGE_BYTES) -> list[tuple[str, int]]:
    """gRPC channel/server options that send and receive messages up to ``max_message_bytes``
    (gRPC's own defaults: 4 MiB received, unlimited sent). Over the limit, gRPC fails the call
    with RESOURCE_EXHAUSTED and a message naming both sizes."""
    return [("grpc.max_send_message_length", max_message_bytes),
            ("grpc.max_receive_message_length", max_message_bytes)]


_VERSION_METADATA = ((GRPC_METADATA_KEY, str(CONTRACT_VERSION)),)

SERVER_OPTIONS: list[tuple[str, int]] = [("grpc.so_reuseport", 0)]
"""Options of every server besides the message limits: no SO_REUSEPORT, so one listener per port."""


class _SyncVersionStamp(grpc.UnaryUnaryClientInterceptor):
    """Adds ``rla-contract: <version>`` to every unary call of a blocking channel."""

    def intercept_unary_unary(self, continuation: Callable, client_call_details: Any, request: Any) -> Any:
        d = client_call_details
        return continuation(_ClientCallDetails(d.method, d.timeout, _merged(d.metadata), d.credentials,
                                               d.wait_for_ready, getattr(d, "compression", None)), request)


class _AioVersionStamp(grpc.aio.UnaryUnaryClientInterceptor):
    """Adds ``rla-contract: <version>`` to every unary call of an asyncio channel."""

    async def intercept_unary_unary(self, continuation: Callable, client_call_details: Any, request: Any) -> Any:
        details = grpc.aio.ClientCallDetails(client_call_details.method, client_call_details.timeout,
                                             _merged(client_call_details.metadata), client_call_details.credentials,
                                             client_call_details.wait_for_ready)
        return await continuation(details, request)


def _merged(metadata: Any) -> tuple:
    return tuple(metadata or ()) + _VERSION_METADATA


class _ClientCallDetails(collections.namedtuple("_ClientCallDetails", ("method", "timeout", "metadata", "credentials",
                                                                       "wait_for_ready", "compression")),
                         grpc.ClientCallDetails):
    """The details of a blocking call with other metadata (gRPC's documented recipe)."""


def channel(address: str, max_message_bytes: int = MAX_MESSAGE_BYTES) -> grpc.Channel:
    """A blocking insecure channel to ``host:port`` with the run's message limit; every call says
    the contract version this code speaks (`services.common.contract_version`)."""
    return grpc.intercept_channel(grpc.insecure_channel(address, options=message_options(max_message_bytes)),
                                  _SyncVersionStamp())


def aio_channel(address: str, max_message_bytes: int = MAX_MESSAGE_BYTES,
                load_balancing: str = "pick_first", max_reconnect_backoff_s: float | None = None) -> grpc.aio.Channel:
    """An asyncio insecure channel to ``address`` (``host:port`` or any gRPC target) with the run's
    message limit; every call says the contract version this code speaks. ``load_balancing``
    ``round_robin`` connects to every address the target resolves to and spreads calls over them
    (gRPC's own policy); ``pick_first`` (gRPC's default) uses one. ``max_reconnect_backoff_s`` caps
    the wait between two connection attempts to a server that is down (gRPC's default grows to
    120 s: a server back after 17 s would be found only after about 26)."""
    options: list[tuple[str, int | str]] = [*message_options(max_message_bytes)]
    if load_balancing != "pick_first":
        options.append(("grpc.lb_policy_name", load_balancing))
    if max_reconnect_backoff_s is not None:
        options.append(("grpc.max_reconnect_backoff_ms", int(max_reconnect_backoff_s * 1000)))
    return grpc.aio.insecure_channel(address, options=options, interceptors=[_AioVersionStamp()])


class MalformedRequestGuard(grpc.aio.ServerInterceptor):
    """Answer a request whose bytes do not parse as the method's message with INVALID_ARGUMENT,
    and a caller that speaks another contract version with FAILED_PRECONDITION.

    grpc.aio parses a request before the handler runs, and a parse failure there becomes UNKNOWN
    ("Unexpected DecodeError"), which names no fault of the caller. This interceptor hands the
    unary-request handlers (unary-unary and server-streaming, such as `Policy.GenerateStream`) the
    raw bytes and parses them itself. Client-streaming methods are left as they are.
    """

    async def intercept_service(self, continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler]],
                                details: grpc.HandlerCallDetails) -> grpc.RpcMethodHandler:
        handler = await continuation(details)
        if handler is None or handler.request_deserializer is None or handler.request_streaming:
            return handler
        parse, method = handler.request_deserializer, details.method
        skew = peer_version_problem(dict(details.invocation_metadata or ()).get(GRPC_METADATA_KEY), "the caller speaks")

        async def parsed(raw: bytes, context: grpc.aio.ServicerContext) -> object:
            if skew:
                await context.abort(grpc.StatusCode.FAILED_PRECONDITION, skew)
            try:
                return parse(raw)
            except Exception as exc:  # noqa: BLE001 - DecodeError, or whatever a custom deserializer raises
                await context.abort(grpc.StatusCode.INVALID_ARGUMENT,
                                    f"request to {method} is not a valid message ({len(raw)} bytes): {exc}")
                raise  # abort raises; this line is never reached

        if handler.unary_unary is not None:
            inner = handler.unary_unary

            async def unary(raw: bytes, context: grpc.aio.ServicerContext) -> object:
                return await inner(await parsed(raw, context), context)

            return grpc.unary_unary_rpc_method_handler(unary, request_deserializer=None,
                                                       response_serializer=handler.response_serializer)
        if handler.unary_stream is not None:
            streamed = handler.unary_stream

            async def stream(raw: bytes, context: grpc.aio.ServicerContext) -> AsyncIterator[object]:
                answer = streamed(await parsed(raw, context), context)
                if inspect.isasyncgen(answer):
                    async for chunk in answer:
                        yield chunk
                else:  # a coroutine that writes with context.write
                    await answer

            return grpc.unary_stream_rpc_method_handler(stream, request_deserializer=None,
                                                        response_serializer=handler.response_serializer)
        return handler


def _bind_problem(host: str, port: int) -> str:
    """Why ``host:port`` cannot be bound, found by binding a plain socket there (gRPC does not say)."""
    try:
        family, kind, proto, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
        with socket.socket(family, kind, proto) as probe:
            probe.bind(address)
    except OSError as exc:
        return "is in use" if exc.errno == errno.EADDRINUSE else f"cannot be bound ({exc.strerror or exc})"
    return "cannot be bound"


def bind_server(host: str, port: int, max_message_bytes: int = MAX_MESSAGE_BYTES,
                setting: str = "server.grpc_port") -> tuple[grpc.aio.Server, int]:
    """A grpc.aio server bound to ``host:port`` (0 = free port) without SO_REUSEPORT, nothing served yet.

    Binding comes first so that a process whose port is taken stops before it does any work.

    Args:
        max_message_bytes: largest request or response in bytes (``limits.max_message_bytes``).
        setting: the config key the port comes from, named in the error.

    Returns:
        ``(server, bound_port)``.

    Raises:
        ServiceFailedError: the address is in use (another process serves it) or cannot be bound;
            the message names the address and ``setting``.
    """
    server = grpc.aio.server(options=[*message_options(max_message_bytes), *SERVER_OPTIONS],
                             interceptors=[MalformedRequestGuard()])
    try:
        bound = server.add_insecure_port(f"{host}:{port}")
    except RuntimeError:  # grpcio >= 1.60: "Failed to bind to address"
        bound = 0
    if bound == 0:
        raise ServiceFailedError(f"gRPC address {host}:{port} ({setting}) {_bind_problem(host, port)}: another "
                                 "process may be serving it; stop that one or choose another port")
    return server, bound


async def add_services(server: grpc.aio.Server, register: Sequence[Callable[[grpc.aio.Server], None]] = (),
                       service_names: Sequence[str] = ()) -> health.aio.HealthServicer:
    """Add the servicers, health and reflection to a server from `bind_server` (before it starts).

    Args:
        register: callables that add servicers, e.g. ``lambda s: add_XServicer_to_server(x, s)``.
        service_names: full names of the registered services, e.g. ``"rlanything.v1.Environment"``
            (for reflection and per-service health).

    Returns:
        The health servicer: the server as a whole ("") and every named service report NOT_SERVING
        until the caller sets SERVING.
    """
    for add in register:
        add(server)
    health_servicer = health.aio.HealthServicer()
    for name in ["", *service_names]:
        await health_servicer.set(name, health_pb2.HealthCheckResponse.NOT_SERVING)
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
    names = [*service_names, health_pb2.DESCRIPTOR.services_by_name["Health"].full_name,
             reflection.SERVICE_NAME]
    reflection.enable_server_reflection(names, server)
    return health_servicer


async def create_server(
    host: str,
    port: int,
    register: Sequence[Callable[[grpc.aio.Server], None]] = (),
    service_names: Sequence[str] = (),
    max_message_bytes: int = MAX_MESSAGE_BYTES,
    setting: str = "server.grpc_port",
) -> tuple[grpc.aio.Server, int, health.aio.HealthServicer]:
    """`bind_server` then `add_services`: a grpc.aio server with health and reflection on ``host:port``.

    Returns:
        ``(server, bound_port, health_servicer)``; the server is not started, and the server as a
        whole ("") and every named service report NOT_SERVING until the caller sets SERVING.

    Raises:
        ServiceFailedError: the address is in use or cannot be bound (named with ``setting``).
    """
    server, bound = bind_server(host, port, max_message_bytes, setting)
    return server, bound, await add_services(server, register, service_names)


def map_errors(method: Callable[..., Awaitable[R]]) -> Callable[..., Awaitable[R]]:
    """Decorate an async servicer method: project errors become gRPC status codes.

    `InvalidArgumentError` → INVALID_ARGUMENT, `NotFoundError` → NOT_FOUND, `BusyError` →
    RESOURCE_EXHAUSTED, `UnavailableError` (a sandbox fault, say) → UNAVAILABLE, each with the
    exception's message as details. Anything else propagates
    (gRPC reports UNKNOWN).
    """

    @functools.wraps(method)
    async def wrapper(self: object, request: object, context: grpc.aio.ServicerContext) -> R:
        try:
            return await method(self, request, context)
        except InvalidArgumentError as exc:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(exc))
        except NotFoundError as exc:
            await context.abort(grpc.StatusCode.NOT_FOUND, str(exc))
        except BusyError as exc:
            await context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, str(exc))
        except UnavailableError as exc:
            await context.abort(grpc.StatusCode.UNAVAILABLE, str(exc))
        raise AssertionError("unreachable: context.abort raises")

    return wrapper


def _status_name(status: int) -> str:
    return health_pb2.HealthCheckResponse.ServingStatus.Name(status)


async def check_health(address: str, service: str = "", timeout_s: float = 1.0) -> str:
    """Ask ``address`` for the health of ``service`` ("" = the whole server).

    Returns:
        ``"SERVING"``, ``"NOT_SERVING"``, ``"SERVICE_UNKNOWN"`` or ``"UNREACHABLE"``.
    """
    async with grpc.aio.insecure_channel(address) as channel:
        try:
            response = await health_pb2_grpc.HealthStub(channel).Check(
                health_pb2.HealthCheckRequest(service=service), timeout=timeout_s)
        except grpc.aio.AioRpcError as exc:
            return "SERVICE_UNKNOWN" if exc.code() == grpc.StatusCode.NOT_FOUND else "UNREACHABLE"
    return _status_name(response.status)


def check_health_sync(address: str, service: str = "", timeout_s: float = 1.0) -> str:
    """Blocking twin of `check_health` for code that has no event loop (the launcher)."""
    with grpc.insecure_channel(address) as channel:
        try:
            response = health_pb2_grpc.HealthStub(channel).Check(
                health_pb2.HealthCheckRequest(service=service), timeout=timeout_s)
        except grpc.RpcError as exc:
            code = exc.code() if isinstance(exc, grpc.Call) else None
            return "SERVICE_UNKNOWN" if code == grpc.StatusCode.NOT_FOUND else "UNREACHABLE"
    return _status_name(response.status)
