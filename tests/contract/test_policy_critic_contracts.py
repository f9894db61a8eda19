"""The Policy and Critic contracts (`services/contract/`) against the shipped services — the policy
with the `hf` backend and its OpenAI-compatible endpoint (the `vllm` backend's own checks are in
tests/vllm_backend), and the critic before and after it closed a group — and against deliberately
broken servers, which must fail with a clause a person can read."""

from __future__ import annotations

import asyncio
import subprocess
import time
from collections.abc import Iterator
from concurrent import futures
from pathlib import Path

import grpc
import pytest

from rlanything.v1 import critic_pb2, critic_pb2_grpc, policy_pb2, policy_pb2_grpc
from rlanything.v1.events_pb2 import TaskRef
from services.common.bus import EventBus
from services.common.config import ConsumerConfig, NatsConfig
from services.common.nats_server import NatsServer, free_port
from services.contract.critic_contract import check_critic
from services.contract.policy_contract import check_policy
from tests.contract.conftest import _start, _stop
from tests.launch import RLANYTHING
from tests.integration.critic.test_critic_service import publish, train_group

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def failures(results: list) -> str:
    return "\n".join(f"{r.clause}: sent {r.sent}; got {r.got}; required {r.required}" for r in results if not r.passed)


@pytest.fixture(scope="module")
def policy(contract_nats: NatsServer, contract_dir: Path, tiny_model: Path) -> Iterator[tuple[str, str]]:
    """(gRPC address, OpenAI base URL) of a policy service (role rollout) serving a tiny model."""
    http = free_port()
    proc = _start("policy", {"role": "rollout", "openai_port": http, "model": {"source": str(tiny_model)},
                             "checkpoint_dir": str(contract_dir / "ckpt")}, contract_nats, contract_dir)
    yield proc.address, f"http://127.0.0.1:{http}/v1"
    _stop(proc)


def test_the_policy_service_keeps_every_clause(policy: tuple[str, str]) -> None:
    results = check_policy(*policy)
    assert not failures(results), failures(results)
    out = subprocess.run([RLANYTHING, "contract", "policy", policy[0], "--openai", policy[1]],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0 and out.stdout.rstrip().endswith(f"5 of 5 clauses hold for {policy[0]}"), out.stdout


class DropsTheLastPrompt(policy_pb2_grpc.PolicyServicer):
    """Broken on purpose: answers one completion fewer than it was asked for."""

    def Generate(self, request, context):  # noqa: N802 - the gRPC method's name
        return policy_pb2.GenerateResponse(completions=[policy_pb2.Completion(text="x", token_ids=[1], logprobs=[-0.1],
                                                                              finish_reason="stop")
                                                        for _ in request.prompts[1:]], model_version=0)


def serve(add, servicer) -> tuple[grpc.Server, str]:
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    add(servicer, server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    return server, f"127.0.0.1:{port}"


def test_a_policy_that_drops_a_prompt_fails_clause_1_readably() -> None:
    server, address = serve(policy_pb2_grpc.add_PolicyServicer_to_server, DropsTheLastPrompt())
    try:
        first = check_policy(address)[0]
    finally:
        server.stop(None)
    assert not first.passed and first.clause.startswith("1. ")
    assert first.got.startswith("2 completions: GenerateResponse {")
    assert first.required == "one completion per prompt (3), in order"


class StreamsWithoutItsCompletion(DropsTheLastPrompt):
    """Broken on purpose: Generate is right, GenerateStream never sends the completion."""

    def Generate(self, request, context):  # noqa: N802
        return policy_pb2.GenerateResponse(completions=[policy_pb2.Completion(text="x", token_ids=[1], logprobs=[-0.1],
                                                                              finish_reason="stop")
                                                        for _ in request.prompts], model_version=0)

    def GenerateStream(self, request, context):  # noqa: N802
        yield policy_pb2.GenerateChunk(token_ids=[1], logprobs=[-0.1], text="x")


def test_a_policy_whose_stream_never_completes_fails_clause_5_readably() -> None:
    server, address = serve(policy_pb2_grpc.add_PolicyServicer_to_server, StreamsWithoutItsCompletion())
    try:
        results = check_policy(address)
    finally:
        server.stop(None)
    assert [r.passed for r in results] == [True, True, False, True, False]  # 3: this server accepts anything
    fifth = results[4]
    assert fifth.clause.startswith("5. ") and fifth.got == "1 chunks, completion in chunks []"
    assert fifth.required == "exactly one chunk with the completion, the last"


@pytest.fixture(scope="module")
def critic(contract_dir: Path) -> Iterator[tuple[str, NatsServer]]:
    with NatsServer() as nats:  # its own store: the critic starts with no round
        proc = _start("critic", {"group_timeout_s": 120}, nats, contract_dir)
        yield proc.address, nats
        _stop(proc)


def test_the_critic_keeps_every_clause_before_and_after_a_round(critic: tuple[str, NatsServer]) -> None:
    address, nats = critic
    before = check_critic(address)
    assert not failures(before), failures(before)

    async def close_a_group() -> None:
        bus = await EventBus.connect(NatsConfig(url=nats.url), ConsumerConfig(), name="contract")
        await publish(bus, train_group("r0/gym_text/train-0000/v0"))
        await bus.close()

    asyncio.run(close_a_group())
    stub = critic_pb2_grpc.CriticStub(grpc.insecure_channel(address))
    deadline = time.monotonic() + 30
    while not stub.GetTaskStats(critic_pb2.TaskStatsRequest(), timeout=5).stats:
        assert time.monotonic() < deadline, "the critic never closed the group"
        time.sleep(0.2)
    after = check_critic(address)
    assert not failures(after), failures(after)
    assert stub.GetRoundReport(critic_pb2.RoundReportRequest(round=-1), timeout=5).groups_complete == 1


class MiscountsAcc(critic_pb2_grpc.CriticServicer):
    """Broken on purpose: reports acc as wins / G asked, not wins / rollouts received."""

    def GetRoundReport(self, request, context):  # noqa: N802
        context.abort(grpc.StatusCode.NOT_FOUND, "no round is complete yet")

    def GetTaskStats(self, request, context):  # noqa: N802
        if request.slot_id == "no-such-slot":
            context.abort(grpc.StatusCode.NOT_FOUND, "unknown slot")
        return critic_pb2.TaskStatsResponse(stats=[critic_pb2.TaskStats(
            task=TaskRef(slot_id="gym_text/train-0000"), rollouts=3, wins=1, acc=0.25, last_round=0)])


def test_a_critic_whose_acc_does_not_add_up_fails_clause_3_readably() -> None:
    server, address = serve(critic_pb2_grpc.add_CriticServicer_to_server, MiscountsAcc())
    try:
        results = check_critic(address)
    finally:
        server.stop(None)
    assert [r.passed for r in results] == [False, True, False]  # clause 1: round -2 is not INVALID_ARGUMENT
    assert results[0].required == "INVALID_ARGUMENT for a round below -1"
    assert results[2].required == "acc = wins / rollouts" and "acc: 0.25" in results[2].got
