"""The reward service as a real process: judge workers (one judged event per trajectory id), the RM
trainer with hot-swapped versions, the oracle's version-only "trainer", and SmolLM2 as a zero-shot judge."""

from __future__ import annotations

import asyncio
import random
import time
from pathlib import Path

import grpc
import pytest

from rlanything.v1 import reward_pb2, reward_pb2_grpc
from rlanything.v1.events_pb2 import (MODEL_ROLE_REWARD_MODEL, JudgedTrajectory, ModelVersion, RewardSampleBatch,
                                      TrainingSample, Trajectory)
from services.common.checkpoints import VersionStore
from services.common.config import FamilyConfig
from services.common.models.generation import HFGenerator
from services.common.streams import Subjects
from services.env.families.frozenlake import FrozenLakeFamily
from services.offline.judge_episodes import record_group
from services.reward.judges import steps_of
from services.offline.judge_sft import judge_specs
from tests.support import events

pytestmark = [pytest.mark.integration, pytest.mark.slow]

CONSUMER = "consumer: {ack_wait_s: 10, max_deliveries: 3, backoff_s: [0.2], fetch_batch: 8, fetch_timeout_s: 0.3}\n"


def reward_yaml(model: Path | str, ckpt: Path, role: str = "all", backend: str = "llm", votes: int = 2,
                max_new_tokens: int = 6, extra: str = "") -> str:
    return (CONSUMER + f"reward: {{role: {role}, backend: {backend}, votes: {votes}, max_new_tokens: {max_new_tokens}, "
            f"prompt_chars: 200, field_chars: 120, checkpoint_dir: '{ckpt}', model: {{source: '{model}'}}, "
            f"ppo: {{lr: 0.01}}{extra}}}\n")


def trajectory(job: str = "r0/t", seed: int = 7) -> Trajectory:
    """One recorded FrozenLake rollout with oracle labels (id ``<job>/0``)."""
    spec = judge_specs(FamilyConfig(type="gym_text", knobs={"size": 4, "hole_prob": 0.2}), 1, seed)[0]
    (t,) = record_group(FrozenLakeFamily(), spec, 1, 0.5, random.Random(seed), job)
    return t


def judge_steps(address: str, request: reward_pb2.JudgeStepsRequest) -> reward_pb2.JudgeStepsResponse:
    stub = reward_pb2_grpc.RewardModelStub(grpc.insecure_channel(address))
    return stub.JudgeSteps(request, timeout=60)


async def test_a_trajectory_published_twice_is_judged_once(spawn_service, tiny_judge_dir, tmp_path, bus) -> None:
    reward = spawn_service("reward", reward_yaml(tiny_judge_dir, tmp_path / "ckpt", role="judge")
                           + "nats: {duplicate_window_s: 1.0}\n")
    t = trajectory()
    # Same trajectory id, two stream messages (a producer retry after its msg-id window, a replay...).
    await bus.publish(Subjects.TRAJ_COMPLETED, t, msg_id="first")
    await bus.publish(Subjects.TRAJ_COMPLETED, t, msg_id="second")
    (judged,) = await events(bus, Subjects.TRAJ_JUDGED, "TRAJ", 1, JudgedTrajectory, timeout_s=60)
    await asyncio.sleep(1.5)  # past the stream's duplicate window: only the judged mark can stop a re-publish
    await bus.publish(Subjects.TRAJ_COMPLETED, t, msg_id="third")
    deadline = time.monotonic() + 30
    while sum(m["msg"] in ("judged", "already judged; skipped") for m in reward.log_messages()) < 3:
        assert time.monotonic() < deadline, reward.log_path.read_text()[-2000:]
        await asyncio.sleep(0.2)
    assert any(m["msg"] == "already judged; skipped" for m in reward.log_messages())  # the third, at least
    all_judged = await events(bus, Subjects.TRAJ_JUDGED, "TRAJ", 10, JudgedTrajectory, timeout_s=2)
    assert len(all_judged) == 1

    assert judged.trajectory == t and judged.reward_model_version == 0
    assert [j.step_index for j in judged.judgements] == [s.index for s in t.steps]
    for step, j in zip(t.steps, judged.judgements):
        assert len(j.votes) == 2 and j.prompt_token_ids and step.next_observation[:20] in j.judge_prompt
        assert j.mean_vote == pytest.approx(sum(v.value for v in j.votes) / 2)
        for v in j.votes:
            assert v.value in (-1, 0, 1) and 0 < len(v.response_token_ids) == len(v.behaviour_logprobs) <= 6


async def test_evaluation_rollouts_pass_through_unjudged_unless_judge_eval_is_on(spawn_service, tiny_judge_dir,
                                                                                 tmp_path, bus) -> None:
    spawn_service("reward", reward_yaml(tiny_judge_dir, tmp_path / "ckpt", role="judge"))
    held, train = trajectory("r0/h", seed=8), trajectory("r0/t", seed=9)
    held.split = "heldout"
    await bus.publish(Subjects.TRAJ_COMPLETED, held, msg_id="h")
    await bus.publish(Subjects.TRAJ_COMPLETED, train, msg_id="t")
    by_split = {j.trajectory.split: j for j in
                await events(bus, Subjects.TRAJ_JUDGED, "TRAJ", 2, JudgedTrajectory, timeout_s=60)}
    assert [j.step_index for j in by_split["heldout"].judgements] == [s.index for s in held.steps]
    assert [len(j.votes) for j in by_split["heldout"].judgements] == [0] * len(held.steps)
    assert [len(j.votes) for j in by_split["train"].judgements] == [2] * len(train.steps)


async def test_trainer_trains_a_round_and_judges_vote_with_the_new_version(spawn_service, tiny_judge_dir, tmp_path,
                                                                          bus) -> None:
    ckpt = tmp_path / "ckpt"
    reward = spawn_service("reward", reward_yaml(tiny_judge_dir, ckpt, votes=1))
    request = reward_pb2.JudgeStepsRequest(steps=steps_of(trajectory())[:1], temperature=0.0001)
    before = judge_steps(reward.address, request)
    assert before.model_version == 0
    versions = await VersionStore.open(bus)
    assert (await versions.latest("reward")).trained_on_round == -1  # version 0 announced by the trainer

    gen = HFGenerator(str(tiny_judge_dir))
    prompt = gen.encode_chat([{"role": "user", "content": before.judgements[0].judge_prompt}])
    target = gen.tokenizer.encode("\\boxed{1}", add_special_tokens=False) + [gen.tokenizer.eos_token_id]
    samples = [TrainingSample(sample_id=f"x/{i}/0", prompt_token_ids=prompt, response_token_ids=target,
                              advantage=1.0) for i in range(8)]
    await bus.publish(Subjects.SAMPLES_REWARD, RewardSampleBatch(batch_id="r0/a/reward", round=0, samples=samples,
                                                                 jobs_in_round=1), msg_id="r0/a/reward")
    announced = (await events(bus, Subjects.MODELS_REWARD, "MODELS", 2, ModelVersion, timeout_s=60))[-1]
    assert announced.role == MODEL_ROLE_REWARD_MODEL
    assert (announced.version, announced.trained_on_round) == (1, 0) and Path(announced.uri) == ckpt / "reward" / "v1"
    deadline = time.monotonic() + 30
    while (after := judge_steps(reward.address, request)).model_version < 1:
        assert time.monotonic() < deadline
        await asyncio.sleep(0.2)
    assert after.judgements[0].votes[0].response_token_ids != before.judgements[0].votes[0].response_token_ids
    assert reward.proc.poll() is None  # same process
    messages = [m["msg"] for m in reward.log_messages()]
    served = [m for m in reward.log_messages() if m["msg"] == "serving new version"]
    assert "trained" in messages and [(m["role"], m["version"]) for m in served] == [("reward", 1)]


def test_a_greedy_request_votes_greedily_whatever_the_judges_temperature(spawn_service, tiny_judge_dir,
                                                                         tmp_path) -> None:
    """The judge's configured temperature is 0.8: a request with ``greedy`` gets m identical votes
    (token for token) on every step, one without it gets sampled votes that differ."""
    reward = spawn_service("reward", reward_yaml(tiny_judge_dir, tmp_path / "ckpt", votes=4, max_new_tokens=8,
                                                 extra=", temperature: 0.8"))
    steps = steps_of(trajectory())[:3]
    greedy = judge_steps(reward.address, reward_pb2.JudgeStepsRequest(steps=steps, greedy=True))
    for j in greedy.judgements:
        assert len({tuple(v.response_token_ids) for v in j.votes}) == 1, [list(v.response_token_ids) for v in j.votes]
    again = judge_steps(reward.address, reward_pb2.JudgeStepsRequest(steps=steps, greedy=True))
    assert [[list(v.response_token_ids) for v in j.votes] for j in again.judgements] == \
        [[list(v.response_token_ids) for v in j.votes] for j in greedy.judgements]
    sampled = judge_steps(reward.address, reward_pb2.JudgeStepsRequest(steps=steps))  # 0 = the judge's 0.8
    assert any(len({tuple(v.response_token_ids) for v in j.votes}) > 1 for j in sampled.judgements)
    with pytest.raises(grpc.RpcError) as err:
        judge_steps(reward.address, reward_pb2.JudgeStepsRequest(steps=steps, greedy=True, temperature=0.5))
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "greedy" in (err.value.details() or "")


async def test_oracle_backend_votes_labels_and_announces_a_version_per_round(spawn_service, tmp_path, bus) -> None:
    reward = spawn_service("reward", reward_yaml("", tmp_path / "ckpt", backend="oracle", votes=3))
    t = trajectory(job="r0/o")
    await bus.publish(Subjects.TRAJ_COMPLETED, t, msg_id=t.trajectory_id)
    (judged,) = await events(bus, Subjects.TRAJ_JUDGED, "TRAJ", 1, JudgedTrajectory, timeout_s=30)
    sign = {1: 1, 2: -1}
    assert [[v.value for v in j.votes] for j in judged.judgements] == [[sign[s.oracle_label]] * 3 for s in t.steps]
    for job in ("r0/a", "r0/b"):  # two jobs in round 0: one version "trained on round 0" after both
        await bus.publish(Subjects.SAMPLES_REWARD, RewardSampleBatch(batch_id=f"{job}/reward", round=0,
                                                                     jobs_in_round=2), msg_id=f"{job}/reward")
    versions = await VersionStore.open(bus)
    deadline = time.monotonic() + 30
    while (latest := await versions.latest("reward")).version < 1:
        assert time.monotonic() < deadline
        await asyncio.sleep(0.2)
    assert (latest.version, latest.trained_on_round, latest.uri) == (1, 0, "oracle:")
    response = judge_steps(reward.address, reward_pb2.JudgeStepsRequest(steps=steps_of(t)))
    assert response.model_version == 0 and len(response.judgements[0].votes) == 3
    assert not (tmp_path / "ckpt").exists()  # nothing to checkpoint


def test_smollm2_judges_zero_shot_through_judge_steps(spawn_service, tmp_path) -> None:
    reward = spawn_service("reward", reward_yaml("smollm2", tmp_path / "ckpt", role="judge", votes=2,
                                                 max_new_tokens=12))
    stub = reward_pb2_grpc.RewardModelStub(grpc.insecure_channel(reward.address))
    response = stub.JudgeSteps(reward_pb2.JudgeStepsRequest(steps=steps_of(trajectory())[:1]), timeout=300)
    (j,) = response.judgements
    assert len(j.votes) == 2 and "Was this step good?" in j.judge_prompt and len(j.prompt_token_ids) > 100
    assert j.mean_vote == pytest.approx(sum(v.value for v in j.votes) / 2)
    for v in j.votes:  # valid or not: a vote with its text and tokens
        assert v.value in (-1, 0, 1) and v.response and 0 < len(v.response_token_ids) == len(v.behaviour_logprobs) <= 12
