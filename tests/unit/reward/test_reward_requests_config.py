"""JudgeSteps request validation, KV mark keys, and the reward section of the run config."""

from __future__ import annotations

import pytest

from rlanything.v1.reward_pb2 import JudgeStepsRequest, StepToJudge
from services.common.config import RewardServiceConfig, load_config
from services.common.errors import ConfigError, InvalidArgumentError
from services.reward.grpc_service import MAX_STEPS, validate_request
from services.reward.worker import MARK_TTL_S, mark_key

STEP = StepToJudge(prompt="Now: here", response="\\boxed{1}", next_observation="There.")


def test_defaults_fill_zero_votes_and_temperature() -> None:
    assert validate_request(JudgeStepsRequest(steps=[STEP]), 3, 0.8) == (3, pytest.approx(0.8))
    assert validate_request(JudgeStepsRequest(steps=[STEP], votes=5, temperature=0.25), 3, 0.8) == (5, 0.25)


def test_greedy_means_temperature_zero_whatever_the_default() -> None:
    assert validate_request(JudgeStepsRequest(steps=[STEP], greedy=True), 3, 0.8) == (3, 0.0)
    with pytest.raises(InvalidArgumentError, match="greedy.*temperature 0.5"):
        validate_request(JudgeStepsRequest(steps=[STEP], greedy=True, temperature=0.5), 3, 0.8)


@pytest.mark.parametrize("request_, message", [
    (JudgeStepsRequest(), "steps must hold at least one step"),
    (JudgeStepsRequest(steps=[STEP], votes=-1), "votes must be in 0..32 (0 = the service default), got -1"),
    (JudgeStepsRequest(steps=[STEP], votes=33), "votes must be in 0..32 (0 = the service default), got 33"),
    (JudgeStepsRequest(steps=[STEP], temperature=-0.5), "temperature must be >= 0 (0 = the service default), got -0.5"),
    (JudgeStepsRequest(steps=[STEP, StepToJudge(prompt="  ")]), "steps[1].prompt is empty"),
    (JudgeStepsRequest(steps=[STEP] * (MAX_STEPS + 1)), f"at most {MAX_STEPS} steps per request"),
])
def test_bad_requests_name_the_field(request_: JudgeStepsRequest, message: str) -> None:
    with pytest.raises(InvalidArgumentError) as err:
        validate_request(request_, 3, 0.8)
    assert message in str(err.value)


def test_mark_keys_are_valid_nats_keys() -> None:
    assert mark_key("r0/gym_text-size4-s3/v0/2") == "r0/gym_text-size4-s3/v0/2"
    odd = mark_key("job:1 #2")
    assert odd.startswith("sha256.") and odd == mark_key("job:1 #2") and odd != mark_key("job:1 #3")
    assert mark_key(".x").startswith("sha256.")
    # found by fuzzing: a 200,000-character id of valid characters became a 200,000-character
    # subject, and NATS closed the judge's connection ("maximum control line exceeded")
    long = mark_key("a" * 200_000)
    assert long.startswith("sha256.") and len(long) < 100 and long != mark_key("a" * 199_999)
    assert MARK_TTL_S == 7 * 24 * 3600.0  # as long as the TRAJ log keeps a trajectory


def test_reward_config_defaults_and_k8s_role_names() -> None:
    cfg = load_config(None, []).reward
    assert (cfg.role, cfg.backend, cfg.votes, cfg.temperature) == ("all", "llm", 3, 0.8)
    assert (cfg.sft.label_noise, cfg.max_new_tokens, cfg.judged_bucket) == (0.3, 48, "reward_judged")
    assert load_config(None, ["reward.role=judge"]).reward.role == "judge"
    assert load_config(None, ["reward.role=trainer", "reward.backend=oracle"]).reward.backend == "oracle"
    assert load_config(None, ["reward.frozen=true"]).reward.frozen is True and cfg.frozen is False


@pytest.mark.parametrize("override, message", [
    ("reward.votes=0", "reward.votes"),
    ("reward.votes=33", "reward.votes"),
    ("reward.temperature=-1", "reward.temperature"),
    ("reward.role=worker", "reward.role"),
    ("reward.backend=gpt", "reward.backend"),
    ("reward.sft.label_noise=0.7", "reward.sft.label_noise"),
    ("reward.judged_bucket=a.b", "reward.judged_bucket"),
    ("reward.backend=openai", "backend 'openai' needs model.openai_base_url"),
    ("reward.model.backend=openai", "use backend: openai"),
])
def test_reward_config_rejects_bad_values(override: str, message: str) -> None:
    with pytest.raises(ConfigError) as err:
        load_config(None, [override])
    assert message in str(err.value)


def test_openai_judge_config() -> None:
    cfg = RewardServiceConfig(backend="openai", model={"openai_base_url": "http://h:8000/v1", "openai_model": "m"})
    assert cfg.model.openai_base_url == "http://h:8000/v1"
