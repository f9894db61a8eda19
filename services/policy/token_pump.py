"""One chat generated in a worker thread, its tokens handed to the event loop as they come.

`TokenPump` runs `Generator.generate_stream` in the loop's default executor; `TokenPump.get`
returns the items that arrived since the last call, oldest first: ``("token", token_id, logprob)``
for each token, then one ``("done", Completion)`` or ``("error", exception)``. The worker wakes
the event loop at most once per `get` (not once per token), so a fast decoder is not slowed by
the loop competing for the interpreter; the end of the generation always wakes it, so `TokenPump.settle`
(the reader's pause between chunks) ends early when nothing more will come. `TokenPump.stop` sets the generation's cancel event: the
`hf` backend checks it after every token, the `vllm` backend after every engine step (and aborts
the request in the engine), so the worker is free again within one step.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections import deque
from typing import Any

from services.common.models.generation import GENERATING, Chat, Generator, Sampling

__all__ = ["TokenPump", "watch_disconnect"]


class TokenPump:
    """The tokens of one generation, as it runs (start it with `start`, read them with `get`).

    Args:
        logprobs: report each token's log-prob (NaN otherwise; the `hf` backend then skips the
            per-step log-softmax).
    """

    def __init__(self, generator: Generator, chat: Chat, sampling: Sampling, seed: int | None,
                 logprobs: bool = True) -> None:
        self.generator = generator
        self.chat = chat
        self.sampling = sampling
        self.seed = seed
        self.logprobs = logprobs
        self.cancel = threading.Event()
        self.finished = False
        self._items: deque[tuple[Any, ...]] = deque()
        self._lock = threading.Lock()
        self._wake_pending = False
        self._arrived = asyncio.Event()
        self._ended = asyncio.Event()
        self._future: asyncio.Future | None = None
        self.version: int | None = None
        """The model version generating the tokens (`generation.GENERATING`), known from the first token on."""

    def start(self) -> None:
        """Start the generation in a worker thread (call from the event loop)."""
        loop = asyncio.get_running_loop()

        def ended() -> None:
            self._ended.set()
            self._arrived.set()

        def put(item: tuple[Any, ...]) -> None:
            final = item[0] != "token"
            with self._lock:
                self._items.append(item)
                if self._wake_pending and not final:
                    return
                self._wake_pending = True
            with contextlib.suppress(RuntimeError):  # the loop closed: nobody reads any more
                loop.call_soon_threadsafe(ended if final else self._arrived.set)

        def on_token(_row: int, token: int, logprob: float) -> None:
            if self.version is None:  # the backend picked its model before the first token
                self.version = getattr(GENERATING, "version", None)
            put(("token", token, logprob))

        def run() -> None:
            try:
                c = self.generator.generate_stream(self.chat, self.sampling, on_token, self.cancel, self.seed,
                                                   logprobs=self.logprobs)
            except Exception as exc:  # noqa: BLE001 - handed to the reader, who answers with it
                put(("error", exc))
            else:
                put(("done", c))

        self._future = loop.run_in_executor(None, run)

    async def get(self) -> list[tuple[Any, ...]]:
        """The items that arrived since the last call (at least one; waits for it)."""
        while True:
            with self._lock:
                self._wake_pending = False
                if self._items:
                    batch = list(self._items)
                    self._items.clear()
                    break
            self._arrived.clear()  # a wake scheduled before this runs later: a harmless spurious one
            await self._arrived.wait()
        if batch[-1][0] != "token":
            self.finished = True
        return batch

    async def settle(self, seconds: float) -> None:
        """Wait ``seconds`` (the reader lets tokens gather between two chunks), or less: return as
        soon as the generation has ended (its result then waits for no pause)."""
        if self._ended.is_set():
            return
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(self._ended.wait(), seconds)

    def stop(self) -> None:
        """Cancel the generation (no effect once it finished)."""
        self.cancel.set()


async def watch_disconnect(receive: Any, on_disconnect: Any) -> None:
    """Call ``on_disconnect()`` once the ASGI ``receive`` channel reports ``http.disconnect`` (the
    request body was already read; run as a task, cancel it when the response is complete)."""
    while True:
        message = await receive()
        if message.get("type") == "http.disconnect":
            on_disconnect()
            return
