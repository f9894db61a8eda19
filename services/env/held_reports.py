"""A round's task reports applied in one fixed order (``loop.reproducible``).

The env adapts the task pool from each job's `TaskReport` (`services.env.adaptation`). Those
decisions depend on the order they are made in: a slot with a pending candidate skips its regular
report's proposal, and the candidate's own report, once handled, frees the slot and may propose a
retry. Reports arrive in the order the rollouts finished, which differs from run to run, so two
runs of one seed made different pool decisions (a variant proposed in round 1 in one run, in
round 2 in the other). Under ``loop.reproducible`` the env therefore holds a round's reports (in
KV, so a restart loses none) and applies them all, in `apply_order`, when the round's last awaited
report arrives, or just before the next round is released after ``sync_report_wait_s``.
"""

from __future__ import annotations

import asyncio

from collections.abc import Awaitable, Callable, Iterable

from rlanything.v1.events_pb2 import TaskReport

from services.common.kv import ProtoBucket, escape_id

__all__ = ["HeldReports", "apply_order"]


def apply_order(reports: Iterable[TaskReport]) -> list[TaskReport]:
    """The order a round's held reports are applied in (pure): candidates' reports first (a slot's
    candidate is resolved before its regular report decides whether to propose), then by job id."""
    return sorted(reports, key=lambda r: (not r.is_candidate, r.job_id))


class HeldReports:
    """The held reports of the open round, one KV key per job (``Buckets.ENV_HELD``)."""

    def __init__(self, bucket: ProtoBucket) -> None:
        self.bucket = bucket
        self._lock = asyncio.Lock()
        """One `apply` at a time: the last report's handler and a release after the wait may both apply."""

    async def hold(self, report: TaskReport) -> None:
        """Store ``report`` (idempotent: a redelivered report overwrites its own key)."""
        await self.bucket.put(escape_id(report.job_id), report)

    async def apply(self, handle: Callable[[TaskReport], Awaitable[None]]) -> int:
        """Run ``handle`` on every held report in `apply_order`, then forget them; how many.

        A crash part-way leaves every report held: the next `apply` handles them again, as a
        redelivery would (the adaptation handler tolerates a report seen twice)."""
        async with self._lock:
            keys = await self.bucket.keys()
            held = [r for r in [(await self.bucket.get(k))[0] for k in keys] if r is not None]
            for report in apply_order(held):
                await handle(report)
            for key in keys:
                await self.bucket.kv.delete(key)
            return len(held)
