"""An OpenAI-compatible `/v1/chat/completions` endpoint over the policy's generation backend
(FastAPI; products call it with the official `openai` client).

``stream: true`` answers with server-sent events as the OpenAI API defines them, sent as the
tokens are generated: a first chunk with the assistant role, a content delta for each token that
completes text, a last chunk with ``finish_reason``, with ``stream_options.include_usage`` a final
chunk with the usage (empty ``choices``), then ``data: [DONE]``. Text is held back only while it
may still be the start of a stop string (and while a character's bytes are incomplete), so the
concatenated deltas are exactly the non-streamed text (both are built by
`services.common.models.detokenize.ContentBuilder`); tokens decoded within `CHUNK_INTERVAL_S` of
the previous chunk go out together in the next one. A client that hangs up cancels the
generation within one decoding step (`hf`) or engine step (`vllm`: the request is aborted).

Errors are OpenAI error bodies (``{"error": {"message", "type", "param", "code"}}``) with a 4xx/5xx
status, streamed or not, as long as no byte of the answer was sent: an unknown ``model`` is a 404
``model_not_found``; a stream starts only once its first token exists, so a failure before it is
a JSON error too. A failure after the stream started is one ``data: {"error": {...}}`` event, then
the stream ends (no ``[DONE]``); the `openai` client raises `openai.APIError` on it.

``logprobs.content[]`` lists the content's tokens (the end-of-turn token is not content): each
token's raw ``bytes`` (a token that ends inside a character gives its partial bytes), so the bytes
concatenated rebuild the content. Requests with capture headers are captured for the live loop
(`services.policy.capture`; the ``X-RLA-Capture`` response header says what happened): the
content captured is the content delivered, and a stream is captured only once it was delivered
whole (a stream the client abandoned, or that failed, is not captured). ``top_logprobs`` is
refused with a 400 naming it: no backend here returns alternatives, and an empty list would be a
silent lie. Errors carry ``param`` when one field is at fault.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import logging
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from typing import Any, Literal, TypeVar

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, StreamingResponse
from starlette.exceptions import HTTPException
from pydantic import BaseModel, ConfigDict, Field

from services.common.request_limit import RequestLimit
from services.common.errors import BusyError, ContextLengthError, InvalidArgumentError
from services.common.models.detokenize import ContentBuilder, TokenEntry
from services.common.models.generation import Completion, GenerationCancelled, Generator, Sampling, generate_async
from services.common.seeding import derive_seed
from services.policy.content import content_builder
from services.policy.capture import CAPTURES, CaptureHeaderError, Capturer, capture_ticket
from services.policy.token_pump import TokenPump, watch_disconnect

__all__ = ["build_app"]

log = logging.getLogger("rlanything.policy.openai")
CHUNK_INTERVAL_S = 0.02
"""Shortest time between two content chunks of a stream: a token is sent at once unless the
previous chunk left less than this ago; tokens decoded meanwhile go out together in the next
chunk. A decoder slower than 50 tokens/s (every real model on CPU) sends one chunk per token; a
faster one is not slowed by the event loop waking for every token (the `hf` decoder and the loop
share the interpreter)."""
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
    """'' = the served model; any other name must be one the endpoint serves (else 404)."""
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


def _error_body(message: str, param: str | None = None, code: str | None = None,
                kind: str = "invalid_request_error") -> dict:
    return {"error": {"message": message, "type": kind, "param": param, "code": code}}


def _error(message: str, param: str | None = None, status: int = 400, code: str | None = None,
           kind: str = "invalid_request_error", headers: Mapping[str, str] | None = None) -> JSONResponse:
    """An OpenAI-style error body."""
    return JSONResponse(status_code=status, headers=dict(headers or {}), content=_error_body(message, param, code, kind))


def _internal(exc: BaseException) -> dict:
    """The error body of an unexpected failure (the exception's type and message; details in the log)."""
    return _error_body(f"internal error: {type(exc).__name__}: {exc}"[:500], None, "internal_error", "server_error")


def _error_response(exc: BaseException) -> JSONResponse:
    """The JSON error answer for a generation that failed before any byte was sent."""
    if isinstance(exc, BusyError):
        return _error(str(exc), None, status=429, code="rate_limit_exceeded", kind="rate_limit_error",
                      headers={"Retry-After": "1"})
    if isinstance(exc, ContextLengthError):
        return _error(str(exc), exc.param, code="context_length_exceeded")
    if isinstance(exc, (InvalidArgumentError, ValueError)):
        return _error(str(exc))
    if isinstance(exc, GenerationCancelled):  # the client hung up: nobody reads this
        return _error("client closed the request", None, status=499)
    log.error("generation failed", exc_info=exc)
    return JSONResponse(status_code=500, content=_internal(exc))


def build_app(generator: Generator, model_name: str, capturer: Capturer | None = None,
              tenant_keys: Mapping[str, str] | None = None, admission: RequestLimit | None = None,
              aliases: Sequence[str] = ()) -> FastAPI:
    """The FastAPI app: ``POST /v1/chat/completions``, ``GET /v1/models``.

    Args:
        model_name: the served model's id (listed by ``/v1/models``, answered in ``model``).
        capturer: where captured completions go (None = capture off; see `services.policy.capture`).
        tenant_keys: tenant key → tenant name, for capture.
        admission: the bound on generations in progress (shared with the gRPC servicer); a request
            over it gets 429 ``rate_limit_exceeded`` with ``Retry-After: 1``. Default: 64.
        aliases: other names a request's ``model`` may use for the served model; any name that is
            neither this nor ``model_name`` gets 404 ``model_not_found``.
    """
    keys = dict(tenant_keys or {})
    gate = admission or RequestLimit(64, "policy.max_pending_requests")
    names = [model_name, *(a for a in aliases if a != model_name)]
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

    @app.exception_handler(Exception)
    async def unexpected(_: Request, exc: Exception) -> JSONResponse:  # never text/plain "Internal Server Error"
        log.error("request failed", exc_info=exc)
        return JSONResponse(status_code=500, content=_internal(exc))

    @app.get("/v1/models")
    async def models() -> dict:
        return {"object": "list", "data": [{"id": n, "object": "model", "owned_by": "rlanything"} for n in names]}

    @app.post("/v1/chat/completions", response_model=None)
    async def chat(req: ChatRequest, request: Request) -> dict | JSONResponse | StreamingResponse:
        if req.model and req.model not in names:
            return _error(f"The model `{req.model}` does not exist: this endpoint serves "
                          f"{', '.join(repr(n) for n in names)}", "model", status=404, code="model_not_found")
        try:
            ticket, capture_state = capture_ticket(request.headers, capturer is not None, keys)
        except CaptureHeaderError as exc:
            return _error(str(exc), exc.param)
        if ticket is not None and req.top_p < 1:  # its behaviour log-probs would not be the sampled distribution's
            ticket, capture_state = None, "rejected:top_p"
        if capture_state.startswith("rejected:"):
            CAPTURES.labels(capture_state.replace(":", "_")).inc()
        if req.top_logprobs:
            return _error("top_logprobs is not supported by this backend (it returns the chosen token's log-prob "
                          "only); leave it out or set it to 0", "top_logprobs")
        stop = (req.stop,) if isinstance(req.stop, str) else tuple(req.stop or ())
        sampling = Sampling(temperature=req.temperature, top_p=req.top_p,
                            max_new_tokens=req.max_completion_tokens or req.max_tokens or 256, stop=stop)
        # OpenAI's `seed`: this chat alone is seeded, so concurrent requests do not change its draw
        seed = None if req.seed is None else derive_seed("openai", req.seed)
        chat_ = [{"role": m.role, "content": m.content or ""} for m in req.messages]
        head = {"id": f"chatcmpl-{uuid.uuid4().hex}", "created": int(time.time()), "model": req.model or model_name,
                "system_fingerprint": f"v{generator.model_version}"}

        def capture(c: Completion, content: str) -> str:
            """Offer the delivered completion for capture; the X-RLA-Capture value."""
            if ticket is None or capturer is None:
                return capture_state
            return capturer.offer(ticket, chat_, dataclasses.replace(c, text=content), str(head["id"]),
                                  c.model_version if c.model_version is not None else generator.model_version,
                                  sampling)

        slot = contextlib.ExitStack()
        try:
            slot.enter_context(gate.slot())
        except BusyError as exc:
            return _error_response(exc)
        if req.stream:
            return await _start_stream(request, generator, chat_, sampling, seed, head, req, slot, capture,
                                       capture_state)
        with slot:
            try:
                done = await _unless_disconnected(request, generate_async(
                    generator, [chat_], sampling, None if seed is None else [seed]))
            except Exception as exc:  # noqa: BLE001 - every failure is an OpenAI error body
                return _error_response(exc)
        if done is None:  # the client hung up: the generation was cancelled, nobody reads this
            return _error("client closed the request", None, status=499)
        (c,) = done
        if c.model_version is not None:  # the version that generated it, not the one served at arrival
            head["system_fingerprint"] = f"v{c.model_version}"
        builder = content_builder(generator, sampling)
        if builder is None:
            content, entries = c.text, []
        else:
            for token, logprob in zip(c.token_ids, _logprobs(c)):
                builder.push(token, logprob)
            builder.finish()
            content, entries = builder.text, builder.entries
        headers = {"X-RLA-Capture": capture(c, content)}
        choice: dict = {"index": 0, "finish_reason": _finish(c, builder),
                        "message": {"role": "assistant", "content": content}}
        if req.logprobs:
            choice["logprobs"] = {"content": [e.as_openai() for e in entries]}
        return JSONResponse({**head, "object": "chat.completion", "choices": [choice], "usage": _usage(c)},
                            headers=headers)

    return app


def _logprobs(c: Completion) -> Sequence[float]:
    return c.logprobs if len(c.logprobs) == len(c.token_ids) else [float("nan")] * len(c.token_ids)


def _finish(c: Completion, builder: ContentBuilder | None) -> str:
    """``stop`` when a stop string or end of turn ended the content, else the backend's reason."""
    return "stop" if builder is not None and builder.ended and c.finish_reason != "length" else c.finish_reason


def _usage(c: Completion) -> dict:
    return {"prompt_tokens": len(c.prompt_token_ids), "completion_tokens": len(c.token_ids),
            "total_tokens": len(c.prompt_token_ids) + len(c.token_ids)}


async def _start_stream(request: Request, generator: Generator, chat: list[dict[str, str]], sampling: Sampling,
                        seed: int | None, head: dict, req: ChatRequest, slot: contextlib.ExitStack,
                        capture: Callable[[Completion, str], str], capture_state: str
                        ) -> JSONResponse | StreamingResponse:
    """Start the generation and answer once its first token (or its failure) exists: a failure
    before the first byte is a JSON error; after it, the stream (`_events`)."""
    pump = TokenPump(generator, chat, sampling, seed, logprobs=req.logprobs)
    watcher = asyncio.ensure_future(watch_disconnect(request.receive, pump.stop))
    try:
        pump.start()
        first = await pump.get()
    except BaseException:
        pump.stop()
        watcher.cancel()
        slot.close()
        raise
    if first[0][0] == "error":
        watcher.cancel()
        slot.close()
        return _error_response(first[0][1])
    if pump.version is not None:  # the version generating the stream (a sync may have come since arrival)
        head["system_fingerprint"] = f"v{pump.version}"
    include_usage = bool(req.stream_options and req.stream_options.include_usage)
    return StreamingResponse(_events(pump, first, watcher, slot, head, content_builder(generator, sampling), req.logprobs,
                                     include_usage, capture),
                             media_type="text/event-stream", headers={"X-RLA-Capture": capture_state})


def _sse(data: dict) -> str:
    return f"data: {json.dumps(data)}\n\n"


async def _events(pump: TokenPump, first: list[tuple[Any, ...]], watcher: asyncio.Future, slot: contextlib.ExitStack,
                  head: dict, builder: ContentBuilder | None, logprobs: bool, include_usage: bool,
                  capture: Callable[[Completion, str], str]) -> AsyncIterator[str]:
    """The server-sent events of one streamed completion, as its tokens arrive (module docstring).
    Leaving early (the client hung up, the server stops) cancels the generation."""
    null_usage = {"usage": None} if include_usage else {}

    def chunk(text: str | None, entries: Sequence[TokenEntry] = (), finish: str | None = None) -> str:
        choice: dict = {"index": 0, "delta": {} if text is None else {"content": text}, "finish_reason": finish}
        if logprobs and (entries or finish is None):
            choice["logprobs"] = {"content": [e.as_openai() for e in entries]}
        return _sse({**head, "object": "chat.completion.chunk", "choices": [choice], **null_usage})

    try:
        yield _sse({**head, "object": "chat.completion.chunk", **null_usage,
                    "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}]})
        batch, sent = first, time.monotonic()
        while True:
            text, entries = "", list[TokenEntry]()
            for item in batch:  # the tokens that arrived since the last chunk go out in one chunk
                if item[0] == "token":
                    if builder is not None:
                        delta = builder.push(item[1], item[2])
                        text += delta.text
                        entries.extend(delta.entries)
                    continue
                if item[0] == "done":
                    c: Completion = item[1]
                    if builder is None:
                        content = text = c.text  # no tokenizer: the backend's text as it is, in one delta
                    else:
                        delta = builder.finish()
                        content, text = builder.text, text + delta.text
                        entries.extend(delta.entries)
                    yield chunk(text or None, entries, _finish(c, builder))
                    if include_usage:
                        yield _sse({**head, "object": "chat.completion.chunk", "choices": [], "usage": _usage(c)})
                    yield "data: [DONE]\n\n"
                    capture(c, content)  # delivered whole (the last event was handed to the server)
                    return
                if text or entries:  # what was generated before the failure
                    yield chunk(text, entries)
                log.error("generation failed mid-stream", exc_info=item[1])
                yield _sse(_internal(item[1]))
                return
            if text or entries:
                yield chunk(text, entries)
                wait_s = CHUNK_INTERVAL_S - (time.monotonic() - sent)
                if wait_s > 0:  # let a fast decoder's next tokens gather (one loop wake per chunk, not per token);
                    await pump.settle(wait_s)  # the end of the generation cuts the pause short
                sent = time.monotonic()
            batch = await pump.get()
    finally:
        if not pump.finished:
            pump.stop()
        watcher.cancel()
        slot.close()


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
