"""The Critic contract (proto/rlanything/v1/critic.proto), as clauses run against any server:

1. GetRoundReport refuses a round below −1 (INVALID_ARGUMENT) and a round never seen (NOT_FOUND).
2. GetRoundReport(−1) is the latest complete round — NOT_FOUND while none is complete — and the
   same report as asking for that round by number; group counts are ≥ 0 and the metrics' round is
   the round asked for.
3. GetTaskStats lists per task version rollouts ≥ wins ≥ 0, acc = wins / rollouts and the last
   round; filtered by a slot it returns only that slot; an unknown slot is NOT_FOUND.
"""

from __future__ import annotations

from dataclasses import dataclass

import grpc
from rlanything.v1 import critic_pb2, critic_pb2_grpc

from services.contract.clauses import ClauseFailed, Result, call, refused, run_clauses, show

__all__ = ["check_critic", "CLAUSES"]

NEVER = 10**9
"""A round no run reaches."""


@dataclass
class _Run:
    stub: critic_pb2_grpc.CriticStub
    timeout_s: float


def refuses_bad_rounds(run: _Run) -> None:
    refused(run.stub.GetRoundReport, critic_pb2.RoundReportRequest(round=-2), {grpc.StatusCode.INVALID_ARGUMENT},
            "INVALID_ARGUMENT for a round below -1", run.timeout_s)
    refused(run.stub.GetRoundReport, critic_pb2.RoundReportRequest(round=NEVER), {grpc.StatusCode.NOT_FOUND},
            "NOT_FOUND for a round never seen", run.timeout_s)


def latest_round_is_a_real_round(run: _Run) -> None:
    request = critic_pb2.RoundReportRequest(round=-1)
    try:
        latest = run.stub.GetRoundReport(request, timeout=run.timeout_s)
    except grpc.RpcError as err:
        if err.code() == grpc.StatusCode.NOT_FOUND:
            return  # no round complete yet: what the contract says
        raise ClauseFailed(show(request), f"{err.code().name}: {err.details()}",
                           "the latest complete round's report, or NOT_FOUND while none is complete") from None
    if min(latest.groups_complete, latest.groups_partial, latest.groups_open) < 0:
        raise ClauseFailed(show(request), show(latest), "group counts >= 0")
    by_number = critic_pb2.RoundReportRequest(round=latest.metrics.round)
    again = call(run.stub.GetRoundReport, by_number, run.timeout_s)
    if (again.groups_complete, again.groups_partial, dict(again.metrics.values)) != (
            latest.groups_complete, latest.groups_partial, dict(latest.metrics.values)):
        raise ClauseFailed(f"{show(request)} then {show(by_number)}", f"{show(latest)} then {show(again)}",
                           "round -1 is the same report as the latest round asked by number")


def task_stats_add_up(run: _Run) -> None:
    request = critic_pb2.TaskStatsRequest()
    response = call(run.stub.GetTaskStats, request, run.timeout_s)
    for s in response.stats:
        if not s.task.slot_id or not 0 <= s.wins <= s.rollouts or s.rollouts <= 0 or s.last_round < 0:
            raise ClauseFailed(show(request), f"a task's stats {show(s)}",
                               "a slot id, rollouts >= wins >= 0 with rollouts > 0, last_round >= 0")
        if abs(s.acc - s.wins / s.rollouts) > 1e-9:
            raise ClauseFailed(show(request), f"a task's stats {show(s)}", "acc = wins / rollouts")
    for slot in sorted({s.task.slot_id for s in response.stats})[:3]:
        one = critic_pb2.TaskStatsRequest(slot_id=slot)
        only = call(run.stub.GetTaskStats, one, run.timeout_s)
        if not only.stats or any(s.task.slot_id != slot for s in only.stats):
            raise ClauseFailed(show(one), show(only), f"the stats of slot {slot!r} only")
    refused(run.stub.GetTaskStats, critic_pb2.TaskStatsRequest(slot_id="no-such-slot"), {grpc.StatusCode.NOT_FOUND},
            "NOT_FOUND for a slot never seen", run.timeout_s)


CLAUSES = [
    ("1. Bad and unknown rounds are refused", refuses_bad_rounds),
    ("2. Round -1 is the latest complete round", latest_round_is_a_real_round),
    ("3. Task statistics add up and filter by slot", task_stats_add_up),
]


def check_critic(address: str, timeout_s: float = 30.0) -> list[Result]:
    """Run every clause against the Critic server at ``address`` (host:port), in order."""
    with grpc.insecure_channel(address) as channel:
        return run_clauses(CLAUSES, _Run(critic_pb2_grpc.CriticStub(channel), timeout_s))
