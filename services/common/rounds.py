"""The round in one place (pure): every id the services build or parse, the model roles, and the
rules that say when a round may start and when it is done.

Ids are a contract beside the protos (proto/rlanything/v1/events.proto states the same grammar):
JetStream de-duplicates a re-published event by its message id, the trainers key stored batches by
them, and the run monitor counts a round's events from them. The grammar (``<x>``: a field;
slot ids contain one ``/``, e.g. ``gym_text/train-0001``)::

    job id             r<round>/<slot id>/v<version>                   `job_id`, `parse_job_id`
    retried request    <job id>/retry                                  `retry_job_id`
    trajectory id      <job id>/<rollout index>                        `trajectory_id`, `job_of_trajectory`
      live             live/<tenant>/<escaped episode id>[/e<epoch>]   `live_trajectory_id` (job id live/<tenant>)
    step id            <trajectory id>/<step index>                    `step_id`
    training sample id <step id> (policy) | <step id>/<vote> (reward)   `sample_id`
    judged event id    <trajectory id>/judged | /shadow/<name>         `judged_id`
    sample batch id    <job id>/<role> (live: <trajectory id>/<role>)  `batch_id`
    task-pool event id <job id>/<kind>                                 `pool_event_id`
    stored batch key   r<round>.<escaped batch id> | live.<...>        `batch_key`
    pending candidate  <slot id>/v<version>                            `candidate_key`
    model version id   <role>/v<version>                               `model_version_id`

Everything derived from a job id starts ``r<round>/``, so `round_of_id` reads the round of any of
them (None for live ids, which belong to no round).

Completion rules, each where the round is decided:

* `round_ready`: the scheduler (sync) releases round r+1 once both models trained on round r;
* `round_batches`: a trainer (sync) trains on round r once one batch per job of it is stored;
* `latest_closed_round`: the critic's latest round with closed groups and none open;
* `round_done`: the run monitor's round is done once the critic closed every group, this
  process read every trajectory and judgement the critic counted, and (sync) both models trained.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass

from rlanything.v1.events_pb2 import MODEL_ROLE_POLICY, MODEL_ROLE_REWARD_MODEL, ModelRole

from services.common.kv import escape_id

__all__ = ["ROLES", "ROLE_ENUM", "role_name", "JobId", "job_id", "parse_job_id", "retry_job_id", "trajectory_id",
           "job_of_trajectory", "live_job_id", "live_trajectory_id", "step_id", "sample_id", "model_version_id", "judged_id", "batch_id",
           "pool_event_id", "batch_key", "LIVE_PREFIX", "candidate_key", "round_of_id", "round_ready", "round_batches",
           "latest_closed_round", "groups_closed", "round_done"]

ROLES = ("policy", "reward")
"""The two trained models, by the name used in subjects, KV keys, metrics and configs."""
ROLE_ENUM: Mapping[str, ModelRole] = {"policy": MODEL_ROLE_POLICY, "reward": MODEL_ROLE_REWARD_MODEL}
"""Role name → `ModelRole` enum value (`ModelVersion.role`)."""
_ROLE_NAME: dict[int, str] = {int(v): k for k, v in ROLE_ENUM.items()}


def role_name(role: int | str) -> str | None:
    """The role name of a `ModelRole` value, given as its number or its enum name as JSON writes it
    (``MODEL_ROLE_POLICY``); None for an unspecified or unknown role."""
    if isinstance(role, str):
        return _ROLE_NAME.get(ModelRole.Value(role)) if role in ModelRole.keys() else None
    return _ROLE_NAME.get(int(role))


@dataclass(frozen=True)
class JobId:
    """The parts of a rollout job id."""

    round: int
    slot_id: str
    version: int


_JOB = re.compile(r"^r(\d+)/(.+)/v(\d+)$")


def job_id(round_: int, slot_id: str, version: int) -> str:
    """``r<round>/<slot id>/v<version>``: stable, so a re-published job is de-duplicated."""
    return f"r{round_}/{slot_id}/v{version}"


def parse_job_id(job: str) -> JobId | None:
    """The parts of a job id built by `job_id` (None for any other string)."""
    m = _JOB.match(job)
    return None if m is None else JobId(int(m.group(1)), m.group(2), int(m.group(3)))


def retry_job_id(job: str) -> str:
    """The id under which a rejected candidate's parent asks again (``<job id>/retry``)."""
    return f"{job}/retry"


def trajectory_id(job: str, index: int) -> str:
    """``<job id>/<rollout index>``."""
    return f"{job}/{index}"


def job_of_trajectory(trajectory: str) -> str:
    """The job id of a rollout's trajectory id (everything before its last ``/``)."""
    return trajectory.rsplit("/", 1)[0]


def live_job_id(tenant: str) -> str:
    """The job id of every live trajectory of ``tenant`` (``live/<tenant>``)."""
    return f"live/{tenant}"


def live_trajectory_id(tenant: str, episode_id: str, erasure_epoch: int = 0) -> str:
    """``live/<tenant>/<escaped episode id>``: stable, so a re-publish is de-duplicated; ``/e<n>``
    appended for an episode first stored after the tenant's n-th erasure, so the same episode id
    posted again after an erasure is a new trajectory (judged, evaluated and trained again)."""
    return f"{live_job_id(tenant)}/{escape_id(episode_id)}" + (f"/e{erasure_epoch}" if erasure_epoch else "")


def step_id(trajectory: str, index: int) -> str:
    """``<trajectory id>/<step index>``: the judge's per-step seed and the step's name."""
    return f"{trajectory}/{index}"


def sample_id(trajectory: str, step: int, vote: int | None = None) -> str:
    """A training sample's id: its step's id (`step_id`) for a policy sample, ``/<vote>`` appended
    for a reward-model sample (one per vote)."""
    return step_id(trajectory, step) + ("" if vote is None else f"/{vote}")


def model_version_id(role: str, version: int) -> str:
    """The message id of a `ModelVersion` announcement: ``<role>/v<version>``."""
    return f"{role}/v{version}"


def judged_id(trajectory: str, shadow: str = "") -> str:
    """The message id of a trajectory's judged event (distinct from its completed event's id),
    ``<trajectory id>/judged``; a shadow judge's: ``<trajectory id>/shadow/<name>``."""
    return f"{trajectory}/shadow/{shadow}" if shadow else f"{trajectory}/judged"


def batch_id(source: str, role: str) -> str:
    """A sample batch's id: ``<job id>/<role>`` for a group's batch, ``<trajectory id>/<role>`` for
    a live trajectory's.

    Raises:
        ValueError: ``role`` is not one of `ROLES`.
    """
    if role not in ROLES:
        raise ValueError(f"role must be one of {ROLES}, got {role!r}")
    return f"{source}/{role}"


def pool_event_id(job: str, kind: str) -> str:
    """A task-pool event's id: ``<job id>/<kind>`` (kind: requested, proposed, accepted, ...)."""
    return f"{job}/{kind}"


LIVE_PREFIX = "live."
"""Key prefix of stored live batches (outside every round's count)."""


def batch_key(round_: int, batch: str, live: bool = False) -> str:
    """The KV key of a stored batch: ``r<round>.<escaped batch id>``, or ``live.<escaped batch
    id>`` for a live batch (`common.kv.escape_id`: two batch ids never share a key; the old "other
    characters as _" rule let "a/b" and "a_b" collide)."""
    return (LIVE_PREFIX if live else f"r{round_}.") + escape_id(batch)


def candidate_key(slot_id: str, version: int) -> str:
    """How `SchedulerState.candidate_jobs` names a pending candidate: ``<slot_id>/v<version>``."""
    return f"{slot_id}/v{version}"


def round_of_id(msg_id: str) -> int | None:
    """The round of a job-derived id ``r<round>/...`` (None for other ids, e.g. live ones)."""
    head = msg_id.split("/", 1)[0]
    return int(head[1:]) if head.startswith("r") and head[1:].isdigit() else None


def round_ready(next_round: int, policy_round: int, reward_round: int) -> bool:
    """Sync mode: may round ``next_round`` start? (-1 = that model has not trained yet)."""
    return next_round == 0 or (policy_round >= next_round - 1 and reward_round >= next_round - 1)


def round_batches(keys: Sequence[str], round_: int, jobs_in_round: int) -> list[str] | None:
    """Synchronous mode: the stored keys of ``round_`` when all its ``jobs_in_round`` batches are in
    (one batch per job), plus every stored live batch (trained with this round, never counted),
    else None."""
    mine = [k for k in keys if k.startswith(f"r{round_}.")]
    if len(mine) < jobs_in_round:
        return None
    return mine + [k for k in keys if k.startswith(LIVE_PREFIX)]


def latest_closed_round(closed_by_round: Mapping[int, Collection[str]], open_rounds: Iterable[int]) -> int | None:
    """The highest round with a closed group and no open group, or None."""
    still_open = set(open_rounds)
    done = [r for r, jobs in closed_by_round.items() if jobs and r not in still_open]
    return max(done) if done else None


def groups_closed(metrics: Mapping[str, float]) -> float:
    """Groups the critic closed in a round, complete or partial (from its round metrics)."""
    return metrics.get("critic/groups_complete", 0) + metrics.get("critic/groups_partial", 0)


def round_done(metrics: Mapping[str, float], trajectories_seen: int, judged_seen: int, trained: Collection[str],
               mode: str = "sync") -> bool:
    """Is a round done? The critic closed all of its groups (``critic/jobs_in_round`` of its round
    ``metrics``), this process read as many trajectories and judgements as the critic counted
    (``critic/trajectories``: the readers lag a little) and, in sync mode, both roles are in
    ``trained`` (asynchronous mode trains whenever enough samples are stored, so a version may cover
    several rounds and some rounds get none: there a round is done when its groups are)."""
    jobs = metrics.get("critic/jobs_in_round", 0)
    groups_done = jobs > 0 and groups_closed(metrics) >= jobs
    seen = metrics.get("critic/trajectories", 0)
    caught_up = trajectories_seen >= seen and judged_seen >= seen
    return groups_done and caught_up and (mode == "async" or set(ROLES) <= set(trained))
