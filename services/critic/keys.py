"""JetStream KV keys of the critic's buckets (pure).

Job ids such as ``r3/gym_text/train-0001/v2`` are escaped injectively (`common.kv.escape_id`),
so two different job ids never share a key and an escaped id never contains '.' or '/'.
"""

from __future__ import annotations

from services.common.kv import escape_id

__all__ = ["escape_id", "group_key", "report_key", "stats_key", "MODEL_POLICY_KEY"]

MODEL_POLICY_KEY = "model.policy"
"""Stats-bucket key of the latest announced policy version (a `ModelVersion`)."""


def group_key(job_id: str, rollout_index: int) -> str:
    """Groups-bucket key of one stored judged trajectory: ``<escaped job>.<rollout index>``."""
    if rollout_index < 0:
        raise ValueError(f"rollout_index must be >= 0, got {rollout_index}")
    return f"{escape_id(job_id)}.{rollout_index}"


def report_key(job_id: str) -> str:
    """Stats-bucket key of a closed group's `TaskReport` (its presence marks the job closed)."""
    return f"report.{escape_id(job_id)}"


def stats_key(job_id: str) -> str:
    """Stats-bucket key of a closed group's round statistics (a `RoundMetrics` of sums)."""
    return f"stats.{escape_id(job_id)}"
