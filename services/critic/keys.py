"""JetStream KV keys of the critic's buckets (pure).

KV keys allow only ``[-/_=.A-Za-z0-9]``, and '.' separates key tokens. Job ids such as
``r3/gym_text/train-0001/v2`` are escaped injectively: every character outside
``[A-Za-z0-9_-]`` becomes ``=XX`` (the hex of its UTF-8 bytes), so two different job ids never
share a key and an escaped id never contains '.' or '/'.
"""

from __future__ import annotations

import re

__all__ = ["escape_id", "group_key", "report_key", "stats_key", "MODEL_POLICY_KEY"]

_SAFE = re.compile(r"[A-Za-z0-9_-]")

MODEL_POLICY_KEY = "model.policy"
"""Stats-bucket key of the latest announced policy version (a `ModelVersion`)."""


def escape_id(raw: str) -> str:
    """``raw`` with every character outside [A-Za-z0-9_-] written as ``=XX`` per UTF-8 byte.

    Raises:
        ValueError: ``raw`` is empty (an empty key token is not a valid KV key).
    """
    if not raw:
        raise ValueError("cannot build a KV key from an empty id")
    return "".join(c if _SAFE.fullmatch(c) else "".join(f"={b:02X}" for b in c.encode()) for c in raw)


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
