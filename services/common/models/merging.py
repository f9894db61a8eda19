"""Merge concurrent generate calls into shared batches (asyncio micro-batching).

A rollout worker plays several jobs at once; each job asks for one completion per live episode
per step. Alone, a held-out job (one episode) is a batch of one, and on a CPU a tiny model's
`generate` costs about the same for 1 chat as for 32 (per-token Python overhead dominates). A
`MergingGenerator` collects the calls that arrive within ``wait_s`` of each other, and runs every
pending call with the same `Sampling` as ONE `Generator.generate` call (split into chunks of at
most ``max_batch`` chats) in a worker thread, so the event loop keeps serving.

Per-chat seeds (``generate(chats, sampling, seeds=...)``) travel with their chats into the merged
call, so a seeded chat samples the same tokens whatever it was merged with.

A merged call that fails is retried call by call, so a chat the backend cannot handle (a prompt
over the context length) fails its own caller only.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from dataclasses import dataclass

from prometheus_client import Histogram

from services.common.models.generation import Chat, Completion, Generator, Sampling, Seeds, check_seeds, generate_async

__all__ = ["MergingGenerator", "Merged"]

MERGED_CHATS = Histogram("rla_generate_merged_chats", "Chats per merged generate call.",
                         buckets=(1, 2, 4, 8, 16, 32, 64, 128, 256))


@dataclass(frozen=True)
class Merged:
    """The completions of one call, the model version that produced them, and the call's share of
    the merged generate calls' wall time (seconds, by chat count: concurrent callers' shares add up
    to the wall time once, where their waits would count it once per caller)."""

    completions: list[Completion]
    model_version: int
    seconds: float


@dataclass
class _Call:
    chats: Sequence[Chat]
    seeds: Seeds
    future: asyncio.Future[Merged]


class MergingGenerator:
    """An asyncio front of a `Generator` that merges concurrent calls with equal sampling."""

    def __init__(self, generator: Generator, max_batch: int = 64, wait_s: float = 0.005) -> None:
        if max_batch < 1:
            raise ValueError(f"max_batch must be >= 1, got {max_batch}")
        self.generator = generator
        self.max_batch = max_batch
        self.wait_s = wait_s
        self._pending: dict[Sampling, list[_Call]] = {}
        self._runner: asyncio.Task[None] | None = None

    async def generate(self, chats: Sequence[Chat], sampling: Sampling, seeds: Seeds = None) -> Merged:
        """One completion per chat, in order, the model version that produced them, the time share.

        Calls with an equal ``sampling`` (temperature, top_p, max_new_tokens, stop, seed) that wait
        at the same time share generate calls; a ``sampling.seed`` then seeds the merged call, not
        this one, where per-chat ``seeds`` stay with their chats.

        Raises:
            ValueError: ``seeds`` does not hold one seed per chat.
            Exception: whatever the generator raised for these chats (alone, after a merged failure).
        """
        if not chats:
            return Merged([], self.generator.model_version, 0.0)
        check_seeds(chats, seeds)
        future: asyncio.Future[Merged] = asyncio.get_running_loop().create_future()
        self._pending.setdefault(sampling, []).append(_Call(list(chats), None if seeds is None else list(seeds), future))
        if self._runner is None or self._runner.done():
            self._runner = asyncio.create_task(self._drain(), name="generate-merger")
        return await future

    async def _drain(self) -> None:
        while self._pending:
            await asyncio.sleep(self.wait_s)
            sampling = next(iter(self._pending))
            calls = [c for c in self._pending.pop(sampling) if not c.future.done()]  # done = its caller gave up
            if not calls:
                continue
            try:
                await self._together(calls, sampling)
            except Exception as exc:  # noqa: BLE001 - retried alone below, or handed to the one caller
                if len(calls) == 1:
                    if not calls[0].future.done():
                        calls[0].future.set_exception(exc)
                    continue
                for c in calls:
                    try:
                        await self._together([c], sampling)
                    except Exception as alone:  # noqa: BLE001 - this call's own failure, re-raised by its caller
                        if not c.future.done():
                            c.future.set_exception(alone)

    async def _together(self, calls: list[_Call], sampling: Sampling) -> None:
        """Generate for every chat of ``calls`` (chunks of ``max_batch``); resolves their futures.

        Raises:
            Exception: whatever the generator raised (no future is resolved then).
        """
        chats = [chat for c in calls for chat in c.chats]
        seeds: list[int | None] | None = None
        if any(c.seeds is not None for c in calls):
            seeds = [s for c in calls for s in (c.seeds if c.seeds is not None else [None] * len(c.chats))]
        version = self.generator.model_version
        started = time.perf_counter()
        completions: list[Completion] = []
        for i in range(0, len(chats), self.max_batch):
            chunk = chats[i: i + self.max_batch]
            MERGED_CHATS.observe(len(chunk))
            completions += await generate_async(self.generator, chunk, sampling,
                                                None if seeds is None else seeds[i: i + self.max_batch])
        seconds = time.perf_counter() - started
        start = 0
        for c in calls:
            if not c.future.done():
                c.future.set_result(Merged(completions[start: start + len(c.chats)], version,
                                           seconds * len(c.chats) / len(chats)))
            start += len(c.chats)
