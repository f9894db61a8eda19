"""Generated event payloads on every subject a service consumes: each consumer goes on, nothing
hangs, and every payload that is not a valid message of the subject's type ends in the
dead-letter stream with its reason."""

from __future__ import annotations

import asyncio
import time

import nats
import pytest
from google.protobuf.message import DecodeError
from hypothesis import HealthCheck, given, settings

from rlanything.v1 import events_pb2, ingest_pb2
from services.common.config.base import MAX_MESSAGE_BYTES
from services.common.streams import DLQ_PREFIX
from tests.system.fuzz.tally import EVENTS, tally
from tests.system.fuzz.strategies import payloads

pytestmark = [pytest.mark.system, pytest.mark.slow]

E, I = events_pb2, ingest_pb2
CONSUMED = [  # (stream, durable consumer, a subject it consumes, the payload type)
    ("JOBS", "policy-rollout-workers", "rla.jobs.rollout", E.RolloutJob),
    ("SAMPLES", "policy-trainer", "rla.samples.policy", E.PolicySampleBatch),
    ("SAMPLES", "reward-trainer", "rla.samples.reward", E.RewardSampleBatch),
    ("TRAJ", "reward-judges", "rla.traj.completed", E.Trajectory),
    ("TRAJ", "reward-judges-live", "rla.traj.live.completed.fuzz.ep-1", E.Trajectory),
    ("TRAJ", "critic-judged", "rla.traj.judged", E.JudgedTrajectory),
    ("TRAJ", "critic-live", "rla.traj.live.judged.fuzz.ep-1", E.JudgedTrajectory),
    ("MODELS", "critic-policy-versions", "rla.models.policy", E.ModelVersion),
    ("MODELS", "env-model-versions", "rla.models.reward", E.ModelVersion),
    ("REPORTS", "env-task-reports", "rla.critic.task", E.TaskReport),
    ("INGEST", "env-live-candidates", "rla.ingest.candidate.fuzz", I.LiveTaskCandidate),
    ("INGEST", "ingest-captures", "rla.ingest.completion.fuzz.ep-1", I.CapturedCompletion),
]
DRAIN_S = 300.0 + 2.0 * EVENTS
"""Seconds every consumer gets to handle or dead-letter what it was sent (more means a hung handler)."""


def _parses(message_type, data: bytes) -> bool:
    try:
        message_type.FromString(data)
        return True
    except DecodeError:
        return False


async def _drained(js, stream: str, durable: str) -> bool:
    info = await js.consumer_info(stream, durable)
    return info.num_pending == 0 and info.num_ack_pending == 0


async def _dead_letters(js, subject: str) -> list:
    dlq = f"{DLQ_PREFIX}.{subject}"
    sub = await js.pull_subscribe(dlq, stream="DLQ")
    out = []
    while True:
        try:
            out += await sub.fetch(256, timeout=1.0)
        except (nats.errors.TimeoutError, asyncio.TimeoutError):
            break
    await sub.unsubscribe()
    return out


@pytest.mark.parametrize(("stream", "durable", "subject", "message_type"), CONSUMED, ids=[c[1] for c in CONSUMED])
def test_every_generated_event_is_handled_or_dead_lettered_with_a_reason(system, stream, durable, subject,
                                                                          message_type) -> None:
    others = [m.DESCRIPTOR for *_, m in CONSUMED if m is not message_type]
    sent: list[bytes] = []

    @settings(max_examples=EVENTS, deadline=None, database=None, derandomize=True,
              suppress_health_check=list(HealthCheck))
    @given(payloads(message_type.DESCRIPTOR, others))
    def collect(data: bytes) -> None:
        if len(data) > MAX_MESSAGE_BYTES:  # NATS refuses these at the client already (max_payload)
            tally(subject, "refused by NATS (over max_payload)")
        else:
            sent.append(data)

    collect()

    async def main() -> None:
        nc = await nats.connect(system["nats_url"])
        js = nc.jetstream()
        names = [c.name for c in await js.consumers_info(stream)]
        if durable not in names:
            await nc.close()
            pytest.skip(f"{durable} runs only when configured (e.g. a live env family); this deployment has {names}")
        for i, data in enumerate(sent):
            await js.publish(subject, data, headers={"Nats-Msg-Id": f"fuzz/{durable}/{i}"})
        deadline = time.monotonic() + DRAIN_S
        while not await _drained(js, stream, durable):
            assert time.monotonic() < deadline, f"{durable} did not handle its {len(sent)} events in {DRAIN_S} s"
            await asyncio.sleep(0.5)
        letters = await _dead_letters(js, subject)
        await nc.close()
        reasons = [m.headers.get("Rla-Dlq-Reason", "") for m in letters]
        assert all(reasons), "a dead letter without a reason"
        unparsable = sum(1 for d in sent if not _parses(message_type, d))
        mine = [m for m in letters if m.headers.get("Rla-Dlq-Consumer") == durable]
        assert len(mine) >= unparsable, (len(mine), unparsable)  # every unparsable payload is among them
        for _ in range(len(mine)):
            tally(subject, "dead-lettered")
        for _ in range(len(sent) - len(mine)):
            tally(subject, "handled")

    asyncio.run(main())
