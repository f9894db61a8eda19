"""`cancel_until_done`: tasks that lose a cancellation (Python 3.11 ``wait_for``) still end; one that
never ends is returned after the timeout instead of hanging the caller."""

from __future__ import annotations

import asyncio
import contextlib
import time

from services.common.task_stop import cancel_until_done


async def _loses_cancellations(lost: list[int], seen: list[int]) -> None:
    """Goes on after each of the first ``lost[0]`` cancellations, as a task does whose
    cancellation ``wait_for`` dropped."""
    while True:
        try:
            await asyncio.sleep(0.01)
        except asyncio.CancelledError:
            seen.append(1)
            if len(seen) > lost[0]:
                raise


async def _fails() -> None:
    raise ValueError("boom")


async def test_a_task_that_lost_cancellations_is_cancelled_again_until_it_ends() -> None:
    seen: list[int] = []
    task = asyncio.create_task(_loses_cancellations([3], seen))
    await asyncio.sleep(0)
    assert await cancel_until_done([task], timeout_s=5, retry_s=0.02) == set()
    assert task.cancelled() and len(seen) == 4


async def test_a_task_that_never_ends_is_returned_after_the_timeout() -> None:
    seen: list[int] = []
    lost = [10**9]
    stubborn = asyncio.create_task(_loses_cancellations(lost, seen))
    failed = asyncio.create_task(_fails())
    await asyncio.sleep(0)
    start = time.monotonic()
    assert await cancel_until_done([stubborn, failed], timeout_s=0.3, retry_s=0.05) == {stubborn}
    assert 0.3 <= time.monotonic() - start < 2.0 and len(seen) >= 4
    assert isinstance(failed.exception(), ValueError)  # left on the task, not raised
    lost[0] = 0  # now let it end
    stubborn.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await stubborn
