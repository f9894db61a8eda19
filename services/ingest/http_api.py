"""The ingest HTTP API for products (FastAPI). Bodies are the proto3 JSON mapping of the
`ingest.proto` messages (``episodeId`` or ``episode_id`` both work); errors are OpenAI-style
``{"error": {"message", "type", "param", "code"}}`` bodies.

| endpoint | success | body |
|---|---|---|
| ``POST /v1/ingest/episodes`` | 202 | `IngestEpisode` → `IngestAck` |
| ``POST /v1/ingest/feedback`` | 202 | `Feedback` → `IngestAck` |
| ``GET /v1/ingest/episodes/{episode_id}`` | 200 | `EpisodeStatus` (no content) |
| ``DELETE /v1/ingest/users/{user_ref}`` | 200 | `EraseUserResponse` |
| ``DELETE /v1/ingest/tenant`` | 200 | `PurgeTenantResponse`: everything of the key's tenant |
| ``GET /healthz`` | 200 | ``{"status": "ok"}`` |

Every request carries ``Authorization: Bearer <tenant key>``. Refusals: 401 unknown key, 403 no
consent or another tenant's name, 404 unknown episode, 409 a revision re-posted with other
content, 413 too large, 422 a schema or value error naming the field, 429 (with ``Retry-After``)
too many open episodes, 503 redaction or the event bus unavailable (retry; nothing was stored),
500 anything else (an OpenAI-style ``server_error`` body, the traceback in the service's log).
"""

from __future__ import annotations

import json
import logging
from typing import TypeVar

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from google.protobuf import json_format
from google.protobuf.message import Message
from rlanything.v1.ingest_pb2 import Feedback, IngestEpisode

from services.common.bus import CONNECTION_ERRORS
from services.common.errors import UnavailableError
from services.ingest.shell import IngestShell
from services.ingest.episodes import IngestError

__all__ = ["build_app"]

M = TypeVar("M", bound=Message)
log = logging.getLogger("rlanything.ingest")
_TYPES = {401: "authentication_error", 403: "permission_error", 404: "not_found_error", 409: "conflict_error",
          413: "request_too_large", 429: "rate_limit_error", 503: "service_unavailable"}


def _error(exc: IngestError) -> JSONResponse:
    headers = {"Retry-After": "5"} if exc.status == 429 else None
    return JSONResponse(status_code=exc.status, headers=headers, content={"error": {
        "message": exc.message, "type": _TYPES.get(exc.status, "invalid_request_error"), "param": exc.param,
        "code": None}})


def _body(message: Message) -> dict:
    return json_format.MessageToDict(message, preserving_proto_field_name=True)


def _bearer(request: Request) -> str | None:
    auth = request.headers.get("authorization", "")
    scheme, _, token = auth.partition(" ")
    return token.strip() if scheme.lower() == "bearer" else None


async def _parse(request: Request, message_type: type[M], max_bytes: int) -> M:
    raw = await request.body()
    if len(raw) > max_bytes:
        raise IngestError(413, f"body of {len(raw)} bytes is over {max_bytes} (ingest.max_episode_bytes, as JSON)",
                          None)
    try:
        data = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise IngestError(422, f"body is not JSON: {exc}", None) from None
    if not isinstance(data, dict):
        raise IngestError(422, f"body must be a JSON object, got {type(data).__name__}", None)
    try:
        return json_format.ParseDict(data, message_type())
    except json_format.ParseError as exc:
        raise IngestError(422, f"body does not match {message_type.DESCRIPTOR.name}: {exc}", None) from None


def build_app(shell: IngestShell) -> FastAPI:
    """The FastAPI app over ``shell`` (see the module docstring for the endpoints)."""
    app = FastAPI(title="RLAnything ingest")
    json_limit = shell.cfg.max_episode_bytes * 4  # JSON spells bytes out; the proto size is checked after

    @app.exception_handler(IngestError)
    async def refused(_: Request, exc: IngestError) -> JSONResponse:
        return _error(exc)

    @app.exception_handler(Exception)
    async def failed(_: Request, exc: Exception) -> JSONResponse:  # never text/plain "Internal Server Error"
        if isinstance(exc, (UnavailableError, *CONNECTION_ERRORS)):  # NATS lost or stopping: the product retries
            log.warning("request not done: the event bus is unavailable", extra={"error": repr(exc)})
            return _error(IngestError(503, f"the event bus is unavailable ({type(exc).__name__}: {exc}); "
                                           "nothing was stored, retry", None))
        log.error("request failed", exc_info=exc)
        return JSONResponse(status_code=500, content={"error": {
            "message": f"internal error: {type(exc).__name__}: {exc}"[:500], "type": "server_error", "param": None,
            "code": "internal_error"}})

    @app.get("/healthz")
    async def healthz() -> dict:
        return {"status": "ok"}

    async def authenticated(request: Request, message_type: type[M]) -> tuple[str, M]:
        """The key's tenant (401 before the body is read) and the body, whose ``tenant`` must be
        empty or that tenant (403)."""
        bearer = _bearer(request)
        shell.tenant_of(bearer)
        message = await _parse(request, message_type, json_limit)
        return shell.tenant_of(bearer, getattr(message, "tenant")), message

    @app.post("/v1/ingest/episodes", status_code=202)
    async def post_episode(request: Request) -> dict:
        tenant, episode = await authenticated(request, IngestEpisode)
        return _body(await shell.record_episode(tenant, episode))

    @app.post("/v1/ingest/feedback", status_code=202)
    async def post_feedback(request: Request) -> dict:
        tenant, feedback = await authenticated(request, Feedback)
        return _body(await shell.record_feedback(tenant, feedback))

    @app.get("/v1/ingest/episodes/{episode_id}")
    async def get_episode(episode_id: str, request: Request) -> dict:
        return _body(await shell.get_episode(shell.tenant_of(_bearer(request)), episode_id))

    @app.delete("/v1/ingest/tenant")
    async def purge_tenant(request: Request) -> dict:
        return _body(await shell.purge_tenant(shell.tenant_of(_bearer(request))))

    @app.delete("/v1/ingest/users/{user_ref}")
    async def erase_user(user_ref: str, request: Request) -> dict:
        return _body(await shell.erase_user(shell.tenant_of(_bearer(request)), user_ref))

    return app
