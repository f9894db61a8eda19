"""Merge concurrent generate calls into shared batches (asyncio micro-batching).

A rollout worker plays several jobs at once; each job asks for one completion per live episode
per step. Alone, a held-out job (one episode) is a batch of one, and on a CPU a tiny model's
`generate` costs about the same for 1 chat as for 32 (per-token Python overhead dominates). A
`MergingGenerator` collects the calls that arrive within ``wait_s`` of each other, and runs every
pending call with the same `Sampling` as ONE `Generator.generate` call (split into chunks of at
most ``max_batch`` chats) in a worker thread, so the event loop keeps serving.

Per-chat seeds (``generate(chats, sampling, seeds=...)``) travel with their chats into the merged
call, so a seeded chat samples the same tokens whatever it was merged with.

The merging rules (a caller that gave up is dropped, a failed merged call is retried call by call,
time shares) are those of `services.common.microbatch.MicroBatcher`, which also merges the
reward's judge calls.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from prometheus_client import Histogram

from services.common.microbatch import MicroBatcher
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


_Item = tuple[Chat, "int | None", bool]
"""One chat of a call, its seed, and whether its call passed ``seeds`` at all."""


class MergingGenerator:
    """An asyncio front of a `Generator` that merges concurrent calls with equal sampling."""

    def __init__(self, generator: Generator, max_batch: int = 64, wait_s: float = 0.005) -> None:
        if max_batch < 1:
            raise ValueError(f"max_batch must be >= 1, got {max_batch}")
        self.generator = generator
        self.max_batch = max_batch
        self.wait_s = wait_s
        self._batcher: MicroBatcher[Sampling, _Item, Completion, int] = MicroBatcher(
            self._together, wait_s, name="generate-merger")

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
        items: list[_Item] = [(chat, None if seeds is None else seeds[i], seeds is not None)
                              for i, chat in enumerate(chats)]
        part = await self._batcher.submit(sampling, items)
        return Merged(part.results, part.meta, part.seconds)

    async def _together(self, sampling: Sampling, items: list[_Item]) -> tuple[list[Completion], int]:
        """Generate for every chat of ``items`` (chunks of ``max_batch``); the completions and the
        model version that produced them.

        Raises:
            Exception: whatever the generator raised.
        """
        chats = [chat for chat, _, _ in items]
        seeds = [seed for _, seed, _ in items] if any(seeded for _, _, seeded in items) else None
        version = self.generator.model_version
        completions: list[Completion] = []
        for i in range(0, len(chats), self.max_batch):
            chunk = chats[i: i + self.max_batch]
            MERGED_CHATS.observe(len(chunk))
            completions += await generate_async(self.generator, chunk, sampling,
                                                None if seeds is None else seeds[i: i + self.max_batch])
        return completions, version
