"""Helpers shared by integration tests (read events, wait for the task pool)."""

from __future__ import annotations

import asyncio
import time

from nats.js.api import ConsumerConfig as JsConsumerConfig

from rlanything.v1 import env_pb2, env_pb2_grpc
from services.common.bus import EventBus


async def events(bus: EventBus, subject: str, stream: str, count: int, message_type, timeout_s: float = 30.0):
    """Read up to ``count`` events; on the JOBS work queue the test acts as the one worker (acks)."""
    durable = "test-worker" if stream == "JOBS" else None
    sub = await bus.js.pull_subscribe(subject, durable=durable, stream=stream,
                                      config=JsConsumerConfig(filter_subject=subject))
    got = []
    deadline = asyncio.get_running_loop().time() + timeout_s
    while len(got) < count and asyncio.get_running_loop().time() < deadline:
        try:
            msgs = await sub.fetch(count - len(got), timeout=1)
        except Exception:  # noqa: BLE001 - fetch timeout: keep waiting until the deadline
            continue
        for m in msgs:
            got.append(message_type.FromString(m.data))
            await m.ack_sync()
    await sub.unsubscribe()
    return got


def wait_for_tasks(env: env_pb2_grpc.EnvironmentStub, count: int, timeout_s: float = 60.0) -> list:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        tasks = list(env.ListTasks(env_pb2.ListTasksRequest(), timeout=5).tasks)
        if len(tasks) >= count:
            return tasks
        time.sleep(0.1)
    raise AssertionError(f"pool has {len(tasks)} tasks, expected {count}")


def tiny_causal_lm(layers: int = 2):
    """A randomly initialised (seed 0) Qwen2 causal LM: vocabulary 40, width 32, ``layers`` decoder layers."""
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(0)
    config = Qwen2Config(vocab_size=40, hidden_size=32, intermediate_size=64, num_hidden_layers=layers,
                         num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=64)
    return Qwen2ForCausalLM(config).eval()
