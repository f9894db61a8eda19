"""Live traffic reaches a trained round: ingest → judge → critic → the policy trainer, each a real
process on one nats-server. A captured, served turn of a settled episode with the user's outcome
becomes a live sample batch, which the synchronous trainer trains with the next round — without
counting it towards that round's jobs."""

from __future__ import annotations

import asyncio
import time

import pytest

from rlanything.v1.events_pb2 import PolicySampleBatch
from rlanything.v1.ingest_pb2 import CapturedCompletion, Consent
from services.common.checkpoints import VersionStore
from services.common.models.loading import load_model
from services.common.streams import Subjects
from tests.integration.ingest.test_ingest_service import HEADERS, episode, start, wait_state
from tests.integration.policy.test_policy_service import policy_yaml

pytestmark = [pytest.mark.integration, pytest.mark.slow]


async def test_a_served_live_turn_trains_the_policy_in_the_next_round(spawn_service, tiny_model_dir, tmp_path,
                                                                      bus) -> None:
    spawn_service("reward", "reward: {role: judge, backend: oracle, votes: 3}\n")  # votes = the user's thumbs
    critic = spawn_service("critic", "critic: {live: {min_count: 0}}\n")
    spawn_service("policy", policy_yaml(tiny_model_dir, tmp_path / "ckpt", role="trainer"))
    _, client = start(spawn_service)
    versions = await VersionStore.open(bus)

    _, tok = load_model(str(tiny_model_dir))
    prompt = tok.apply_chat_template([{"role": "user", "content": "What is 17 + 25?"}], add_generation_prompt=True)
    prompt = list(prompt["input_ids"] if hasattr(prompt, "keys") else prompt)
    answer = tok.encode("\\boxed{42}", add_special_tokens=False) + [tok.eos_token_id]
    capture = CapturedCompletion(tenant="acme", episode_id="live-1", completion_id="cmpl-1", response="\\boxed{42}",
                                 prompt_token_ids=prompt, response_token_ids=answer, logprobs=[-1.0] * len(answer),
                                 model_version=0, consent=Consent(training=True))
    await bus.publish("rla.ingest.completion.acme.live-1", capture, msg_id="acme/cmpl/cmpl-1")
    await asyncio.sleep(0.5)
    body = episode("live-1", ended=True)
    body["messages"][1].update({"completionId": "cmpl-1", "turnId": "t1"})
    assert client.post("/v1/ingest/episodes", headers=HEADERS, json=body).json()["status"] == "STATUS_ACCEPTED"
    for fb in ({"feedbackId": "th", "episodeId": "live-1", "turnId": "t1", "kind": "KIND_THUMBS", "value": 1},
               {"feedbackId": "ok", "episodeId": "live-1", "kind": "KIND_OUTCOME", "value": 1}):
        assert client.post("/v1/ingest/feedback", headers=HEADERS, json=fb).json()["status"] == "STATUS_APPLIED"
    assert wait_state(client, "live-1", "STATE_SETTLED")["state"] == "STATE_SETTLED"

    deadline = time.monotonic() + 30
    while not (done := [m for m in critic.log_messages() if m.get("msg") == "live trajectory evaluated"]):
        assert time.monotonic() < deadline, "critic did not evaluate the live trajectory"
        await asyncio.sleep(0.1)
    # One served turn with the user's outcome: one policy sample; the oracle's 3 votes agree, so the
    # judge has no consistency spread to learn from.
    assert (done[0]["policy_samples"], done[0]["reward_samples"]) == (1, 0)
    await asyncio.sleep(1.0)  # the live batch is stored by the trainer, which does not train on it alone
    assert (await versions.latest("policy")).version == 0

    # Round 0 has one job: its batch completes the round; the live batch rides along.
    await bus.publish(Subjects.SAMPLES_POLICY, PolicySampleBatch(batch_id="r0/a/policy", round=0, jobs_in_round=1),
                      msg_id="r0/a/policy")
    deadline = time.monotonic() + 60
    while (latest := await versions.latest("policy")).version < 1:
        assert time.monotonic() < deadline, "the trainer did not train round 0"
        await asyncio.sleep(0.2)
    assert latest.trained_on_round == 0
    assert latest.metrics["live_samples"] == 1.0 and latest.metrics["ppo/samples"] == 1.0
