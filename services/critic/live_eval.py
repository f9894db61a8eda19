"""What a judged live trajectory could train, and how well the judge agreed with the product's
users (pure; docs/live-usage.md). Live traffic has no group (G = 1), so:

* **Policy**: only turns our policy served (``served_by_policy``, token ids present) at most
  ``max_staleness`` versions behind the latest policy, and (by default) only when the outcome
  came from outside the judge. Step reward r = O + λ·S̄ (docs/algorithm.md, loop 1); advantage
  A = clip((r − μ_b) / max(σ_b, σ_min), ±A_max) against an exponentially weighted baseline per
  (tenant, task type) that is updated **after** A is computed, so a sample is never normalised
  by itself; A = 0 while the baseline has seen fewer than ``min_count`` rewards (warm-up).
  Exponentially weighted mean and variance: Finch (2009), "Incremental calculation of weighted
  mean and variance", §9.
* **Judge**: only with an outcome from outside the judge (user, product, reference check) —
  an outcome read from its own votes would reward agreeing with itself. Consistency rewards as
  for environment rollouts (`common.algo.consistency_reward`). Balanced: an episode whose
  outcome side (won or lost) already has more than ``rm_slack`` episodes over the other side in
  its baseline bucket trains the judge not at all — the live stand-in for the [0.2, 0.8] band,
  which keeps the judge from learning "most answers are good".
* **Agreement**: the sign of the judge's mean vote over the turns vs an external outcome, and
  per turn vs the user's thumbs (the step's ``oracle_label``).
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field

from rlanything.v1.events_pb2 import STEP_LABEL_BAD, STEP_LABEL_GOOD, JudgedTrajectory, TrainingSample

from services.common.algo.consistency_reward import consistency_rewards
from services.common.algo.integrated_reward import mean_vote
from services.common.rounds import sample_id

__all__ = ["LiveSettings", "Baseline", "update_baseline", "live_advantage", "LiveOutcome", "evaluate_live",
           "EXTERNAL_OUTCOMES"]

EXTERNAL_OUTCOMES = frozenset({"user", "product", "reference_check"})
"""``Trajectory.outcome_source`` values that did not come from the judge."""


@dataclass(frozen=True)
class LiveSettings:
    """Knobs of the live path (``critic.live``)."""

    max_staleness: int = 1
    """Policy versions a served turn may lag the latest one."""
    min_count: int = 8
    """Rewards a baseline must have seen before its advantages are non-zero."""
    alpha: float = 0.05
    """Weight of a new reward in the exponentially weighted baseline."""
    sigma_min: float = 0.1
    """Floor of the baseline's standard deviation."""
    adv_max: float = 3.0
    """Advantages are clipped to ±adv_max."""
    requires_outcome: bool = True
    """Train the policy only on turns of episodes with an external outcome."""
    rm_slack: int = 2
    """Episodes one outcome side may lead the other by before the judge skips that side."""


@dataclass(frozen=True)
class Baseline:
    """Exponentially weighted mean and variance of one (tenant, task type)'s step rewards."""

    n: int = 0
    mean: float = 0.0
    var: float = 0.0


def update_baseline(b: Baseline, r: float, alpha: float) -> Baseline:
    """``b`` after reward ``r`` (Finch 2009, §9: δ = r − μ; μ += αδ; σ² = (1 − α)(σ² + αδ²));
    the first reward sets the mean."""
    if b.n == 0:
        return Baseline(1, r, 0.0)
    delta = r - b.mean
    return Baseline(b.n + 1, b.mean + alpha * delta, (1 - alpha) * (b.var + alpha * delta * delta))


def live_advantage(r: float, b: Baseline, s: LiveSettings) -> float:
    """The advantage of reward ``r`` against baseline ``b`` (0 during warm-up)."""
    if b.n < s.min_count:
        return 0.0
    a = (r - b.mean) / max(math.sqrt(b.var), s.sigma_min)
    return max(-s.adv_max, min(s.adv_max, a))


@dataclass
class LiveOutcome:
    """Everything one judged live trajectory yields."""

    policy: list[TrainingSample] = field(default_factory=list)
    reward: list[TrainingSample] = field(default_factory=list)
    baseline: Baseline = Baseline()
    skipped: Counter[str] = field(default_factory=Counter)
    """Turns (policy) or the episode (rm) that train nothing, by reason: ``not_served``, ``stale``,
    ``no_outcome`` (policy), ``warmup``, ``zero_advantage``, ``rm_no_outcome``, ``rm_unbalanced``."""
    outcome_agrees: bool | None = None
    """The sign of the judge's mean vote equals the external outcome (None: no outcome or no votes)."""
    thumbs_agree: int = 0
    thumbs_disagree: int = 0
    rm_wins: int = 0
    rm_losses: int = 0
    """Episodes per outcome side that trained the judge so far in the bucket (after this one)."""


def evaluate_live(judged: JudgedTrajectory, baseline: Baseline, latest_policy_version: int, lam: float,
                  invalid_vote_penalty: float, s: LiveSettings, rm_wins: int = 0, rm_losses: int = 0) -> LiveOutcome:
    """Samples, baseline and agreement of one judged live trajectory (see the module docstring).

    Args:
        judged: a trajectory with source ``ingest``, judged with the chat rubric.
        baseline: the (tenant, task type) baseline before this trajectory.
        latest_policy_version: the newest announced policy version (staleness is measured to it).
        lam: λ of r = O + λ·S̄.
        invalid_vote_penalty: raw consistency reward of an unparseable vote.
        rm_wins, rm_losses: won and lost episodes that trained the judge so far in this bucket.
    """
    t = judged.trajectory
    out = LiveOutcome(baseline=baseline, rm_wins=rm_wins, rm_losses=rm_losses)
    external = t.outcome_source in EXTERNAL_OUTCOMES and t.outcome in (1, -1)
    means = [mean_vote([v.value for v in j.votes]) for j in judged.judgements]
    for step, judgement, m in zip(t.steps, judged.judgements, means):
        label = {STEP_LABEL_GOOD: 1, STEP_LABEL_BAD: -1}.get(step.oracle_label, 0)  # the user's thumbs
        if label and judgement.votes and m != 0:
            if (m > 0) == (label > 0):
                out.thumbs_agree += 1
            else:
                out.thumbs_disagree += 1
        if not step.served_by_policy or not step.response_token_ids:
            out.skipped["not_served"] += 1
            continue
        if latest_policy_version - step.served_version > s.max_staleness:
            out.skipped["stale"] += 1
            continue
        if s.requires_outcome and not external:
            out.skipped["no_outcome"] += 1
            continue
        r = t.outcome + lam * m
        a = live_advantage(r, out.baseline, s)
        out.baseline = update_baseline(out.baseline, r, s.alpha)  # after A: never normalised by itself
        if a == 0.0:
            out.skipped["warmup" if out.baseline.n <= s.min_count else "zero_advantage"] += 1
            continue
        out.policy.append(TrainingSample(sample_id=sample_id(t.trajectory_id, step.index),
                                         prompt_token_ids=step.prompt_token_ids,
                                         response_token_ids=step.response_token_ids,
                                         behaviour_logprobs=step.behaviour_logprobs, advantage=a,
                                         model_version=step.served_version))
    if not external:
        out.skipped["rm_no_outcome"] += 1
        return out
    voted = [m for m, j in zip(means, judged.judgements) if j.votes]
    if voted:
        overall = sum(voted) / len(voted)
        out.outcome_agrees = None if overall == 0 else (overall > 0) == (t.outcome > 0)
    side, other = (rm_wins, rm_losses) if t.outcome > 0 else (rm_losses, rm_wins)
    if side > other + s.rm_slack:
        out.skipped["rm_unbalanced"] += 1
        return out
    for judgement in judged.judgements:
        r_M = consistency_rewards(t.outcome, [v.value for v in judgement.votes], lam, invalid_vote_penalty)
        if r_M is None:
            continue
        for i, (vote, r) in enumerate(zip(judgement.votes, r_M)):
            if r != 0.0 and vote.response_token_ids:
                out.reward.append(TrainingSample(sample_id=sample_id(t.trajectory_id, judgement.step_index, i),
                                                 prompt_token_ids=judgement.prompt_token_ids,
                                                 response_token_ids=vote.response_token_ids,
                                                 behaviour_logprobs=vote.behaviour_logprobs, advantage=r,
                                                 model_version=judged.reward_model_version))
    if out.reward:
        out.rm_wins, out.rm_losses = (rm_wins + 1, rm_losses) if t.outcome > 0 else (rm_wins, rm_losses + 1)
    return out
