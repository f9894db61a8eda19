"""Task-pool slot operations: one pending candidate per slot, promotion, history."""

from __future__ import annotations

import pytest

from rlanything.v1.env_pb2 import TaskSlot, TaskVersion
from services.common.errors import InvalidArgumentError, NotFoundError
from services.env.slots import find_version, resolve_pending, with_pending


def seed_slot() -> TaskSlot:
    return TaskSlot(slot_id="gym_text/train-0000", family="gym_text", split="train", next_version=1,
                    active=TaskVersion(version=0, knobs={"size": 4.0}, seed=7, oracle_plan_length=6,
                                       parent_version=-1))


def candidate(size: float) -> TaskVersion:
    return TaskVersion(knobs={"size": size}, seed=8, oracle_plan_length=8, parent_version=0)


def test_one_pending_per_slot() -> None:
    slot = with_pending(seed_slot(), candidate(5))
    assert slot.pending.version == 1 and slot.next_version == 2
    with pytest.raises(InvalidArgumentError, match="already has pending version 1; one pending per slot"):
        with_pending(slot, candidate(6))


def test_accept_promotes_and_keeps_history() -> None:
    slot = resolve_pending(with_pending(seed_slot(), candidate(5)), 1, accepted=True)
    assert slot.active.version == 1 and slot.active.knobs["size"] == 5
    assert [v.version for v in slot.history] == [0]
    assert not slot.HasField("pending")
    assert find_version(slot, 0).knobs["size"] == 4  # old rollouts still resolve
    again = with_pending(slot, candidate(6))  # a new candidate is allowed after resolution
    assert again.pending.version == 2


def test_reject_drops_candidate() -> None:
    slot = resolve_pending(with_pending(seed_slot(), candidate(5)), 1, accepted=False)
    assert slot.active.version == 0 and not slot.HasField("pending") and slot.rejected == 1
    with pytest.raises(NotFoundError, match="has no version 1"):
        find_version(slot, 1)


def test_resolve_wrong_version() -> None:
    slot = with_pending(seed_slot(), candidate(5))
    with pytest.raises(NotFoundError, match="no pending version 3"):
        resolve_pending(slot, 3, accepted=True)
    with pytest.raises(NotFoundError):
        resolve_pending(seed_slot(), 1, accepted=False)


def test_input_slot_is_not_mutated() -> None:
    original = seed_slot()
    with_pending(original, candidate(5))
    assert not original.HasField("pending") and original.next_version == 1
