"""Pure operations on task-pool slots (`TaskSlot` messages); the pool shell stores them in KV.

Invariant: a slot holds at most one pending candidate. `with_pending` refuses a second one;
`resolve_pending` promotes (accepted) or drops (rejected) it.
"""

from __future__ import annotations

from rlanything.v1.env_pb2 import TaskSlot, TaskVersion
from rlanything.v1.events_pb2 import TaskRef

from services.common.errors import InvalidArgumentError, NotFoundError

__all__ = ["with_pending", "resolve_pending", "find_version", "ref_of"]


def ref_of(slot: TaskSlot, version: TaskVersion) -> TaskRef:
    """The `TaskRef` of one version of a slot."""
    return TaskRef(slot_id=slot.slot_id, version=version.version, family=slot.family)


def with_pending(slot: TaskSlot, candidate: TaskVersion) -> TaskSlot:
    """A copy of ``slot`` with ``candidate`` pending; its version number is assigned here.

    Raises:
        InvalidArgumentError: the slot already has a pending candidate (one per slot).
    """
    if slot.HasField("pending"):
        raise InvalidArgumentError(
            f"slot {slot.slot_id} already has pending version {slot.pending.version}; one pending per slot")
    new = TaskSlot()
    new.CopyFrom(slot)
    new.pending.CopyFrom(candidate)
    new.pending.version = slot.next_version
    new.next_version = slot.next_version + 1
    return new


def resolve_pending(slot: TaskSlot, version: int, accepted: bool) -> TaskSlot:
    """A copy of ``slot`` after its pending ``version`` was accepted (becomes active) or rejected.

    Raises:
        NotFoundError: ``version`` is not the slot's pending candidate.
    """
    if not slot.HasField("pending") or slot.pending.version != version:
        raise NotFoundError(f"slot {slot.slot_id} has no pending version {version}")
    new = TaskSlot()
    new.CopyFrom(slot)
    if accepted:
        new.history.append(slot.active)
        new.active.CopyFrom(slot.pending)
    else:
        new.rejected += 1
    new.ClearField("pending")
    return new


def find_version(slot: TaskSlot, version: int) -> TaskVersion:
    """Any version of the slot: active, pending or from its history.

    Raises:
        NotFoundError: the slot never had that version (or it was a rejected candidate).
    """
    if slot.active.version == version:
        return slot.active
    if slot.HasField("pending") and slot.pending.version == version:
        return slot.pending
    for old in slot.history:
        if old.version == version:
            return old
    raise NotFoundError(f"task {slot.slot_id} has no version {version}")
