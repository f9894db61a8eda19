"""The single-turn episode base (`SingleTurnEpisode`): one scored answer, then nothing changes."""

from __future__ import annotations

import pytest

from services.env.families.base import SingleTurnEpisode, StepResult


class Parity(SingleTurnEpisode):
    """Is 7 odd? Answer "yes" (1), "maybe" scores 0.5, anything else 0."""

    def __init__(self) -> None:
        super().__init__("Answer the question.", "Is 7 odd?")

    def score(self, action: str) -> float:
        return {"yes": 1.0, "maybe": 0.5}.get(action, 0.0)

    def gold_answer(self) -> str:
        return "yes"


@pytest.mark.parametrize(("answer", "result"), [
    ("yes", StepResult("Correct.", (), 1.0, True, True, 0)),
    ("maybe", StepResult("Incorrect.", (), 0.5, True, False, None)),   # partial credit is no win
    ("no", StepResult("Incorrect.", (), 0.0, True, False, None)),
])
def test_the_first_step_is_the_scored_answer_and_ends_the_episode(answer: str, result: StepResult) -> None:
    episode = Parity()
    assert (episode.single_turn, episode.admissible_actions, episode.oracle_plan()) == (True, (), ["yes"])
    assert episode.step(answer) == result
    assert episode.oracle_plan() == []
    assert episode.step("yes") == StepResult("The question was already answered.", (), 0.0, True, False, None)
