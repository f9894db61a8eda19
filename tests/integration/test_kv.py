"""Key-value helpers against a real JetStream server: protobuf values, CAS updates, restart."""

from __future__ import annotations

import asyncio
import tempfile
import time

import pytest

from rlanything.v1 import events_pb2
from services.common.bus import EventBus
from services.common.config import ConsumerConfig, NatsConfig
from services.common.kv import ProtoBucket, live_entries
from services.common.nats_server import NatsServer

pytestmark = pytest.mark.integration


async def test_get_put_and_missing(bus: EventBus) -> None:
    bucket = await ProtoBucket.open(bus.js, "models", events_pb2.ModelVersion)
    assert await bucket.get("policy") == (None, 0)
    assert await bucket.keys() == []
    rev = await bucket.put("policy", events_pb2.ModelVersion(version=3, uri="/ckpt/3"))
    value, got_rev = await bucket.get("policy")
    assert value.version == 3 and got_rev == rev
    assert await bucket.keys() == ["policy"]


async def test_keys_right_after_put_lists_every_live_key_and_no_deleted_one(bus: EventBus) -> None:
    # The trainer's pattern: put a batch, list the keys, train when the round is complete.
    # nats-py's own KeyValue.keys() returned partial lists here now and then (a run hung).
    bucket = await ProtoBucket.open(bus.js, "batches", events_pb2.ModelVersion)
    live: set[str] = set()
    for r in range(30):
        for j in range(12):
            key = f"r{r}.job-{j}"
            await bucket.put(key, events_pb2.ModelVersion(version=j))
            live.add(key)
            assert set(await bucket.keys()) == live, (r, j)
        for key in [k for k in live if k.startswith(f"r{r}.")]:
            await bucket.kv.delete(key)
            live.discard(key)
    assert await bucket.keys() == []
    for j in range(600):  # more than one fetch of keys
        await bucket.put(f"k{j}", events_pb2.ModelVersion(version=j))
    await bucket.kv.purge("k0")
    assert await bucket.keys() == [f"k{j}" for j in range(1, 600)]


async def test_live_entries_hold_every_live_value_and_its_write_time(bus: EventBus) -> None:
    # What the critic restores its open groups from after a restart (it used kv.watch before,
    # which can end its initial listing early).
    bucket = await ProtoBucket.open(bus.js, "groups", events_pb2.ModelVersion)
    before = time.time()
    for j in range(700):  # more than one fetch
        await bucket.put(f"g{j}", events_pb2.ModelVersion(version=j))
    await bucket.put("g5", events_pb2.ModelVersion(version=-5))  # a newer revision of one key
    await bucket.kv.delete("g1")
    entries = await live_entries(bucket.kv)
    assert [e.key for e in entries] == [f"g{j}" for j in range(700) if j not in (1, 5)] + ["g5"]
    values = {e.key: events_pb2.ModelVersion.FromString(e.value).version for e in entries}
    assert values["g5"] == -5 and values["g699"] == 699
    assert all(before - 1 <= e.written_unix_s <= time.time() + 1 for e in entries)
    assert [e.value for e in await live_entries(bucket.kv, values=False)][:2] == [b"", b""]


async def test_concurrent_cas_updates_lose_nothing(bus: EventBus) -> None:
    bucket = await ProtoBucket.open(bus.js, "counters", events_pb2.RoundMetrics)

    def bump(current):
        new = events_pb2.RoundMetrics()
        if current is not None:
            new.CopyFrom(current)
        new.values["n"] = new.values["n"] + 1
        return new

    await asyncio.gather(*(bucket.update("round", bump, retries=50) for _ in range(20)))
    value, _ = await bucket.get("round")
    assert value.values["n"] == 20


async def test_bucket_survives_server_restart(consumer_config: ConsumerConfig) -> None:
    store = tempfile.mkdtemp(prefix="rla-kv-")
    with NatsServer(store_dir=store) as server:
        bus = await EventBus.connect(NatsConfig(url=server.url), consumer_config, name="kv")
        bucket = await ProtoBucket.open(bus.js, "pool", events_pb2.TaskRef)
        await bucket.put("slot-1", events_pb2.TaskRef(slot_id="slot-1", version=4))
        await bus.close()
        port = server.port
    with NatsServer(store_dir=store, port=port) as server:
        bus = await EventBus.connect(NatsConfig(url=server.url), consumer_config, name="kv")
        bucket = await ProtoBucket.open(bus.js, "pool", events_pb2.TaskRef)
        value, _ = await bucket.get("slot-1")
        assert value.version == 4
        await bus.close()


async def test_live_entries_under_a_key_prefix_are_filtered_by_the_server(bus) -> None:
    from services.common.kv import open_bucket

    kv = await open_bucket(bus.js, "prefixed")
    for key in ("acme.ep-1.a", "acme.ep-1.b", "acme.ep-10.a", "other.ep-1.a"):
        await kv.put(key, key.encode())
    await kv.delete("acme.ep-1.b")
    assert [e.key for e in await live_entries(kv, key_prefix="acme.ep-1.")] == ["acme.ep-1.a"]
    assert sorted(e.key for e in await live_entries(kv, key_prefix="acme.")) == ["acme.ep-1.a", "acme.ep-10.a"]
    assert len(await live_entries(kv)) == 3
    with pytest.raises(ValueError, match="must end with"):
        await live_entries(kv, key_prefix="acme")


async def test_a_huge_id_is_refused_before_it_reaches_nats(bus: EventBus) -> None:
    """Found by fuzzing: a sample batch whose batch_id had 200,000 characters became a KV key, and
    NATS closed the trainer's connection ("maximum control line exceeded"), which ended the
    service. The key is now refused first, as a poison id, and the connection stays up."""
    from services.common.errors import InvalidArgumentError, InvalidEventError, InvalidKeyError
    from services.common.kv import escape_id

    bucket = await ProtoBucket.open(bus.js, "batches", events_pb2.ModelVersion)
    huge = "b" * 200_000
    for attempt in (lambda: bucket.put(huge, events_pb2.ModelVersion()), lambda: bucket.get(huge),
                    lambda: bucket.update(huge, lambda _: events_pb2.ModelVersion())):
        with pytest.raises(InvalidKeyError, match="1024") as err:
            await attempt()
        assert isinstance(err.value, InvalidEventError) and isinstance(err.value, InvalidArgumentError)
    with pytest.raises(InvalidKeyError, match="200000 characters"):
        escape_id(huge)
    assert not bus.nc.is_closed and bus.nc.is_connected
    await bucket.put("small", events_pb2.ModelVersion(version=1))  # the same connection still works
    assert (await bucket.get("small"))[0].version == 1


async def test_a_key_with_characters_kv_refuses_is_our_invalid_key_error(bus: EventBus) -> None:
    """Found by fuzzing: Environment.Reset of slot id ":" reached nats-py's own InvalidKeyError,
    which the servicer did not know, so the caller saw UNKNOWN instead of INVALID_ARGUMENT."""
    from services.common.errors import InvalidArgumentError, InvalidKeyError

    bucket = await ProtoBucket.open(bus.js, "slots", events_pb2.ModelVersion)
    for bad in (":", "a b", ".lead", "trail.", "é"):
        with pytest.raises(InvalidKeyError) as err:
            await bucket.get(bad)
        assert isinstance(err.value, InvalidArgumentError) and repr(bad) in str(err.value)
    assert await bucket.get("ok/key_1=A.b-c") == (None, 0)
