"""Stopping asyncio tasks when a cancellation can be lost.

Python 3.11's ``asyncio.wait_for`` returns the awaited result instead of raising
``CancelledError`` when the result and the cancellation arrive in the same loop iteration
(CPython gh-86296, fixed by 3.12's rewrite of ``wait_for``). The NATS client awaits every request,
fetch and flush that way, so a task looping over NATS calls can carry on after ``task.cancel()``;
awaiting it once after one cancel can then wait forever.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable

__all__ = ["STOP_TASKS_S", "cancel_until_done"]

STOP_TASKS_S = 5.0
"""How long a stopping service waits for each group of cancelled tasks (its consumers, then its
background tasks) before it goes on without them (seconds)."""


async def cancel_until_done(tasks: Iterable[asyncio.Task[object]], timeout_s: float,
                            retry_s: float = 0.2) -> set[asyncio.Task[object]]:
    """Cancel ``tasks`` and cancel again every ``retry_s`` seconds those still running, for at
    most ``timeout_s`` seconds in all.

    A cancellation lost once lands at the task's next ``await``: a loop that lost one ends at the
    next try. An exception a task ended with is retrieved, not raised (as ``gather`` with
    ``return_exceptions=True`` does).

    Returns:
        The tasks still running after ``timeout_s`` seconds (empty when every one ended).
    """
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    tasks = set(tasks)
    pending = {t for t in tasks if not t.done()}
    while pending:
        for task in pending:
            task.cancel()
        left = deadline - loop.time()
        if left <= 0:
            break
        _, pending = await asyncio.wait(pending, timeout=min(retry_s, left))
    for task in tasks - pending:
        if not task.cancelled():
            task.exception()  # retrieved: no "exception was never retrieved" at exit
    return pending
