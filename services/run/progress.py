"""Round progress from the event streams (pure state; `services.run.monitor` feeds it).

A round is complete when the critic closed all of its groups (``critic/jobs_in_round``) and
both models announced a version trained on it. Its record merges the critic's round metrics,
both trainers' metrics (``policy/ppo/...``, ``reward/ppo/...``) and the environment's decisions.
"""

from __future__ import annotations

import time
from collections import defaultdict
from dataclasses import dataclass, field

from rlanything.v1.events_pb2 import (DIRECTION_EASIER, DIRECTION_HARDER, MODEL_ROLE_POLICY, ModelVersion,
                                      RolloutJob, RoundMetrics, TaskPoolEvent)

__all__ = ["RoundProgress", "RunProgress", "round_of_id"]

_KIND = TaskPoolEvent.Kind


def round_of_id(msg_id: str) -> int | None:
    """The round of a job-derived id ``r<round>/...`` (None for other ids)."""
    head = msg_id.split("/", 1)[0]
    return int(head[1:]) if head.startswith("r") and head[1:].isdigit() else None


@dataclass
class RoundProgress:
    """Counts of one round as its events arrive."""

    round: int
    started_s: float = field(default_factory=time.monotonic)
    jobs: int = 0
    expected_trajectories: int = 0
    trajectories: set[str] = field(default_factory=set)
    judged: set[str] = field(default_factory=set)
    policy_batches: set[str] = field(default_factory=set)
    reward_batches: set[str] = field(default_factory=set)
    metrics: dict[str, float] = field(default_factory=dict)
    trained: dict[str, dict[str, float]] = field(default_factory=dict)
    """role → the trainer's metrics for this round."""
    env: dict[str, float] = field(default_factory=lambda: defaultdict(float))
    finished_s: float | None = None

    @property
    def phase(self) -> str:
        """rollout → judging → critic → training → done."""
        if self.finished_s is not None:
            return "done"
        if self.expected_trajectories and len(self.trajectories) < self.expected_trajectories:
            return "rollout"
        if len(self.judged) < max(1, len(self.trajectories)):
            return "judging"
        closed = self.metrics.get("critic/groups_complete", 0) + self.metrics.get("critic/groups_partial", 0)
        if closed < max(1, self.jobs):
            return "critic"
        return "training"

    def complete(self) -> bool:
        """All groups closed and both models trained on this round."""
        jobs = self.metrics.get("critic/jobs_in_round", 0)
        closed = self.metrics.get("critic/groups_complete", 0) + self.metrics.get("critic/groups_partial", 0)
        return jobs > 0 and closed >= jobs and {"policy", "reward"} <= set(self.trained)

    def record(self, accepted_total: float, wall_s: float) -> dict[str, float]:
        """The round's line of metrics.jsonl."""
        out: dict[str, float] = {"round": float(self.round), "time/round_s": round(wall_s, 3)}
        out.update(self.metrics)
        for role, metrics in self.trained.items():
            out.update({f"{role}/{k}": v for k, v in metrics.items()})
        out.update(self.env)
        out["env/accepted_total"] = accepted_total
        out["counts/jobs"] = float(self.jobs)
        out["counts/trajectories"] = float(len(self.trajectories))
        out["counts/judged"] = float(len(self.judged))
        out["counts/policy_batches"] = float(len(self.policy_batches))
        out["counts/reward_batches"] = float(len(self.reward_batches))
        return dict(sorted(out.items()))


class RunProgress:
    """All rounds of a run; `on_*` methods take decoded events."""

    def __init__(self, first_round: int = 0) -> None:
        self.rounds: dict[int, RoundProgress] = {}
        self.first_round = first_round
        self.accepted_total = 0.0
        self.versions: dict[str, int] = {}

    def round(self, r: int) -> RoundProgress:
        """The progress of round ``r`` (created on first use)."""
        if r not in self.rounds:
            self.rounds[r] = RoundProgress(r)
        return self.rounds[r]

    def on_job(self, job: RolloutJob) -> None:
        rp = self.round(int(job.round))
        rp.jobs += 1
        rp.expected_trajectories += job.group_size

    def on_id(self, kind: str, msg_id: str) -> None:
        """A trajectory/judged/batch event by its message id."""
        r = round_of_id(msg_id)
        if r is None:
            return
        getattr(self.round(r), kind).add(msg_id)

    def on_metrics(self, m: RoundMetrics) -> None:
        rp = self.round(int(m.round))
        closed = lambda d: d.get("critic/groups_complete", 0) + d.get("critic/groups_partial", 0)  # noqa: E731
        if closed(dict(m.values)) >= closed(rp.metrics):  # metrics are republished as groups close
            rp.metrics = dict(m.values)

    def on_version(self, v: ModelVersion) -> None:
        role = "policy" if v.role == MODEL_ROLE_POLICY else "reward"
        self.versions[role] = int(v.version)
        if v.trained_on_round >= 0:
            self.round(int(v.trained_on_round)).trained[role] = dict(v.metrics)

    def on_pool(self, e: TaskPoolEvent) -> None:
        kind = _KIND.Name(e.kind).removeprefix("KIND_").lower()
        side = {DIRECTION_HARDER: "harder", DIRECTION_EASIER: "easier"}.get(e.direction, "none")
        self.round(int(e.round)).env[f"env/{kind}_{side}"] += 1
        if e.kind == _KIND.KIND_ACCEPTED:
            self.accepted_total += 1
