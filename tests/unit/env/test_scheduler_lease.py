"""The scheduler's leader lease (`services.env.lease`) over a KV double with JetStream's rules:
create-if-absent, compare-and-set on the revision, entries that expire ``ttl_s`` after their write."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from nats.js.errors import KeyNotFoundError, KeyWrongLastSequenceError

from services.env.lease import LeaderLease


@dataclass
class _Entry:
    value: bytes | None
    revision: int | None


class ExpiringKV:
    """One JetStream KV bucket with ``history: 1`` and a max age: the rules `LeaderLease` relies on."""

    def __init__(self, ttl_s: float, clock: list[float]) -> None:
        self.ttl_s, self.clock = ttl_s, clock
        self.data: dict[str, tuple[bytes, int, float]] = {}
        self.seq = 0

    def _live(self, key: str) -> tuple[bytes, int, float] | None:
        found = self.data.get(key)
        if found is not None and self.clock[0] - found[2] >= self.ttl_s:  # expired by the bucket's max age
            del self.data[key]
            return None
        return found

    def _write(self, key: str, value: bytes) -> int:
        self.seq += 1
        self.data[key] = (value, self.seq, self.clock[0])
        return self.seq

    async def get(self, key: str) -> _Entry:
        found = self._live(key)
        if found is None:
            raise KeyNotFoundError
        return _Entry(found[0], found[1])

    async def create(self, key: str, value: bytes) -> int:
        if self._live(key) is not None:
            raise KeyWrongLastSequenceError
        return self._write(key, value)

    async def update(self, key: str, value: bytes, last: int | None = None) -> int:
        found = self._live(key)
        if (found[1] if found else 0) != last:
            raise KeyWrongLastSequenceError
        return self._write(key, value)


def _pair(ttl_s: float = 8.0) -> tuple[list[float], ExpiringKV, LeaderLease, LeaderLease]:
    clock = [100.0]
    kv = ExpiringKV(ttl_s, clock)
    return (clock, kv, LeaderLease(kv, "scheduler", "10.0.0.1:50051", ttl_s, lambda: clock[0]),
            LeaderLease(kv, "scheduler", "10.0.0.2:50051", ttl_s, lambda: clock[0]))


async def test_one_of_two_replicas_holds_the_lease_and_keeps_it_while_it_renews() -> None:
    clock, kv, a, b = _pair()
    assert await a.renew() is True
    assert await b.renew() is False
    for _ in range(10):  # 20 s of renewals every ttl/4 = 2 s
        clock[0] += a.period_s
        assert await a.renew() is True
        assert await b.renew() is False
        assert a.held() and not b.held()
    assert (await kv.get("scheduler")).value == b"10.0.0.1:50051"
    assert (a.acquired_total, b.acquired_total) == (1, 0)


async def test_a_dead_holders_lease_expires_and_the_other_replica_takes_it() -> None:
    clock, kv, a, b = _pair(ttl_s=8.0)
    assert await a.renew()
    clock[0] += 7.9  # a stopped renewing: its key lives 8 s after its last write
    assert await b.renew() is False
    clock[0] += 0.1
    assert await b.renew() is True
    assert b.held() and b.acquired_total == 1


async def test_a_paused_holder_counts_itself_out_after_ttl_and_its_renewal_fails() -> None:
    clock, kv, a, b = _pair(ttl_s=8.0)
    assert await a.renew()
    clock[0] += 8.0
    assert not a.held()  # it could not renew for a whole TTL: it must not release a round now
    assert await b.renew()
    clock[0] += 1.0
    assert await a.renew() is False  # its compare-and-set on its old revision fails: b holds it
    assert not a.held() and a.revision == 0 and b.held()


async def test_a_replica_restarted_under_its_name_takes_its_unexpired_lease_back() -> None:
    clock, kv, a, _ = _pair()
    assert await a.renew()
    restarted = LeaderLease(kv, "scheduler", "10.0.0.1:50051", 8.0, lambda: clock[0])
    clock[0] += 1.0
    assert await restarted.renew() is True
    assert await a.renew() is False  # the old process, if it still ran, lost it to the new one


def test_a_lease_needs_a_holder_name_and_a_positive_ttl() -> None:
    kv = ExpiringKV(1.0, [0.0])
    with pytest.raises(ValueError, match="needs a name"):
        LeaderLease(kv, "scheduler", "", 1.0)
    with pytest.raises(ValueError, match="ttl_s must be > 0, got 0"):
        LeaderLease(kv, "scheduler", "a:1", 0)
