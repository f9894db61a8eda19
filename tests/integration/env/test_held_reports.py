"""``loop.reproducible``: the env applies a round's task reports in one fixed order, whatever order
they arrive in (the env service as a real process, real JetStream).

Found by the two-runs test: pool decisions depend on the order reports are handled (a slot's
pending candidate blocks its regular report's proposal; the candidate's own report frees it), and
reports arrive in the order rollouts finish, so one run proposed a variant in round 1 that the
other proposed in round 2."""

from __future__ import annotations

import pytest

from rlanything.v1.events_pb2 import DIRECTION_HARDER, RolloutJob, TaskPoolEvent, TaskReport
from services.common.streams import Subjects
from services.env.held_reports import apply_order
from tests.integration.env.test_env_service import stub
from tests.support import events, wait_for_tasks

pytestmark = [pytest.mark.integration, pytest.mark.slow]

CONFIG = """
loop: {{reproducible: {reproducible}}}
env:
  cache_dir: {cache}
  families:
    - {{type: gym_text, knobs: {{size: 4, hole_prob: 0.2}}, train_slots: 3, heldout_slots: 1,
       ood_knobs: {{size: 5, hole_prob: 0.25}}, ood_slots: 1}}
  scheduler: {{enabled: true, tasks_per_round: 3, group_size: 4, eval_every: 0}}
"""


def too_easy(job: RolloutJob) -> TaskReport:
    return TaskReport(job_id=job.job_id, round=job.round, task=job.task, group_size=4, rollouts=4, wins=4, acc=1.0,
                      direction=DIRECTION_HARDER)


@pytest.mark.parametrize("reproducible", [True, False])
async def test_a_rounds_reports_are_decided_in_job_order_whatever_order_they_arrive_in(
        spawn_service, tmp_path, bus, reproducible: bool) -> None:
    svc = spawn_service("env", CONFIG.format(cache=tmp_path / "cache", reproducible=str(reproducible).lower()))
    wait_for_tasks(stub(svc.address), 5)
    jobs = await events(bus, Subjects.ROLLOUT_JOBS, "JOBS", 3, RolloutJob)
    assert [j.round for j in jobs] == [0, 0, 0]
    arrival = sorted(jobs, key=lambda j: j.job_id, reverse=True)  # the last job finished first
    for job in arrival[:2]:
        await bus.publish(Subjects.CRITIC_TASK, too_easy(job), msg_id=job.job_id)
    early = await events(bus, Subjects.ENV_POOL, "REPORTS", 4, TaskPoolEvent, timeout_s=3)
    if reproducible:
        assert early == []  # held until the round's last awaited report
    else:
        assert len(early) == 4  # decided as they come
    await bus.publish(Subjects.CRITIC_TASK, too_easy(arrival[2]), msg_id=arrival[2].job_id)
    decided = await events(bus, Subjects.ENV_POOL, "REPORTS", 6, TaskPoolEvent)
    requested = [e.event_id.removesuffix("/requested") for e in decided if e.kind == TaskPoolEvent.KIND_REQUESTED]
    assert sorted(requested) == sorted(j.job_id for j in jobs)
    expected = [r.job_id for r in apply_order([too_easy(j) for j in jobs])] if reproducible else [
        j.job_id for j in arrival]
    assert requested == expected
    assert expected != [j.job_id for j in arrival] or not reproducible  # the two orders differ here
