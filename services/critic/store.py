"""The critic's durable state in two JetStream KV buckets (the only I/O besides publishing).

* groups bucket (``critic_groups``): one key per stored rollout, ``<escaped job>.<rollout index>``
  → the serialized `JudgedTrajectory`. A rollout is acked only after its key is written, a
  redelivered rollout overwrites its own key (no double count), and a closed group's keys are
  deleted. After a restart the open groups are read back, with the time their first rollout was
  stored (the partial timeout keeps counting from there).
* stats bucket (``critic_stats``): per closed job ``stats.<job>`` → `RoundMetrics` (the group's
  sums) and ``report.<job>`` → `TaskReport`, written in that order, so a report key marks a job
  closed; plus ``model.policy`` → the latest announced policy `ModelVersion`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from nats.js import JetStreamContext
from nats.js.kv import KeyValue
from rlanything.v1.events_pb2 import JudgedTrajectory, ModelVersion, RoundMetrics, TaskReport

from services.common.kv import live_entries, open_bucket
from services.critic.keys import MODEL_POLICY_KEY, group_key, report_key, stats_key
from services.critic.ledger import Ledger

__all__ = ["OpenGroup", "GroupStore", "StatsStore"]


@dataclass
class OpenGroup:
    """A job's rollouts stored so far (a cache of its keys in the groups bucket)."""

    job_id: str
    round: int
    group_size: int
    first_stored_unix_s: float
    """When the group's first rollout was stored (wall clock; the partial timeout counts from it)."""
    records: dict[int, JudgedTrajectory] = field(default_factory=dict)
    """rollout_index → judged trajectory."""

    @property
    def first(self) -> JudgedTrajectory:
        """The stored rollout with the lowest index (the reference for consistency checks)."""
        return self.records[min(self.records)]

    def is_complete(self) -> bool:
        """Are all G rollouts in?"""
        return len(self.records) >= self.group_size


class GroupStore:
    """The groups bucket: one serialized `JudgedTrajectory` per stored rollout."""

    def __init__(self, kv: KeyValue) -> None:
        self.kv = kv

    @classmethod
    async def open(cls, js: JetStreamContext, name: str, replicas: int = 1) -> "GroupStore":
        """Open (or create, on ``replicas`` nodes) bucket ``name``, history 1."""
        return cls(await open_bucket(js, name, history=1, replicas=replicas))

    async def put(self, judged: JudgedTrajectory) -> None:
        """Store one rollout (overwrites the same rollout of the same job)."""
        t = judged.trajectory
        await self.kv.put(group_key(t.job_id, t.rollout_index), judged.SerializeToString())

    async def delete(self, job_id: str, rollout_indices: list[int]) -> None:
        """Delete a closed group's keys."""
        for index in rollout_indices:
            await self.kv.delete(group_key(job_id, index))

    async def load(self) -> dict[str, OpenGroup]:
        """Every group with at least one stored rollout, by job id."""
        groups: dict[str, OpenGroup] = {}
        for entry in await live_entries(self.kv):
            judged = JudgedTrajectory.FromString(entry.value or b"")
            t = judged.trajectory
            stored = entry.written_unix_s
            group = groups.setdefault(t.job_id, OpenGroup(t.job_id, int(t.round), int(t.group_size), stored))
            group.first_stored_unix_s = min(group.first_stored_unix_s, stored)
            group.records[int(t.rollout_index)] = judged
        return groups


class StatsStore:
    """The stats bucket: closed groups' reports and statistics, and the latest policy version."""

    def __init__(self, kv: KeyValue) -> None:
        self.kv = kv

    @classmethod
    async def open(cls, js: JetStreamContext, name: str, replicas: int = 1) -> "StatsStore":
        """Open (or create, on ``replicas`` nodes) bucket ``name``, history 1."""
        return cls(await open_bucket(js, name, history=1, replicas=replicas))

    async def put_closed(self, report: TaskReport, stats: RoundMetrics) -> None:
        """Store a closed group: statistics first, then the report that marks the job closed."""
        await self.kv.put(stats_key(report.job_id), stats.SerializeToString())
        await self.kv.put(report_key(report.job_id), report.SerializeToString())

    async def put_policy_version(self, version: ModelVersion) -> None:
        """Remember the latest announced policy version."""
        await self.kv.put(MODEL_POLICY_KEY, version.SerializeToString())

    async def load(self, ledger: Ledger) -> ModelVersion | None:
        """Fill ``ledger`` with every closed group; returns the latest policy version, if any."""
        reports: dict[str, TaskReport] = {}
        stats: dict[str, RoundMetrics] = {}
        policy = None
        for entry in await live_entries(self.kv):
            if entry.key.startswith("report."):
                report = TaskReport.FromString(entry.value or b"")
                reports[report.job_id] = report
            elif entry.key.startswith("stats."):
                stats[entry.key.removeprefix("stats.")] = RoundMetrics.FromString(entry.value or b"")
            elif entry.key == MODEL_POLICY_KEY:
                policy = ModelVersion.FromString(entry.value or b"")
        for job_id, report in reports.items():
            group_stats = stats.get(stats_key(job_id).removeprefix("stats."), RoundMetrics(round=report.round))
            ledger.close(report, group_stats)
        return policy
