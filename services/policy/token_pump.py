"""One chat generated in a worker thread, its tokens handed to the event loop as they come.

`TokenPump` runs `Generator.generate_stream` in the loop's default executor; each token arrives
on an `asyncio.Queue` as ``("token", token_id, logprob)``, then one ``("done", Completion)`` or
``("error", exception)``. `TokenPump.stop` sets the generation's cancel event: the `hf` backend
checks it after every token, so the worker is free again within one decoding step.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from typing import Any

from services.common.models.generation import Chat, Generator, Sampling

__all__ = ["TokenPump", "watch_disconnect"]


class TokenPump:
    """The tokens of one generation, as it runs (start it with `start`, read them with `get`)."""

    def __init__(self, generator: Generator, chat: Chat, sampling: Sampling, seed: int | None) -> None:
        self.generator = generator
        self.chat = chat
        self.sampling = sampling
        self.seed = seed
        self.cancel = threading.Event()
        self.queue: asyncio.Queue[tuple[Any, ...]] = asyncio.Queue()
        self.finished = False
        self._future: asyncio.Future | None = None

    def start(self) -> None:
        """Start the generation in a worker thread (call from the event loop)."""
        loop = asyncio.get_running_loop()

        def put(item: tuple[Any, ...]) -> None:
            with contextlib.suppress(RuntimeError):  # the loop closed: nobody reads any more
                loop.call_soon_threadsafe(self.queue.put_nowait, item)

        def run() -> None:
            try:
                c = self.generator.generate_stream(self.chat, self.sampling,
                                                   lambda _row, token, logprob: put(("token", token, logprob)),
                                                   self.cancel, self.seed)
            except Exception as exc:  # noqa: BLE001 - handed to the reader, who answers with it
                put(("error", exc))
            else:
                put(("done", c))

        self._future = loop.run_in_executor(None, run)

    async def get(self) -> tuple[Any, ...]:
        """The next item: ``("token", id, logprob)``, ``("done", Completion)`` or ``("error", exc)``."""
        item = await self.queue.get()
        if item[0] != "token":
            self.finished = True
        return item

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
