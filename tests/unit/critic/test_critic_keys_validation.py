"""KV keys of the critic (injective escaping) and the checks that dead-letter bad trajectories."""

from __future__ import annotations

import re

import pytest

from services.common.errors import InvalidEventError
from services.critic.keys import escape_id, group_key, report_key, stats_key
from services.critic.validation import check_judged, check_same_group
from tests.unit.critic.critic_builders import judged

VALID_KEY = re.compile(r"^[-/_=.a-zA-Z0-9]+$")  # nats.py's KV key rule


def test_escaped_ids_are_valid_single_tokens_and_injective() -> None:
    ids = ["r0/gym_text/train-0000/v2", "r0.gym_text.train-0000.v2", "r0=2Fgym", "r0/gym", "ünï code", "a_b-c"]
    escaped = [escape_id(i) for i in ids]
    assert len(set(escaped)) == len(ids)
    assert all(VALID_KEY.match(e) and "." not in e and "/" not in e for e in escaped)
    assert escape_id("r0/gym_text/train-0000/v2") == "r0=2Fgym_text=2Ftrain-0000=2Fv2"
    assert escape_id("a_b-c") == "a_b-c"
    assert group_key("r1/x", 3) == "r1=2Fx.3"
    assert report_key("r1/x") == "report.r1=2Fx" and stats_key("r1/x") == "stats.r1=2Fx"
    with pytest.raises(ValueError, match="empty id"):
        escape_id("")


def test_well_formed_trajectories_pass() -> None:
    check_judged(judged("j", 3, -1, [[1, 0, -1], []]))
    negative = judged("j", 3, -1, [[1]])
    negative.trajectory.steps[0].env_reward = -100.0   # a Gymnasium penalty (CliffWalking): finite, not code
    check_judged(negative)
    check_judged(judged("j", 0, 1, []))


@pytest.mark.parametrize(("mutate", "message"), [
    (lambda j: setattr(j.trajectory, "job_id", ""), "job_id and trajectory.trajectory_id are required"),
    (lambda j: j.trajectory.task.ClearField("slot_id"), "task.slot_id is required"),
    (lambda j: setattr(j.trajectory, "group_size", 0), "group_size must be >= 1, got 0"),
    (lambda j: setattr(j.trajectory, "rollout_index", 4), r"rollout_index must be in \[0, 4\), got 4"),
    (lambda j: setattr(j.trajectory, "outcome", 0), r"outcome must be \+1 \(won\) or -1 \(lost\), got 0"),
    (lambda j: j.judgements.pop(), "2 steps but 1 judgements; the reward service must judge every step"),
    (lambda j: setattr(j.judgements[1], "step_index", 0), "position 1 holds step 1 judged as step 0"),
    (lambda j: setattr(j.judgements[0].votes[0], "value", 2), r"step 0 has vote values \[2\]"),
    # rewards are refused, never clamped into training: non-finite anywhere, outside [0, 1] for code
    (lambda j: setattr(j.trajectory.steps[1], "env_reward", float("nan")), "step 1 has env_reward nan; it must be finite"),
    (lambda j: setattr(j.trajectory.steps[0], "env_reward", float("inf")), "step 0 has env_reward inf; it must be finite"),
    (lambda j: (setattr(j.trajectory.task, "family", "code"), setattr(j.trajectory.steps[1], "env_reward", 1.5)),
     r"step 1 of a code task has env_reward 1.5; a share of tests passed is in \[0, 1\]"),
    (lambda j: (setattr(j.trajectory.task, "family", "codeio"), setattr(j.trajectory.steps[1], "env_reward", -0.25)),
     r"step 1 of a codeio task has env_reward -0.25"),
])
def test_malformed_trajectories_are_invalid_events(mutate, message: str) -> None:
    j = judged("j", 1, -1, [[1, 1, -1], [-1, -1, -1]])
    mutate(j)
    with pytest.raises(InvalidEventError, match=message):
        check_judged(j)


def test_a_job_keeps_one_task_round_and_group_size() -> None:
    first = judged("j", 0, 1, [[1]])
    check_same_group(first, judged("j", 1, -1, [[1]]))
    with pytest.raises(InvalidEventError, match=r"group_size: 4 vs 8; task: gym_text/train-0000@v0 vs s@v0"):
        check_same_group(first, judged("j", 1, -1, [[1]], group_size=8, slot_id="s"))
