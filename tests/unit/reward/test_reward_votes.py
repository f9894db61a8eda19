"""Strict vote parsing and aggregation of the judge's answers."""

from __future__ import annotations

import pytest

from rlanything.v1.events_pb2 import STEP_LABEL_BAD, STEP_LABEL_GOOD, STEP_LABEL_UNSPECIFIED
from services.reward.votes import label_vote, majority_vote, mean_vote, parse_vote


@pytest.mark.parametrize("text, value", [
    ("\\boxed{1}", 1),
    ("\\boxed{+1}", 1),
    ("\\boxed{-1}", -1),
    ("The agent walks toward the goal. \\boxed{ 1 }", 1),
    ("\\boxed{\n-1\t}", -1),
    ("first \\boxed{-1}, on reflection \\boxed{1}", 1),          # several boxes: the last counts
    ("first \\boxed{1}, on reflection \\boxed{-1}", -1),
    ("first \\boxed{1}, then \\boxed{-1", 0),                     # the last box is unterminated
    ("no verdict at all", 0),                                    # missing box
    ("", 0),
    ("\\boxed{}", 0),
    ("\\boxed{0}", 0),
    ("\\boxed{2}", 0),
    ("\\boxed{-2}", 0),
    ("\\boxed{1/2}", 0),                                         # fractions
    ("\\boxed{\\frac{1}{2}}", 0),
    ("\\boxed{0.5}", 0),
    ("\\boxed{1.0}", 1),                                        # numeric forms of ±1 are normalised
    ("\\boxed{-1.0}", -1),
    ("\\boxed{+1.00}", 1),
    ("\\boxed{1.}", 0),
    ("\\boxed{good}", 0),                                        # words
    ("\\boxed{yes}", 0),
    ("\\boxed{-1 (bad)}", 0),
    ("\\boxed{+ 1}", 0),
    ("\\boxed{\u22121}", -1),                                    # unicode minus sign (U+2212) means minus
    ("\\boxed{\uff0b1}", 1),                                     # fullwidth plus
    ("\\boxed{\u22121.0}", -1),
    ("\\boxed{11}", 0),
    ("boxed{1}", 0),                                             # no backslash: not a box
])
def test_parse_vote_is_strict(text: str, value: int) -> None:
    assert parse_vote(text) == value


def test_mean_vote_counts_invalid_votes_as_zero() -> None:
    assert mean_vote([1, 1, 1]) == 1.0
    assert mean_vote([1, -1, 0]) == 0.0
    assert mean_vote([1, 0, 0]) == pytest.approx(1 / 3)
    assert mean_vote([-1, -1, 1]) == pytest.approx(-1 / 3)
    assert mean_vote([]) == 0.0
    with pytest.raises(ValueError, match="vote values must be"):
        mean_vote([2])


def test_majority_vote_and_ties() -> None:
    assert majority_vote([1, 1, -1]) == 1
    assert majority_vote([-1, 0, 0]) == -1
    assert majority_vote([1, -1, 0]) == 0
    assert majority_vote([0, 0, 0]) == 0


def test_label_vote() -> None:
    assert label_vote(STEP_LABEL_GOOD) == 1
    assert label_vote(STEP_LABEL_BAD) == -1
    assert label_vote(STEP_LABEL_UNSPECIFIED) == 0


def test_a_verdict_quoted_from_the_agent_is_no_vote() -> None:
    """Regression (field bugs, 6): a judge that only echoes the step it was shown (with the agent's
    box in it) used to vote +1; the prompt now shows agent boxes defanged, and only a box of the
    judge's own counts."""
    from services.reward.judge_prompt import judge_chat

    chat = judge_chat("Reach G.", "Now: A F G\nActions:\n1. left\n2. right\nAnswer as \\boxed{i}.", "\\boxed{1}",
                      "You moved right.")
    shown = chat[-1]["content"]
    assert "\\boxed{" not in shown and "boxed{1}" in shown  # the agent's answer is still shown
    assert parse_vote(f"The agent answered: {shown}") == 0
    assert parse_vote(f"{shown} My verdict: \\boxed{{-1}}") == -1
