"""MicroBatcher: the one micro-batching rule of the policy's generate calls and the reward's judge calls."""

from __future__ import annotations

import asyncio

import pytest

from services.common.microbatch import MicroBatcher


class Doubler:
    """Doubles each item; records (key, items) of every call; fails any call holding a negative item."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, list[int]]] = []

    async def __call__(self, key: str, items: list[int]) -> tuple[list[int], str]:
        self.calls.append((key, list(items)))
        if any(i < 0 for i in items):
            raise ValueError(f"negative item in {items}")
        return [2 * i for i in items], f"v-{key}"


async def test_equal_keys_share_one_call_other_keys_get_their_own() -> None:
    run = Doubler()
    batcher = MicroBatcher(run, wait_s=0.01)
    a, b, c = await asyncio.gather(batcher.submit("x", [1, 2]), batcher.submit("y", [3]), batcher.submit("x", [4]))
    assert run.calls == [("x", [1, 2, 4]), ("y", [3])]  # the longest-waiting key first
    assert (a.results, a.meta, b.results, b.meta, c.results) == ([2, 4], "v-x", [6], "v-y", [8])
    assert a.seconds >= 0.0 and c.seconds == pytest.approx(a.seconds / 2)  # shares by item count


async def test_a_failing_request_fails_alone_after_the_merged_call() -> None:
    run = Doubler()
    batcher = MicroBatcher(run, wait_s=0.01)
    ok, bad = await asyncio.gather(batcher.submit("x", [1]), batcher.submit("x", [-1, 5]), return_exceptions=True)
    assert isinstance(bad, ValueError) and not isinstance(ok, BaseException) and ok.results == [2]
    assert run.calls == [("x", [1, -1, 5]), ("x", [1]), ("x", [-1, 5])]


async def test_a_cancelled_caller_is_dropped_before_its_batch_runs() -> None:
    run = Doubler()
    batcher = MicroBatcher(run, wait_s=0.05)
    gone = asyncio.create_task(batcher.submit("x", [7, 8]))
    kept = asyncio.create_task(batcher.submit("x", [1]))
    await asyncio.sleep(0.01)
    gone.cancel()
    assert (await kept).results == [2]
    assert run.calls == [("x", [1])]


async def test_a_run_with_the_wrong_number_of_results_is_an_error() -> None:
    async def short(key: str, items: list[int]) -> tuple[list[int], None]:
        return items[:-1], None

    with pytest.raises(ValueError, match="micro-batcher: run returned 1 results for 2 items"):
        await MicroBatcher(short, wait_s=0.0).submit("x", [1, 2])


def test_a_negative_wait_is_refused() -> None:
    with pytest.raises(ValueError, match="wait_s must be >= 0, got -1"):
        MicroBatcher(Doubler(), wait_s=-1)
