"""Per-round metrics from per-group sufficient statistics (pure).

Each closed group contributes a flat dict of sums (keys ``sum/...``) and maxima (``max/...``),
stored with the group, so a round's metrics are recomputed exactly after a restart and a group
re-closed after a crash replaces its own contribution instead of adding to it. `round_metrics`
turns the sums of one round into the slash-namespaced metrics of docs/algorithm.md (arXiv 2602.02488):

| metric | definition |
|---|---|
| policy/success_<split> | wins / rollouts over the round's non-candidate groups of that split |
| reward/step_accuracy | sign(S̄) == oracle label (GOOD=+1, BAD=−1) over labelled steps with votes; S̄ = 0 is wrong |
| reward/outcome_accuracy | sign(mean_k S̄_k) == O over trajectories with ≥ 1 step with votes; 0 is wrong |
| reward/invalid_vote_rate | votes with value 0 / all votes |
| reward/split_vote_share | judged steps whose votes are not all equal / judged steps |
| env/in_band_share | non-candidate train groups with acc in the RM band / those groups |
| policy/zero_advantage_share | steps with A = 0 / steps of the groups that train the policy |
| policy/advantage_oracle_agreement | Σ A·label / Σ abs(A) over the policy samples' steps with an oracle label: 1 = every advantage points the oracle's way, 0 = no better than chance |
| policy/response_tokens_mean | response tokens / steps, over every trajectory |
| policy/invalid_answer_rate | steps whose answer was no valid ``\\boxed{i}`` / steps, over every trajectory |
| policy/truncated_response_rate | steps whose response was cut by max_new_tokens / steps, over every trajectory |
| time/generate_s, time/env_s, time/judge_s | seconds of policy generation (each job's share of merged generate calls), env calls (waits, overlapping across jobs played at once) and judge generation, summed over the round's jobs |
| policy/staleness | max over trajectories of (latest announced policy version − its version) |
| critic/* | groups_complete, groups_partial, groups_candidate, groups_candidate_trained, trajectories, policy_samples, reward_samples |
| reward/unit_test_accuracy | generated unit tests every correct program passes / tests written, over groups with at least one correct program (``critic.unit_tests``; an unparseable or duplicate test is not correct) |
| reward/unit_test_unparseable_share, reward/unit_test_duplicate_share | generated tests rejected as not in the format / as a repeat of an earlier test of the group, over tests written |
| reward/labelled_steps | judged steps with an oracle label (what reward/step_accuracy is measured on; 0 = no accuracy) |

A ratio whose denominator is 0 is left out (no data is not a 0 % rate).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from rlanything.v1.events_pb2 import STEP_LABEL_BAD, STEP_LABEL_GOOD, JudgedTrajectory

from services.common.algo.integrated_reward import mean_vote

__all__ = ["judge_stats", "add_stats", "round_metrics", "LABEL_SIGN"]

LABEL_SIGN = {STEP_LABEL_GOOD: 1, STEP_LABEL_BAD: -1}
"""The oracle's step label as a sign (steps without a label are absent)."""
_RATIOS = (
    ("reward/step_accuracy", "sum/steps_correct", "sum/steps_labelled"),
    ("reward/outcome_accuracy", "sum/outcome_correct", "sum/trajectories_judged"),
    ("reward/invalid_vote_rate", "sum/votes_invalid", "sum/votes"),
    ("reward/split_vote_share", "sum/steps_split", "sum/steps_judged"),
    ("env/in_band_share", "sum/train_in_band", "sum/train_groups"),
    ("reward/unit_test_accuracy", "sum/unit_tests_correct", "sum/unit_tests_checked"),
    ("reward/unit_test_unparseable_share", "sum/unit_tests_rejected_unparseable", "sum/unit_tests"),
    ("reward/unit_test_duplicate_share", "sum/unit_tests_rejected_duplicate", "sum/unit_tests"),
    ("policy/zero_advantage_share", "sum/policy_steps_zero", "sum/policy_steps"),
    ("policy/advantage_oracle_agreement", "sum/advantage_signed", "sum/advantage_labelled"),
    ("policy/response_tokens_mean", "sum/response_tokens", "sum/steps"),
    ("policy/invalid_answer_rate", "sum/steps_invalid", "sum/steps"),
    ("policy/truncated_response_rate", "sum/steps_truncated", "sum/steps"),
)
_TIMES = ("generate_s", "env_s", "judge_s")
_COUNTS = ("groups_complete", "groups_partial", "groups_candidate", "groups_candidate_trained", "trajectories", "policy_samples",
           "reward_samples")


def _sign(x: float) -> int:
    return (x > 0) - (x < 0)


def judge_stats(records: Sequence[JudgedTrajectory]) -> dict[str, float]:
    """Sums about the RM's votes and the policy's responses over the trajectories of one group."""
    s = dict.fromkeys(("sum/steps_labelled", "sum/steps_correct", "sum/trajectories_judged",
                       "sum/outcome_correct", "sum/votes", "sum/votes_invalid", "sum/steps_judged",
                       "sum/steps_split", "sum/steps", "sum/response_tokens", "sum/steps_invalid",
                       "sum/steps_truncated"), 0.0)
    for rec in records:
        t = rec.trajectory
        means_K = []
        for step, judgement in zip(t.steps, rec.judgements):
            values_M = [v.value for v in judgement.votes]
            s_bar = mean_vote(values_M)
            if values_M:
                means_K.append(s_bar)
            s["sum/votes"] += len(values_M)
            s["sum/votes_invalid"] += sum(1 for v in values_M if v == 0)
            if values_M:
                s["sum/steps_judged"] += 1
                s["sum/steps_split"] += len(set(values_M)) > 1
            if values_M and step.oracle_label in LABEL_SIGN:  # unjudged (evaluation) steps are not counted
                s["sum/steps_labelled"] += 1
                s["sum/steps_correct"] += _sign(s_bar) == LABEL_SIGN[step.oracle_label]
        for step in t.steps:
            s["sum/steps"] += 1
            s["sum/response_tokens"] += len(step.response_token_ids)
            s["sum/steps_invalid"] += not step.valid
            s["sum/steps_truncated"] += step.response_truncated
        if means_K:
            s["sum/trajectories_judged"] += 1
            s["sum/outcome_correct"] += _sign(sum(means_K) / len(means_K)) == t.outcome
    return s


def add_stats(total: dict[str, float], part: Mapping[str, float]) -> dict[str, float]:
    """Merge ``part`` into ``total`` in place (sums add, maxima take the max); returns ``total``."""
    for key, value in part.items():
        if key.startswith("max/"):
            total[key] = max(total.get(key, value), value)
        else:
            total[key] = total.get(key, 0.0) + value
    return total


def round_metrics(group_stats: Iterable[Mapping[str, float]]) -> dict[str, float]:
    """The metrics of one round from the statistics of its closed groups (see the module table)."""
    total: dict[str, float] = {}
    for part in group_stats:
        add_stats(total, part)
    out: dict[str, float] = {}
    for key, value in total.items():
        if key.startswith("sum/rollouts/") and value > 0:
            split = key.removeprefix("sum/rollouts/")
            out[f"policy/success_{split}"] = total.get(f"sum/wins/{split}", 0.0) / value
    for name, num, den in _RATIOS:
        if total.get(den, 0.0) > 0:
            out[name] = total.get(num, 0.0) / total[den]
    if "max/staleness" in total:
        out["policy/staleness"] = total["max/staleness"]
    if "max/jobs_in_round" in total:
        out["critic/jobs_in_round"] = total["max/jobs_in_round"]
    for name in _TIMES:
        if f"sum/time/{name}" in total:
            out[f"time/{name}"] = total[f"sum/time/{name}"]
    for name in _COUNTS:
        out[f"critic/{name}"] = total.get(f"sum/{name}", 0.0)
    out["reward/labelled_steps"] = total.get("sum/steps_labelled", 0.0)
    return dict(sorted(out.items()))
