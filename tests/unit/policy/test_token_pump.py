"""`TokenPump` (the streaming hand-off from a generation thread to the event loop), with a stub
generator (unit test: no model)."""

from __future__ import annotations

import asyncio
import threading
import time

from services.common.models.generation import Completion, Generator, Sampling


class _Stub(Generator):
    """Reports three tokens, then finishes once ``release`` is set."""

    def __init__(self) -> None:
        self.release = threading.Event()

    def generate(self, chats, sampling, cancel=None, seeds=None):
        raise AssertionError("the token pump streams: it must not call generate")

    def generate_stream(self, chat, sampling, on_token, cancel=None, seed=None, logprobs=True):
        for t in (5, 6, 7):
            on_token(0, t, -1.0)
        self.release.wait(5)
        return Completion("abc", (1,), (5, 6, 7), (-1.0,) * 3, "stop", 0)


def test_settle_returns_as_soon_as_the_generation_ends() -> None:
    from services.policy.token_pump import TokenPump

    async def main() -> tuple[float, float, list]:
        stub = _Stub()
        pump = TokenPump(stub, [{"role": "user", "content": "x"}], Sampling(), None)
        pump.start()
        tokens = await pump.get()
        started = time.monotonic()
        await pump.settle(0.2)  # still generating: the whole interval passes
        waited = time.monotonic() - started
        asyncio.get_running_loop().call_later(0.05, stub.release.set)
        started = time.monotonic()
        await pump.settle(3.0)  # the generation ends 0.05 s in: no need to wait for the rest
        ended = time.monotonic() - started
        return waited, ended, tokens + await pump.get()

    waited, ended, items = asyncio.run(main())
    assert waited >= 0.19
    assert ended < 1.0, f"settle waited {ended:.2f} s after the generation ended"
    assert [i[0] for i in items] == ["token", "token", "token", "done"] and items[-1][1].text == "abc"
