"""The scripted product of scripts/bench_live_value.py: its tasks, users, thumbs and success accounting."""

from __future__ import annotations

import random

import httpx
import openai
import pytest

from scripts.bench_live_value import (
    NavTask, Tally, before_after, heldout_task, make_users, map_tasks, optimal_moves, paired_rows, product_round,
    summary_rows, task_candidate_id, thumb)
from services.env.families.frozenlake import shortest_path
from services.policy.prompting import SYSTEM_PROMPT

MAP = ["SFFF", "FHFH", "FFFH", "HFFG"]


def test_optimal_moves_are_the_first_steps_of_every_shortest_path() -> None:
    assert optimal_moves(MAP, 0, 0) == [1, 2]  # down or right: both 6 steps from S
    assert optimal_moves(MAP, 2, 2) == [1]  # down to (3, 2), then right; right is a hole
    assert optimal_moves(MAP, 3, 3) == []  # on the goal
    assert optimal_moves(MAP, 0, 3) == [0]  # the only way on is back left


def test_map_tasks_keep_only_positions_with_one_right_move_shown_as_the_env_shows_them() -> None:
    tasks = map_tasks(7)
    assert tasks
    for task in tasks:
        (role0, system), (role1, user) = task.messages
        assert (role0, system) == ("system", SYSTEM_PROMPT) and role1 == "user"
        assert user.startswith("Task: Walk on the frozen lake") and "1. left\n2. down\n3. right\n4. up" in user
        assert task.reference in {"1", "2", "3", "4"}


def test_thumb_follows_the_reference_and_noise_flips_it() -> None:
    rng = random.Random(0)
    assert thumb("I go \\boxed{3}", "3", rng, 0.0) == 1
    assert thumb("\\boxed{2}", "3", rng, 0.0) == -1
    assert thumb("\\boxed{13}", "3", rng, 0.0) == -1  # a whole token, not a substring
    assert thumb("\\boxed{3}", "3", rng, 1.0) == -1
    flips = [thumb("\\boxed{3}", "3", random.Random(i), 0.25) for i in range(400)]
    assert 0.2 < flips.count(-1) / 400 < 0.3


def test_tally_counts_right_answers_per_group() -> None:
    tally = Tally()
    assert tally.add("eval", "\\boxed{2}", "2") is True
    assert tally.add("eval", "\\boxed{4}", "2") is False
    assert tally.add("eval", "no box, 2", "2") is True  # no \boxed{}: the reference as a whole token
    tally.add("train", "\\boxed{1}", "3")
    assert tally.rate("eval") == 2 / 3 and tally.rate("train") == 0.0 and tally.rate("failure") is None


def test_before_after_takes_the_first_and_last_measured_values() -> None:
    assert before_after([None, 0.25, None, 0.5, 0.75, None]) == (0.25, 0.75)
    assert before_after([None, None]) == (None, None)


def test_summary_rows_average_seeds_that_measured_both_ends() -> None:
    results = [{"arm": "fed", "before_after": {"m": (0.2, 0.6)}}, {"arm": "fed", "before_after": {"m": (0.4, 0.8)}},
               {"arm": "fed", "before_after": {"m": (None, None)}}, {"arm": "unfed", "before_after": {"m": (None, None)}}]
    rows = summary_rows(results)
    assert rows[0][:2] == ("fed", "m") and abs(rows[0][2] - 0.3) < 1e-12 and abs(rows[0][3] - 0.7) < 1e-12
    assert rows[1] == ("unfed", "m", None, None)


def test_paired_rows_compare_the_change_of_both_arms_on_the_same_seeds() -> None:
    results = [{"arm": "fed", "seed": 0, "before_after": {"m": (0.2, 0.6), "n": (None, None)}},
               {"arm": "unfed", "seed": 0, "before_after": {"m": (0.3, 0.4), "n": (0.1, 0.2)}},
               {"arm": "fed", "seed": 1, "before_after": {"m": (0.5, 0.5), "n": (0.1, 0.2)}}]  # no unfed seed 1
    [(measure, seeds, fed, unfed)] = paired_rows(results)
    assert (measure, seeds) == ("m", 1) and abs(fed - 0.4) < 1e-12 and abs(unfed - 0.1) < 1e-12
    assert paired_rows(results[2:]) == []


def test_user_groups_are_disjoint_and_split_by_the_envs_held_out_rule() -> None:
    groups = make_users(3, n_train=6, n_failure=4, n_eval=5, tasks_per_user=3)
    assert [len(groups[g]) for g in ("train", "failure", "eval")] == [6, 4, 5]
    prompts = {g: [t.messages for u in users for t in u.tasks] for g, users in groups.items()}
    everything = [p for ps in prompts.values() for p in ps]
    assert len(everything) == len(set(everything)) == 15 * 3
    assert all(not heldout_task(t) for u in groups["train"] for t in u.tasks)
    assert all(heldout_task(t) for u in groups["failure"] for t in u.tasks)
    assert make_users(3, 6, 4, 5, 3) == groups  # deterministic per seed


def test_the_candidate_id_is_the_ingest_services_hash_of_the_conversation_before_the_reply() -> None:
    from rlanything.v1.ingest_pb2 import Feedback, IngestEpisode, IngestMessage, SettledEpisode

    from services.ingest.candidates import task_candidate

    task = NavTask((("system", "be brief"), ("user", "Which way?")), "2")
    settled = SettledEpisode(episode=IngestEpisode(
        episode_id="e", tenant="shop", task_type="navigate", consent={"training": True, "task_generation": True},
        messages=[IngestMessage(role="system", content="be brief"), IngestMessage(role="user", content="Which way?"),
                  IngestMessage(role="assistant", content="\\boxed{3}", turn_id="t1")],
        outcome={"value": -1, "reference": "2"}),
        feedback=[Feedback(kind=Feedback.KIND_THUMBS, value=-1, turn_id="t1")])
    candidate = task_candidate(settled, now=0.0)
    assert candidate is not None and candidate.candidate_id == task_candidate_id(task)
    assert shortest_path(MAP, 0, 0) is not None


class _Product:
    """Fails its round the way a product does when the run's servers went away mid-round."""

    def __init__(self, error: Exception) -> None:
        self.error = error

    def round(self, k: int) -> dict:
        raise self.error


REQUEST = httpx.Request("POST", "http://127.0.0.1:1/v1/ingest/episodes")


@pytest.mark.parametrize("error", [
    httpx.ConnectError("[Errno 111] Connection refused", request=REQUEST),  # the ingest client (a CI run's failure)
    openai.APIConnectionError(request=REQUEST),  # the policy's endpoint
    httpx.HTTPStatusError("episode r1-train-1-1: 503 Service Unavailable", request=REQUEST,  # ingest stopping
                          response=httpx.Response(503, request=REQUEST)),  # (a CI run's failure, then a 500)
], ids=["ingest", "openai", "ingest-stopping"])
def test_a_product_round_cut_short_by_the_end_of_the_run_ends_the_product_and_fails_otherwise(error) -> None:
    assert product_round(_Product(error), 1, run_ended=lambda: True) is None
    with pytest.raises(RuntimeError, match="product round 1: .*(Connection refused|Connection error|503)"):
        product_round(_Product(error), 1, run_ended=lambda: False)
