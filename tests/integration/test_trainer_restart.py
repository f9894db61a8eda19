"""A trainer killed between announcing a version and forgetting the batches it trained on, then
restarted on the same JetStream store: every batch is trained in exactly one version (the
asynchronous chaos run once counted 45 trained + 5 stored of 49 jobs)."""

from __future__ import annotations

import pytest

from rlanything.v1.events_pb2 import PolicySampleBatch, TrainingSample
from services.common.algo.batching import Sample
from services.common.bus import Delivery, EventBus
from services.common.checkpoints import VersionStore
from services.common.kv import ProtoBucket
from services.common.trainer import Trainer

pytestmark = pytest.mark.integration


class RecordingLearner:
    """Test double: records which samples each version trained on, changes no weights."""

    def __init__(self, trained: dict[str, int]) -> None:
        self.trained = trained
        self.lineage = ("", "")
        self.resumed: list[int] = []

    async def initial_uri(self, role: str) -> str:
        return "/nowhere/v0"

    async def resume(self, role: str, version: int) -> None:
        self.resumed.append(version)

    async def learn(self, role: str, samples: list[Sample], recompute_old: bool, version: int,
                    latest_uri: str | None) -> tuple[dict[str, float], str]:
        for s in samples:
            assert s.sample_id not in self.trained, f"{s.sample_id} trained in v{self.trained[s.sample_id]} and v{version}"
            self.trained[s.sample_id] = version
        return {"ppo/samples": float(len(samples))}, f"/nowhere/v{version}"


class Killed(Exception):
    """Stands for kill -9 at that point."""


def batch(i: int) -> PolicySampleBatch:
    sample = TrainingSample(sample_id=f"job-{i}/0", prompt_token_ids=[1, 2], response_token_ids=[3],
                            behaviour_logprobs=[-0.5], advantage=1.0)
    return PolicySampleBatch(batch_id=f"job-{i}/policy", round=0, samples=[sample], jobs_in_round=8)


async def start_trainer(bus: EventBus, trained: dict[str, int]) -> Trainer:
    store = await ProtoBucket.open(bus.js, "policy_samples", PolicySampleBatch)
    trainer = await Trainer.open(bus, "policy", RecordingLearner(trained), await VersionStore.open(bus), store,
                                 mode="async", min_samples_async=2)
    await trainer.ensure_initial_version()
    return trainer


async def test_a_batch_is_trained_once_across_a_kill_after_the_announcement(bus: EventBus) -> None:
    trained: dict[str, int] = {}
    first = await start_trainer(bus, trained)
    delivery = Delivery(subject="rla.samples.policy", stream_seq=1, num_delivered=1, msg_id=None)
    await first.on_batch(batch(0), delivery)

    async def die(key: str) -> None:
        raise Killed(key)

    first.store.kv.delete = die  # type: ignore[method-assign]  # the process dies right after announcing v1
    with pytest.raises(Killed):
        await first.on_batch(batch(1), delivery)
    assert trained == {"job-0/0": 1, "job-1/0": 1}

    second = await start_trainer(bus, trained)  # restarted on the same store
    assert second.learner.resumed == [1] and first.learner.resumed == []  # from v1, announced before the kill
    await second.on_batch(batch(1), delivery)   # JetStream redelivers the batch that was never acked
    for i in (2, 3, 4, 5):
        await second.on_batch(batch(i), delivery)
    left = await second.store.keys()
    assert sorted(trained) == [f"job-{i}/0" for i in range(6)]  # each once (the learner asserts no repeat)
    assert left == []
    latest = await second.versions.latest("policy")
    assert latest is not None and latest.version == 3  # v1: jobs 0-1, v2: 2-3 (job 1 skipped), v3: 4-5
    assert sorted(trained.values()) == [1, 1, 2, 2, 3, 3]
    assert list(latest.batch_keys) == ["r0.job-4=2Fpolicy", "r0.job-5=2Fpolicy"]  # lineage: what v3 trained on


async def test_a_sync_round_completes_from_batches_stored_before_a_restart_listing_the_store_once(bus: EventBus) -> None:
    """The stored keys are listed once at recovery, not on every batch (a listing cost ~60 ms: ~20 s of
    an evaluation round's 300 empty batches); a restarted trainer still counts its predecessor's batches."""
    trained: dict[str, int] = {}
    store = await ProtoBucket.open(bus.js, "policy_samples", PolicySampleBatch)
    first = await Trainer.open(bus, "policy", RecordingLearner(trained), await VersionStore.open(bus), store)
    await first.ensure_initial_version()
    delivery = Delivery(subject="rla.samples.policy", stream_seq=1, num_delivered=1, msg_id=None)
    for i in range(3):
        await first.on_batch(batch(i), delivery)
    assert trained == {}  # 3 of the round's 8 jobs: nothing trained yet

    second = await Trainer.open(bus, "policy", RecordingLearner(trained), await VersionStore.open(bus), store)
    listings = 0
    listed = second.store.keys

    async def counting() -> list[str]:
        nonlocal listings
        listings += 1
        return await listed()

    second.store.keys = counting  # type: ignore[method-assign]
    for i in range(3, 8):
        await second.on_batch(batch(i), delivery)
    assert sorted(trained) == [f"job-{i}/0" for i in range(8)] and set(trained.values()) == {1}
    assert listings == 1
    assert await listed() == []  # every trained batch forgotten
