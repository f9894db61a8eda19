"""When a trainer trains (pure rules of services/common/trainer.py)."""

from __future__ import annotations

from services.common.rounds import LIVE_PREFIX, batch_key
from services.common.rounds import round_batches as round_complete
from services.common.trainer import async_quota_met


def test_batch_keys_are_per_round_and_safe_for_kv() -> None:
    assert batch_key(3, "r3/gym_text/train-0001/v0/policy") == "r3.r3=2Fgym_text=2Ftrain-0001=2Fv0=2Fpolicy"
    assert batch_key(13, "a.b") == "r13.a=2Eb"
    assert batch_key(0, "a/b") != batch_key(0, "a_b")  # two batches never share a key


def test_a_round_is_complete_when_every_job_sent_its_batch() -> None:
    keys = [batch_key(2, f"job-{j}") for j in range(3)] + [batch_key(3, "job-0"), batch_key(12, "job-9")]
    assert round_complete(keys, 2, 4) is None
    assert round_complete(keys, 2, 3) == keys[:3]
    assert round_complete(keys, 1, 1) is None  # round 12's key does not count for round 1
    assert round_complete(keys, 3, 1) == [keys[3]]
    assert round_complete(keys, 12, 1) == [keys[4]]


def test_async_training_waits_for_the_sample_quota() -> None:
    assert not async_quota_met([], 1)
    assert not async_quota_met([30, 33], 64)
    assert async_quota_met([30, 34], 64)


def test_live_batches_ride_along_with_a_round_and_never_count_towards_it() -> None:
    live = batch_key(3, "live/acme/e1/policy", live=True)
    assert live == "live.live=2Facme=2Fe1=2Fpolicy" and live.startswith(LIVE_PREFIX)
    keys = [batch_key(2, "r2/a/policy"), live]
    assert round_complete(keys, 2, 2) is None  # the live batch is not the missing job's batch
    assert round_complete(keys + [batch_key(2, "r2/b/policy")], 2, 2) == [
        batch_key(2, "r2/a/policy"), batch_key(2, "r2/b/policy"), live]
    assert round_complete([live], 0, 1) is None
