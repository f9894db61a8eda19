"""The scheduler's task sampling (pure): in-band curriculum weights, weighted sampling without replacement."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from rlanything.v1.env_pb2 import TaskSlot
from services.env.scheduler import band_weights, drawable, weighted_sample


def slot(name: str, acc: float | None) -> TaskSlot:
    s = TaskSlot(slot_id=name, split="train")
    if acc is not None:
        s.last_acc, s.has_acc = acc, True
    return s


def test_out_of_band_tasks_weigh_less_and_unmeasured_ones_weigh_one() -> None:
    slots = [slot("a", 0.0), slot("b", 0.5), slot("c", 1.0), slot("d", None), slot("e", 0.2), slot("f", 0.8)]
    assert band_weights(slots, 0.2, 0.8, 0.1) == [0.1, 1.0, 0.1, 1.0, 1.0, 1.0]
    assert band_weights(slots, 0.2, 0.8, 1.0) == [1.0] * 6  # uniform: the paper's scheduler


def test_weighted_sample_is_distinct_and_prefers_heavy_items() -> None:
    rng = random.Random(0)
    items = list(range(10))
    weights = [10.0 if i < 2 else 0.1 for i in items]
    counts: Counter[int] = Counter()
    for _ in range(500):
        picked = weighted_sample(rng, items, weights, 3)
        assert len(picked) == len(set(picked)) == 3
        counts.update(picked)
    assert counts[0] > 450 and counts[1] > 450  # heavy items are almost always drawn
    assert sum(counts[i] for i in range(2, 10)) == 500  # the third pick comes from the light ones


def test_weighted_sample_edge_cases() -> None:
    rng = random.Random(1)
    assert sorted(weighted_sample(rng, ["x", "y"], [1.0, 1.0], 5)) == ["x", "y"]
    with pytest.raises(ValueError, match="weights"):
        weighted_sample(rng, ["x"], [0.0], 1)
    with pytest.raises(ValueError, match="items"):
        weighted_sample(rng, ["x"], [1.0, 1.0], 1)


def test_a_candidate_with_a_released_job_gets_no_second_job() -> None:
    from services.common.rounds import candidate_key
    from services.env.scheduler import candidate_released

    released = [candidate_key("gym_text/train-0005", 1), candidate_key("gym_text/train-0001", 0)]
    assert released == ["gym_text/train-0005/v1", "gym_text/train-0001/v0"]
    assert candidate_released(released, "gym_text/train-0005", 1)
    assert not candidate_released(released, "gym_text/train-0005", 2)
    assert not candidate_released(released, "gym_text/train-0000", 1)  # no prefix confusion with train-0005
    assert not candidate_released([], "gym_text/train-0005", 1)


def test_skip_pending_leaves_out_slots_whose_variant_is_being_tried() -> None:
    slots = [slot("a", 0.0), slot("b", 0.5), slot("c", 1.0), slot("d", None)]
    slots[0].pending.version = 1  # a's easier variant is pending
    slots[2].pending.version = 3
    assert [s.slot_id for s in drawable(slots, skip_pending=True)] == ["b", "d"]
    assert [s.slot_id for s in drawable(slots, skip_pending=False)] == ["a", "b", "c", "d"]  # the paper
    # fewer eligible slots than N: the round draws them all (N is a cap)
    assert sorted(s.slot_id for s in weighted_sample(random.Random(0), drawable(slots, True), [1.0, 1.0], 3)) == ["b", "d"]
