"""The policy service as a real process: rollouts against the env service, the trainer,
hot-swapped versions, gRPC Generate, and the OpenAI-compatible endpoint."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import grpc
import pytest
import torch

from rlanything.v1 import policy_pb2, policy_pb2_grpc
from rlanything.v1.events_pb2 import (PolicySampleBatch, RolloutJob, SamplingParams,
                                      TrainingSample, Trajectory)
from services.common.checkpoints import VersionStore, save_checkpoint
from services.common.models.loading import load_model
from services.common.nats_server import free_port
from services.common.streams import Subjects
from tests.support import events, wait_for_tasks

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def policy_yaml(model: Path | str, ckpt: Path, env_address: str = "127.0.0.1:1", role: str = "all",
                http_port: int = 0) -> str:
    return (f"policy: {{role: {role}, openai_port: {http_port}, checkpoint_dir: '{ckpt}', "
            f"model: {{source: '{model}'}}, rollout: {{env_address: '{env_address}'}}, ppo: {{lr: 0.01}}}}\n"
            "env: {scheduler: {enabled: false}, families: [{type: gym_text, knobs: {size: 4, hole_prob: 0.2}, "
            "train_slots: 2}]}\n")


def generate(address: str, text: str = "Task: go") -> policy_pb2.GenerateResponse:
    stub = policy_pb2_grpc.PolicyStub(grpc.insecure_channel(address))
    return stub.Generate(policy_pb2.GenerateRequest(
        prompts=[policy_pb2.Conversation(messages=[policy_pb2.ChatMessage(role="user", content=text)])],
        sampling=SamplingParams(temperature=0.0, max_new_tokens=12)), timeout=30)


async def test_rollout_job_produces_complete_trajectories(spawn_service, tiny_model_dir, tmp_path, bus) -> None:
    from rlanything.v1 import env_pb2_grpc

    env = spawn_service("env", "env: {scheduler: {enabled: false}, families: [{type: gym_text, "
                               "knobs: {size: 4, hole_prob: 0.2}, train_slots: 2}]}\n")
    tasks = wait_for_tasks(env_pb2_grpc.EnvironmentStub(grpc.insecure_channel(env.address)), 2)
    spawn_service("policy", policy_yaml(tiny_model_dir, tmp_path / "ckpt", env.address, role="rollout"))
    job = RolloutJob(job_id="r0/a", round=0, task=tasks[0].ref, group_size=3, seeds=[1, 2, 3], max_steps=4,
                     sampling=SamplingParams(temperature=1.0, top_p=1.0, max_new_tokens=8), jobs_in_round=1,
                     split="train")
    await bus.publish(Subjects.ROLLOUT_JOBS, job, msg_id=job.job_id)
    trajectories = await events(bus, Subjects.TRAJ_COMPLETED, "TRAJ", 3, Trajectory, timeout_s=60)
    assert sorted(t.trajectory_id for t in trajectories) == ["r0/a/0", "r0/a/1", "r0/a/2"]
    for t in trajectories:
        assert t.task == tasks[0].ref and t.group_size == 3 and t.jobs_in_round == 1 and t.outcome in (1, -1)
        assert 1 <= len(t.steps) <= 4 and t.generate_s > 0 and t.policy_version == 0
        for k, s in enumerate(t.steps):
            assert s.index == k and s.prompt.startswith("Task: Walk on the frozen lake")
            assert len(s.response_token_ids) == len(s.behaviour_logprobs) > 0 and s.prompt_token_ids
            assert s.observation and s.next_observation
            if s.valid:
                assert s.action in ("left", "down", "right", "up") and s.oracle_label in (1, 2)
            else:  # an untrained model mostly answers garbage: recorded as invalid, never "index 0"
                assert s.action == "" and s.action_index == -1 and "was not a valid" in s.next_observation


async def test_trainer_trains_a_round_and_workers_serve_the_new_version(spawn_service, tiny_model_dir, tmp_path,
                                                                        bus) -> None:
    ckpt = tmp_path / "ckpt"
    policy = spawn_service("policy", policy_yaml(tiny_model_dir, ckpt))
    before = generate(policy.address)
    assert before.model_version == 0
    versions = await VersionStore.open(bus)
    assert (await versions.latest("policy")).trained_on_round == -1  # version 0 announced by the trainer

    # Two jobs in round 0: the trainer waits for both batches, then trains and announces v1.
    model, tok = load_model(str(tiny_model_dir))
    prompt = tok.apply_chat_template([{"role": "user", "content": "Task: go"}], add_generation_prompt=True)
    prompt = list(prompt["input_ids"] if hasattr(prompt, "keys") else prompt)
    target = tok.encode("\\boxed{2}", add_special_tokens=False) + [tok.eos_token_id]
    samples = [TrainingSample(sample_id=f"s{i}", prompt_token_ids=prompt, response_token_ids=target, advantage=1.0)
               for i in range(16)]
    await bus.publish(Subjects.SAMPLES_POLICY, PolicySampleBatch(batch_id="r0/a/policy", round=0, samples=samples,
                                                                 jobs_in_round=2), msg_id="r0/a/policy")
    await asyncio.sleep(1.0)
    assert (await versions.latest("policy")).version == 0
    await bus.publish(Subjects.SAMPLES_POLICY, PolicySampleBatch(batch_id="r0/b/policy", round=0, samples=samples,
                                                                 jobs_in_round=2), msg_id="r0/b/policy")
    deadline = time.monotonic() + 60
    while (latest := await versions.latest("policy")).version < 1:
        assert time.monotonic() < deadline
        await asyncio.sleep(0.2)
    assert latest.trained_on_round == 0 and Path(latest.uri) == ckpt / "policy" / "v1"
    published = time.monotonic()
    while generate(policy.address).model_version < 1:
        assert time.monotonic() - published < 30
        await asyncio.sleep(0.1)
    after = generate(policy.address)
    assert after.completions[0].token_ids != before.completions[0].token_ids  # trained toward "\boxed{2}"
    messages = [m["msg"] for m in policy.log_messages()]
    assert "trained" in messages and "serving new version" in messages


async def test_hot_swap_without_restart_and_bad_requests(spawn_service, tiny_model_dir, tmp_path, bus) -> None:
    policy = spawn_service("policy", policy_yaml(tiny_model_dir, tmp_path / "ckpt", role="rollout"))
    first = generate(policy.address)
    model, tok = load_model(str(tiny_model_dir))
    torch.manual_seed(1)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.5)
    path = save_checkpoint(model, tok, tmp_path / "ckpt", "policy", 7)
    versions = await VersionStore.open(bus)
    await versions.announce("policy", 7, path, trained_on_round=6)
    deadline = time.monotonic() + 30
    while (now := generate(policy.address)).model_version != 7:
        assert time.monotonic() < deadline
        await asyncio.sleep(0.1)
    assert now.completions[0].token_ids != first.completions[0].token_ids
    assert policy.proc.poll() is None  # same process

    stub = policy_pb2_grpc.PolicyStub(grpc.insecure_channel(policy.address))
    for request, message in [
        (policy_pb2.GenerateRequest(), "prompts must hold at least one conversation"),
        (policy_pb2.GenerateRequest(prompts=[policy_pb2.Conversation(messages=[
            policy_pb2.ChatMessage(role="robot", content="x")])]), "prompts[0].messages[0].role must be one of"),
        (policy_pb2.GenerateRequest(prompts=[policy_pb2.Conversation(messages=[
            policy_pb2.ChatMessage(role="user", content="x")])], sampling=SamplingParams(temperature=-1)),
         "sampling.temperature must be >= 0, got -1.0"),
    ]:
        with pytest.raises(grpc.RpcError) as err:
            stub.Generate(request, timeout=10)
        assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert message in err.value.details()


def test_smollm2_answers_through_the_openai_endpoint(spawn_service, tmp_path) -> None:
    from openai import BadRequestError, OpenAI

    port = free_port()
    spawn_service("policy", policy_yaml("smollm2", tmp_path / "ckpt", role="rollout", http_port=port)
                  + "\n", start=True)
    client = OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="unused")
    response = client.chat.completions.create(
        model="smollm2", messages=[{"role": "user", "content": "What is the capital of France? One word."}],
        temperature=0, max_tokens=12, logprobs=True)
    answer = response.choices[0].message.content
    assert "Paris" in answer, answer
    listed = response.choices[0].logprobs.content
    # the end-of-turn token is generated (counted in usage) but is no content, so it is not listed
    ended = response.choices[0].finish_reason == "stop"
    assert response.usage.completion_tokens == len(listed) + ended and listed
    assert b"".join(bytes(t.bytes) for t in listed) == answer.encode()
    assert [m.id for m in client.models.list().data] == ["smollm2", "policy"]  # the source, then policy.openai_model_names
    with pytest.raises(BadRequestError):
        client.chat.completions.create(model="smollm2", messages=[], max_tokens=4)
