"""Loop 3's decision tree, one row per branch (`services.env.decisions`, docs/algorithm.md loop 3)."""

from __future__ import annotations

import pytest

from rlanything.v1.env_pb2 import TaskSlot, TaskVersion
from rlanything.v1.events_pb2 import DIRECTION_EASIER, DIRECTION_HARDER, DIRECTION_UNSPECIFIED, TaskReport
from services.common.config import AdaptationConfig
from services.common.errors import InvalidEventError
from services.env.decisions import (RETRY_KEY, Action, Decision, Facts, decide, needs_clash, plan_moves, retry_report,
                                    undeployable_reason)
from services.env.families.base import TaskSpec
from services.env.proposer import Proposal

H, E, U = DIRECTION_HARDER, DIRECTION_EASIER, DIRECTION_UNSPECIFIED
CFG = AdaptationConfig()  # harder_at 0.8, easier_at 0.2, band [0.2, 0.8], retry_rejected 0


def slot(family: str = "gym_text", split: str = "train", version: int = 1, pending: TaskVersion | None = None,
         hint: float = 0.0) -> TaskSlot:
    s = TaskSlot(slot_id="s0", family=family, split=split, active=TaskVersion(version=version, knobs={"hint": hint}))
    if pending is not None:
        s.pending.CopyFrom(pending)
    return s


def cand(version: int = 2, direction: int = H, parent_acc: float = 1.0, retries: int = 0) -> TaskVersion:
    meta = {RETRY_KEY: str(retries)} if retries else {}
    return TaskVersion(version=version, direction=direction, parent_acc=parent_acc, parent_version=1,  # type: ignore[arg-type]
                       metadata=meta)


def report(acc: float, version: int = 1, is_candidate: bool = False, rollouts: int = 8) -> TaskReport:
    r = TaskReport(job_id="r3/j7", round=3, acc=acc, rollouts=rollouts, is_candidate=is_candidate)
    r.task.slot_id, r.task.version = "s0", version
    return r


@pytest.mark.parametrize(("rep", "slot_", "cfg", "expected"), [
    # a train task's own report: propose harder / easier, or only record
    (report(0.875), slot(), CFG, Decision(Action.PROPOSE, True, H)),
    (report(0.8), slot(), CFG, Decision(Action.PROPOSE, True, H)),               # harder_at is inclusive
    (report(0.125), slot(), CFG, Decision(Action.PROPOSE, True, E)),
    (report(0.2), slot(), CFG, Decision(Action.PROPOSE, True, E)),               # easier_at is inclusive
    (report(0.5), slot(), CFG, Decision(Action.RECORD, True)),                   # inside: nothing to propose
    (report(1.0), slot(pending=cand()), CFG, Decision(Action.RECORD, True)),     # one pending candidate per slot
    (report(1.0), slot(split="heldout"), CFG, Decision(Action.RECORD, True)),    # never adapt evaluation tasks
    (report(1.0), slot(), CFG.model_copy(update={"enabled": False}), Decision(Action.RECORD, True)),  # ablation
    (report(1.0, version=0), slot(), CFG, Decision(Action.IGNORE)),             # an older version's report
    # a candidate's report: accept / reject by the band rule; stale ones ignored
    (report(0.5, version=2, is_candidate=True), slot(pending=cand()), CFG,
     Decision(Action.ACCEPT, True, H, "harder: 0.2 <= acc_new=0.500 < acc_prev=1.000")),
    (report(0.125, version=2, is_candidate=True), slot(pending=cand()), CFG,
     Decision(Action.REJECT, False, H, "harder: acc_new=0.125 below band 0.2")),
    (report(0.5, version=2, is_candidate=True), slot(pending=cand(direction=E, parent_acc=0.0)), CFG,
     Decision(Action.ACCEPT, True, E, "easier: acc_prev=0.000 < acc_new=0.500 <= 0.8")),
    (report(0.0, version=2, is_candidate=True), slot(pending=cand(direction=E, parent_acc=0.0)), CFG,
     Decision(Action.REJECT, False, E, "acc_new=0.000: no rollout solved the candidate")),
    (report(0.5, version=2, is_candidate=True), slot(), CFG, Decision(Action.IGNORE)),              # resolved already
    (report(0.5, version=3, is_candidate=True), slot(pending=cand()), CFG, Decision(Action.IGNORE)),  # another one
    # retry: a rejected candidate's parent proposes again, at most retry_rejected times in a row
    (report(0.125, version=2, is_candidate=True), slot(pending=cand()), CFG.model_copy(update={"retry_rejected": 2}),
     Decision(Action.REJECT, False, H, "harder: acc_new=0.125 below band 0.2", retry=1)),
    (report(0.125, version=2, is_candidate=True), slot(pending=cand(retries=1)),
     CFG.model_copy(update={"retry_rejected": 2}),
     Decision(Action.REJECT, False, H, "harder: acc_new=0.125 below band 0.2", retry=2)),
    (report(0.125, version=2, is_candidate=True), slot(pending=cand(retries=2)),
     CFG.model_copy(update={"retry_rejected": 2}), Decision(Action.REJECT, False, H, "harder: acc_new=0.125 below band 0.2")),
    (report(0.125, version=2, is_candidate=True), slot(split="heldout", pending=cand()),
     CFG.model_copy(update={"retry_rejected": 2}), Decision(Action.REJECT, False, H, "harder: acc_new=0.125 below band 0.2")),
])
def test_decide_table(rep: TaskReport, slot_: TaskSlot, cfg: AdaptationConfig, expected: Decision) -> None:
    assert decide(rep, slot_, cfg) == expected


def test_a_candidate_that_is_an_evaluation_instance_is_refused_whatever_its_acc() -> None:
    rep, s = report(0.5, version=2, is_candidate=True), slot(pending=cand())
    assert needs_clash(rep, s)
    assert decide(rep, s, CFG, Facts(clash="map of eval seed 7")) == Decision(
        Action.REJECT, False, H, "refused whatever its acc: map of eval seed 7")
    assert not needs_clash(report(0.5, version=3, is_candidate=True), s)   # stale: nothing to check
    assert not needs_clash(report(0.5, version=2), s)                        # not a candidate's report


@pytest.mark.parametrize(("rep", "slot_", "facts", "expected"), [
    # admission of a pending live task from its candidate rollouts
    (report(0.5, is_candidate=True), slot("live", "live_pending"), Facts(),
     Decision(Action.ADMIT, True, reason="live: 0 < acc=0.500 < 1: admitted to train")),
    (report(0.0, is_candidate=True), slot("live", "live_pending"), Facts(has_hint=True),
     Decision(Action.ADMIT, False, reason="live: acc=0.000: retried with the user's correction as a hint")),
    (report(0.0, is_candidate=True), slot("live", "live_pending", hint=1.0), Facts(has_hint=True),
     Decision(Action.ADMIT, False, reason="live: acc=0.000: no rollout solves it, hint or not")),
    (report(1.0, is_candidate=True), slot("live", "live_pending"), Facts(),
     Decision(Action.ADMIT, False, reason="live: acc=1.000: the current policy already solves it")),
    # admitted: record, and with the model proposer write a variant
    (report(1.0), slot("live"), Facts(writer=True), Decision(Action.WRITE, True, H)),
    (report(0.0), slot("live"), Facts(writer=True), Decision(Action.WRITE, True, E)),
    (report(1.0), slot("live"), Facts(), Decision(Action.RECORD, True)),                 # no model proposer
    (report(0.5), slot("live"), Facts(writer=True), Decision(Action.RECORD, True)),
    (report(1.0), slot("live", pending=cand()), Facts(writer=True), Decision(Action.RECORD, True)),
    (report(1.0, version=0), slot("live"), Facts(writer=True), Decision(Action.IGNORE)),
    # a model-written variant's own rollouts: the band rule, as for any candidate
    (report(0.5, version=2, is_candidate=True), slot("live", pending=cand()), Facts(),
     Decision(Action.ACCEPT, True, H, "harder: 0.2 <= acc_new=0.500 < acc_prev=1.000")),
])
def test_decide_live_table(rep: TaskReport, slot_: TaskSlot, facts: Facts, expected: Decision) -> None:
    got = decide(rep, slot_, CFG, facts)
    assert got == Decision(expected.action, expected.record_acc, expected.direction, expected.reason,
                           expected.retry, got.live)
    assert (got.live is not None) is (expected.action is Action.ADMIT)


def test_live_admission_verdicts_carry_split_and_hint() -> None:
    admitted = decide(report(0.5, is_candidate=True), slot("live", "live_pending"), CFG, Facts(heldout=True)).live
    assert admitted is not None and (admitted.split, admitted.hint, admitted.accepted) == ("live_heldout", None, True)
    hinted = decide(report(0.0, is_candidate=True), slot("live", "live_pending"), CFG, Facts(has_hint=True)).live
    assert hinted is not None and (hinted.split, hinted.hint, hinted.accepted) == (None, 1.0, False)


@pytest.mark.parametrize("rep", [report(0.5, rollouts=0), TaskReport(job_id="x", rollouts=8, acc=0.5),
                                 TaskReport(job_id="", task=report(0.5).task, rollouts=8, acc=0.5)])
def test_a_report_without_job_slot_or_rollouts_is_an_invalid_event(rep: TaskReport) -> None:
    with pytest.raises(InvalidEventError, match="needs job_id, task.slot_id and rollouts > 0"):
        decide(rep, slot(), CFG)


def test_retry_report_asks_again_from_the_parent_unless_it_moved_on() -> None:
    rep = report(0.125, version=2, is_candidate=True)
    again = retry_report(rep, cand(parent_acc=0.875), slot())
    assert again is not None
    assert (again.job_id, again.acc, again.is_candidate, again.task.version) == ("r3/j7/retry", 0.875, False, 1)
    assert retry_report(rep, cand(), slot(pending=cand(version=3))) is None  # another candidate pending
    assert retry_report(rep, cand(), slot(version=5)) is None                # the parent changed


P = Proposal(TaskSpec("gym_text", {"size": 5.0}, 11), "size 4 -> 5")


@pytest.mark.parametrize(("proposal", "plan", "why", "knobless", "reason"), [
    (None, None, "", True, "the family has no difficulty knobs: no variant can be made"),
    (None, None, "", False, "every knob is at its bound"),
    (P, None, "no winning plan (the oracle cannot solve it)", False,
     "size 4 -> 5: no winning plan (the oracle cannot solve it)"),
    (P, 9, "", False, None),  # deployable
])
def test_undeployable_reason(proposal: Proposal | None, plan: int | None, why: str, knobless: bool,
                             reason: str | None) -> None:
    assert undeployable_reason(proposal, plan, why, knobless) == reason


@pytest.mark.parametrize(("proposal", "direction", "parent_plan", "plan", "per_rollout", "moves"), [
    (P, H, 6, 7, False, True),
    (P, H, 6, 6, False, False),   # harder needs a strictly longer plan
    (P, E, 6, 6, False, True),    # easier: no longer
    (Proposal(P.spec, "reseed", reseed=True), E, 6, 6, False, False),  # a reseed must move strictly
    (Proposal(P.spec, "slip", same_task=True), H, 6, 6, False, True),  # the knob alone moves it
    (P, H, 6, 6, True, True),     # per-rollout family: its knobs stand for it
    (P, H, 0, 3, False, True),    # parent without a known plan
])
def test_plan_moves(proposal: Proposal, direction: int, parent_plan: int, plan: int, per_rollout: bool,
                    moves: bool) -> None:
    assert plan_moves(proposal, direction, parent_plan, plan, per_rollout) is moves
