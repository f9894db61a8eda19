"""Generation for a request nobody waits for any more stops (field bugs, 4).

Regression: two ``Policy.Generate`` calls with a 1 s deadline got DEADLINE_EXCEEDED while the
server kept generating at a full core, and the next 1-token call waited behind the generator lock;
the same held for an HTTP client that hung up. Measured against the real policy service process,
with a model this test builds: wide and deep enough that greedy decoding of 1000 tokens takes
seconds on CPU (it never emits end-of-turn, so the work's length is known).
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import grpc
import pytest

from rlanything.v1 import policy_pb2, policy_pb2_grpc
from rlanything.v1.events_pb2 import SamplingParams
from services.common.config import FamilyConfig, TinyModelConfig
from services.common.nats_server import free_port
from services.common.process_idle import seconds_until_idle
from services.env.families.frozenlake import FrozenLakeFamily
from services.offline.policy_sft import build_tiny_for, demonstrations
from tests.integration.policy.test_policy_service import policy_yaml

pytestmark = [pytest.mark.integration, pytest.mark.slow]

PROMPT = "Task: walk to G.\nNow: A F G"
LONG = 1000  # tokens: several seconds of greedy decoding for the model below


@pytest.fixture(scope="module")
def slow_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    fam = FamilyConfig(type="gym_text", knobs={"size": 4, "hole_prob": 0.2})
    demos = demonstrations(FrozenLakeFamily(), fam, 20, history_steps=2)
    return build_tiny_for(demos, tmp_path_factory.mktemp("slow") / "model", TinyModelConfig(hidden_size=256, layers=8))


def request(max_new_tokens: int) -> policy_pb2.GenerateRequest:
    return policy_pb2.GenerateRequest(
        prompts=[policy_pb2.Conversation(messages=[policy_pb2.ChatMessage(role="user", content=PROMPT)])],
        sampling=SamplingParams(temperature=0.0, max_new_tokens=max_new_tokens))


def test_grpc_deadline_stops_generation_and_frees_the_model(spawn_service, slow_model_dir, tmp_path) -> None:
    policy = spawn_service("policy", policy_yaml(slow_model_dir, tmp_path / "ckpt", role="rollout"))
    stub = policy_pb2_grpc.PolicyStub(grpc.insecure_channel(policy.address))
    stub.Generate(request(1), timeout=60)  # warm-up
    with ThreadPoolExecutor(2) as pool:
        calls = [pool.submit(stub.Generate, request(LONG), timeout=1.0) for _ in range(2)]
        codes = []
        for call in calls:
            with pytest.raises(grpc.RpcError) as err:
                call.result()
            codes.append(err.value.code())
    deadline = time.monotonic()
    assert codes == [grpc.StatusCode.DEADLINE_EXCEEDED] * 2
    idle_after = seconds_until_idle(policy.proc.pid, deadline, limit_s=6.0)
    start = time.monotonic()
    assert len(stub.Generate(request(1), timeout=60).completions[0].token_ids) == 1
    next_latency = time.monotonic() - start
    print(f"grpc: idle {idle_after:.2f} s after the deadline; next 1-token call {next_latency:.3f} s")
    assert idle_after < 1.5
    assert next_latency < 1.0
    # Control: the abandoned work really was long (so the checks above could fail).
    start = time.monotonic()
    full = stub.Generate(request(LONG), timeout=120).completions[0]
    assert len(full.token_ids) == LONG and full.finish_reason == "length"
    assert time.monotonic() - start > 2.5


def test_http_client_that_hangs_up_stops_generation(spawn_service, slow_model_dir, tmp_path) -> None:
    from openai import APITimeoutError, OpenAI

    port = free_port()
    policy = spawn_service("policy", policy_yaml(slow_model_dir, tmp_path / "ckpt", role="rollout", http_port=port))
    client = OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="unused", max_retries=0, timeout=60)
    chat = [{"role": "user", "content": PROMPT}]
    client.chat.completions.create(model="policy", messages=chat, temperature=0, max_tokens=1)  # warm-up
    with pytest.raises(APITimeoutError):
        client.with_options(timeout=1.0).chat.completions.create(model="policy", messages=chat, temperature=0,
                                                                 max_tokens=LONG)
    gone = time.monotonic()
    idle_after = seconds_until_idle(policy.proc.pid, gone, limit_s=6.0)
    start = time.monotonic()
    answer = client.chat.completions.create(model="policy", messages=chat, temperature=0, max_tokens=1)
    next_latency = time.monotonic() - start
    print(f"http: idle {idle_after:.2f} s after the client hung up; next 1-token call {next_latency:.3f} s")
    assert answer.usage.completion_tokens == 1
    assert idle_after < 1.5
    assert next_latency < 1.0
