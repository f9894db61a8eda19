"""The JetStream streams and subjects of RLAnything (the README's architecture).

Work-queue streams hand each message to exactly one worker and delete it on ack; limits streams
keep an event log that can be replayed (re-judging old trajectories is a replay, not a re-run).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

__all__ = ["StreamSpec", "Subjects", "STREAMS", "DLQ_PREFIX", "dlq_subject", "EVAL_SPLITS"]

EVAL_SPLITS = frozenset({"heldout", "ood", "live_heldout"})
"""Task splits that only measure the policy: rolled out in evaluation rounds, never trained on
(``live_heldout``: real failures kept aside, `policy/success_live_heldout`). Shared by the env's
scheduler and the judge workers, which leave such rollouts unjudged."""


class Subjects:
    """Subject names; the payload type of each is in the comment (package rlanything.v1)."""

    ROLLOUT_JOBS = "rla.jobs.rollout"          # RolloutJob
    TRAJ_COMPLETED = "rla.traj.completed"      # Trajectory
    TRAJ_JUDGED = "rla.traj.judged"            # JudgedTrajectory
    SAMPLES_POLICY = "rla.samples.policy"      # PolicySampleBatch
    SAMPLES_REWARD = "rla.samples.reward"      # RewardSampleBatch
    MODELS_POLICY = "rla.models.policy"        # ModelVersion
    MODELS_REWARD = "rla.models.reward"        # ModelVersion
    CRITIC_TASK = "rla.critic.task"            # TaskReport
    ENV_POOL = "rla.env.pool"                  # TaskPoolEvent
    METRICS_ROUND = "rla.metrics.round"        # RoundMetrics
    METRICS_ENV = "rla.metrics.env"            # RoundMetrics of the env's round release (eval/overlap, redraws)
    INGEST_EPISODE = "rla.ingest.episode"      # IngestEpisode (redacted), one subject per tenant: .<tenant>
    INGEST_FEEDBACK = "rla.ingest.feedback"    # Feedback (redacted), .<tenant>
    INGEST_SETTLED = "rla.ingest.settled"      # SettledEpisode (redacted), .<tenant>
    INGEST_COMPLETION = "rla.ingest.completion"  # CapturedCompletion (redacted), .<tenant>.<escaped episode id>
    INGEST_CANDIDATE = "rla.ingest.candidate"  # LiveTaskCandidate (redacted), .<tenant>
    INGEST_ERASED = "rla.ingest.erased"        # EpisodesErased, .<tenant>: forget what you keep of them
    TRAJ_LIVE = "rla.traj.live.completed"      # Trajectory of a settled live episode (source "ingest"), .<tenant>.<escaped episode id>
    TRAJ_LIVE_JUDGED = "rla.traj.live.judged"  # JudgedTrajectory of a live episode (chat rubric), .<tenant>.<escaped episode id>
    TRAJ_SHADOW = "rla.traj.shadow"            # JudgedTrajectory by a shadow judge (trains nothing), .<judge name>
    TRAJ_LIVE_SHADOW = "rla.traj.live.shadow"  # the same for a live episode, .<tenant>.<escaped episode id>.<judge name>


DLQ_PREFIX = "rla.dlq"


def dlq_subject(original_subject: str) -> str:
    """Dead-letter subject of a message first published on ``original_subject``."""
    return f"{DLQ_PREFIX}.{original_subject}"


@dataclass(frozen=True)
class StreamSpec:
    """One JetStream stream."""

    name: str
    """Stream name (upper case by convention)."""
    subjects: tuple[str, ...]
    """Subjects (wildcards allowed) the stream captures."""
    retention: Literal["limits", "workqueue"]
    """`workqueue`: deleted on ack, one consumer per subject; `limits`: a replayable log."""
    max_age_s: float = 0.0
    """Seconds a message is kept (0 = forever)."""


STREAMS: tuple[StreamSpec, ...] = (
    StreamSpec("JOBS", ("rla.jobs.>",), "workqueue"),
    StreamSpec("TRAJ", ("rla.traj.>",), "limits", max_age_s=7 * 24 * 3600.0),
    StreamSpec("SAMPLES", ("rla.samples.>",), "workqueue"),
    StreamSpec("MODELS", ("rla.models.>",), "limits"),
    StreamSpec("REPORTS", ("rla.critic.>", "rla.env.>"), "limits"),
    StreamSpec("METRICS", ("rla.metrics.>",), "limits"),
    StreamSpec("INGEST", ("rla.ingest.>",), "limits", max_age_s=7 * 24 * 3600.0),
    StreamSpec("DLQ", (f"{DLQ_PREFIX}.>",), "limits"),
)
