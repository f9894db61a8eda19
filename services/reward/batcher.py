"""Merge concurrent judge requests into shared generate batches (asyncio micro-batching).

Judge workers handle the trajectories of one fetch concurrently and gRPC requests arrive
concurrently; each awaits `JudgeBatcher.judge`. The first request waits ``wait_s`` seconds for
others, then every pending request with the same (votes, temperature) is judged in ONE call of
the synchronous `Judge` (which splits it into generate calls of at most ``max_batch`` chats) in a
worker thread, so the event loop keeps serving.

A merged call that fails is retried request by request, so one request the judge cannot handle
(a poison trajectory) fails alone and its batch-mates are judged. Without this every request of
the call failed, and since they all nak with the same backoff they met again in one call on every
redelivery until all of them were dead-lettered. The merging rules are those of
`services.common.microbatch.MicroBatcher`, which also merges the policy's generate calls.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass

from prometheus_client import Histogram
from rlanything.v1.events_pb2 import StepJudgement
from rlanything.v1.reward_pb2 import StepToJudge

from services.common.microbatch import MicroBatcher
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


class JudgeBatcher:
    """An asyncio front of a synchronous `Judge` that merges concurrent requests."""

    def __init__(self, judge: Judge, wait_s: float = 0.01) -> None:
        self.judge = judge
        self.wait_s = wait_s
        self._batcher: MicroBatcher[tuple[int, float], StepToJudge, StepJudgement, int] = MicroBatcher(
            self._judge_together, wait_s, name="judge-batcher")

    async def judge_steps(self, steps: Sequence[StepToJudge], votes: int, temperature: float) -> Judged:
        """Judge ``steps`` with ``votes`` votes each (merged with concurrent requests of equal votes
        and temperature); ``step_index`` is the position in ``steps``.

        Raises:
            Exception: whatever the judge raised for these steps (alone, after a merged failure).
        """
        part = await self._batcher.submit((votes, temperature), steps)
        for i, j in enumerate(part.results):
            j.step_index = i
        return Judged(part.results, part.meta, part.seconds)

    async def _judge_together(self, key: tuple[int, float], steps: list[StepToJudge]) -> tuple[list[StepJudgement], int]:
        """One judge call for every step (in a worker thread); the judgements and the model version
        that voted.

        Raises:
            Exception: whatever the judge raised.
        """
        votes, temperature = key
        version = self.judge.model_version
        with BATCH_SECONDS.time():
            judgements = await asyncio.to_thread(self.judge.judge, steps, votes, temperature)
        BATCH_STEPS.observe(len(steps))
        return judgements, version
