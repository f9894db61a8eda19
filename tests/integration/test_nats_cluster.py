"""A local three-node JetStream cluster (`NatsCluster`, ``launcher.nats_cluster_size: 3``) with every
stream and KV bucket replicated x3 (``nats.stream_replicas: 3``): a `kill -9` of one node, even the
one leading the stream, loses no acknowledged message and delivers none twice; with two of the three
gone, JetStream refuses writes (the quorum rule: a write needs 2 of 3 replicas)."""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TypeVar

import nats.errors
import pytest
from nats.js.errors import NoStreamResponseError, ServiceUnavailableError

from rlanything.v1 import events_pb2
from services.common.bus import Delivery, EventBus, safe_url, server_urls
from services.common.config import ConsumerConfig, NatsConfig, load_config
from services.common.errors import ConfigError
from services.common.kv import ProtoBucket
from services.common.nats_server import NatsCluster, NatsServer
from services.common.streams import STREAMS, Subjects
from services.run.launcher import Launcher

pytestmark = pytest.mark.integration
T = TypeVar("T")

FAST = ConsumerConfig(ack_wait_s=2.0, max_deliveries=5, backoff_s=[0.05], fetch_batch=8, fetch_timeout_s=0.3)


@pytest.fixture
def cluster() -> NatsCluster:
    with NatsCluster(3) as c:
        yield c


def _node_named(cluster: NatsCluster, name: str) -> NatsServer:
    return next(n for n in cluster.nodes if n.server_name == name)


RETRIED = (nats.errors.TimeoutError, NoStreamResponseError, nats.errors.NoRespondersError,
           nats.errors.ConnectionReconnectingError, ServiceUnavailableError)
"""What a JetStream request raises while a stream or consumer elects a new leader (a few seconds): a
pull request to a consumer still electing its leader is answered 503 (``ServiceUnavailableError``),
which the services' consumer loops retry too (`services.common.bus.CONNECTION_ERRORS`)."""


async def _retrying(call: Callable[[], Awaitable[T]], timeout_s: float = 60.0) -> T:
    """``call()`` until it succeeds: a service's own retry of a failed publish or KV write (a
    redelivery, a nak, a loop tick)."""
    deadline = asyncio.get_running_loop().time() + timeout_s
    while True:
        try:
            return await call()
        except RETRIED:
            if asyncio.get_running_loop().time() > deadline:
                raise
            await asyncio.sleep(0.2)


async def _publish_retrying(bus: EventBus, subject: str, i: int, timeout_s: float = 60.0) -> None:
    """Publish job ``i``, retried with the same Nats-Msg-Id: the stream keeps one copy even if a try
    that timed out was stored."""
    await _retrying(lambda: bus.publish(subject, events_pb2.RolloutJob(job_id=f"job-{i}"), msg_id=f"job-{i}"),
                    timeout_s)


async def test_every_stream_and_bucket_is_replicated_and_survives_the_kill_of_its_leader(cluster: NatsCluster) -> None:
    bus = await EventBus.connect(NatsConfig(url=cluster.url, stream_replicas=3, connect_timeout_s=2.0,
                                            reconnect_time_wait_s=0.2), FAST, name="test")
    try:
        await bus.ensure_streams()
        for spec in STREAMS:
            info = await bus.js.stream_info(spec.name)
            assert info.config.num_replicas == 3, spec.name
            assert info.cluster is not None and len(info.cluster.replicas or []) == 2, (spec.name, info.cluster)
        bucket = await ProtoBucket.open(bus.js, "models", events_pb2.ModelVersion, replicas=3)
        assert (await bus.js.stream_info("KV_models")).config.num_replicas == 3
        await bucket.put("policy", events_pb2.ModelVersion(version=1))

        for i in range(20):
            await _publish_retrying(bus, "rla.jobs.rollout", i)
        leader = (await bus.js.stream_info("JOBS")).cluster.leader
        victim = _node_named(cluster, leader)
        os.kill(victim.proc.pid, signal.SIGKILL)  # the JOBS stream's leader, mid-stream
        victim.proc.wait()
        for i in range(20, 40):
            await _publish_retrying(bus, "rla.jobs.rollout", i)
        await _publish_retrying(bus, "rla.jobs.rollout", 7)  # a retried publish: stored once
        value = await _retrying(lambda: bucket.update("policy", lambda v: events_pb2.ModelVersion(version=2)))
        assert value.version == 2 and (await _retrying(lambda: bucket.get("policy")))[0].version == 2

        seen: list[str] = []
        sub = await _retrying(lambda: bus.js.pull_subscribe("rla.jobs.rollout", durable="workers", stream="JOBS"))
        deadline = asyncio.get_running_loop().time() + 90.0
        while len(seen) < 40 and asyncio.get_running_loop().time() < deadline:
            try:
                msgs = await sub.fetch(10, timeout=2.0)
            except RETRIED:
                continue
            for m in msgs:
                seen.append(events_pb2.RolloutJob.FromString(m.data).job_id)
                await m.ack_sync(timeout=10.0)
        assert sorted(seen) == sorted(f"job-{i}" for i in range(40)), "a job lost or delivered twice"
        # a new leader, and every job acked: the work queue drops an acked job once the ack is replicated
        for _ in range(100):
            info = await _retrying(lambda: bus.js.stream_info("JOBS"))
            if info.state.messages == 0:
                break
            await asyncio.sleep(0.1)
        assert info.cluster.leader != leader and info.state.messages == 0, info.state

        # The quorum rule: with 2 of 3 nodes gone, no replicated stream accepts a write.
        other = next(n for n in cluster.nodes if n is not victim and n.port != bus.nc.connected_url.port)
        os.kill(other.proc.pid, signal.SIGKILL)
        other.proc.wait()
        with pytest.raises((nats.errors.TimeoutError, NoStreamResponseError, nats.errors.NoRespondersError)):
            await bus.js.publish("rla.jobs.rollout", b"x", timeout=3.0, headers={"Nats-Msg-Id": "no-quorum"})

        # One node back: 2 of 3 again, writes are acknowledged.
        victim.start()
        await _publish_retrying(bus, "rla.jobs.rollout", 99, timeout_s=90.0)
    finally:
        await bus.close()


async def test_a_running_consumer_rides_out_the_kill_of_the_node_leading_it(cluster: NatsCluster) -> None:
    """The chaos run's first failure: each service's consumer loop crashed (exit 1) on the 503 its
    pull request got while the killed node's consumers elected new leaders."""
    bus = await EventBus.connect(NatsConfig(url=cluster.url, stream_replicas=3, connect_timeout_s=2.0,
                                            reconnect_time_wait_s=0.2), FAST, name="test")
    seen: list[str] = []
    redelivered: list[str] = []

    async def handler(event: events_pb2.RolloutJob, delivery: Delivery) -> None:
        (redelivered if delivery.num_delivered > 1 else seen).append(event.job_id)

    stop = asyncio.Event()
    try:
        await bus.ensure_streams()
        consumer = bus.consumer(stream="JOBS", durable="workers", subject=Subjects.ROLLOUT_JOBS,
                                message_type=events_pb2.RolloutJob, handler=handler)
        await consumer.setup()
        stored_before = (await _retrying(lambda: bus.js.stream_info("JOBS"))).state.last_seq
        runner = asyncio.create_task(consumer.run(stop))
        for i in range(10):
            await _publish_retrying(bus, Subjects.ROLLOUT_JOBS, i)
        leader = (await bus.js.consumer_info("JOBS", "workers")).cluster.leader
        victim = _node_named(cluster, leader)
        os.kill(victim.proc.pid, signal.SIGKILL)  # the consumer's leader: its pull requests get 503s
        victim.proc.wait()
        for i in range(10, 30):
            await _publish_retrying(bus, Subjects.ROLLOUT_JOBS, i)
        deadline = asyncio.get_running_loop().time() + 90.0
        while len(set(seen) | set(redelivered)) < 30 and not runner.done() \
                and asyncio.get_running_loop().time() < deadline:
            await asyncio.sleep(0.1)
        assert not runner.done(), f"the consumer loop ended: {runner.exception()!r}"
        # Every job handled, each stored once. Delivery is at least once (the services' effects are keyed
        # by id, README "Guarantees"): a job whose ack went to the dead leader comes again as a redelivery,
        # and one the dead leader sent that never arrived comes only as one (a CI run: 4 of 30).
        jobs = {f"job-{i}" for i in range(30)}
        assert set(seen) | set(redelivered) == jobs, f"lost: {sorted(jobs - set(seen) - set(redelivered))}"
        assert len(seen) == len(set(seen)), f"a job stored twice: {sorted(seen)}"
        stored = (await _retrying(lambda: bus.js.stream_info("JOBS"))).state.last_seq - stored_before
        assert stored == 30, f"{stored} messages stored for 30 jobs"
    finally:
        stop.set()
        await bus.close()


def test_the_launcher_starts_a_cluster_and_refuses_more_replicas_than_nodes(tmp_path: Path) -> None:
    (tmp_path / "logs").mkdir()
    config = load_config(None, ["launcher.nats_cluster_size=3", "nats.stream_replicas=3"])
    launcher = Launcher(config, tmp_path, persistent_nats=True)
    try:
        url = launcher.start_nats()
        assert len(server_urls(url)) == 3 and url == safe_url(url)
        assert launcher.cluster is not None
        assert [n.server_name for n in launcher.cluster.nodes] == ["n0", "n1", "n2"]
        for i, node in enumerate(launcher.cluster.nodes):
            assert node.store_dir == tmp_path / "nats" / f"node-{i}"
            assert node.log_path == tmp_path / "logs" / f"nats-n{i}.log"
            assert node.proc is not None and node.proc.poll() is None
            conf = (node.store_dir / "nats-server.conf").read_text()
            assert "cluster {" in conf and f"server_name: n{i}" in conf and "sync_interval: always" in conf
    finally:
        launcher.stop()
    too_many = load_config(None, ["nats.stream_replicas=3"])
    with pytest.raises(ConfigError, match="nats.stream_replicas=3 is more than launcher.nats_cluster_size=1"):
        Launcher(too_many, tmp_path).start_nats()
    with pytest.raises(ConfigError, match="launcher.nats_cluster_size"):
        load_config(None, ["launcher.nats_cluster_size=2"])


def test_a_url_list_is_split_and_each_url_hides_its_password() -> None:
    url = "nats://u:secret@a:4222, nats://u:secret@b:4222"
    assert server_urls(url) == ["nats://u:secret@a:4222", "nats://u:secret@b:4222"]
    assert safe_url(url) == "nats://a:4222,nats://b:4222"
    with pytest.raises(ValueError, match="empty URL between two commas"):
        NatsConfig(url="nats://a:4222,,nats://b:4222")
