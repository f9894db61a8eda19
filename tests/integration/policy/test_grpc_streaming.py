"""gRPC `Policy.GenerateStream` on a real grpc.aio server on loopback, serving a real (tiny) HF
model: the chunks rebuild `Policy.Generate`'s answer, a batch is refused, and cancelling the call
cancels the generation."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator
from pathlib import Path

import grpc
import pytest

from rlanything.v1 import policy_pb2, policy_pb2_grpc
from rlanything.v1.events_pb2 import SamplingParams
from services.common.grpc_runtime import aio_channel, create_server
from services.common.models.generation import HFGenerator
from services.policy.grpc_service import PolicyServicer

pytestmark = pytest.mark.integration

CHAT = policy_pb2.Conversation(messages=[policy_pb2.ChatMessage(
    role="user", content="Task: walk to G.\nNow: A F G\nActions:\n1. left\n2. right")])


class CancelSpy(HFGenerator):
    """The `hf` backend, keeping each streamed generation's cancel event (to see the call's
    cancellation reach the generation)."""

    cancels: list[threading.Event] = []

    def generate_stream(self, chat, sampling, on_token, cancel=None, seed=None, logprobs=True):  # noqa: ANN001
        assert cancel is not None
        self.cancels.append(cancel)
        return super().generate_stream(chat, sampling, on_token, cancel, seed, logprobs)


@pytest.fixture
async def channel(tiny_model_dir: Path) -> AsyncIterator[grpc.aio.Channel]:
    servicer = PolicyServicer(CancelSpy(str(tiny_model_dir)))
    server, port, _ = await create_server(
        "127.0.0.1", 0, [lambda s: policy_pb2_grpc.add_PolicyServicer_to_server(servicer, s)])
    await server.start()
    async with aio_channel(f"127.0.0.1:{port}") as opened:
        yield opened
    await server.stop(None)


@pytest.fixture
def stub(channel: grpc.aio.Channel) -> policy_pb2_grpc.PolicyStub:
    return policy_pb2_grpc.PolicyStub(channel)


def request(max_new_tokens: int, stop: tuple[str, ...] = (), prompts: int = 1, temperature: float = 0.0,
            seed: int = 0) -> policy_pb2.GenerateRequest:
    return policy_pb2.GenerateRequest(prompts=[CHAT] * prompts, sampling=SamplingParams(
        temperature=temperature, max_new_tokens=max_new_tokens, stop=list(stop), seed=seed))


async def test_the_chunks_rebuild_the_unary_answer_at_temperature_0(stub) -> None:
    plain = (await stub.Generate(request(24), timeout=60)).completions[0]
    chunks = [c async for c in stub.GenerateStream(request(24), timeout=60)]
    assert len(chunks) >= 2 and plain.token_ids
    assert [c.HasField("completion") for c in chunks] == [False] * (len(chunks) - 1) + [True]
    last = chunks[-1].completion
    assert list(last.token_ids) == list(plain.token_ids) == [t for c in chunks for t in c.token_ids]
    assert list(last.logprobs) == pytest.approx(list(plain.logprobs), abs=1e-4)
    assert [lp for c in chunks for lp in c.logprobs] == pytest.approx(list(plain.logprobs), abs=1e-4)
    assert "".join(c.text for c in chunks) == last.text == plain.text
    assert last.finish_reason == plain.finish_reason and last.prompt_token_ids == plain.prompt_token_ids


async def test_a_seeded_sampled_stream_with_a_stop_string_equals_the_unary_answer(stub) -> None:
    """Sampled (seeded) so the text varies; the stop string is taken from the middle of the answer."""
    sampled = {"temperature": 1.0, "seed": 5}
    long = (await stub.Generate(request(30, **sampled), timeout=60)).completions[0].text
    # from the middle of the answer, not across a character the random model left incomplete (U+FFFD)
    stop = next(long[k:k + 3] for k in range(12, len(long) - 3) if "\ufffd" not in long[k:k + 3])
    plain = (await stub.Generate(request(30, (stop,), **sampled), timeout=60)).completions[0]
    chunks = [c async for c in stub.GenerateStream(request(30, (stop,), **sampled), timeout=60)]
    assert "".join(c.text for c in chunks) == chunks[-1].completion.text == plain.text == long[: long.index(stop)]
    assert chunks[-1].completion.finish_reason == "stop"


async def test_a_batch_is_invalid_argument(stub) -> None:
    with pytest.raises(grpc.aio.AioRpcError) as err:
        async for _ in stub.GenerateStream(request(4, prompts=2), timeout=60):
            pass
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "exactly one prompt" in err.value.details()


async def test_cancelling_the_call_cancels_the_generation(stub) -> None:
    CancelSpy.cancels.clear()
    call = stub.GenerateStream(request(2000), timeout=60)
    first = await call.read()
    assert first.token_ids and not first.HasField("completion")
    call.cancel()
    for _ in range(100):  # the server sees the cancellation within a few event-loop turns
        if CancelSpy.cancels and CancelSpy.cancels[0].is_set():
            break
        await asyncio.sleep(0.05)
    assert len(CancelSpy.cancels) == 1 and CancelSpy.cancels[0].is_set()


async def test_bytes_that_are_no_request_are_invalid_argument_not_unknown(channel) -> None:
    """Found by the gRPC fuzz test: the server-streaming method parsed its request in grpc.aio,
    so corrupt bytes came back UNKNOWN ("Unexpected DecodeError"), which names no fault."""
    raw = channel.unary_stream(
        "/rlanything.v1.Policy/GenerateStream", request_serializer=None, response_deserializer=None)
    with pytest.raises(grpc.aio.AioRpcError) as err:
        async for _ in raw(b"\x00", timeout=60):
            pass
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT, err.value.details()
    assert "not a valid message (1 bytes)" in err.value.details()
