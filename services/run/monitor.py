"""Feed `RunProgress` from the live event streams (core NATS subscriptions: no consumers,
nothing acked, nothing taken from the services)."""

from __future__ import annotations

from nats.aio.client import Client as NATS
from nats.aio.msg import Msg
from rlanything.v1.events_pb2 import ModelVersion, RolloutJob, RoundMetrics, TaskPoolEvent

from services.common.streams import Subjects
from services.run.progress import RunProgress

__all__ = ["subscribe_progress"]


async def subscribe_progress(nc: NATS, progress: RunProgress) -> list[object]:
    """Subscribe ``progress`` to every event of the loop; returns the subscriptions."""

    def by_id(kind: str):
        async def handler(msg: Msg) -> None:
            msg_id = (msg.headers or {}).get("Nats-Msg-Id")
            if msg_id:
                progress.on_id(kind, msg_id)
        return handler

    def decoded(message_type, sink):
        async def handler(msg: Msg) -> None:
            sink(message_type.FromString(msg.data))
        return handler

    return [
        await nc.subscribe(Subjects.ROLLOUT_JOBS, cb=decoded(RolloutJob, progress.on_job)),
        await nc.subscribe(Subjects.TRAJ_COMPLETED, cb=by_id("trajectories")),
        await nc.subscribe(Subjects.TRAJ_JUDGED, cb=by_id("judged")),
        await nc.subscribe(Subjects.SAMPLES_POLICY, cb=by_id("policy_batches")),
        await nc.subscribe(Subjects.SAMPLES_REWARD, cb=by_id("reward_batches")),
        await nc.subscribe("rla.models.>", cb=decoded(ModelVersion, progress.on_version)),
        await nc.subscribe(Subjects.METRICS_ROUND, cb=decoded(RoundMetrics, progress.on_metrics)),
        await nc.subscribe(Subjects.ENV_POOL, cb=decoded(TaskPoolEvent, progress.on_pool)),
    ]
