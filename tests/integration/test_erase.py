"""Erasing a subject's messages one by one (secure erase) on a real JetStream stream."""

from __future__ import annotations

import pytest

from rlanything.v1.events_pb2 import PolicySampleBatch, TrainingSample
from services.common.bus import Delivery, EventBus
from services.common.checkpoints import VersionStore
from services.common.erase import erase_subject
from services.common.kv import ProtoBucket
from services.common.rounds import batch_key
from services.common.trainer import Trainer
from tests.integration.test_trainer_restart import RecordingLearner

pytestmark = pytest.mark.integration


async def test_erase_subject_deletes_every_message_of_the_subject_and_nothing_else(bus: EventBus) -> None:
    for i in range(3):
        await bus.publish("rla.ingest.completion.acme.ep-1", PolicySampleBatch(batch_id=f"a{i}"), msg_id=f"a{i}")
        await bus.publish("rla.ingest.completion.acme.ep-2", PolicySampleBatch(batch_id=f"b{i}"), msg_id=f"b{i}")
    assert await erase_subject(bus.js, "INGEST", "rla.ingest.completion.acme.ep-1") == 3
    info = await bus.js.stream_info("INGEST", subjects_filter="rla.ingest.>")
    assert info.state.subjects == {"rla.ingest.completion.acme.ep-2": 3}
    assert await erase_subject(bus.js, "INGEST", "rla.ingest.completion.acme.>") == 3   # wildcards too
    assert await erase_subject(bus.js, "INGEST", "rla.ingest.completion.acme.>") == 0   # idempotent


async def test_a_trainer_forgets_an_erased_users_live_batch_before_training_it(bus: EventBus) -> None:
    trained: dict[str, int] = {}
    store = await ProtoBucket.open(bus.js, "policy_samples", PolicySampleBatch)
    trainer = await Trainer.open(bus, "policy", RecordingLearner(trained), await VersionStore.open(bus), store,
                                 mode="sync")
    await trainer.ensure_initial_version()
    delivery = Delivery(subject="rla.samples.policy", stream_seq=1, num_delivered=1, msg_id=None)
    for tid in ("live/acme/ep-1", "live/acme/ep-2"):
        sample = TrainingSample(sample_id=f"{tid}/0", prompt_token_ids=[1], response_token_ids=[2],
                                behaviour_logprobs=[-0.1], advantage=1.0)
        await trainer.on_batch(PolicySampleBatch(batch_id=f"{tid}/policy", samples=[sample], live=True), delivery)
    assert await trainer.forget_live(["live/acme/ep-1/policy", "live/acme/ep-9/policy"]) == 1
    assert await store.keys() == [batch_key(0, "live/acme/ep-2/policy", live=True)]
    round_batch = PolicySampleBatch(batch_id="r0/job/policy", round=0, jobs_in_round=1, samples=[TrainingSample(
        sample_id="r0/job/0/0", prompt_token_ids=[1], response_token_ids=[2], behaviour_logprobs=[-0.1], advantage=1.0)])
    await trainer.on_batch(round_batch, delivery)
    assert sorted(trained) == ["live/acme/ep-2/0", "r0/job/0/0"]   # the erased user's sample never trained
