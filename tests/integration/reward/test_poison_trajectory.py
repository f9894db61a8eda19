"""One trajectory the judge cannot handle, fetched with healthy ones (real nats-server, the reward
service's own consumer, handler and batcher): only it is dead-lettered; the others are judged once.

The judge here is the oracle with one injected failure (a trajectory whose task text is POISON):
no real judge fails on demand, and what is under test is the consumer and the batcher.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import pytest
from nats.js.api import ConsumerConfig as JsConsumerConfig

from rlanything.v1.events_pb2 import STEP_LABEL_GOOD, JudgedTrajectory, StepJudgement, TaskRef, Trajectory, TrajectoryStep
from rlanything.v1.reward_pb2 import StepToJudge
from services.common.bus import EventBus
from services.common.streams import Subjects, dlq_subject
from services.reward.batcher import JudgeBatcher
from services.reward.judges import OracleJudge
from services.reward.worker import JudgedMarks, TrajectoryJudger

pytestmark = pytest.mark.integration


class OracleFailingOnPoison(OracleJudge):
    def judge(self, steps: Sequence[StepToJudge], votes: int, temperature: float) -> list[StepJudgement]:
        if any(s.task_text == "POISON" for s in steps):
            raise ValueError("the judge cannot handle this trajectory")
        return super().judge(steps, votes, temperature)


def trajectory(i: int, task_text: str = "Reach G.") -> Trajectory:
    step = TrajectoryStep(index=0, prompt="Now: here", response="\\boxed{2}", next_observation="moved",
                          oracle_label=STEP_LABEL_GOOD, valid=True)
    return Trajectory(trajectory_id=f"job/{i}", job_id="job", rollout_index=i, group_size=4, outcome=1,
                      task_text=task_text, steps=[step], task=TaskRef(slot_id="s0", family="gym_text"))


async def read(bus: EventBus, stream: str, subject: str, timeout_s: float = 3.0) -> list[bytes]:
    sub = await bus.js.pull_subscribe(subject, durable=None, stream=stream,
                                      config=JsConsumerConfig(filter_subject=subject))
    out: list[bytes] = []
    try:
        while True:
            out += [m.data for m in await sub.fetch(16, timeout=timeout_s)]
    except Exception:  # noqa: BLE001 - timeout: nothing more to read
        pass
    await sub.unsubscribe()
    return out


async def test_only_the_poison_trajectory_is_dead_lettered(bus: EventBus) -> None:
    batcher = JudgeBatcher(OracleFailingOnPoison(), wait_s=0.05)
    handler = TrajectoryJudger(bus, batcher, await JudgedMarks.open(bus.js, "marks_test"), votes=3, temperature=0.8)
    consumer = bus.consumer(stream="TRAJ", durable="reward-judges-test", subject=Subjects.TRAJ_COMPLETED,
                            message_type=Trajectory, handler=handler.on_trajectory, concurrent=True)
    for i in range(4):  # one fetch gets all four (fetch_batch 8), max_deliveries 3
        t = trajectory(i, "POISON" if i == 1 else "Reach G.")
        await bus.publish(Subjects.TRAJ_COMPLETED, t, msg_id=t.trajectory_id)
    stop = asyncio.Event()
    task = asyncio.create_task(consumer.run(stop))
    await asyncio.sleep(4.0)  # three deliveries of the poison one with 0.05 s backoff, 1 s ack wait
    stop.set()
    await task
    await consumer.unbind()
    judged = [JudgedTrajectory.FromString(d).trajectory.trajectory_id
              for d in await read(bus, "TRAJ", Subjects.TRAJ_JUDGED)]
    assert sorted(judged) == ["job/0", "job/2", "job/3"]  # each healthy one exactly once
    dead = [Trajectory.FromString(d).trajectory_id
            for d in await read(bus, "DLQ", dlq_subject(Subjects.TRAJ_COMPLETED))]
    assert dead == ["job/1"]
