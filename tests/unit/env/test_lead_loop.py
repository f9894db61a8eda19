"""The env service's scheduler-lease loop outlives a broker hiccup: in a three-node NATS cluster a
publish to a stream that lost its leader with a killed node answers "no response from stream"
(`NoStreamResponseError`) until a new leader is elected; the loop retries on its next period instead
of crashing the process (which took the env's gRPC down for its restart and dead-lettered the rollout
jobs that could not reach it: the chaos test of a killed NATS node)."""

from __future__ import annotations

import asyncio
import logging

import nats.js.errors

from services.env.service import EnvService


class FlakyLease:
    period_s = 0.01
    holder, ttl_s = "me", 1.0

    def __init__(self) -> None:
        self.renewals = 0

    def held(self) -> bool:
        return self.renewals > 1

    async def renew(self) -> bool:
        self.renewals += 1
        if self.renewals == 1:
            raise nats.js.errors.NoStreamResponseError
        return True


class Scheduler:
    ticks = 0

    async def tick(self) -> None:
        self.ticks += 1


async def test_the_lease_loop_retries_after_no_response_from_a_stream() -> None:
    service = EnvService.__new__(EnvService)
    service.lease, service.scheduler, service.log = FlakyLease(), Scheduler(), logging.getLogger("test")
    task = asyncio.create_task(service._lead())
    for _ in range(200):
        await asyncio.sleep(0.01)
        if service.scheduler.ticks:
            break
    assert not task.done(), task.exception()
    task.cancel()
    assert service.lease.renewals >= 2 and service.scheduler.ticks >= 1
