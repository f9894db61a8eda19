"""The `vllm` backend streamed: tokens reported from the engine's incremental outputs as each step
ends, through the OpenAI-compatible endpoint to the official `openai` client, and a client that
hangs up aborting its request in the engine.

Runs in `make test-vllm` (skipped where vLLM is not installed); one engine on the tiny base
checkpoint (greedy decoding of `CHATS` never ends its turn within 400 tokens), served by
`services.policy.openai_api` on loopback. The same checks for the `hf` backend are in
tests/integration/policy/test_openai_streaming.py; the speed figures are in bench/streaming.md.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")  # GiB of KV cache for the CPU build
pytest.importorskip("vllm")

import httpx  # noqa: E402
import torch  # noqa: E402

from services.common.models.generation import Completion, GenerationCancelled, Sampling  # noqa: E402
from services.common.models.loading import load_model  # noqa: E402
from services.common.models.vllm_engine import VLLMGenerator  # noqa: E402
from services.policy.openai_api import build_app  # noqa: E402
from tests.serving import serving  # noqa: E402
from tests.vllm_backend.tiny import CHATS, GREEDY, build_base  # noqa: E402

pytestmark = pytest.mark.vllm


class Recording(VLLMGenerator):
    """The `vllm` backend, recording how each stream ended: ("done" | "cancelled", tokens reported)."""

    def __init__(self, *args, **kwargs) -> None:  # noqa: ANN002, ANN003 - VLLMGenerator's
        super().__init__(*args, **kwargs)
        self.ends: list[tuple[str, int]] = []

    def generate_stream(self, chat, sampling, on_token, cancel=None, seed=None, logprobs=True) -> Completion:  # noqa: ANN001
        reported = []

        def tap(row: int, token: int, logprob: float) -> None:
            reported.append(token)
            on_token(row, token, logprob)

        try:
            c = super().generate_stream(chat, sampling, tap, cancel, seed, logprobs)
        except GenerationCancelled:
            self.ends.append(("cancelled", len(reported)))
            raise
        self.ends.append(("done", len(reported)))
        return c


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(v0, v1): the tiny base, and the base plus N(0, 0.5²) noise (other greedy answers)."""
    root = tmp_path_factory.mktemp("vllm-stream")
    base = build_base(root / "v0")
    model, tok = load_model(str(base))
    torch.manual_seed(1)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.5)
    model.save_pretrained(root / "v1")
    tok.save_pretrained(root / "v1")
    return base, root / "v1"


@pytest.fixture(scope="module")
def engine(checkpoints: tuple[Path, Path]) -> Iterator[Recording]:
    gen = Recording(str(checkpoints[0]), dtype="float32", max_model_len=512, enforce_eager=True,
                    gpu_memory_utilization=0.3)
    yield gen
    gen.close()


@pytest.fixture(scope="module")
def base_url(engine: Recording) -> Iterator[str]:
    with serving(build_app(engine, "tiny")) as url:
        yield url


def test_each_token_is_reported_while_the_request_is_in_the_engine(engine: Recording) -> None:
    plain = engine.generate(CHATS, GREEDY)
    for chat, want in zip(CHATS, plain):
        reported: list[tuple[int, float, bool]] = []
        got = engine.generate_stream(chat, GREEDY, lambda _row, t, lp: reported.append(
            (t, lp, engine.llm.llm_engine.has_unfinished_requests())))
        assert got.token_ids == want.token_ids == tuple(t for t, _, _ in reported)
        assert got.text == want.text and got.finish_reason == want.finish_reason
        assert got.prompt_token_ids == want.prompt_token_ids and got.model_version == want.model_version
        assert max(abs(a - b) for a, b in zip(got.logprobs, want.logprobs)) < 1e-4
        assert [lp for _, lp, _ in reported] == list(got.logprobs)
        assert all(running for _, _, running in reported[:-1])  # reported before the request finished


def test_openai_client_deltas_equal_the_non_streamed_text_at_temperature_0(base_url: str) -> None:
    from openai import OpenAI

    client = OpenAI(base_url=base_url, api_key="unused", max_retries=0)
    for chat in CHATS:
        ask = {"model": "tiny", "messages": chat, "temperature": 0, "max_tokens": 24, "logprobs": True}
        plain = client.chat.completions.create(**ask)
        chunks = list(client.chat.completions.create(**ask, stream=True, stream_options={"include_usage": True}))
        content = [c for c in chunks if c.choices]
        streamed = "".join(c.choices[0].delta.content or "" for c in content)
        assert streamed == plain.choices[0].message.content and streamed
        assert len(content) >= 3  # the role chunk, then the deltas as they came
        entries = [e for c in content if c.choices[0].logprobs for e in c.choices[0].logprobs.content or []]
        assert bytes(b for e in entries for b in e.bytes) == streamed.encode()
        assert [e.logprob for e in entries] == pytest.approx([e.logprob for e in plain.choices[0].logprobs.content],
                                                             abs=1e-4)
        assert content[-1].choices[0].finish_reason == plain.choices[0].finish_reason
        assert chunks[-1].usage.completion_tokens == plain.usage.completion_tokens


def test_a_stop_string_is_held_back_and_cut_as_in_the_plain_answer(base_url: str) -> None:
    from openai import OpenAI

    client = OpenAI(base_url=base_url, api_key="unused", max_retries=0)
    ask = {"model": "tiny", "messages": CHATS[0], "temperature": 1.0, "seed": 5, "max_tokens": 30}
    full = client.chat.completions.create(**ask).choices[0].message.content
    stop = next(full[k:k + 3] for k in range(12, len(full) - 3) if "\ufffd" not in full[k:k + 3])
    plain = client.chat.completions.create(**ask, stop=[stop]).choices[0]
    chunks = list(client.chat.completions.create(**ask, stop=[stop], stream=True))
    streamed = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert plain.message.content == full[: full.index(stop)] == streamed
    assert plain.finish_reason == "stop" == [c.choices[0].finish_reason for c in chunks if c.choices][-1]


def test_a_client_that_hangs_up_aborts_its_request_in_the_engine(engine: Recording, base_url: str) -> None:
    engine.ends.clear()
    body = {"model": "tiny", "messages": CHATS[0], "temperature": 0, "max_tokens": 400, "stream": True}
    seen = 0
    with httpx.stream("POST", f"{base_url}/chat/completions", json=body, timeout=60) as r:
        for line in r.iter_lines():
            if line.startswith("data: {") and json.loads(line[6:])["choices"][0]["delta"].get("content"):
                seen += 1
                if seen == 3:
                    break  # leaving the block closes the connection
    for _ in range(200):  # the outcome, not its speed (bench/streaming.md times it)
        if engine.ends:
            break
        time.sleep(0.05)
    assert engine.ends and engine.ends[0][0] == "cancelled" and engine.ends[0][1] < 400, engine.ends
    assert not engine.llm.llm_engine.has_unfinished_requests()
    again = engine.generate_stream(CHATS[0], Sampling(temperature=0, max_new_tokens=8), lambda *_: None)
    assert again.token_ids == engine.generate([CHATS[0]], Sampling(temperature=0, max_new_tokens=8))[0].token_ids


def test_streams_follow_an_in_place_weight_update(engine: Recording, checkpoints: tuple[Path, Path]) -> None:
    before = engine.generate_stream(CHATS[1], GREEDY, lambda *_: None).token_ids
    engine.load_version(str(checkpoints[1]), 1)
    try:
        after = engine.generate_stream(CHATS[1], GREEDY, lambda *_: None)
        assert after.model_version == 1 and after.token_ids == engine.generate([CHATS[1]], GREEDY)[0].token_ids
        assert after.token_ids != before
    finally:
        engine.load_version(str(checkpoints[0]), 0)
