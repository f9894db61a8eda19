"""The order a reproducible round's held task reports are applied in."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from rlanything.v1.events_pb2 import TaskReport
from services.env.held_reports import apply_order


def report(job_id: str, candidate: bool = False) -> TaskReport:
    return TaskReport(job_id=job_id, is_candidate=candidate)


def test_candidates_first_then_job_ids() -> None:
    held = [report("r1/gym_text/train-0002/v0"), report("r1/gym_text/train-0001/v1", candidate=True),
            report("r1/gym_text/train-0001/v0"), report("r1/gym_text/train-0000/v3", candidate=True)]
    assert [(r.job_id, r.is_candidate) for r in apply_order(held)] == [
        ("r1/gym_text/train-0000/v3", True), ("r1/gym_text/train-0001/v1", True),
        ("r1/gym_text/train-0001/v0", False), ("r1/gym_text/train-0002/v0", False)]


@given(st.permutations([("a", False), ("b", True), ("c", False), ("d", True), ("e", False)]))
def test_any_arrival_order_gives_the_same_order(arrival) -> None:
    assert [r.job_id for r in apply_order([report(j, c) for j, c in arrival])] == ["b", "d", "a", "c", "e"]
