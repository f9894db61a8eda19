"""An OpenAI-compatible `/v1/chat/completions` endpoint over the policy's generation backend
(FastAPI; products call it with the official `openai` client)."""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections.abc import Iterator
from typing import Literal

import uvicorn

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field

from services.common.models.generation import Generator, Sampling

__all__ = ["build_app", "EmbeddedServer"]


class Message(BaseModel):
    """One chat message."""

    model_config = ConfigDict(extra="allow")
    role: Literal["system", "user", "assistant"]
    content: str


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


def build_app(generator: Generator, model_name: str) -> FastAPI:
    """The FastAPI app: ``POST /v1/chat/completions``, ``GET /v1/models``."""
    app = FastAPI(title="RLAnything policy (OpenAI-compatible)")

    @app.exception_handler(RequestValidationError)
    async def invalid(_: Request, exc: RequestValidationError) -> JSONResponse:
        detail = "; ".join(f"{'.'.join(str(p) for p in e['loc'][1:])}: {e['msg']}" for e in exc.errors())
        return JSONResponse(status_code=400, content={"error": {"message": detail, "type": "invalid_request_error"}})

    @app.get("/v1/models")
    async def models() -> dict:
        return {"object": "list", "data": [{"id": model_name, "object": "model", "owned_by": "rlanything"}]}

    @app.post("/v1/chat/completions")
    async def chat(req: ChatRequest) -> dict:
        stop = (req.stop,) if isinstance(req.stop, str) else tuple(req.stop or ())
        sampling = Sampling(temperature=req.temperature, top_p=req.top_p,
                            max_new_tokens=req.max_completion_tokens or req.max_tokens or 256, stop=stop, seed=req.seed)
        chat_ = [{"role": m.role, "content": m.content} for m in req.messages]
        (c,) = await asyncio.to_thread(generator.generate, [chat_], sampling)
        choice: dict = {"index": 0, "finish_reason": c.finish_reason,
                        "message": {"role": "assistant", "content": c.text}}
        if req.logprobs:
            tok = getattr(generator, "tokenizer", None)
            choice["logprobs"] = {"content": [
                {"token": tok.decode([t]) if tok else str(t), "logprob": lp, "bytes": None, "top_logprobs": []}
                for t, lp in zip(c.token_ids, c.logprobs)]}
        return {"id": f"chatcmpl-{uuid.uuid4().hex}", "object": "chat.completion", "created": int(time.time()),
                "model": req.model or model_name, "system_fingerprint": f"v{generator.model_version}",
                "choices": [choice],
                "usage": {"prompt_tokens": len(c.prompt_token_ids), "completion_tokens": len(c.token_ids),
                          "total_tokens": len(c.prompt_token_ids) + len(c.token_ids)}}

    return app


class EmbeddedServer(uvicorn.Server):
    """A uvicorn server inside a service's event loop: the service owns SIGTERM, not uvicorn."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield
