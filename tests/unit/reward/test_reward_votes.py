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
    ("\\boxed{1.0}", 0),
    ("\\boxed{good}", 0),                                        # words
    ("\\boxed{yes}", 0),
    ("\\boxed{-1 (bad)}", 0),
    ("\\boxed{+ 1}", 0),
    ("\\boxed{\u22121}", 0),                                     # unicode minus
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
