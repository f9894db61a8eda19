"""A settled live episode as a `Trajectory` (pure): one step per assistant turn, the product's
transcript as the source of truth, captured completions joined in by ``completion_id``.

* Step k's prompt is the conversation before that assistant turn, each message tagged with its
  role; user and tool text is **fenced** (``<<<`` … ``>>>``, with fence markers inside it
  removed) so a judge can tell the product's users' words from instructions.
* ``observation`` is the last user message before the turn, ``next_observation`` the first one
  after it: the next state a judge reads the reply's effect from (a correction, a thank-you).
* A turn whose ``completion_id`` matches a capture with the same (redacted) response text gets
  the captured token ids and behaviour log-probs and ``served_by_policy``; captures no turn
  claims (SDK retries, abandoned answers) are orphans and are dropped.
* Outcome: the episode's own ``outcome`` (with its source), else the latest OUTCOME feedback
  (source "user"), else 0 with source "" (none). Per-turn thumbs become the step's
  ``oracle_label`` (good/bad), which is what the judge's live step accuracy is measured against.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from rlanything.v1.events_pb2 import STEP_LABEL_BAD, STEP_LABEL_GOOD, TaskRef, Trajectory, TrajectoryStep
from rlanything.v1.ingest_pb2 import (OUTCOME_SOURCE_PRODUCT, OUTCOME_SOURCE_REFERENCE_CHECK, OUTCOME_SOURCE_USER,
                                      CapturedCompletion, Feedback, IngestMessage, SettledEpisode)

from services.common.kv import escape_id
from services.common.rounds import live_job_id, live_trajectory_id
from services.common.text import fence

__all__ = ["LiveTrajectory", "to_trajectory", "render_context", "live_trajectory_id", "LIVE_FAMILY"]

LIVE_FAMILY = "live"
_SOURCES = {OUTCOME_SOURCE_USER: "user", OUTCOME_SOURCE_PRODUCT: "product",
            OUTCOME_SOURCE_REFERENCE_CHECK: "reference_check"}


@dataclass(frozen=True)
class LiveTrajectory:
    """The trajectory and what the join did: turns served by our policy, captures dropped."""

    trajectory: Trajectory
    served_turns: int
    orphan_captures: int
    retokenized_turns: int = 0
    """Turns joined with a capture whose token ids were dropped (redaction changed its text)."""


def render_context(messages: list[IngestMessage]) -> str:
    """The conversation before a turn, one tagged block per message (user and tool text fenced)."""
    blocks = []
    for m in messages:
        body = fence(m.content) if m.role in ("user", "tool") else m.content
        blocks.append(f"[{m.role}]\n{body}")
    return "\n".join(blocks)


def _outcome(settled: SettledEpisode) -> tuple[int, str]:
    ep = settled.episode
    if ep.outcome.value:
        return int(ep.outcome.value), _SOURCES.get(ep.outcome.source, "user")
    outcomes = [f for f in settled.feedback if f.kind == Feedback.KIND_OUTCOME]
    if outcomes:
        last = max(outcomes, key=lambda f: f.created_unix_s)
        return (1 if last.value > 0 else -1), "user"
    return 0, ""


def to_trajectory(settled: SettledEpisode, captures: Mapping[str, CapturedCompletion]) -> LiveTrajectory:
    """The live trajectory of ``settled`` (see the module docstring); ``captures`` by completion id."""
    ep = settled.episode
    messages = list(ep.messages)
    thumbs = {f.turn_id: f.value for f in sorted(settled.feedback, key=lambda f: f.created_unix_s)
              if f.kind == Feedback.KIND_THUMBS and f.turn_id}
    steps: list[TrajectoryStep] = []
    used: set[str] = set()
    retokenized = 0
    for i, m in enumerate(messages):
        if m.role != "assistant":
            continue
        turn_id = m.turn_id or str(i)
        before = next((p.content for p in reversed(messages[:i]) if p.role == "user"), "")
        after = next((n.content for n in messages[i + 1:] if n.role == "user"), "")
        step = TrajectoryStep(index=len(steps), prompt=render_context(messages[:i]), response=m.content,
                              valid=True, observation=before, next_observation=after, turn_id=turn_id)
        if turn_id in thumbs:
            step.oracle_label = STEP_LABEL_GOOD if thumbs[turn_id] > 0 else STEP_LABEL_BAD
        capture = captures.get(m.completion_id) if m.completion_id else None
        if capture is not None and capture.response == m.content:
            used.add(m.completion_id)
            if capture.response_token_ids and capture.prompt_token_ids:
                step.prompt_token_ids.extend(capture.prompt_token_ids)
                step.response_token_ids.extend(capture.response_token_ids)
                step.behaviour_logprobs.extend(capture.logprobs)
                step.served_by_policy = True
                step.served_version = capture.model_version
            else:
                retokenized += 1
        steps.append(step)
    outcome, source = _outcome(settled)
    first_user = next((m.content for m in messages if m.role == "user"), "")
    served = [s for s in steps if s.served_by_policy]
    traj = Trajectory(
        trajectory_id=live_trajectory_id(ep.tenant, ep.episode_id, settled.erasure_epoch), job_id=live_job_id(ep.tenant),
        task=TaskRef(slot_id=f"{LIVE_FAMILY}/{ep.tenant}/{escape_id(ep.task_type or 'chat')}", family=LIVE_FAMILY),
        group_size=1, task_text=first_user, steps=steps, outcome=outcome, split=LIVE_FAMILY, source="ingest",
        policy_version=max((s.served_version for s in served), default=0), tenant=ep.tenant,
        episode_id=ep.episode_id, outcome_source=source, task_type=ep.task_type)
    return LiveTrajectory(traj, len(served), len(set(captures) - used), retokenized)
