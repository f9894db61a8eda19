"""Loop 3's decision tree, pure: what one task report does to its slot (`decide`).

`services.env.adaptation.Adaptation` reads the slot, calls `decide`, and applies the `Decision`
(pool writes, proposals, task-pool events). Everything here is a function of its arguments, so
each branch has a table test (tests/unit/env/test_decisions.py):

* a train task's report: record its acc; propose a harder (acc ≥ ``harder_at``) or easier
  (acc ≤ ``easier_at``) variant unless adaptation is off, the slot is not ``train``, the report is
  of an older version, or a candidate is already pending;
* a candidate's report: accept or reject it (`variant_verdict`, arXiv 2602.02488 §3.3; refused
  whatever its acc when it clashes with an evaluation instance); a rejected one may be retried
  (``retry_rejected``) from its parent (`retry_report`);
* a live task (family ``live``): its candidate rollouts admit it or not (`live_verdict`); once
  admitted it records its acc and, with the model proposer, gets model-written variants;
* a proposal no variant can come from is undeployable (`undeployable_reason`).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from rlanything.v1.env_pb2 import TaskSlot, TaskVersion
from rlanything.v1.events_pb2 import DIRECTION_UNSPECIFIED, TaskReport

from services.common.algo.direction import direction_for
from services.common.algo.variant_gate import Verdict, variant_verdict
from services.common.config import AdaptationConfig
from services.common.errors import InvalidEventError
from services.common.rounds import retry_job_id
from services.env.acceptance import LiveVerdict, live_verdict
from services.env.proposer import Proposal, moves_difficulty

__all__ = ["Action", "Decision", "Facts", "LIVE", "RETRY_KEY", "check_report", "decide", "needs_clash", "plan_moves", "retry_report",
           "undeployable_reason"]

RETRY_KEY = "retry"
"""Candidate metadata: how many candidates of its slot were rejected in a row before it was proposed."""
LIVE = "live"
"""The family whose tasks are users' failures (admitted by `live_verdict`)."""


class Action(Enum):
    """What the shell does with a report."""

    IGNORE = "ignore"
    """Nothing: a redelivered report, or one of an older version."""
    RECORD = "record"
    """Record the report's acc as the active version's acc; nothing else."""
    PROPOSE = "propose"
    """Record the acc (when ``record_acc``) and propose a variant in ``direction`` (knob move)."""
    WRITE = "write"
    """Live task: record the acc and ask the model proposer for a variant in ``direction``."""
    ACCEPT = "accept"
    """The pending candidate becomes the active version; its acc is recorded."""
    REJECT = "reject"
    """The pending candidate is dropped; ``retry`` > 0: its parent proposes again at once."""
    ADMIT = "admit"
    """Live task: apply ``live`` (its new split and hint); record its acc when admitted."""


@dataclass(frozen=True)
class Facts:
    """What the decision needs beyond the report, the slot and the config (read by the shell).

    ``clash``: why the pending candidate is an evaluation instance (None: it is not; only read
    when `needs_clash`); ``heldout``/``has_hint``: the live slot is a held-out one / its user gave
    a correction; ``writer``: a model proposer is configured.
    """

    clash: str | None = None
    heldout: bool = False
    has_hint: bool = False
    writer: bool = False


@dataclass(frozen=True)
class Decision:
    """The outcome of one report: the action, whether to record the report's acc, the direction
    asked for (`Direction` enum value), the reason of an accept/reject, the retry count to propose
    again with (0: none) and, for ``ADMIT``, the live verdict."""

    action: Action
    record_acc: bool = False
    direction: int = DIRECTION_UNSPECIFIED
    reason: str = ""
    retry: int = 0
    live: LiveVerdict | None = None


def needs_clash(report: TaskReport, slot: TaskSlot) -> bool:
    """Does `decide` read `Facts.clash` for this report (a non-live candidate still pending)?"""
    return (report.is_candidate and slot.family != LIVE and slot.HasField("pending")
            and slot.pending.version == report.task.version)


def check_report(report: TaskReport) -> None:
    """Raises `InvalidEventError` (naming the fields) unless ``report`` has a job id, a slot id and rollouts."""
    if not report.job_id or not report.task.slot_id or report.rollouts <= 0:
        raise InvalidEventError(f"task report {report.job_id!r}: needs job_id, task.slot_id and rollouts > 0 "
                                f"(got {report.task.slot_id!r}, {report.rollouts})")


def decide(report: TaskReport, slot: TaskSlot, cfg: AdaptationConfig, facts: Facts = Facts()) -> Decision:
    """What ``report`` (a critic `TaskReport`) does to ``slot`` (its task's `TaskSlot`).

    Raises:
        InvalidEventError: the report has no ``task.slot_id`` or no rollouts.
        ValueError: ``report.acc`` outside [0, 1] (from `direction_for` / `variant_verdict`).
    """
    check_report(report)
    if slot.family == LIVE:
        return _decide_live(report, slot, cfg, facts)
    if report.is_candidate:
        return _resolve(report, slot, cfg, facts.clash)
    if slot.active.version != report.task.version:
        return Decision(Action.IGNORE)
    if not cfg.enabled or slot.split != "train" or slot.HasField("pending"):
        return Decision(Action.RECORD, record_acc=True)  # one pending candidate per slot: its report first
    direction = direction_for(report.acc, cfg.harder_at, cfg.easier_at)
    if direction == DIRECTION_UNSPECIFIED:
        return Decision(Action.RECORD, record_acc=True)
    return Decision(Action.PROPOSE, record_acc=True, direction=direction)


def _decide_live(report: TaskReport, slot: TaskSlot, cfg: AdaptationConfig, facts: Facts) -> Decision:
    """A live task: its candidate rollouts admit or drop it; once admitted it records its acc and,
    with the model proposer, gets harder/easier variants written by the model."""
    if slot.split != "live_pending" and report.is_candidate:
        return _resolve(report, slot, cfg, None)  # a model-written variant's own rollouts; live: its own held-out split
    if slot.active.version != report.task.version:
        return Decision(Action.IGNORE)  # a redelivered report of an earlier version
    if not report.is_candidate or slot.split != "live_pending":
        if facts.writer and cfg.enabled and slot.split == "train" and not slot.HasField("pending"):
            direction = direction_for(report.acc, cfg.harder_at, cfg.easier_at)
            if direction != DIRECTION_UNSPECIFIED:
                return Decision(Action.WRITE, record_acc=True, direction=direction)
        return Decision(Action.RECORD, record_acc=True)
    verdict = live_verdict(report.acc, slot.active.knobs.get("hint", 0.0), facts.has_hint, facts.heldout)
    return Decision(Action.ADMIT, record_acc=verdict.accepted, reason=verdict.reason, live=verdict)


def _resolve(report: TaskReport, slot: TaskSlot, cfg: AdaptationConfig, clash: str | None) -> Decision:
    """A candidate's own rollouts: accept or reject its slot's pending version."""
    if not slot.HasField("pending") or slot.pending.version != report.task.version:
        return Decision(Action.IGNORE)  # already resolved (a redelivered report)
    pending = slot.pending
    # a candidate proposed before the rule (or by another process) that is an evaluation instance: refused
    verdict = (Verdict(False, f"refused whatever its acc: {clash}") if clash is not None
               else variant_verdict(pending.direction, pending.parent_acc, report.acc, cfg.band_low, cfg.band_high))
    if verdict.accepted:  # the new active version's acc is its own candidate rollouts' acc
        return Decision(Action.ACCEPT, record_acc=True, direction=pending.direction, reason=verdict.reason)
    retries = int(pending.metadata.get(RETRY_KEY, "0"))
    again = retries < cfg.retry_rejected and slot.split == "train" and cfg.enabled
    return Decision(Action.REJECT, direction=pending.direction, reason=verdict.reason,
                    retry=retries + 1 if again else 0)


def retry_report(report: TaskReport, pending: TaskVersion, parent: TaskSlot) -> TaskReport | None:
    """The parent's request again after its candidate ``pending`` was rejected: its acc, the
    candidate's failures as feedback, job id ``<job>/retry``. None when ``parent`` (the slot read
    after the rejection) has a pending candidate or another active version than the candidate's parent."""
    if parent.HasField("pending") or parent.active.version != pending.parent_version:
        return None
    again = TaskReport()
    again.CopyFrom(report)
    again.job_id, again.acc, again.is_candidate = retry_job_id(report.job_id), pending.parent_acc, False
    again.task.version = parent.active.version
    return again


def plan_moves(proposal: Proposal, direction: int, parent_plan: int, plan: int, per_rollout: bool) -> bool:
    """Does a deployable candidate's oracle ``plan`` (steps) move the difficulty the asked way?

    A same-task knob move or a per-rollout family (each rollout its own instance) moves it by its
    knobs alone; else the plan must move (`moves_difficulty`), and strictly for a reseed.
    """
    return (proposal.same_task or per_rollout
            or (moves_difficulty(direction, parent_plan, plan) and not (proposal.reseed and plan == parent_plan)))


def undeployable_reason(proposal: Proposal | None, plan: int | None, why: str, knobless: bool) -> str | None:
    """Why no candidate comes of a proposal (the ``rejected_undeployable`` event's reason), or None
    when ``proposal`` with oracle ``plan`` is deployable. ``proposal`` None: the proposer had no move
    (``knobless``: the family has no difficulty knobs); ``plan`` None: every try failed, ``why`` the last."""
    if proposal is None:
        return ("the family has no difficulty knobs: no variant can be made" if knobless
                else "every knob is at its bound")
    if plan is None:
        return f"{proposal.note}: {why}"
    return None
