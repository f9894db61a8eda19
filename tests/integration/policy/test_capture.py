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
