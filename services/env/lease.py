"""The scheduler's leader lease: of several env replicas, only the holder releases rounds.

The lease is one key in a JetStream KV bucket whose entries expire ``ttl_s`` seconds after their
last write (the bucket's max age). A replica takes a free lease with create-if-absent, keeps it
with a compare-and-set on the revision it wrote last (so two replicas can never both renew one
revision), and loses it when a renewal fails or when it could not renew for ``ttl_s`` seconds
(it may have been paused while the key expired and another replica took it). A holder that dies
stops renewing; its key expires and the next replica's create succeeds: another replica schedules
within ``ttl_s`` plus one renewal period. A replica that restarts under the same holder name (the
launcher restarts it on the same address) takes its own unexpired lease back at once (only a
process that has not held the lease yet does that, so an old process of the same name, if it still
ran, would not take it back).

This is the pattern of etcd's and Kubernetes' leases (a TTL and a revision-checked renewal),
on the store the services already share.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Protocol

from nats.js.errors import KeyNotFoundError, KeyWrongLastSequenceError

__all__ = ["LeaderLease", "LeaseStore"]


class _Entry(Protocol):
    value: bytes | None
    revision: int | None


class LeaseStore(Protocol):
    """The three KV operations the lease needs (nats.py ``KeyValue`` has them)."""

    async def get(self, key: str) -> _Entry: ...
    async def create(self, key: str, value: bytes) -> int: ...
    async def update(self, key: str, value: bytes, last: int | None = None) -> int: ...


class LeaderLease:
    """One replica's view of the lease ``key``: call `renew` every ``ttl_s / 4`` seconds, ask `held`."""

    def __init__(self, kv: LeaseStore, key: str, holder: str, ttl_s: float,
                 clock: Callable[[], float] = time.monotonic) -> None:
        if not holder:
            raise ValueError("a lease holder needs a name")
        if ttl_s <= 0:
            raise ValueError(f"ttl_s must be > 0, got {ttl_s}")
        self.kv = kv
        self.key = key
        self.holder = holder
        """This replica's name, the value written (its advertised address, or host:pid)."""
        self.ttl_s = ttl_s
        self.clock = clock
        self.revision = 0
        """The revision this replica wrote last while holding the lease; 0 = not holding it."""
        self._renewed_s = float("-inf")
        self.acquired_total = 0
        """Times this replica took the lease (1 for a replica that leads from start to end)."""

    @property
    def period_s(self) -> float:
        """How often to renew: four renewals per TTL, so one lost write does not lose the lease."""
        return self.ttl_s / 4

    def held(self) -> bool:
        """Does this replica hold the lease now: its last write succeeded less than ``ttl_s`` ago."""
        return self.revision > 0 and self.clock() - self._renewed_s < self.ttl_s

    async def renew(self) -> bool:
        """Keep the lease (compare-and-set on our revision) or take it if free; returns `held()`.

        A failed compare-and-set means another replica holds it now: this one stops leading.
        Connection errors propagate (the caller retries on its next period; `held` turns False
        once ``ttl_s`` passed without a renewal).
        """
        started = self.clock()
        value = self.holder.encode()
        if self.revision:
            try:
                self.revision = await self.kv.update(self.key, value, last=self.revision)
                self._renewed_s = started
                return self.held()
            except KeyWrongLastSequenceError:
                self.revision = 0  # another replica took it after our key expired
        try:
            self.revision = await self.kv.create(self.key, value)
        except KeyWrongLastSequenceError:  # held: by another replica, or by this one before a restart
            try:
                entry = await self.kv.get(self.key)
            except KeyNotFoundError:  # expired between the two calls: the next period creates it
                return False
            if entry.value != value or not entry.revision or self.acquired_total:
                return False  # another's; or ours, written by a newer process of the same name
            try:
                self.revision = await self.kv.update(self.key, value, last=entry.revision)
            except KeyWrongLastSequenceError:
                return False
        self._renewed_s = started
        self.acquired_total += 1
        return self.held()
