"""A response cut by max_new_tokens is recorded as truncated on its step (fake generator, real env)."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Sequence

from rlanything.v1.events_pb2 import DIRECTION_HARDER, CandidateCheck, RolloutJob, SamplingParams, TaskRef

from services.common.models.generation import Chat, Completion, Generator, Sampling
from services.env.families.base import TaskSpec
from services.env.families.frozenlake import FrozenLakeFamily
from services.offline.local_env import LocalEnvClient
from services.policy.rollout import run_group

SPEC = TaskSpec("gym_text", {"size": 4, "hole_prob": 0.2}, 3)


class Scripted(Generator):
    """Answers from a script: (text, finish_reason) per call."""

    def __init__(self, script: list[tuple[str, str]]) -> None:
        self.script = list(script)

    def generate(self, chats: Sequence[Chat], sampling: Sampling, cancel=None, seeds=None) -> list[Completion]:
        text, finish = self.script.pop(0)
        return [Completion(text, (1,), (2, 3), (-0.1, -0.2), finish) for _ in chats]


def test_a_response_cut_by_max_new_tokens_is_marked_on_its_step() -> None:
    env = LocalEnvClient({"gym_text": FrozenLakeFamily()}, lambda ref: SPEC)
    job = RolloutJob(job_id="j", task=TaskRef(slot_id="s", family="gym_text"), group_size=1, seeds=[0], max_steps=3,
                     sampling=SamplingParams(temperature=0.0, max_new_tokens=2))
    gen = Scripted([("I think \\boxed{", "length"), ("\\boxed{1}", "stop"), ("\\boxed{2}", "stop")])
    (t,) = asyncio.run(run_group(job, env, gen))
    assert [(s.valid, s.response_truncated) for s in t.steps][:2] == [(False, True), (True, False)]


def test_a_candidate_job_passes_its_acceptance_check_on_to_every_trajectory() -> None:
    env = LocalEnvClient({"gym_text": FrozenLakeFamily()}, lambda ref: SPEC)
    check = CandidateCheck(direction=DIRECTION_HARDER, parent_acc=0.875, band_low=0.2, band_high=0.8)
    job = RolloutJob(job_id="j", task=TaskRef(slot_id="s", family="gym_text"), group_size=2, seeds=[0, 1],
                     max_steps=1, sampling=SamplingParams(temperature=0.0, max_new_tokens=4), is_candidate=True,
                     candidate_check=check)
    trajectories = asyncio.run(run_group(job, env, Scripted([("\\boxed{1}", "stop")])))
    assert [(t.is_candidate, t.candidate_check) for t in trajectories] == [(True, check)] * 2
    drawn = RolloutJob(job_id="k", task=TaskRef(slot_id="s", family="gym_text"), group_size=1, seeds=[0], max_steps=1,
                       sampling=SamplingParams(temperature=0.0, max_new_tokens=4))
    (t,) = asyncio.run(run_group(drawn, env, Scripted([("\\boxed{1}", "stop")])))
    assert not t.HasField("candidate_check")


def test_a_job_asking_for_a_version_far_ahead_of_every_announcement_is_unreachable() -> None:
    """Found by fuzzing: a job asking for policy version 34 when 1 was the newest held the only
    rollout worker for 5 deliveries x 120 s of version wait before reaching the dead letters."""
    from services.policy.rollout import unreachable_version

    assert unreachable_version(34, 1) == "asks for policy version 34, but the newest announced is 1"
    assert unreachable_version(2, 1) is None  # the latest record may trail the announcement by one
    assert unreachable_version(1, None) is None and unreachable_version(2, None) is not None
    assert unreachable_version(0, None) is None


def test_every_step_records_the_policy_version_that_generated_it() -> None:
    """Weights are swapped in place while an episode runs (asynchronous mode): each step's samples
    must carry their own generating version, not the episode's last (the staleness bound uses it)."""
    env = LocalEnvClient({"gym_text": FrozenLakeFamily()}, lambda ref: SPEC)
    job = RolloutJob(job_id="j", task=TaskRef(slot_id="s", family="gym_text"), group_size=1, seeds=[0], max_steps=3,
                     sampling=SamplingParams(temperature=0.0, max_new_tokens=4))

    class Swapping(Scripted):
        def generate(self, chats, sampling, cancel=None, seeds=None):
            out = [dataclasses.replace(c, model_version=self.model_version)
                   for c in super().generate(chats, sampling, cancel, seeds)]
            self.model_version += 1  # a new version lands right after this call
            return out

    gen = Swapping([("\\boxed{9}", "stop")] * 3)  # an invalid answer each step: the episode runs 3 steps
    gen.model_version = 4
    (t,) = asyncio.run(run_group(job, env, gen))
    assert [s.served_version for s in t.steps] == [4, 5, 6]   # not the version read after the call (7)
    assert t.policy_version == 4                              # the oldest: the trajectory's staleness
