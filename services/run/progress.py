"""Round progress from the event streams (pure state; `services.run.monitor` feeds it).

A round is complete when the critic closed all of its groups (``critic/jobs_in_round``) and
both models announced a version trained on it. Its record merges the critic's round metrics,
both trainers' metrics (``policy/ppo/...``, ``reward/ppo/...``), the environment's decisions and its
counts of the round's release (``eval/overlap``: train instances that are held-out or OOD ones, 0).

Where the time goes: the progress also stamps (monotonic seconds) when the round's first job,
last trajectory, last judgement, last closed group and each model's version arrived; `phase_times`
turns the stamps and the measured work seconds into the ``time/...`` keys of the round's record.
"""

from __future__ import annotations

import time
from collections import defaultdict
from dataclasses import dataclass, field

from rlanything.v1.events_pb2 import DIRECTION_EASIER, DIRECTION_HARDER, ModelVersion, RolloutJob, RoundMetrics, TaskPoolEvent

from services.common.rounds import groups_closed, job_of_trajectory, role_name, round_done, round_of_id

__all__ = ["RoundProgress", "RunProgress", "phase_times", "PHASES"]

PHASES: tuple[tuple[str, str], ...] = (
    ("time/generate_s", "policy generation"),
    ("time/env_s", "env steps"),
    ("time/judge_s", "judging"),
    ("policy/time/train_s", "policy training"),
    ("reward/time/train_s", "RM training"),
    ("time/save_s", "checkpoint save"),
    ("time/other_s", "framework + waiting"),
)
"""The stacked parts of a round's wall time (keys of its record), in plotting order."""


def phase_times(record: dict[str, float], stamps: dict[str, float], wall_s: float,
                started_s: float) -> dict[str, float]:
    """Where one round's wall time went (pure).

    ``record`` holds the work seconds measured by the services: ``time/generate_s``,
    ``time/env_s`` and ``time/judge_s`` (critic sums over the round's jobs) and each trainer's
    ``<role>/time/train_s`` and ``<role>/time/save_s``. ``stamps`` are monotonic seconds of the
    round's events (`RoundProgress.stamps`), ``started_s`` when the driver began waiting for the
    round, ``wall_s`` its length in seconds.

    Returns (seconds): ``time/save_s`` (both models), ``time/critical_path_s`` = max(generation +
    env steps, judging) + max(policy training + save, RM training + save) — rollouts and judging
    run in different processes at the same time, then the two trainers do —, ``time/other_s`` =
    wall − critical path (never below 0): the framework's overhead (event transport, bookkeeping,
    hot-loading, idle waits), ``time/overhead_share`` = other / wall, and the wall-clock
    spans ``time/span/wait_s`` (round start → first job: the scheduler waiting for versions),
    ``rollout_s`` (→ last trajectory), ``judge_tail_s`` (→ last judgement), ``critic_tail_s``
    (→ last group closed) and ``train_tail_s`` (→ both versions announced), for the stamps present.
    """
    out: dict[str, float] = {}
    g = lambda key: record.get(key, 0.0)  # noqa: E731
    save = g("policy/time/save_s") + g("reward/time/save_s")
    out["time/save_s"] = save
    # critical path of a round: rollouts overlap judging (other processes), then the two trainers run side by side
    rollout_and_judge = max(g("time/generate_s") + g("time/env_s"), g("time/judge_s"))
    training = max(g("policy/time/train_s") + g("policy/time/save_s"), g("reward/time/train_s") + g("reward/time/save_s"))
    out["time/critical_path_s"] = rollout_and_judge + training
    out["time/other_s"] = max(0.0, wall_s - out["time/critical_path_s"])
    out["time/overhead_share"] = out["time/other_s"] / wall_s if wall_s > 0 else 0.0
    chain = [("wait_s", "first_job"), ("rollout_s", "last_trajectory"), ("judge_tail_s", "last_judged"),
             ("critic_tail_s", "groups_closed")]
    previous = started_s
    for name, stamp in chain:
        if stamp in stamps:
            out[f"time/span/{name}"] = max(0.0, stamps[stamp] - previous)
            previous = stamps[stamp]
    trained = [stamps[k] for k in ("trained_policy", "trained_reward") if k in stamps]
    if len(trained) == 2:
        out["time/span/train_tail_s"] = max(0.0, max(trained) - previous)
    return out

_KIND = TaskPoolEvent.Kind


@dataclass
class RoundProgress:
    """Counts of one round as its events arrive."""

    round: int
    started_s: float = field(default_factory=time.monotonic)
    jobs: int = 0
    expected_trajectories: int = 0
    trajectories: set[str] = field(default_factory=set)
    job_ids: set[str] = field(default_factory=set)
    """Jobs with at least one trajectory (from the trajectories' ids ``<job id>/<index>``)."""
    judged: set[str] = field(default_factory=set)
    policy_batches: set[str] = field(default_factory=set)
    reward_batches: set[str] = field(default_factory=set)
    metrics: dict[str, float] = field(default_factory=dict)
    trained: dict[str, dict[str, float]] = field(default_factory=dict)
    """role → the trainer's metrics for this round."""
    env: dict[str, float] = field(default_factory=lambda: defaultdict(float))
    finished_s: float | None = None
    restarts: int = 0
    """Processes the launcher restarted during this round (``launcher/restarts`` in the record)."""
    stamps: dict[str, float] = field(default_factory=dict)
    """first_job, last_trajectory, last_judged, groups_closed, trained_policy, trained_reward (monotonic s)."""

    def stamp(self, name: str, first: bool = False) -> None:
        """Record now under ``name`` (keep the earliest when ``first``, else the latest)."""
        if not (first and name in self.stamps):
            self.stamps[name] = time.monotonic()

    @property
    def phase(self) -> str:
        """rollout → judging → critic → training → done."""
        if self.finished_s is not None:
            return "done"
        if self.expected_trajectories and len(self.trajectories) < self.expected_trajectories:
            return "rollout"
        if len(self.judged) < max(1, len(self.trajectories)):
            return "judging"
        if groups_closed(self.metrics) < max(1, self.jobs):
            return "critic"
        return "training"

    def complete(self, mode: str = "sync") -> bool:
        """All groups closed, their trajectories and judgements read, and (sync mode) both models
        trained on this round (`services.common.rounds.round_done`)."""
        return round_done(self.metrics, len(self.trajectories), len(self.judged), self.trained, mode)

    def record(self, accepted_total: float, wall_s: float) -> dict[str, float]:
        """The round's line of metrics.jsonl."""
        out: dict[str, float] = {"round": float(self.round), "time/round_s": round(wall_s, 3)}
        out.update(self.metrics)
        for role, metrics in self.trained.items():
            out.update({f"{role}/{k}": v for k, v in metrics.items()})
        out.update(self.env)
        out["env/accepted_total"] = accepted_total
        out["launcher/restarts"] = float(self.restarts)
        # From the durable streams (restarts change none of them); batches as each trainer trained
        # them where a version names this round, else as seen live.
        out["counts/jobs"] = float(len(self.job_ids))
        out["counts/trajectories"] = float(len(self.trajectories))
        out["counts/judged"] = float(len(self.judged))
        for role, seen in (("policy", self.policy_batches), ("reward", self.reward_batches)):
            out[f"counts/{role}_batches"] = self.trained.get(role, {}).get("batches", float(len(seen)))
        out.update(phase_times(out, self.stamps, wall_s, time.monotonic() - wall_s))
        return dict(sorted(out.items()))


class RunProgress:
    """All rounds of a run; `on_*` methods take decoded events."""

    def __init__(self, first_round: int = 0) -> None:
        self.rounds: dict[int, RoundProgress] = {}
        self.first_round = first_round
        self.accepted_total = 0.0
        self.versions: dict[str, int] = {}
        self.latest_trained: dict[str, dict[str, float]] = {}
        self.restarts: dict[str, int] = {}
        """process name → restarts made by the launcher so far."""
        """role → the metrics of its newest version trained on some round (asynchronous mode's records)."""

    def round(self, r: int) -> RoundProgress:
        """The progress of round ``r`` (created on first use)."""
        if r not in self.rounds:
            self.rounds[r] = RoundProgress(r)
        return self.rounds[r]

    def on_restart(self, name: str, round_: int | None = None) -> None:
        """The launcher restarted process ``name`` while round ``round_`` (default: the newest) ran."""
        self.restarts[name] = self.restarts.get(name, 0) + 1
        r = max(self.rounds, default=self.first_round) if round_ is None else round_
        self.round(r).restarts += 1

    def on_job(self, job: RolloutJob) -> None:
        rp = self.round(int(job.round))
        rp.stamp("first_job", first=True)
        rp.jobs += 1
        rp.expected_trajectories += job.group_size

    def on_id(self, kind: str, msg_id: str) -> None:
        """A trajectory/judged/batch event by its message id."""
        r = round_of_id(msg_id)
        if r is None:
            return
        rp = self.round(r)
        getattr(rp, kind).add(msg_id)
        if kind == "trajectories":
            rp.job_ids.add(job_of_trajectory(msg_id))
        if kind in ("trajectories", "judged"):
            rp.stamp("last_trajectory" if kind == "trajectories" else "last_judged")

    def on_metrics(self, m: RoundMetrics) -> None:
        rp = self.round(int(m.round))
        if groups_closed(dict(m.values)) >= groups_closed(rp.metrics):  # metrics are republished as groups close
            rp.metrics = dict(m.values)
            rp.stamp("groups_closed")

    def on_version(self, v: ModelVersion) -> None:
        role = role_name(v.role)
        if role is None:
            return  # not a model version of a known role
        self.versions[role] = int(v.version)
        if v.trained_on_round >= 0:
            rp = self.round(int(v.trained_on_round))
            rp.trained[role] = dict(v.metrics)
            self.latest_trained[role] = dict(v.metrics)
            rp.stamp(f"trained_{role}", first=True)

    def on_env_metrics(self, m: RoundMetrics) -> None:
        """The env's counts of a round's release (``rla.metrics.env``: ``eval/overlap``, the train
        instances drawn and redrawn) into that round's record."""
        self.round(int(m.round)).env.update(dict(m.values))

    def on_pool(self, e: TaskPoolEvent) -> None:
        kind = _KIND.Name(e.kind).removeprefix("KIND_").lower()
        side = {DIRECTION_HARDER: "harder", DIRECTION_EASIER: "easier"}.get(e.direction, "none")
        self.round(int(e.round)).env[f"env/{kind}_{side}"] += 1
        if e.kind == _KIND.KIND_ACCEPTED:
            self.accepted_total += 1
