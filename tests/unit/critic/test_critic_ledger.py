"""The critic's ledger: round reports, the latest complete round, task stats, idempotent closes."""

from __future__ import annotations

import pytest

from rlanything.v1.events_pb2 import RoundMetrics, TaskRef, TaskReport
from services.common.errors import InvalidArgumentError, NotFoundError
from services.critic.ledger import Ledger


def report(job: str, round_: int, slot: str = "s/0", version: int = 0, wins: int = 2, rollouts: int = 4,
           partial: bool = False) -> TaskReport:
    return TaskReport(job_id=job, round=round_, task=TaskRef(slot_id=slot, version=version, family="gym_text"),
                      group_size=4, rollouts=rollouts, wins=wins, acc=wins / rollouts, partial=partial, split="train")


def stats(round_: int, wins: int, rollouts: int, partial: bool = False, t: float = 1.0) -> RoundMetrics:
    return RoundMetrics(round=round_, published_unix_s=t, values={
        "sum/wins/train": wins, "sum/rollouts/train": rollouts, "sum/trajectories": rollouts,
        "sum/groups_complete": float(not partial), "sum/groups_partial": float(partial)})


def test_round_report_counts_and_aggregates_groups() -> None:
    ledger = Ledger()
    assert ledger.close(report("a", 0), stats(0, 2, 4, t=10.0)) == 1
    assert ledger.close(report("b", 0, wins=1, rollouts=3, partial=True), stats(0, 1, 3, partial=True, t=12.0)) == 2
    ledger.mark_open("c", 1)
    rep = ledger.round_report(0)
    assert (rep.groups_complete, rep.groups_partial, rep.groups_open) == (1, 1, 0)
    assert rep.metrics.round == 0 and rep.metrics.published_unix_s == 12.0
    assert rep.metrics.values["policy/success_train"] == pytest.approx(3 / 7)
    assert rep.metrics.values["critic/trajectories"] == 7.0
    assert ledger.round_report(-1).metrics.round == 0          # round 1 still has an open group
    rep1 = ledger.round_report(1)
    assert (rep1.groups_open, rep1.groups_complete, dict(rep1.metrics.values)["critic/groups_complete"]) == (1, 0, 0.0)
    assert ledger.close(report("c", 1), stats(1, 4, 4)) == 1
    assert ledger.round_report(-1).metrics.round == 1


def test_closing_a_job_twice_replaces_it() -> None:
    ledger = Ledger()
    ledger.close(report("a", 0), stats(0, 2, 4))
    assert ledger.close(report("a", 0), stats(0, 2, 4)) == 1
    assert ledger.round_report(0).groups_complete == 1
    assert ledger.round_metrics(0).values["critic/trajectories"] == 4.0
    assert [s.rollouts for s in ledger.task_stats()] == [4]


def test_round_report_errors() -> None:
    ledger = Ledger()
    with pytest.raises(NotFoundError, match="no round is complete yet"):
        ledger.round_report(-1)
    ledger.mark_open("x", 0)
    with pytest.raises(NotFoundError, match="no round is complete yet"):
        ledger.round_report(-1)
    with pytest.raises(NotFoundError, match=r"round 3 unknown.*rounds seen: \[0\]"):
        ledger.round_report(3)
    with pytest.raises(InvalidArgumentError, match="got -2"):
        ledger.round_report(-2)


def test_task_stats_accumulate_per_task_version() -> None:
    ledger = Ledger()
    ledger.close(report("a", 0, "s/0"), stats(0, 2, 4))
    ledger.close(report("b", 1, "s/0", wins=4), stats(1, 4, 4))
    ledger.close(report("c", 1, "s/0", version=1, wins=1), stats(1, 1, 4))
    ledger.close(report("d", 1, "s/1", wins=0), stats(1, 0, 4))
    rows = [(s.task.slot_id, s.task.version, s.rollouts, s.wins, s.acc, s.last_round) for s in ledger.task_stats()]
    assert rows == [("s/0", 0, 8, 6, 0.75, 1), ("s/0", 1, 4, 1, 0.25, 1), ("s/1", 0, 4, 0, 0.0, 1)]
    assert [s.task.version for s in ledger.task_stats("s/0")] == [0, 1]
    assert ledger.task_stats("s/0")[0].task.family == "gym_text"
    with pytest.raises(NotFoundError, match="no closed group of task slot 's/9'"):
        ledger.task_stats("s/9")
