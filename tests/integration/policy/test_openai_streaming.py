"""The OpenAI-compatible endpoint as a product uses it: the official `openai` client against a real
uvicorn server on loopback, serving a real (tiny) HF model."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from services.common.models.generation import HFGenerator
from services.policy.openai_api import build_app
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
    assert lp.content and all(t.bytes == list(t.token.encode()) for t in lp.content if "\ufffd" not in t.token)


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


# --- token-by-token streaming, errors as the OpenAI API defines them, exact token bytes (issue 37) ---


class Faulty(HFGenerator):
    """The real tiny model, with a failure injected: before any token (``fail_after`` None) or after
    ``fail_after`` streamed tokens; records when each generation ended (time.monotonic)."""

    fail_after: int | None = -1  # -1: no failure
    ended: list[float]

    def generate(self, chats, sampling, cancel=None, seeds=None, on_token=None, **kw):  # noqa: ANN001 - the base
        if self.fail_after is None:
            raise RuntimeError("injected: the model is gone")
        seen = 0

        def tap(row: int, token: int, logprob: float) -> None:
            nonlocal seen
            seen += 1
            if self.fail_after is not None and 0 <= self.fail_after < seen:
                raise RuntimeError("injected: the device fell over mid-answer")
            on_token(row, token, logprob)

        try:
            return super().generate(chats, sampling, cancel, seeds, tap if on_token else None, **kw)
        finally:
            self.ended.append(time.monotonic())


@pytest.fixture(scope="module")
def faulty(tiny_model_dir: Path) -> Iterator[tuple[Faulty, str]]:
    gen = Faulty(str(tiny_model_dir))
    gen.ended = []
    with serving(build_app(gen, "tiny")) as base:
        yield gen, base


def test_an_unknown_model_is_a_404_model_not_found_streamed_or_not(client) -> None:
    from openai import NotFoundError

    for stream in (False, True):
        with pytest.raises(NotFoundError) as err:
            answer = client.chat.completions.create(model="no-such-model", messages=CHAT, max_tokens=4, stream=stream)
            list(answer) if stream else None
        assert err.value.code == "model_not_found" and err.value.body["param"] == "model", err.value.body
        assert "no-such-model" in err.value.body["message"] and "tiny" in err.value.body["message"]


def test_a_failure_before_the_first_byte_is_a_json_500_streamed_or_not(faulty) -> None:
    gen, base = faulty
    gen.fail_after = None
    try:
        for stream in (False, True):
            r = httpx.post(f"{base}/chat/completions", timeout=60, json={
                "model": "tiny", "messages": CHAT, "max_tokens": 4, "stream": stream})
            assert r.status_code == 500 and r.headers["content-type"] == "application/json", r.text
            error = r.json()["error"]
            assert error["type"] == "server_error" and "RuntimeError" in error["message"], error
    finally:
        gen.fail_after = -1


def test_a_failure_mid_stream_raises_api_error_in_the_client(faulty) -> None:
    from openai import APIError, OpenAI

    gen, base = faulty
    client = OpenAI(base_url=base, api_key="unused", max_retries=0)
    gen.fail_after = 3
    received: list[str] = []
    try:
        with pytest.raises(APIError) as err:
            for chunk in client.chat.completions.create(model="tiny", messages=CHAT, temperature=0, max_tokens=40,
                                                        stream=True):
                received.extend(c.delta.content or "" for c in chunk.choices)
    finally:
        gen.fail_after = -1
    assert "RuntimeError" in err.value.message
    assert 1 <= len([r for r in received if r]) <= 3  # the tokens before the failure were streamed


def test_chunks_are_sent_while_the_answer_is_generated_and_a_disconnect_stops_it(faulty) -> None:
    """The greedy tiny model never ends its turn here (it repeats a newline), so 400 tokens take
    seconds; the client reads three content chunks and hangs up."""
    gen, base = faulty
    body = {"model": "tiny", "messages": CHAT, "temperature": 0, "max_tokens": 400, "stream": True}
    gen.ended.clear()
    start = time.monotonic()
    with httpx.stream("POST", f"{base}/chat/completions", json=body, timeout=60) as r:
        assert r.status_code == 200
        contents = 0
        for line in r.iter_lines():
            if line.startswith("data: {") and '"content": "\\n' in line:
                contents += 1
            if contents == 3:
                break
        first_chunks = time.monotonic() - start
    closed = time.monotonic()
    deadline = closed + 5
    while not gen.ended and time.monotonic() < deadline:
        time.sleep(0.02)
    assert gen.ended, "the generation did not stop within 5 s of the disconnect"
    print(f"3 chunks after {first_chunks:.2f} s; generation ended {gen.ended[0] - closed:.2f} s after the close")
    assert gen.ended[0] > closed  # still generating when the client read its third chunk and left
    assert gen.ended[0] - closed < 1.0


def test_streamed_text_with_a_stop_string_equals_the_plain_text(client) -> None:
    """Sampled (seeded) so the text varies; the stop string is taken from the middle of the answer."""
    ask = {"model": "tiny", "messages": CHAT, "temperature": 1.0, "seed": 5, "max_tokens": 30}
    full = client.chat.completions.create(**ask).choices[0].message.content
    stop = full[12:15]
    plain = client.chat.completions.create(**ask, stop=[stop]).choices[0]
    chunks = list(client.chat.completions.create(**ask, stop=[stop], stream=True))
    streamed = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert plain.message.content == full[: full.index(stop)] == streamed
    assert plain.finish_reason == "stop" == [c.choices[0].finish_reason for c in chunks if c.choices][-1]


@pytest.fixture(scope="module")
def multibyte(tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The tiny model (its tokenizer was trained on ASCII FrozenLake text, so é, 日, 本 and ✓ are 2-3
    single-byte tokens each) taught by a few supervised steps to answer ``ANSWER``."""
    import shutil

    from services.common.config import SFTConfig
    from services.offline.expert import Demonstration
    from services.offline.policy_sft import supervised_train

    model_dir = tmp_path_factory.mktemp("multibyte") / "model"
    shutil.copytree(tiny_model_dir, model_dir)
    gen = HFGenerator(str(model_dir))
    supervised_train(gen, [Demonstration(CHAT, ANSWER)], SFTConfig(steps=120, batch_size=1, lr=3e-3))
    gen.model.eval()
    with serving(build_app(gen, "tiny")) as base:
        yield base


ANSWER = "café 日本 ✓"


def test_token_bytes_rebuild_the_content_streamed_or_not(multibyte: str) -> None:
    from openai import OpenAI

    client = OpenAI(base_url=multibyte, api_key="unused", max_retries=0)
    plain = client.chat.completions.create(model="tiny", messages=CHAT, temperature=0, max_tokens=20, logprobs=True)
    content, entries = plain.choices[0].message.content, plain.choices[0].logprobs.content
    assert content == ANSWER and plain.choices[0].finish_reason == "stop"
    assert b"".join(bytes(e.bytes) for e in entries) == content.encode()
    assert any(not _valid_utf8(bytes(e.bytes)) for e in entries)  # some tokens end inside a character
    assert "<|im_end|>" not in [e.token for e in entries]
    chunks = [c for c in client.chat.completions.create(model="tiny", messages=CHAT, temperature=0, max_tokens=20,
                                                        logprobs=True, stream=True) if c.choices]
    streamed = [e for c in chunks if c.choices[0].logprobs for e in c.choices[0].logprobs.content]
    assert [(e.token, e.bytes) for e in streamed] == [(e.token, e.bytes) for e in entries]
    assert [e.logprob for e in streamed] == pytest.approx([e.logprob for e in entries], abs=1e-5)
    assert "".join(c.choices[0].delta.content or "" for c in chunks) == content


def _valid_utf8(data: bytes) -> bool:
    try:
        data.decode()
    except UnicodeDecodeError:
        return False
    return True


class _SyncOnArrival(HFGenerator):
    """Serves v1 when a request arrives; a sync to v2 lands before the generation picks its model."""

    def __init__(self, source: str) -> None:
        super().__init__(source, version=1)
        self.source = source

    def _sync(self) -> None:
        if self.model_version == 1:
            self.load_version(self.source, 2)

    def generate_stream(self, *args, **kwargs):
        self._sync()
        return super().generate_stream(*args, **kwargs)

    def generate(self, *args, **kwargs):
        self._sync()
        return super().generate(*args, **kwargs)


@pytest.mark.parametrize("stream", [True, False])
def test_system_fingerprint_names_the_version_that_generated_the_answer(tiny_model_dir: Path, stream: bool) -> None:
    """A request that arrives while v1 is served and is generated by v2 says v2 (it said v1)."""
    from openai import OpenAI

    with serving(build_app(_SyncOnArrival(str(tiny_model_dir)), "tiny")) as base:
        client = OpenAI(base_url=base, api_key="unused", max_retries=0)
        if stream:
            chunks = list(client.chat.completions.create(model="tiny", messages=CHAT, temperature=0, max_tokens=4,
                                                         stream=True))
            assert {c.system_fingerprint for c in chunks} == {"v2"}
        else:
            answer = client.chat.completions.create(model="tiny", messages=CHAT, temperature=0, max_tokens=4)
            assert answer.system_fingerprint == "v2"
