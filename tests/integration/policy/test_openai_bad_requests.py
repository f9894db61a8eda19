"""Requests the fuzzer found answered badly by the OpenAI-compatible endpoint (each reproduced
here first): bodies that are not JSON objects, and prompts or ``max_tokens`` beyond the model's
context window. Each must be a 400 with an OpenAI-style error body."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from services.common.request_limit import RequestLimit
from services.common.models.generation import HFGenerator
from services.policy.openai_api import build_app
from tests.integration.policy.conftest import serving

pytestmark = pytest.mark.integration


GATE = RequestLimit(2, "policy.max_pending_requests")


@pytest.fixture(scope="module")
def base(tiny_model_dir: Path) -> Iterator[str]:
    with serving(build_app(HFGenerator(str(tiny_model_dir)), "tiny", admission=GATE)) as url:
        yield url


def _post(base: str, body: bytes) -> httpx.Response:
    return httpx.post(f"{base}/chat/completions", content=body, headers={"Content-Type": "application/json"},
                      timeout=60)


@pytest.mark.parametrize("body", [b"\x80", b"[]", b'"hello"', b"null", b'{"messages": [', b""])
def test_a_body_that_is_not_a_json_object_is_a_400_with_an_error_body(base: str, body: bytes) -> None:
    r = _post(base, body)
    assert r.status_code == 400, r.text
    error = r.json()["error"]
    assert error["type"] == "invalid_request_error" and error["message"]


def test_max_tokens_beyond_the_context_window_is_a_400_naming_it(base: str) -> None:
    # the tiny model's window is 2048 positions (max_position_embeddings); "hi" + 4096 new tokens do not fit
    r = _post(base, b'{"messages": [{"role": "user", "content": "hi"}], "max_tokens": 4096}')
    assert r.status_code == 400, r.text
    error = r.json()["error"]
    assert error["code"] == "context_length_exceeded" and "2048" in error["message"], error
    assert error["param"] == "max_tokens"


def test_a_prompt_longer_than_the_context_window_is_a_400(base: str) -> None:
    r = _post(base, b'{"messages": [{"role": "user", "content": "' + b"word " * 5000 + b'"}], "max_tokens": 4}')
    assert r.status_code == 400, r.text
    error = r.json()["error"]
    assert error["code"] == "context_length_exceeded" and error["param"] == "messages", error


def test_a_request_over_the_pending_limit_gets_429_with_retry_after(base: str) -> None:
    body = b'{"messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}'
    GATE.active = GATE.limit  # every slot taken (as by two long generations in progress)
    try:
        r = _post(base, body)
    finally:
        GATE.active = 0
    assert r.status_code == 429 and r.headers["Retry-After"] == "1", r.text
    error = r.json()["error"]
    assert error["code"] == "rate_limit_exceeded" and error["type"] == "rate_limit_error"
    assert "policy.max_pending_requests=2" in error["message"]
    assert _post(base, body).status_code == 200  # the slots came back: served again
