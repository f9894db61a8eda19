"""Merge concurrent requests into shared calls (asyncio micro-batching), for any batched backend.

Callers on one event loop each `MicroBatcher.submit` a request: a key and a list of items. The
first request waits ``wait_s`` seconds for others; then every pending request with the first
waiting request's key is run as ONE call of ``run(key, items)`` (all their items, in order), and
each request gets its own slice of the results. The batcher is the one rule the policy's
generate calls (`services.common.models.merging.MergingGenerator`) and the reward's judge calls
(`services.reward.batcher.JudgeBatcher`) share:

* a request whose caller gave up (its future done: cancelled) before its batch ran is dropped,
  not run (the policy's rule; the judge's batcher used to judge such steps for nobody);
* a merged call that fails is retried request by request, so one request the backend cannot
  handle (a prompt over the context length, a poison trajectory) fails its own caller alone and
  its batch-mates get their results (both batchers' rule);
* each request's ``seconds`` is its share of the merged call's wall time by item count, so the
  shares of concurrent callers add up to the wall time once.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

__all__ = ["MicroBatcher", "Part"]

K = TypeVar("K", bound=Hashable)
T = TypeVar("T")
R = TypeVar("R")
M = TypeVar("M")


@dataclass(frozen=True)
class Part(Generic[R, M]):
    """One request's results (one per item, in order), what the merged call returned beside its
    results (``meta``: e.g. the model version that produced them), and the request's share of the
    merged call's wall time (seconds)."""

    results: list[R]
    meta: M
    seconds: float


@dataclass
class _Request(Generic[T, R, M]):
    items: list[T]
    future: asyncio.Future[Part[R, M]]


class MicroBatcher(Generic[K, T, R, M]):
    """An asyncio front of a batched call ``run(key, items) -> (results, meta)`` that merges
    concurrent requests with an equal key; ``run`` returns one result per item, in order."""

    def __init__(self, run: Callable[[K, list[T]], Awaitable[tuple[list[R], M]]], wait_s: float,
                 name: str = "micro-batcher") -> None:
        if wait_s < 0:
            raise ValueError(f"wait_s must be >= 0, got {wait_s}")
        self.run = run
        self.wait_s = wait_s
        self.name = name
        self._pending: dict[K, list[_Request[T, R, M]]] = {}
        self._runner: asyncio.Task[None] | None = None

    async def submit(self, key: K, items: Sequence[T]) -> Part[R, M]:
        """Run ``items`` under ``key``, merged with the concurrent requests of an equal key.

        Raises:
            ValueError: ``run`` returned another number of results than it was given items.
            Exception: whatever ``run`` raised for this request's items (alone, after a merged failure).
        """
        future: asyncio.Future[Part[R, M]] = asyncio.get_running_loop().create_future()
        self._pending.setdefault(key, []).append(_Request(list(items), future))
        if self._runner is None or self._runner.done():
            self._runner = asyncio.create_task(self._drain(), name=self.name)
        return await future

    async def _drain(self) -> None:
        while self._pending:
            await asyncio.sleep(self.wait_s)
            key = next(iter(self._pending))  # the key of the longest-waiting request
            batch = [r for r in self._pending.pop(key) if not r.future.done()]  # done = its caller gave up
            if not batch:
                continue
            try:
                await self._together(key, batch)
            except Exception as exc:  # noqa: BLE001 - retried alone below, or handed to the one caller
                if len(batch) == 1:
                    if not batch[0].future.done():
                        batch[0].future.set_exception(exc)
                    continue
                for r in batch:  # the merged call failed: find the request(s) the backend cannot handle
                    try:
                        await self._together(key, [r])
                    except Exception as alone:  # noqa: BLE001 - this request's own failure, re-raised by its caller
                        if not r.future.done():
                            r.future.set_exception(alone)

    async def _together(self, key: K, batch: list[_Request[T, R, M]]) -> None:
        """One ``run`` call for every item of ``batch``; resolves their futures.

        Raises:
            Exception: whatever ``run`` raised (no future is resolved then).
        """
        items = [item for r in batch for item in r.items]
        started = time.perf_counter()
        results, meta = await self.run(key, items)
        if len(results) != len(items):
            raise ValueError(f"{self.name}: run returned {len(results)} results for {len(items)} items")
        seconds = time.perf_counter() - started
        start = 0
        for r in batch:
            if not r.future.done():
                r.future.set_result(Part(results[start: start + len(r.items)], meta,
                                         seconds * len(r.items) / max(1, len(items))))
            start += len(r.items)
