"""gRPC `Ingest` servicer for services: the same operations as the HTTP API, the tenant's key in
the ``authorization: Bearer <key>`` metadata."""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from typing import TypeVar

import grpc
from rlanything.v1 import ingest_pb2, ingest_pb2_grpc

from services.ingest.shell import IngestShell
from services.ingest.episodes import IngestError

__all__ = ["IngestServicer", "SERVICE_NAME", "GRPC_CODES"]

SERVICE_NAME = ingest_pb2.DESCRIPTOR.services_by_name["Ingest"].full_name
GRPC_CODES = {401: grpc.StatusCode.UNAUTHENTICATED, 403: grpc.StatusCode.PERMISSION_DENIED,
              404: grpc.StatusCode.NOT_FOUND, 409: grpc.StatusCode.ALREADY_EXISTS,
              413: grpc.StatusCode.INVALID_ARGUMENT, 422: grpc.StatusCode.INVALID_ARGUMENT,
              429: grpc.StatusCode.RESOURCE_EXHAUSTED, 503: grpc.StatusCode.UNAVAILABLE}
"""HTTP status of an `IngestError` → gRPC status code."""
R = TypeVar("R")


def _mapped(method: Callable[..., Awaitable[R]]) -> Callable[..., Awaitable[R]]:
    @functools.wraps(method)
    async def wrapper(self: "IngestServicer", request: object, context: grpc.aio.ServicerContext) -> R:
        try:
            return await method(self, request, context)
        except IngestError as exc:
            detail = f"{exc.message} (field: {exc.param})" if exc.param else exc.message
            await context.abort(GRPC_CODES.get(exc.status, grpc.StatusCode.INVALID_ARGUMENT), detail)
        raise AssertionError("unreachable: context.abort raises")
    return wrapper


def _bearer(context: grpc.aio.ServicerContext) -> str | None:
    for key, value in context.invocation_metadata() or ():
        if key == "authorization" and isinstance(value, str) and value.lower().startswith("bearer "):
            return value[7:].strip()
    return None


class IngestServicer(ingest_pb2_grpc.IngestServicer):
    """`rlanything.v1.Ingest` over `IngestShell`."""

    def __init__(self, shell: IngestShell) -> None:
        self.shell = shell

    @_mapped
    async def RecordEpisode(self, request: ingest_pb2.RecordEpisodeRequest, context: grpc.aio.ServicerContext
                            ) -> ingest_pb2.IngestAck:
        tenant = self.shell.tenant_of(_bearer(context), request.episode.tenant)
        return await self.shell.record_episode(tenant, request.episode)

    @_mapped
    async def RecordFeedback(self, request: ingest_pb2.RecordFeedbackRequest, context: grpc.aio.ServicerContext
                             ) -> ingest_pb2.IngestAck:
        tenant = self.shell.tenant_of(_bearer(context), request.feedback.tenant)
        return await self.shell.record_feedback(tenant, request.feedback)

    @_mapped
    async def GetEpisode(self, request: ingest_pb2.GetEpisodeRequest, context: grpc.aio.ServicerContext
                         ) -> ingest_pb2.EpisodeStatus:
        return await self.shell.get_episode(self.shell.tenant_of(_bearer(context), request.tenant), request.episode_id)

    @_mapped
    async def EraseUser(self, request: ingest_pb2.EraseUserRequest, context: grpc.aio.ServicerContext
                        ) -> ingest_pb2.EraseUserResponse:
        return await self.shell.erase_user(self.shell.tenant_of(_bearer(context), request.tenant), request.user_ref)

    @_mapped
    async def PurgeTenant(self, request: ingest_pb2.PurgeTenantRequest, context: grpc.aio.ServicerContext
                          ) -> ingest_pb2.PurgeTenantResponse:
        return await self.shell.purge_tenant(self.shell.tenant_of(_bearer(context), request.tenant))
