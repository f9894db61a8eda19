"""The reward model as a unit-test writer (reward.kind: unit_tests): m tests per answer, one per vote,
written from the task text; a vote is +1 when it holds a test in the format, 0 when not."""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from pydantic import ValidationError

from rlanything.v1.reward_pb2 import StepToJudge
from services.common.config import RewardServiceConfig, RunConfig
from services.common.models.generation import Chat, Completion, Generator, Sampling
from services.reward.judges import JudgeSettings, UnitTestWriter


class Scripted(Generator):
    """Answers the scripted texts in turn; records the chats."""

    def __init__(self, texts: list[str]) -> None:
        self.texts = list(texts)
        self.chats: list[Chat] = []
        self.model_version = 0

    def generate(self, chats: Sequence[Chat], sampling: Sampling, cancel=None, seeds=None) -> list[Completion]:
        self.chats += chats
        return [Completion(self.texts.pop(0), (1, 2), (7, 8), (-0.5, -0.25), "stop") for _ in chats]

    def load_version(self, path: str, version: int) -> None:
        self.model_version = version


def test_each_vote_is_one_test_written_from_the_task_text():
    gen = Scripted(["\\boxed{2 => 7}", "no test", "\\boxed{0 => 1}", "\\boxed{5 =>}"])
    writer = UnitTestWriter(gen, JudgeSettings(max_batch=3))
    steps = [StepToJudge(step_id="j/0/0", task_text="Read x, print 3x+1.", prompt="p", response="r"),
             StepToJudge(step_id="j/1/0", task_text="Read x, print x-2.", prompt="p", response="r")]
    a, b = writer.judge(steps, 2, 0.8)
    assert [v.value for v in a.votes] == [1, 0] and [v.value for v in b.votes] == [1, 0]
    assert a.votes[0].response == "\\boxed{2 => 7}" and list(a.votes[0].response_token_ids) == [7, 8]
    assert a.mean_vote == 0.5 and a.judge_prompt.startswith("Read x, print 3x+1.")
    assert "\\boxed{INPUT => OUTPUT}" in gen.chats[0][-1]["content"] and len(gen.chats) == 4


def test_the_kind_must_match_on_both_sides_and_name_what_is_missing():
    with pytest.raises(ValidationError, match="not backend 'oracle'"):
        RewardServiceConfig(kind="unit_tests", backend="oracle")
    assert RewardServiceConfig(kind="unit_tests").model.source == ""  # the cold-started tiny writer
    code = {"families": [{"type": "code", "knobs": {"ops": 1}}]}
    writer = {"kind": "unit_tests", "model": {"source": "some/model"}}
    with pytest.raises(ValidationError, match="critic.unit_tests is False"):
        RunConfig(env=code, reward=writer)
    with pytest.raises(ValidationError, match="env.families also has \\['gym_text'\\]"):
        RunConfig(env={"families": [*code["families"], {"type": "gym_text", "knobs": {"size": 4, "hole_prob": 0}}]},
                  reward=writer, critic={"unit_tests": True})
    assert RunConfig(env=code, reward=writer, critic={"unit_tests": True}).reward.kind == "unit_tests"
