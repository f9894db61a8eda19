"""An OpenAI-compatible `/v1/chat/completions` endpoint over the policy's generation backend
(FastAPI; products call it with the official `openai` client).

``stream: true`` answers with server-sent events as the OpenAI API defines them: a first chunk
with the assistant role, one content delta per generated token, ``finish_reason`` on the last
content chunk, with ``stream_options.include_usage`` a final chunk with the usage (empty
``choices``), then ``data: [DONE]``. The chunks are sent once the completion is generated (the
backends generate a whole batch at once), so the concatenated deltas are exactly the
non-streamed text. Requests with capture headers are captured for the live loop
(`services.policy.capture`; the ``X-RLA-Capture`` response header says what happened). A client that hangs up before its answer is ready cancels the generation.
``top_logprobs`` is refused with a 400 naming it: no backend here returns
alternatives, and an empty list would be a silent lie. Errors carry ``param`` when one field is
at fault.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Mapping
from typing import Literal, TypeVar


from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, StreamingResponse
from starlette.exceptions import HTTPException
from pydantic import BaseModel, ConfigDict, Field

from services.common.admission import Admission
from services.common.errors import BusyError, ContextLengthError, InvalidArgumentError
from services.common.models.generation import GenerationCancelled, Generator, Sampling, generate_async
from services.common.seeding import derive_seed
from services.policy.capture import CAPTURES, CaptureHeaderError, Capturer, capture_ticket

__all__ = ["build_app"]

T = TypeVar("T")


class Message(BaseModel):
    """One chat message."""

    model_config = ConfigDict(extra="allow")
    role: Literal["system", "user", "assistant"]
    content: str | None = None
    """None is valid for an assistant message that carries tool calls (shown as empty text)."""


class StreamOptions(BaseModel):
    """``stream_options``: what a streamed answer adds."""

    model_config = ConfigDict(extra="allow")
    include_usage: bool = False


class ChatRequest(BaseModel):
    """The subset of the OpenAI chat-completions request this endpoint honours."""

    model_config = ConfigDict(extra="allow")
    model: str = ""
    messages: list[Message] = Field(min_length=1)
    temperature: float = Field(1.0, ge=0, le=2)
    top_p: float = Field(1.0, gt=0, le=1)
    max_tokens: int | None = Field(None, ge=1, le=4096)
    max_completion_tokens: int | None = Field(None, ge=1, le=4096)
    stop: str | list[str] | None = None
    n: int = Field(1, ge=1, le=1)
    seed: int | None = None
    logprobs: bool = False
    top_logprobs: int | None = Field(None, ge=0, le=20)
    stream: bool = False
    stream_options: StreamOptions | None = None


def _error(message: str, param: str | None = None, status: int = 400, code: str | None = None,
           kind: str = "invalid_request_error", headers: Mapping[str, str] | None = None) -> JSONResponse:
    """An OpenAI-style error body."""
    return JSONResponse(status_code=status, headers=dict(headers or {}),
                        content={"error": {"message": message, "type": kind, "param": param, "code": code}})


def build_app(generator: Generator, model_name: str, capturer: Capturer | None = None,
              tenant_keys: Mapping[str, str] | None = None, admission: Admission | None = None) -> FastAPI:
    """The FastAPI app: ``POST /v1/chat/completions``, ``GET /v1/models``.

    Args:
        capturer: where captured completions go (None = capture off; see `services.policy.capture`).
        tenant_keys: tenant key → tenant name, for capture.
        admission: the bound on generations in progress (shared with the gRPC servicer); a request
            over it gets 429 ``rate_limit_exceeded`` with ``Retry-After: 1``. Default: 64.
    """
    keys = dict(tenant_keys or {})
    gate = admission or Admission(64, "policy.max_pending_requests")
    app = FastAPI(title="RLAnything policy (OpenAI-compatible)")

    @app.exception_handler(RequestValidationError)
    async def invalid(_: Request, exc: RequestValidationError) -> JSONResponse:
        errors = exc.errors()
        detail = "; ".join(f"{'.'.join(str(p) for p in e['loc'][1:])}: {e['msg']}" for e in errors)
        params = {str(e["loc"][1]) for e in errors if len(e["loc"]) > 1}
        return _error(detail, params.pop() if len(params) == 1 else None)

    @app.exception_handler(HTTPException)
    async def http_error(_: Request, exc: HTTPException) -> JSONResponse:  # an unparsable body, a wrong path
        return _error(str(exc.detail), None, status=exc.status_code)

    @app.get("/v1/models")
    async def models() -> dict:
        return {"object": "list", "data": [{"id": model_name, "object": "model", "owned_by": "rlanything"}]}

    @app.post("/v1/chat/completions", response_model=None)
    async def chat(req: ChatRequest, request: Request) -> dict | JSONResponse | StreamingResponse:
        try:
            ticket, capture_state = capture_ticket(request.headers, capturer is not None, keys)
        except CaptureHeaderError as exc:
            return _error(str(exc), exc.param)
        if capture_state.startswith("rejected:"):
            CAPTURES.labels(capture_state.replace(":", "_")).inc()
        if req.top_logprobs:
            return _error("top_logprobs is not supported by this backend (it returns the chosen token's log-prob "
                          "only); leave it out or set it to 0", "top_logprobs")
        stop = (req.stop,) if isinstance(req.stop, str) else tuple(req.stop or ())
        sampling = Sampling(temperature=req.temperature, top_p=req.top_p,
                            max_new_tokens=req.max_completion_tokens or req.max_tokens or 256, stop=stop)
        # OpenAI's `seed`: this chat alone is seeded, so concurrent requests do not change its draw
        seeds = None if req.seed is None else [derive_seed("openai", req.seed)]
        chat_ = [{"role": m.role, "content": m.content or ""} for m in req.messages]
        try:
            with gate.slot():
                done = await _unless_disconnected(request, generate_async(generator, [chat_], sampling, seeds))
        except BusyError as exc:
            return _error(str(exc), None, status=429, code="rate_limit_exceeded", kind="rate_limit_error",
                          headers={"Retry-After": "1"})
        except ContextLengthError as exc:
            return _error(str(exc), exc.param, code="context_length_exceeded")
        except InvalidArgumentError as exc:
            return _error(str(exc))
        if done is None:  # the client hung up: the generation was cancelled, nobody reads this
            return _error("client closed the request", None, status=499)
        (c,) = done
        version = generator.model_version
        tok = getattr(generator, "tokenizer", None)
        pieces = [tok.decode([t]) if tok else str(t) for t in c.token_ids]
        head = {"id": f"chatcmpl-{uuid.uuid4().hex}", "created": int(time.time()), "model": req.model or model_name,
                "system_fingerprint": f"v{version}"}
        if ticket is not None and capturer is not None:
            capture_state = capturer.offer(ticket, chat_, c, str(head["id"]), version, sampling)
        headers = {"X-RLA-Capture": capture_state}
        usage = {"prompt_tokens": len(c.prompt_token_ids), "completion_tokens": len(c.token_ids),
                 "total_tokens": len(c.prompt_token_ids) + len(c.token_ids)}
        logprobs = [{"token": piece, "logprob": lp, "bytes": list(piece.encode()), "top_logprobs": []}
                    for piece, lp in zip(pieces, c.logprobs)] if req.logprobs else None
        if req.stream:
            include_usage = bool(req.stream_options and req.stream_options.include_usage)
            return StreamingResponse(_events(head, c.text, pieces, c.finish_reason, logprobs, usage, include_usage),
                                     media_type="text/event-stream", headers=headers)
        choice: dict = {"index": 0, "finish_reason": c.finish_reason,
                        "message": {"role": "assistant", "content": c.text}}
        if logprobs is not None:
            choice["logprobs"] = {"content": logprobs}
        return JSONResponse({**head, "object": "chat.completion", "choices": [choice], "usage": usage}, headers=headers)

    return app


async def _unless_disconnected(request: Request, work: Awaitable[T], poll_s: float = 0.2) -> T | None:
    """Await ``work``, or cancel it and return None once the client has disconnected (uvicorn does
    not cancel a handler whose client went away; polled every ``poll_s`` seconds)."""
    task = asyncio.ensure_future(work)
    while True:
        done, _ = await asyncio.wait({task}, timeout=poll_s)
        if done:
            return task.result()
        if await request.is_disconnected():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, GenerationCancelled):
                await task
            return None


def stream_deltas(text: str, pieces: list[str]) -> list[str]:
    """Content deltas of ``text`` along its tokens' decoded ``pieces`` (pure): their concatenation is
    ``text`` exactly (a stop string or a special token cut from the text is never sent)."""
    deltas, sent = [], 0
    for piece in pieces:
        if sent >= len(text):
            break
        take = text[sent: sent + len(piece)] if text.startswith(piece, sent) else ""
        if take:
            deltas.append(take)
            sent += len(take)
    if sent < len(text):  # pieces that do not line up with the text (byte-level merges): send the rest
        deltas.append(text[sent:])
    return deltas


async def _events(head: dict, text: str, pieces: list[str], finish: str, logprobs: list[dict] | None,
                  usage: dict, include_usage: bool) -> AsyncIterator[str]:
    """The server-sent events of one streamed completion (see the module docstring)."""

    def event(choices: list[dict], **extra: object) -> str:
        return f"data: {json.dumps({**head, 'object': 'chat.completion.chunk', 'choices': choices, **extra})}\n\n"

    null_usage = {"usage": None} if include_usage else {}
    yield event([{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}], **null_usage)
    deltas = stream_deltas(text, pieces) or [""]
    for i, delta in enumerate(deltas):
        last = i == len(deltas) - 1
        choice: dict = {"index": 0, "delta": {"content": delta}, "finish_reason": finish if last else None}
        if logprobs is not None and last:
            choice["logprobs"] = {"content": logprobs}
        yield event([choice], **null_usage)
    if include_usage:
        yield event([], usage=usage)
    yield "data: [DONE]\n\n"
