"""The critic's in-memory view of closed and open groups, and the queries the gRPC API answers.

Pure (no I/O): the service fills it from the KV buckets at start-up and after every change, so it
is a cache of durable state. Closing a job twice (a re-close after a crash) replaces its entry,
so counts never double.
"""

from __future__ import annotations

from collections import defaultdict

from rlanything.v1.critic_pb2 import RoundReport, TaskStats
from rlanything.v1.events_pb2 import RoundMetrics, TaskRef, TaskReport

from services.common.errors import InvalidArgumentError, NotFoundError
from services.common.rounds import latest_closed_round
from services.critic.round_stats import round_metrics

__all__ = ["Ledger"]


class Ledger:
    """Task reports and round statistics of closed groups, and the rounds of open groups."""

    def __init__(self) -> None:
        self.reports: dict[str, TaskReport] = {}
        """job_id → the closed group's task report."""
        self.stats: dict[str, RoundMetrics] = {}
        """job_id → the closed group's statistics (``values`` = sums, ``published_unix_s`` = close time)."""
        self.open_jobs: dict[str, int] = {}
        """job_id → round, for groups still collecting rollouts."""
        self._closed_by_round: dict[int, set[str]] = defaultdict(set)

    def is_closed(self, job_id: str) -> bool:
        """Has this job's group been reported already?"""
        return job_id in self.reports

    def mark_open(self, job_id: str, round_: int) -> None:
        """A group started collecting rollouts."""
        self.open_jobs[job_id] = round_

    def close(self, report: TaskReport, stats: RoundMetrics) -> int:
        """Record a closed group (idempotent per job); returns the closed groups of its round."""
        self.open_jobs.pop(report.job_id, None)
        self.reports[report.job_id] = report
        self.stats[report.job_id] = stats
        self._closed_by_round[int(report.round)].add(report.job_id)
        return len(self._closed_by_round[int(report.round)])

    def closed_in_round(self, round_: int) -> int:
        """How many groups of ``round_`` are closed."""
        return len(self._closed_by_round.get(round_, ()))

    def round_metrics(self, round_: int) -> RoundMetrics:
        """The metrics of ``round_`` over its closed groups (empty values when none closed)."""
        jobs = sorted(self._closed_by_round.get(round_, ()))
        values = round_metrics([self.stats[j].values for j in jobs])
        published = max((self.stats[j].published_unix_s for j in jobs), default=0.0)
        return RoundMetrics(round=round_, values=values, published_unix_s=published)

    def latest_complete_round(self) -> int | None:
        """The highest round with a closed group and no open group, or None."""
        return latest_closed_round(self._closed_by_round, self.open_jobs.values())

    def round_report(self, round_: int) -> RoundReport:
        """`GetRoundReport`: ``round_`` ≥ 0, or −1 for the latest complete round.

        Raises:
            InvalidArgumentError: ``round_`` < −1.
            NotFoundError: no group of that round was seen (or, for −1, no round is complete).
        """
        if round_ < -1:
            raise InvalidArgumentError(f"round must be >= 0, or -1 for the latest complete round; got {round_}")
        if round_ == -1:
            latest = self.latest_complete_round()
            if latest is None:
                raise NotFoundError("no round is complete yet (every round seen still has open groups, or none closed)")
            round_ = latest
        closed = sorted(self._closed_by_round.get(round_, ()))
        n_open = sum(1 for r in self.open_jobs.values() if r == round_)
        if not closed and not n_open:
            known = sorted(set(self._closed_by_round) | set(self.open_jobs.values()))
            raise NotFoundError(f"round {round_} unknown: the critic has seen no group of it (rounds seen: {known})")
        partial = sum(1 for j in closed if self.reports[j].partial)
        return RoundReport(metrics=self.round_metrics(round_), groups_complete=len(closed) - partial,
                           groups_partial=partial, groups_open=n_open)

    def task_stats(self, slot_id: str = "") -> list[TaskStats]:
        """`GetTaskStats`: rollouts and wins summed over every closed group, per task version.

        Raises:
            NotFoundError: ``slot_id`` is set and no group of that slot has closed.
        """
        acc: dict[tuple[str, int], TaskStats] = {}
        for report in self.reports.values():
            if slot_id and report.task.slot_id != slot_id:
                continue
            key = (report.task.slot_id, int(report.task.version))
            entry = acc.setdefault(key, TaskStats(task=TaskRef(), last_round=-1))
            entry.task.CopyFrom(report.task)
            entry.rollouts += report.rollouts
            entry.wins += report.wins
            entry.last_round = max(entry.last_round, report.round)
        if slot_id and not acc:
            raise NotFoundError(f"no closed group of task slot {slot_id!r} yet")
        for entry in acc.values():
            entry.acc = entry.wins / entry.rollouts if entry.rollouts else 0.0
        return [acc[k] for k in sorted(acc)]
