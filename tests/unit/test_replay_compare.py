"""The replay comparison (pure): step accuracy against the oracle for both judges, identical votes,
sign agreement, outcome accuracy and invalid votes, per family and overall."""

from __future__ import annotations

import math

from pathlib import Path

from services.run.replay import StepPair, compare, report_markdown, vote_diffs


def test_figures_per_family_and_overall() -> None:
    pairs = [
        StepPair("gym_text", "t1", +1, +1, (1, 1, 1), (1, 1, 1)),      # both right, identical
        StepPair("gym_text", "t1", -1, +1, (1, 1, -1), (-1, -1, 0)),   # stored wrong, replayed right
        StepPair("gym_text", "t2", 0, -1, (1, -1, 0), (-1, -1, -1)),   # no label; S̄ 0 vs −1
        StepPair("textworld", "t3", +1, -1, (0, 0, 0), (1, 0, 0)),     # stored S̄ = 0 counts wrong
    ]
    f = compare(pairs)
    g = f["gym_text"]
    assert g["steps"] == 3 and g["labelled_steps"] == 2
    assert g["step_accuracy_stored"] == 0.5 and g["step_accuracy_replayed"] == 1.0
    assert g["identical_votes"] == 1 / 3 and g["sign_agreement"] == 1 / 3
    # t1 (won): stored signs +1,+1 → +1 right, replayed +1,−1 → 0 wrong; t2 (lost): stored 0 wrong, replayed −1 right
    assert g["outcome_accuracy_stored"] == 0.5 and g["outcome_accuracy_replayed"] == 0.5
    assert g["invalid_vote_rate_replayed"] == 1 / 9
    t = f["textworld"]
    assert t["step_accuracy_stored"] == 0.0 and t["step_accuracy_replayed"] == 1.0
    assert f["all"]["steps"] == 4 and f["all"]["step_accuracy_replayed"] == 1.0


def test_no_labels_means_no_accuracy() -> None:
    f = compare([StepPair("gymnasium", "t", 0, 1, (1,), (1,))])
    assert math.isnan(f["all"]["step_accuracy_stored"]) and f["all"]["identical_votes"] == 1.0


def test_the_votes_that_differ_are_listed_step_by_step() -> None:
    pairs = [
        StepPair("gym_text", "t1", +1, +1, (1, 1, 1), (1, 1, 1), step=0),     # identical: not listed
        StepPair("gym_text", "t1", -1, +1, (1, 1, -1), (1, -1, 0), step=1),   # votes 2 and 3 differ
        StepPair("textworld", "t3", 0, -1, (0, 0), (0, 0, 1), step=4),         # the replay cast a third vote
    ]
    diffs = vote_diffs(pairs)
    assert [(d.trajectory_id, d.step, d.differing) for d in diffs] == [("t1", 1, (2, 3)), ("t3", 4, (3,))]
    text = report_markdown(compare(pairs), Path("runs/r"), "the judge at x", pairs)
    section = text[text.index("## Votes that differ"):]
    assert "2 of 3 steps" in section
    assert "| t1 | 1 | gym_text | -1 | +1 +1 -1 | +1 -1 0 | 2, 3 |" in section
    assert "| t3 | 4 | textworld | 0 | 0 0 | 0 0 +1 | 3 |" in section
    assert "| t1 | 0 |" not in section


def test_a_long_diff_is_cut_with_a_count() -> None:
    pairs = [StepPair("f", f"t{i}", 1, 1, (1,), (-1,), step=0) for i in range(5)]
    text = report_markdown(compare(pairs), Path("runs/r"), "x", pairs, max_diff_rows=2)
    assert "| t1 | 0 |" in text and "| t2 | 0 |" not in text and "3 more steps differ" in text
