"""Generated requests on the OpenAI-compatible endpoint: malformed JSON, wrong field types,
empty and huge messages, huge ``max_tokens``, unknown models. Each gets a 2xx or a 4xx with an
OpenAI-style error body, never a 5xx."""

from __future__ import annotations

import json

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.system.fuzz.tally import EXAMPLES, tally

pytestmark = [pytest.mark.system, pytest.mark.slow]

_json = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
                     lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
                     max_leaves=8)
_content = st.one_of(st.text(max_size=60), st.just(""), st.none(), _json,
                     st.integers(1_000, 300_000).map(lambda n: "word " * (n // 5)))
_message = st.fixed_dictionaries({}, optional={
    "role": st.one_of(st.sampled_from(["system", "user", "assistant", "tool", "", "USER"]), _json),
    "content": _content, "name": st.text(max_size=10)})
_fields = {
    "model": st.one_of(st.sampled_from(["", "policy", "policy", "rlanything-policy", "gpt-4o", "unknown/model"]), _json),
    "messages": st.one_of(st.lists(_message, max_size=4), st.just([]), _json),
    "max_tokens": st.one_of(st.integers(1, 16), st.integers(-10, 0), st.integers(4_000, 2**40), st.just(4096), _json),
    "max_completion_tokens": st.one_of(st.integers(1, 8), st.integers(10**6, 10**12), _json),
    "temperature": st.one_of(st.floats(-1, 3), _json), "top_p": st.one_of(st.floats(-1, 2), _json),
    "stop": st.one_of(st.text(max_size=5), st.lists(st.text(max_size=5), max_size=5), _json),
    "n": st.one_of(st.integers(-1, 3), _json), "seed": st.one_of(st.integers(), _json),
    "logprobs": st.one_of(st.booleans(), _json), "top_logprobs": st.one_of(st.integers(-1, 30), _json),
    "stream": st.one_of(st.booleans(), _json), "stream_options": st.one_of(st.just({"include_usage": True}), _json),
}
_bodies = st.one_of(
    st.fixed_dictionaries({"messages": st.lists(_message, min_size=1, max_size=3)},
                          optional={k: v for k, v in _fields.items() if k != "messages"})
    .map(lambda d: json.dumps(d).encode()),
    st.fixed_dictionaries({}, optional=_fields).map(lambda d: json.dumps(d).encode()),
    _json.map(lambda v: json.dumps(v).encode()),
    st.binary(max_size=200),
    st.text(max_size=100).map(lambda t: ('{"messages": [' + t).encode()),
)


def test_every_generated_chat_request_gets_2xx_or_an_openai_style_4xx(system) -> None:
    url = system["endpoints"]["openai"] + "/chat/completions"
    with httpx.Client(timeout=120.0) as client:

        @settings(max_examples=EXAMPLES * 3, deadline=None, database=None, derandomize=True,
                  suppress_health_check=list(HealthCheck))
        @given(_bodies)
        def one(body: bytes) -> None:
            r = client.post(url, content=body, headers={"Content-Type": "application/json"})
            assert r.status_code < 500, f"{r.status_code} for {body[:300]!r}: {r.text[:500]}"
            if r.status_code >= 400:
                error = r.json()["error"]
                assert isinstance(error["message"], str) and error["message"], r.text
                assert "type" in error, r.text
            tally("POST /v1/chat/completions", str(r.status_code))

        one()
