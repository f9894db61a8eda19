"""One closed group → report, policy batch, RM batch and round statistics, on hand-made votes."""

from __future__ import annotations

import math

import pytest

from rlanything.v1.events_pb2 import (DIRECTION_EASIER, DIRECTION_HARDER, DIRECTION_UNSPECIFIED, STEP_LABEL_BAD,
                                      STEP_LABEL_GOOD, CandidateCheck)
from services.common.config import CriticServiceConfig
from services.critic.group_eval import evaluate_group
from services.critic.round_stats import round_metrics
from tests.unit.critic.critic_builders import judged

G, B = STEP_LABEL_GOOD, STEP_LABEL_BAD
R2 = math.sqrt(2)


def group(job: str = "r0/gym_text/train-0000/v0", **kw):
    """G = 4, acc = 0.5, λ-sensitive votes, one invalid vote, oracle labels on three rollouts."""
    return [
        judged(job, 0, +1, [[1, 1, 1], [1, 1, -1]], labels=[G, G], **kw),
        judged(job, 1, +1, [[1, 1, 1]], **kw),
        judged(job, 2, -1, [[-1, -1, -1], [1, -1, -1], [-1, -1, -1]], labels=[B, G, B], **kw),
        judged(job, 3, -1, [[1, 0, -1]], labels=[B], **kw),
    ]


def by_id(batch) -> dict[str, float]:
    return {s.sample_id: s.advantage for s in batch.samples}


def test_report_has_acc_direction_and_bad_steps_of_every_failed_rollout() -> None:
    out = evaluate_group(list(reversed(group())), CriticServiceConfig(), partial=False)
    r = out.report
    assert (r.job_id, r.round, r.group_size, r.rollouts, r.wins, r.acc) == ("r0/gym_text/train-0000/v0", 0, 4, 4, 2, 0.5)
    assert r.direction == DIRECTION_UNSPECIFIED and not r.partial and not r.is_candidate and r.split == "train"
    assert r.task.slot_id == "gym_text/train-0000" and r.jobs_in_round == 1
    assert [(b.trajectory_id, list(b.step_indices), list(b.actions)) for b in r.bad_steps] == [
        ("r0/gym_text/train-0000/v0/2", [0, 2], ["a2.0", "a2.2"]),
        ("r0/gym_text/train-0000/v0/3", [], []),      # failed, but no step that every vote called bad
    ]


def test_policy_samples_are_non_zero_step_index_advantages() -> None:
    out = evaluate_group(group(), CriticServiceConfig(), partial=False)
    p = out.policy
    assert p.batch_id == "r0/gym_text/train-0000/v0/policy" and p.round == 0 and p.jobs_in_round == 1
    # r = O + S̄: step 0 → (2, 2, -2, -1), step 1 → (4/3, -4/3), step 2 → rollout 2 alone → 0 (dropped)
    z0 = [1.75 / math.sqrt(3.1875), 1.75 / math.sqrt(3.1875), -2.25 / math.sqrt(3.1875), -1.25 / math.sqrt(3.1875)]
    expected = {"/0/0": z0[0], "/0/1": 1.0, "/1/0": z0[1], "/2/0": z0[2], "/2/1": -1.0, "/3/0": z0[3]}
    assert by_id(p) == pytest.approx({f"r0/gym_text/train-0000/v0{k}": v for k, v in expected.items()})
    s = p.samples[0]
    assert (list(s.prompt_token_ids), list(s.response_token_ids), list(s.behaviour_logprobs), s.model_version) == (
        [1000, 0], [1, 2, 3], [-0.5, -0.25, -0.125], 3)


def test_outcome_only_lambda_changes_the_advantages() -> None:
    out = evaluate_group(group(), CriticServiceConfig(lam=0.0), partial=False)
    # r = O: step 0 → (1, 1, -1, -1) → ±1; step 1 → (1, -1) → ±1; step 2 alone → 0
    assert by_id(out.policy) == pytest.approx({"r0/gym_text/train-0000/v0/0/0": 1.0, "r0/gym_text/train-0000/v0/0/1": 1.0,
                                               "r0/gym_text/train-0000/v0/1/0": 1.0, "r0/gym_text/train-0000/v0/2/0": -1.0,
                                               "r0/gym_text/train-0000/v0/2/1": -1.0, "r0/gym_text/train-0000/v0/3/0": -1.0})


def test_lone_rollout_raw_knob_adds_the_late_step() -> None:
    out = evaluate_group(group(), CriticServiceConfig(lone_rollout_advantage="raw"), partial=False)
    assert by_id(out.policy)["r0/gym_text/train-0000/v0/2/2"] == pytest.approx(-2.0)  # r = -1 + 1·(-1)


def test_rm_samples_are_z_scored_votes_of_split_steps_only() -> None:
    out = evaluate_group(group(), CriticServiceConfig(), partial=False)
    rw = out.reward
    assert rw.batch_id == "r0/gym_text/train-0000/v0/reward"
    j = "r0/gym_text/train-0000/v0"
    assert by_id(rw) == pytest.approx({
        f"{j}/0/1/0": 1 / R2, f"{j}/0/1/1": 1 / R2, f"{j}/0/1/2": -R2,         # O=+1: the +1 votes agree
        f"{j}/2/1/0": -R2, f"{j}/2/1/1": 1 / R2, f"{j}/2/1/2": 1 / R2,         # O=-1: the -1 votes agree
        f"{j}/3/0/0": -0.2672612, f"{j}/3/0/1": -1.0690450, f"{j}/3/0/2": 1.3363062,  # invalid vote → -2 raw
    })
    s = next(s for s in rw.samples if s.sample_id == f"{j}/3/0/1")
    assert (list(s.prompt_token_ids), list(s.response_token_ids), list(s.behaviour_logprobs), s.model_version) == (
        [2003, 0], [3001, 0], [-0.75, -0.5], 7)


def test_invalid_answers_are_penalised_counted_and_timed() -> None:
    recs = group()
    bad = recs[0].trajectory.steps[1]  # rollout 0 won; its step 1 answer was no valid action
    bad.valid, bad.action, bad.action_index = False, "", -1
    for r in recs:
        r.trajectory.generate_s, r.trajectory.env_s, r.judge_s = 2.0, 0.5, 0.25
    paper = by_id(evaluate_group(recs, CriticServiceConfig(lam=0.0, invalid_answer_penalty=0.0), partial=False).policy)
    out = evaluate_group(recs, CriticServiceConfig(lam=0.0, invalid_answer_penalty=1.0), partial=False)
    ours = by_id(out.policy)
    key = "r0/gym_text/train-0000/v0/0/1"
    # step 1 is reached by rollouts 0 (won) and 2 (lost): r = (1 − 1, −1) → z = (+1, −1) either way, but
    # with the format term the won-but-invalid step no longer beats the lost one by the full outcome gap
    assert paper[key] == pytest.approx(1.0)
    rewards_step1 = [1 - 1.0, -1.0]
    mean = sum(rewards_step1) / 2
    assert ours[key] == pytest.approx((rewards_step1[0] - mean) / 0.5)
    m = round_metrics([out.stats])
    assert m["policy/invalid_answer_rate"] == pytest.approx(1 / 7)
    assert (m["time/generate_s"], m["time/env_s"], m["time/judge_s"]) == (2.0, 0.5, 1.0)  # job time once, judge per trajectory


def test_round_statistics_of_the_group() -> None:
    out = evaluate_group(group(), CriticServiceConfig(), partial=False, latest_policy_version=5)
    m = round_metrics([out.stats])
    assert m == pytest.approx({
        "policy/success_train": 0.5,
        "reward/step_accuracy": 4 / 6,         # labelled: (G,G) ✓✓, (B,G,B) ✓✗✓, (B) with S̄ = 0 ✗
        "reward/labelled_steps": 6.0,
        "reward/outcome_accuracy": 3 / 4,      # the last rollout's mean vote is 0
        "reward/invalid_vote_rate": 1 / 21,
        "reward/split_vote_share": 3 / 7,
        "env/in_band_share": 1.0,
        "policy/zero_advantage_share": 1 / 7,
        "policy/advantage_oracle_agreement": (5.25 / math.sqrt(3.1875)) / (5.25 / math.sqrt(3.1875) + 2.0),
        "policy/response_tokens_mean": 3.0,
        "policy/invalid_answer_rate": 0.0,
        "policy/truncated_response_rate": 0.0,
        "policy/staleness": 2.0,
        "time/generate_s": 0.0, "time/env_s": 0.0, "time/judge_s": 0.0,
        "critic/groups_complete": 1.0, "critic/groups_partial": 0.0, "critic/groups_candidate": 0.0,
        "critic/groups_candidate_trained": 0.0,
        "critic/trajectories": 4.0, "critic/policy_samples": 6.0, "critic/reward_samples": 9.0,
        "critic/jobs_in_round": float(group()[0].trajectory.jobs_in_round),
    })


@pytest.mark.parametrize(("kw", "success_key"), [({"is_candidate": True}, None), ({"split": "heldout"},
                                                 "policy/success_heldout"), ({"split": "ood"}, "policy/success_ood")])
def test_candidate_and_eval_groups_report_but_never_train(kw: dict, success_key: str | None) -> None:
    out = evaluate_group(group(**kw), CriticServiceConfig(), partial=False)
    assert len(out.policy.samples) == 0 and len(out.reward.samples) == 0
    assert out.policy.batch_id.endswith("/policy") and out.reward.batch_id.endswith("/reward")  # still counted
    assert out.report.acc == 0.5 and out.report.is_candidate == kw.get("is_candidate", False)
    m = round_metrics([out.stats])
    assert "env/in_band_share" not in m and "policy/success_train" not in m
    if success_key:
        assert m[success_key] == 0.5
    assert m["reward/step_accuracy"] == pytest.approx(4 / 6)  # the RM is judged on every group


def test_candidate_groups_train_like_drawn_ones_with_candidate_samples_mixed() -> None:
    drawn = evaluate_group(group(), CriticServiceConfig(), partial=False)
    cand = evaluate_group(group(is_candidate=True), CriticServiceConfig(candidate_samples="mixed"), partial=False)
    assert len(cand.policy.samples) == 6 and by_id(cand.policy) == by_id(drawn.policy)
    assert len(cand.reward.samples) == len(drawn.reward.samples) > 0
    m = round_metrics([cand.stats])
    assert "env/in_band_share" not in m  # the share measures the drawn tasks of the pool only
    heldout = evaluate_group(group(split="heldout", is_candidate=True), CriticServiceConfig(candidate_samples="mixed"),
                             partial=False)
    assert len(heldout.policy.samples) == 0 and len(heldout.reward.samples) == 0


@pytest.mark.parametrize(("direction", "parent_acc", "band", "trains"), [
    (DIRECTION_HARDER, 1.0, (0.2, 0.8), True),     # 0.2 <= 0.5 < 1.0: accepted
    (DIRECTION_HARDER, 0.5, (0.2, 0.8), False),    # not below its parent
    (DIRECTION_EASIER, 0.0, (0.2, 0.8), True),     # 0 < 0.5 <= 0.8
    (DIRECTION_EASIER, 0.0, (0.2, 0.4), False),    # above the env's band (the job carries it)
    (DIRECTION_UNSPECIFIED, 0.0, (0.2, 0.8), False),  # no direction (a live task awaiting admission)
])
def test_candidate_trains_by_default_only_when_the_acceptance_rule_admits_it(direction: int, parent_acc: float,
                                                                            band: tuple, trains: bool) -> None:
    check = CandidateCheck(direction=direction, parent_acc=parent_acc, band_low=band[0], band_high=band[1])
    out = evaluate_group(group(is_candidate=True, candidate_check=check), CriticServiceConfig(), partial=False)
    assert (len(out.policy.samples) == 6, len(out.reward.samples) > 0) == (trains, trains)
    m = round_metrics([out.stats])
    assert m["critic/groups_candidate"] == 1.0 and m["critic/groups_candidate_trained"] == float(trains)
    none = evaluate_group(group(is_candidate=True, candidate_check=check), CriticServiceConfig(candidate_samples="none"),
                          partial=False)
    assert len(none.policy.samples) == 0 and len(none.reward.samples) == 0


def test_unjudged_evaluation_steps_count_for_success_but_not_for_rm_accuracy() -> None:
    # The reward service passes held-out rollouts on with empty judgements (reward.judge_eval off).
    unjudged = [judged("r0/gym_text/heldout-0000/v0", 0, +1, [[]], labels=[G], split="heldout", group_size=2),
                judged("r0/gym_text/heldout-0000/v0", 1, -1, [[], []], labels=[B, B], split="heldout", group_size=2)]
    m = round_metrics([evaluate_group(unjudged, CriticServiceConfig(), partial=False).stats])
    assert m["policy/success_heldout"] == 0.5
    assert "reward/step_accuracy" not in m and "reward/outcome_accuracy" not in m
    both = round_metrics([evaluate_group(unjudged, CriticServiceConfig(), partial=False).stats,
                          evaluate_group(group(), CriticServiceConfig(), partial=False).stats])
    assert both["reward/step_accuracy"] == pytest.approx(4 / 6)  # only the judged group's labelled steps


def test_all_won_group_is_out_of_both_bands_unless_the_policy_band_is_off() -> None:
    won = [judged("j", i, +1, [[1, 1, -1], [1, 1, 1]][: 1 + i % 2]) for i in range(4)]
    out = evaluate_group(won, CriticServiceConfig(), partial=False)
    assert out.report.acc == 1.0 and out.report.direction == DIRECTION_HARDER and list(out.report.bad_steps) == []
    assert len(out.policy.samples) == 0 and len(out.reward.samples) == 0
    assert round_metrics([out.stats])["env/in_band_share"] == 0.0
    assert "policy/zero_advantage_share" not in round_metrics([out.stats])
    all_equal = evaluate_group(won, CriticServiceConfig(policy_band=False), partial=False)
    # every rollout's step 0 has r = 1 + 1/3, step 1 (rollouts 1, 3) r = 2: all advantages 0
    assert len(all_equal.policy.samples) == 0
    assert round_metrics([all_equal.stats])["policy/zero_advantage_share"] == 1.0


def test_rm_band_edges_with_five_rollouts() -> None:
    def five(wins: int):
        return [judged("j5", i, +1 if i < wins else -1, [[1, -1, -1]], group_size=5) for i in range(5)]

    assert evaluate_group(five(1), CriticServiceConfig(), partial=False).report.acc == pytest.approx(0.2)
    assert len(evaluate_group(five(1), CriticServiceConfig(), partial=False).reward.samples) == 15  # acc 0.2: in
    assert len(evaluate_group(five(4), CriticServiceConfig(), partial=False).reward.samples) == 15  # acc 0.8: in
    assert len(evaluate_group(five(0), CriticServiceConfig(), partial=False).reward.samples) == 0   # acc 0: out
    assert evaluate_group(five(0), CriticServiceConfig(), partial=False).report.direction == DIRECTION_EASIER
    narrow = evaluate_group(five(1), CriticServiceConfig(rm_band_low=0.3), partial=False)
    assert len(narrow.reward.samples) == 0 and len(narrow.policy.samples) > 0  # policy band is 1/G


def test_partial_group_reports_the_rollouts_it_has() -> None:
    out = evaluate_group(group()[:3], CriticServiceConfig(), partial=True)
    assert (out.report.partial, out.report.rollouts, out.report.group_size, out.report.wins) == (True, 3, 4, 2)
    assert out.report.acc == pytest.approx(2 / 3)
    m = round_metrics([out.stats])
    assert (m["critic/groups_partial"], m["critic/groups_complete"]) == (1.0, 0.0)
    with pytest.raises(ValueError, match="at least one"):
        evaluate_group([], CriticServiceConfig(), partial=True)


def test_responses_cut_by_max_new_tokens_are_counted() -> None:
    records = group()
    records[0].trajectory.steps[0].response_truncated = True
    records[2].trajectory.steps[1].response_truncated = True
    m = round_metrics([evaluate_group(records, CriticServiceConfig(), partial=False, latest_policy_version=5).stats])
    assert m["policy/truncated_response_rate"] == pytest.approx(2 / 7)


def test_advantage_oracle_agreement_weighs_each_labelled_step_by_its_advantage() -> None:
    """Σ A·label / Σ abs(A) over labelled steps: rollout 2's step 1 is GOOD but its rollout lost, so its
    negative advantage counts against; unlabelled steps (rollout 1) and zero advantages count for nothing."""
    z = 1 / math.sqrt(3.1875)
    out = evaluate_group(group(), CriticServiceConfig(), partial=False)
    signed, labelled = (1.75 + 2.25 + 1.25) * z + 1.0 - 1.0, (1.75 + 2.25 + 1.25) * z + 2.0
    assert out.stats["sum/advantage_signed"] == pytest.approx(signed)
    assert out.stats["sum/advantage_labelled"] == pytest.approx(labelled)
    metrics = round_metrics([out.stats])
    assert metrics["policy/advantage_oracle_agreement"] == pytest.approx(signed / labelled)
    unscaled = evaluate_group(group(), CriticServiceConfig(advantage_scale="none"), partial=False)
    assert round_metrics([unscaled.stats])["policy/advantage_oracle_agreement"] == pytest.approx(5.25 / (5.25 + 8 / 3))
    assert by_id(unscaled.policy)["r0/gym_text/train-0000/v0/2/1"] == pytest.approx(-4 / 3)  # r − mean, no division


def test_a_policy_sample_carries_the_version_that_generated_its_step() -> None:
    """Weights can change mid-episode: a step's sample is as stale as its own step (the trainer bounds it)."""
    g = group()
    for j in g:
        for k, step in enumerate(j.trajectory.steps):
            step.served_version = 5 + k
    out = evaluate_group(g, CriticServiceConfig(), partial=False)
    versions = {s.sample_id.rsplit("/", 2)[-2] + "/" + s.sample_id.rsplit("/", 1)[-1]: s.model_version
                for s in out.policy.samples}
    assert versions == {"0/0": 5, "0/1": 6, "1/0": 5, "2/0": 5, "2/1": 6, "3/0": 5}
