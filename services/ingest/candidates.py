"""When a settled live episode is a real failure worth an environment task (pure).

An episode yields a `LiveTaskCandidate` when all hold:

* ``consent.task_generation``;
* it failed: outcome −1 (the episode's own or the latest OUTCOME feedback), a thumbs-down on a
  turn, or a CORRECTION feedback;
* there is a reference: ``outcome.reference``, else the latest correction's text.

The prompt is the conversation before the failed reply (the thumbs-down turn, else the last
assistant turn), rendered as the live trajectory renders it; the hint is the correction's text.
``candidate_id`` is the sha256 of tenant, task type and the whitespace- and case-normalised
prompt, so many users hitting the same failure make one task.
"""

from __future__ import annotations

import hashlib
import re

from rlanything.v1.ingest_pb2 import Feedback, LiveTaskCandidate, SettledEpisode

from services.ingest.trajectories import live_trajectory_id, render_context

__all__ = ["task_candidate", "candidate_id"]


def candidate_id(tenant: str, task_type: str, prompt: str) -> str:
    """sha256 (hex) of tenant, task type and the normalised prompt."""
    normal = re.sub(r"\s+", " ", prompt).strip().casefold()
    return hashlib.sha256(f"{tenant}\x00{task_type}\x00{normal}".encode()).hexdigest()


def task_candidate(settled: SettledEpisode, now: float) -> LiveTaskCandidate | None:
    """The candidate task of a settled episode, or None (see the module docstring)."""
    ep = settled.episode
    if not ep.consent.task_generation:
        return None
    by_time = sorted(settled.feedback, key=lambda f: f.created_unix_s)
    outcomes = [f for f in by_time if f.kind == Feedback.KIND_OUTCOME]
    outcome = ep.outcome.value or (int(outcomes[-1].value) if outcomes else 0)
    downs = [f.turn_id for f in by_time if f.kind == Feedback.KIND_THUMBS and f.value < 0 and f.turn_id]
    corrections = [f for f in by_time if f.kind == Feedback.KIND_CORRECTION and f.text]
    if outcome >= 0 and not downs and not corrections:
        return None
    reference = ep.outcome.reference or (corrections[-1].text if corrections else "")
    if not reference:
        return None
    messages = list(ep.messages)
    assistant = [i for i, m in enumerate(messages) if m.role == "assistant"]
    if not assistant:
        return None
    failed = next((i for i in assistant if (messages[i].turn_id or str(i)) in downs), assistant[-1])
    prompt = render_context(messages[:failed])
    if not prompt:
        return None
    task_type = ep.task_type or "chat"
    return LiveTaskCandidate(tenant=ep.tenant, candidate_id=candidate_id(ep.tenant, task_type, prompt),
                             source_trajectory_id=live_trajectory_id(ep.tenant, ep.episode_id, settled.erasure_epoch), task_type=task_type,
                             prompt=prompt, reference=reference, hint=corrections[-1].text if corrections else "",
                             created_unix_s=now)
