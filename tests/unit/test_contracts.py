"""The protobuf contracts: stubs are fresh, import under the package path, field numbers pinned."""

from __future__ import annotations

import shutil
from pathlib import Path

from services.common import protogen


def test_committed_stubs_are_fresh() -> None:
    assert protogen.stale_files() == []


def test_stale_stub_is_detected(tmp_path: Path) -> None:
    shutil.copytree(protogen.ROOT / "proto", tmp_path / "proto")
    shutil.copytree(protogen.ROOT / "rlanything", tmp_path / "rlanything",
                    ignore=shutil.ignore_patterns("__pycache__"))
    events = tmp_path / "proto" / "rlanything" / "v1" / "events.proto"
    events.write_text(events.read_text().replace("  double published_unix_s = 3;\n}",
                                                 "  double published_unix_s = 3;\n  int32 added = 4;\n}"))
    problems = protogen.stale_files(tmp_path)
    assert "rlanything/v1/events_pb2.py: differs from its .proto" in problems
    assert not any("env_pb2.py" in p for p in problems)


def test_services_are_defined() -> None:
    from rlanything.v1 import critic_pb2, env_pb2, policy_pb2, reward_pb2

    methods = {
        env_pb2.DESCRIPTOR.services_by_name["Environment"]: {"ListTasks", "Reset", "Step", "Close"},
        policy_pb2.DESCRIPTOR.services_by_name["Policy"]: {"Generate", "GenerateStream"},
        reward_pb2.DESCRIPTOR.services_by_name["RewardModel"]: {"JudgeSteps"},
        critic_pb2.DESCRIPTOR.services_by_name["Critic"]: {"GetRoundReport", "GetTaskStats"},
    }
    for service, expected in methods.items():
        assert {m.name for m in service.methods} == expected
        assert service.full_name.startswith("rlanything.v1.")


def test_event_field_numbers_are_pinned() -> None:
    """Field numbers are the wire contract: renumbering breaks every running peer."""
    from rlanything.v1 import events_pb2

    def numbers(msg: type) -> dict[str, int]:
        return {f.name: f.number for f in msg.DESCRIPTOR.fields}

    assert numbers(events_pb2.TaskRef) == {"slot_id": 1, "version": 2, "family": 3}
    traj = numbers(events_pb2.Trajectory)
    assert (traj["trajectory_id"], traj["steps"], traj["outcome"], traj["policy_version"]) == (1, 8, 9, 11)
    step = numbers(events_pb2.TrajectoryStep)
    assert (step["prompt"], step["response_token_ids"], step["behaviour_logprobs"], step["oracle_label"]) == (2, 5, 6, 12)
    assert numbers(events_pb2.Vote) == {"value": 1, "response": 2, "response_token_ids": 3, "behaviour_logprobs": 4}
    sample = numbers(events_pb2.TrainingSample)
    assert (sample["advantage"], sample["model_version"]) == (5, 6)
    assert numbers(events_pb2.ModelVersion)["sha256"] == 4


def test_a_trajectory_survives_the_wire_into_training_samples() -> None:
    """Serialized as the bus sends it, a judged group decodes, passes the critic's checks, and
    its samples keep the exact token ids and behaviour log-probs (the PPO ratio's denominator)."""
    from rlanything.v1 import events_pb2

    from services.common.config import CriticServiceConfig
    from services.critic.group_eval import _policy_samples
    from services.critic.validation import check_judged

    def judged(index: int, outcome: int, logprobs: list[float]) -> events_pb2.JudgedTrajectory:
        step = events_pb2.TrajectoryStep(index=0, prompt_token_ids=[1, 2], response_token_ids=[5, 6],
                                         behaviour_logprobs=logprobs, oracle_label=events_pb2.STEP_LABEL_GOOD,
                                         valid=True)
        traj = events_pb2.Trajectory(job_id="job-1", trajectory_id=f"job-1/{index}", rollout_index=index, group_size=2,
                                     outcome=outcome, steps=[step], policy_version=3,
                                     task=events_pb2.TaskRef(family="gym_text", slot_id="s0"))
        votes = [events_pb2.Vote(value=outcome)]
        return events_pb2.JudgedTrajectory(trajectory=traj, judgements=[events_pb2.StepJudgement(step_index=0, votes=votes)])

    sent = [judged(0, 1, [-0.5, -1.25]), judged(1, -1, [-0.75, -2.0])]
    received = [events_pb2.JudgedTrajectory.FromString(j.SerializeToString()) for j in sent]
    for r in received:
        check_judged(r)
    samples, zero, _agreement = _policy_samples(received, CriticServiceConfig())
    assert zero == 0
    assert [(list(x.response_token_ids), list(x.behaviour_logprobs), x.advantage, x.model_version) for x in samples] == [
        ([5, 6], [-0.5, -1.25], 1.0, 3), ([5, 6], [-0.75, -2.0], -1.0, 3)]
