"""A service stops after SIGTERM even when a task of it loses its first cancellation.

Python 3.11's ``asyncio.wait_for`` returns the awaited result instead of raising ``CancelledError``
when the result and the cancellation arrive in the same loop iteration (CPython gh-86296); the NATS
client awaits every request that way. A background loop such as the version follower's poll then
goes on after ``task.cancel()``, and a stop that awaited it once would wait forever (seen in CI: a
policy pod that logged "stopping" and was still running 45 s later)."""

from __future__ import annotations

import asyncio
import os
import signal

import pytest

from services.common.bus import EventBus
from services.common.config import RunConfig
from services.common.runtime import Service, run_service

pytestmark = pytest.mark.integration


class LosesOneCancellation(Service):
    """A service whose background loop goes on after its first cancellation, as a lost one does."""

    name = "critic"

    def __init__(self, config: RunConfig) -> None:
        super().__init__(config)
        self.cancellations = 0
        self.serving = asyncio.Event()

    async def on_start(self, bus: EventBus) -> None:
        self.background.append(asyncio.create_task(self._poll(), name="poll"))

    async def _poll(self) -> None:
        while True:
            try:
                self.serving.set()
                await asyncio.sleep(0.01)
            except asyncio.CancelledError:
                self.cancellations += 1
                if self.cancellations > 1:
                    raise


async def test_sigterm_stops_a_service_whose_background_task_lost_a_cancellation(nats_server) -> None:
    service = LosesOneCancellation(RunConfig.model_validate({"nats": {"url": nats_server.url}}))
    run = asyncio.create_task(run_service(service))
    await asyncio.wait_for(service.serving.wait(), 30)
    os.kill(os.getpid(), signal.SIGTERM)  # run_service's own handler takes it
    done, _ = await asyncio.wait({run}, timeout=20)
    if not done:
        run.cancel()
    assert done, "run_service still running 20 s after SIGTERM"
    assert run.result() == 0 and service.cancellations == 2
