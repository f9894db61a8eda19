"""Merge concurrent judge requests into shared generate batches (asyncio micro-batching).

Judge workers handle the trajectories of one fetch concurrently and gRPC requests arrive
concurrently; each awaits `JudgeBatcher.judge`. The first request waits ``wait_s`` seconds for
others, then every pending request with the same (votes, temperature) is judged in ONE call of
the synchronous `Judge` (which splits it into generate calls of at most ``max_batch`` chats) in a
worker thread, so the event loop keeps serving.

A merged call that fails is retried request by request, so one request the judge cannot handle
(a poison trajectory) fails alone and its batch-mates are judged. Without this every request of
the call failed, and since they all nak with the same backoff they met again in one call on every
redelivery until all of them were dead-lettered.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from dataclasses import dataclass

from prometheus_client import Histogram
from rlanything.v1.events_pb2 import StepJudgement
from rlanything.v1.reward_pb2 import StepToJudge

from services.reward.judges import Judge

__all__ = ["JudgeBatcher", "Judged"]

BATCH_STEPS = Histogram("rla_reward_batch_steps", "Steps judged per merged judge call.",
                        buckets=(1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024))
BATCH_SECONDS = Histogram("rla_reward_batch_seconds", "Seconds per merged judge call.")


@dataclass(frozen=True)
class Judged:
    """The judgements of one request and the model version that voted."""

    judgements: list[StepJudgement]
    """One per requested step, in order (``step_index`` = position in the request)."""
    model_version: int
    seconds: float = 0.0
    """This request's share of the merged call's wall time (by step count), seconds."""


@dataclass
class _Request:
    steps: Sequence[StepToJudge]
    votes: int
    temperature: float
    future: asyncio.Future[Judged]


class JudgeBatcher:
    """An asyncio front of a synchronous `Judge` that merges concurrent requests."""

    def __init__(self, judge: Judge, wait_s: float = 0.01) -> None:
        self.judge = judge
        self.wait_s = wait_s
        self._pending: list[_Request] = []
        self._runner: asyncio.Task[None] | None = None

    async def judge_steps(self, steps: Sequence[StepToJudge], votes: int, temperature: float) -> Judged:
        """Judge ``steps`` with ``votes`` votes each (merged with concurrent requests).

        Raises:
            Exception: whatever the judge raised for the merged call.
        """
        future: asyncio.Future[Judged] = asyncio.get_running_loop().create_future()
        self._pending.append(_Request(list(steps), votes, temperature, future))
        if self._runner is None or self._runner.done():
            self._runner = asyncio.create_task(self._drain(), name="judge-batcher")
        return await future

    async def _drain(self) -> None:
        while self._pending:
            await asyncio.sleep(self.wait_s)
            key = (self._pending[0].votes, self._pending[0].temperature)
            batch = [r for r in self._pending if (r.votes, r.temperature) == key]
            self._pending = [r for r in self._pending if (r.votes, r.temperature) != key]
            try:
                await self._judge_together(batch, key[0], key[1])
            except Exception as exc:  # noqa: BLE001 - retried alone below, or handed to the one caller
                if len(batch) == 1:
                    if not batch[0].future.done():
                        batch[0].future.set_exception(exc)
                    continue
                for r in batch:  # the merged call failed: find the request(s) the judge cannot handle
                    try:
                        await self._judge_together([r], key[0], key[1])
                    except Exception as alone:  # noqa: BLE001 - this request's own failure, re-raised by its caller
                        if not r.future.done():
                            r.future.set_exception(alone)

    async def _judge_together(self, batch: list[_Request], votes: int, temperature: float) -> None:
        """One judge call for every step of ``batch``; resolves their futures.

        Raises:
            Exception: whatever the judge raised (no future is resolved then).
        """
        steps = [s for r in batch for s in r.steps]
        version = self.judge.model_version
        started = time.perf_counter()
        with BATCH_SECONDS.time():
            judgements = await asyncio.to_thread(self.judge.judge, steps, votes, temperature)
        BATCH_STEPS.observe(len(steps))
        seconds = time.perf_counter() - started
        start = 0
        for r in batch:
            mine = judgements[start: start + len(r.steps)]
            for i, j in enumerate(mine):
                j.step_index = i
            start += len(r.steps)
            if not r.future.done():
                r.future.set_result(Judged(mine, version, seconds * len(r.steps) / max(1, len(steps))))
