"""Capture on the policy's OpenAI endpoint, as a product uses it: the official `openai` client
against the real policy process, captures read back from the real INGEST stream."""

from __future__ import annotations

import time

import pytest
from nats.js.api import ConsumerConfig as JsConsumerConfig

from rlanything.v1.ingest_pb2 import CapturedCompletion
from services.common.bus import EventBus
from services.common.nats_server import NatsServer, free_port
from tests.integration.policy.test_policy_service import policy_yaml

pytestmark = [pytest.mark.integration, pytest.mark.slow]

KEY = "acme-key-0123456789"
CHAT = [{"role": "user", "content": "I am jane.canary@example.org. Task: walk to G.\nNow: A F G"}]


async def captures(bus: EventBus, count: int, timeout_s: float = 10.0) -> list[CapturedCompletion]:
    deadline = time.monotonic() + timeout_s
    while (await bus.js.stream_info("INGEST")).state.messages < count:
        assert time.monotonic() < deadline, "captures did not arrive"
        time.sleep(0.05)
    sub = await bus.js.pull_subscribe("rla.ingest.completion.>", durable=None, stream="INGEST",
                                      config=JsConsumerConfig(filter_subject="rla.ingest.completion.>"))
    msgs = await sub.fetch(count, timeout=5)
    await sub.unsubscribe()
    return [CapturedCompletion.FromString(m.data) for m in msgs]


async def test_captured_completions_are_redacted_and_never_change_the_answer(
        spawn_service, tiny_model_dir, tmp_path, bus: EventBus, nats_server: NatsServer) -> None:
    from openai import BadRequestError, OpenAI

    port = free_port()
    yaml_text = policy_yaml(tiny_model_dir, tmp_path / "ckpt", role="rollout", http_port=port).replace(
        "policy: {", "policy: {capture: {enabled: true}, ") + f"ingest: {{tenants: {{acme: {{key: {KEY}}}}}}}\n"
    policy = spawn_service("policy", yaml_text)
    client = OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key=KEY, max_retries=0)

    def ask(**headers: str):
        return client.chat.completions.with_raw_response.create(
            model="policy", messages=CHAT, temperature=0, max_tokens=8, extra_headers=headers)

    plain = ask()
    assert plain.headers["x-rla-capture"] == "off"
    captured = ask(**{"X-RLA-Episode": "conv-1", "X-RLA-Turn": "t1", "X-RLA-Consent": "training"})
    assert captured.headers["x-rla-capture"] == "queued"
    assert captured.parse().choices[0].message.content == plain.parse().choices[0].message.content
    assert ask(**{"X-RLA-Episode": "conv-2"}).headers["x-rla-capture"] == "rejected:no_consent"
    nucleus = client.chat.completions.with_raw_response.create(  # answered, but its log-probs are not the
        model="policy", messages=CHAT, temperature=0.8, top_p=0.9, max_tokens=4,  # sampled distribution's
        extra_headers={"X-RLA-Episode": "conv-3", "X-RLA-Consent": "training"})
    assert nucleus.headers["x-rla-capture"] == "rejected:top_p" and nucleus.parse().choices
    other = OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="wrong", max_retries=0)
    raw = other.chat.completions.with_raw_response.create(
        model="policy", messages=CHAT, max_tokens=2, extra_headers={"X-RLA-Episode": "c", "X-RLA-Consent": "training"})
    assert raw.headers["x-rla-capture"] == "rejected:unknown_tenant"
    with pytest.raises(BadRequestError) as err:
        ask(**{"X-RLA-Episode": "a b c", "X-RLA-Consent": "training"})
    assert err.value.body["param"] == "X-RLA-Episode"

    (capture,) = await captures(bus, 1)
    body = captured.parse()
    assert (capture.tenant, capture.episode_id, capture.turn_id, capture.completion_id) == ("acme", "conv-1", "t1",
                                                                                            body.id)
    assert capture.prompt[0].content.startswith("I am <EMAIL_1>.") and capture.redactions["EMAIL"] == 1
    assert not capture.prompt_token_ids and capture.retokenize  # the prompt changed: its ids would leak it
    assert list(capture.response_token_ids) and len(capture.logprobs) == len(capture.response_token_ids)
    everything = b"".join(m for m in [capture.SerializeToString()]) + policy.log_path.read_bytes()
    assert b"jane.canary@example.org" not in everything

    # No ingest service runs in this test at all (capture depends on NATS only), and now NATS is
    # down too: answers go on, with the same body; the capture is dropped and counted.
    nats_server.stop()
    during = ask(**{"X-RLA-Episode": "conv-3", "X-RLA-Consent": "training"})
    assert during.parse().choices[0].message.content == plain.parse().choices[0].message.content
    assert during.headers["x-rla-capture"] == "queued"


async def test_a_stream_is_captured_as_delivered_and_an_abandoned_one_not_at_all(
        spawn_service, tiny_model_dir, tmp_path, bus: EventBus) -> None:
    """Capture of ``stream: true`` (issue 37): the capture holds the content the client received; a
    stream the client closed after two chunks is not captured (it used to be, whole)."""
    import json

    import httpx

    port = free_port()
    yaml_text = policy_yaml(tiny_model_dir, tmp_path / "ckpt", role="rollout", http_port=port).replace(
        "policy: {", "policy: {capture: {enabled: true}, ") + f"ingest: {{tenants: {{acme: {{key: {KEY}}}}}}}\n"
    spawn_service("policy", yaml_text)
    url = f"http://127.0.0.1:{port}/v1/chat/completions"
    chat = [{"role": "user", "content": "Task: walk to G.\nNow: A F G"}]

    def stream(episode: str, max_tokens: int, chunks: int | None = None) -> str:
        """The streamed content, reading at most ``chunks`` content chunks before hanging up."""
        headers = {"Authorization": f"Bearer {KEY}", "X-RLA-Episode": episode, "X-RLA-Consent": "training"}
        body = {"model": "policy", "messages": chat, "temperature": 1.0, "seed": 3, "max_tokens": max_tokens,
                "stream": True}
        text, seen = "", 0
        with httpx.stream("POST", url, json=body, headers=headers, timeout=60) as r:
            assert r.headers["x-rla-capture"] == "queued"
            for line in r.iter_lines():
                if line.startswith("data: {"):
                    delta = (json.loads(line[6:])["choices"] or [{}])[0].get("delta", {})
                    text += delta.get("content") or ""
                    seen += bool(delta.get("content"))
                    if chunks is not None and seen == chunks:
                        break
        return text

    whole = stream("conv-s1", 12)
    stream("conv-s2", 400, chunks=2)  # abandoned
    stream("conv-s3", 6)
    time.sleep(1.0)  # the abandoned stream's capture, had there been one, was queued before conv-s3's
    got = await captures(bus, 2)
    assert [c.episode_id for c in got] == ["conv-s1", "conv-s3"]
    assert (await bus.js.stream_info("INGEST")).state.messages == 2
    assert got[0].response == whole and list(got[0].response_token_ids)
