"""The OpenAI-compatible endpoint as a product uses it: the official `openai` client against a real
uvicorn server on loopback, serving a real (tiny) HF model."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from services.common.models.generation import HFGenerator
from services.policy.openai_api import build_app, stream_deltas
from tests.integration.policy.conftest import serving

pytestmark = pytest.mark.integration

CHAT = [{"role": "user", "content": "Task: walk to G.\nNow: A F G\nActions:\n1. left\n2. right"}]


@pytest.fixture(scope="module")
def client(tiny_model_dir: Path) -> Iterator[object]:
    from openai import OpenAI

    with serving(build_app(HFGenerator(str(tiny_model_dir)), "tiny")) as base:
        yield OpenAI(base_url=base, api_key="unused", max_retries=0)


def test_a_streamed_completion_equals_the_plain_one_at_temperature_0(client) -> None:
    """Regression (field bugs, 3): stream=True used to yield 0 chunks and no error."""
    plain = client.chat.completions.create(model="tiny", messages=CHAT, temperature=0, max_tokens=12)
    chunks = list(client.chat.completions.create(model="tiny", messages=CHAT, temperature=0, max_tokens=12,
                                                 stream=True, stream_options={"include_usage": True}))
    content = [c for c in chunks if c.choices]
    assert content[0].choices[0].delta.role == "assistant"
    assert "".join(c.choices[0].delta.content or "" for c in content) == plain.choices[0].message.content
    finishes = [c.choices[0].finish_reason for c in content]
    assert finishes[-1] == plain.choices[0].finish_reason and all(f is None for f in finishes[:-1])
    assert chunks[-1].choices == [] and chunks[-1].usage.completion_tokens == plain.usage.completion_tokens > 0
    assert len(content) >= 2  # role chunk, then content deltas


def test_without_include_usage_no_usage_chunk_is_sent(client) -> None:
    chunks = list(client.chat.completions.create(model="tiny", messages=CHAT, temperature=0, max_tokens=4, stream=True))
    assert chunks and all(c.choices for c in chunks) and all(c.usage is None for c in chunks)


def test_top_logprobs_is_refused_by_name_and_content_null_is_accepted(client) -> None:
    from openai import BadRequestError

    with pytest.raises(BadRequestError) as err:
        client.chat.completions.create(model="tiny", messages=CHAT, max_tokens=4, logprobs=True, top_logprobs=3)
    assert err.value.body["param"] == "top_logprobs"
    with pytest.raises(BadRequestError) as err:
        client.chat.completions.create(model="tiny", messages=[], max_tokens=4)
    assert err.value.body["param"] == "messages"
    answer = client.chat.completions.create(model="tiny", max_tokens=4, messages=[
        *CHAT, {"role": "assistant", "content": None}, {"role": "user", "content": "again"}])
    assert answer.choices[0].message.role == "assistant"
    lp = client.chat.completions.create(model="tiny", messages=CHAT, max_tokens=4, logprobs=True).choices[0].logprobs
    assert lp.content and all(t.bytes == list(t.token.encode()) for t in lp.content)


def test_stream_deltas_rebuild_the_text_exactly() -> None:
    assert stream_deltas("ab cd", ["ab", " c", "d", "<eos>"]) == ["ab", " c", "d"]
    assert "".join(stream_deltas("ab", ["ab", "</stop>"])) == "ab"
    assert "".join(stream_deltas("héllo", ["h", "\ufffd", "llo"])) == "héllo"
    assert stream_deltas("", ["<eos>"]) == []


def test_a_seeded_request_answers_the_same_beside_concurrent_unseeded_ones(client) -> None:
    """OpenAI's `seed`: the chat is seeded alone, so traffic around it does not change its draw."""
    from concurrent.futures import ThreadPoolExecutor

    def ask(seed: int | None) -> str:
        return client.chat.completions.create(model="tiny", messages=CHAT, temperature=1.0, max_tokens=10,
                                              seed=seed).choices[0].message.content

    first = ask(3)
    with ThreadPoolExecutor(6) as pool:
        answers = list(pool.map(ask, [None, 3, None, 3, None, 3]))
    assert answers[1] == answers[3] == answers[5] == first
    assert len({ask(s) for s in range(1, 7)}) > 1  # other seeds draw other answers (random weights, T=1)
