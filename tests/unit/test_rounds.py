"""The round's ids, roles and completion rules (`services.common.rounds`), as events.proto states them."""

from __future__ import annotations

import pytest

from rlanything.v1.events_pb2 import MODEL_ROLE_POLICY, MODEL_ROLE_REWARD_MODEL, MODEL_ROLE_UNSPECIFIED
from services.common import rounds as R

SLOT = "gym_text/train-0001"


def test_every_id_of_a_job_follows_the_grammar_and_carries_its_round() -> None:
    job = R.job_id(12, SLOT, 3)
    traj = R.trajectory_id(job, 5)
    ids = {
        "job": job, "retry": R.retry_job_id(job), "trajectory": traj, "step": R.step_id(traj, 2),
        "policy sample": R.sample_id(traj, 2), "reward sample": R.sample_id(traj, 2, 1), "judged": R.judged_id(traj),
        "shadow": R.judged_id(traj, "v2"), "batch": R.batch_id(job, "policy"), "pool": R.pool_event_id(job, "accepted"),
    }
    assert ids == {
        "job": "r12/gym_text/train-0001/v3", "retry": "r12/gym_text/train-0001/v3/retry",
        "trajectory": "r12/gym_text/train-0001/v3/5", "step": "r12/gym_text/train-0001/v3/5/2",
        "policy sample": "r12/gym_text/train-0001/v3/5/2", "reward sample": "r12/gym_text/train-0001/v3/5/2/1",
        "judged": "r12/gym_text/train-0001/v3/5/judged", "shadow": "r12/gym_text/train-0001/v3/5/shadow/v2",
        "batch": "r12/gym_text/train-0001/v3/policy", "pool": "r12/gym_text/train-0001/v3/accepted",
    }
    assert {R.round_of_id(i) for i in ids.values()} == {12}
    assert R.parse_job_id(job) == R.JobId(12, SLOT, 3)
    assert R.job_of_trajectory(traj) == job


def test_live_ids_belong_to_no_round() -> None:
    traj = R.live_trajectory_id("acme", "e/1", erasure_epoch=2)
    assert traj == "live/acme/e=2F1/e2" and traj.startswith(R.live_job_id("acme") + "/")
    assert R.round_of_id(traj) is None and R.round_of_id(R.batch_id(traj, "reward")) is None
    assert R.batch_key(0, R.batch_id(traj, "reward"), live=True) == "live.live=2Facme=2Fe=3D2F1=2Fe2=2Freward"


@pytest.mark.parametrize("text", ["", "r12", "r12/slot", "rx/gym_text/train-0001/v3", "r1/gym_text/train-0001/3",
                                  "live/acme/e1"])
def test_other_strings_are_not_job_ids(text: str) -> None:
    assert R.parse_job_id(text) is None


def test_a_batch_id_names_a_known_role() -> None:
    with pytest.raises(ValueError, match="role must be one of \\('policy', 'reward'\\), got 'critic'"):
        R.batch_id("r0/a/b/v0", "critic")


def test_role_names_from_enum_values_and_json_names() -> None:
    assert [R.role_name(v) for v in (MODEL_ROLE_POLICY, MODEL_ROLE_REWARD_MODEL, MODEL_ROLE_UNSPECIFIED, 99)] == [
        "policy", "reward", None, None]
    assert [R.role_name(n) for n in ("MODEL_ROLE_POLICY", "MODEL_ROLE_REWARD_MODEL", "MODEL_ROLE_UNSPECIFIED", "x")] == [
        "policy", "reward", None, None]
    assert {R.ROLE_ENUM[r] for r in R.ROLES} == {MODEL_ROLE_POLICY, MODEL_ROLE_REWARD_MODEL}
    assert R.model_version_id("reward", 7) == "reward/v7"


def test_round_ready_waits_for_both_models_on_the_last_round() -> None:
    assert R.round_ready(0, -1, -1)
    assert not R.round_ready(3, 2, 1) and R.round_ready(3, 2, 2) and R.round_ready(3, 4, 5)


def test_latest_closed_round_skips_rounds_with_open_groups() -> None:
    closed = {0: {"a"}, 1: {"b"}, 2: {"c"}, 3: set()}
    assert R.latest_closed_round(closed, [2]) == 1
    assert R.latest_closed_round(closed, []) == 2
    assert R.latest_closed_round({}, []) is None


@pytest.mark.parametrize(("metrics", "traj", "judged", "trained", "mode", "done"), [
    ({"critic/jobs_in_round": 4, "critic/groups_complete": 3, "critic/groups_partial": 1, "critic/trajectories": 16},
     16, 16, {"policy", "reward"}, "sync", True),
    ({"critic/jobs_in_round": 4, "critic/groups_complete": 3, "critic/trajectories": 12}, 12, 12,
     {"policy", "reward"}, "sync", False),                                     # a group still open
    ({"critic/jobs_in_round": 4, "critic/groups_complete": 4, "critic/trajectories": 16}, 15, 16,
     {"policy", "reward"}, "sync", False),                                     # a trajectory not read yet
    ({"critic/jobs_in_round": 4, "critic/groups_complete": 4, "critic/trajectories": 16}, 16, 16, {"policy"},
     "sync", False),                                                           # the RM has not trained on it
    ({"critic/jobs_in_round": 4, "critic/groups_complete": 4, "critic/trajectories": 16}, 16, 16, set(),
     "async", True),                                                           # async: groups alone
    ({}, 0, 0, {"policy", "reward"}, "sync", False),                           # nothing closed yet
])
def test_round_done(metrics: dict[str, float], traj: int, judged: int, trained: set[str], mode: str, done: bool) -> None:
    assert R.round_done(metrics, traj, judged, trained, mode) is done
