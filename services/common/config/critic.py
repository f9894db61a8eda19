"""Config of the critic service (`critic:`): rewards, advantages, bands, buckets."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from services.common.config.sandbox import SandboxConfig
from services.common.config.base import ServiceConfig, StrictModel

__all__ = ["CriticServiceConfig", "LiveCriticConfig"]


class LiveCriticConfig(StrictModel):
    """The critic's live path (judged live trajectories, `services/critic/live_eval.py`)."""

    max_staleness: int = Field(1, ge=0, description="Policy versions a served live turn may lag the latest one.")
    min_count: int = Field(8, ge=0, description="Rewards a (tenant, task type) baseline needs before advantages.")
    alpha: float = Field(0.05, gt=0, le=1, description="Weight of a new reward in the exponentially weighted baseline.")
    sigma_min: float = Field(0.1, gt=0, description="Floor of the baseline's standard deviation.")
    adv_max: float = Field(3.0, gt=0, description="Live advantages are clipped to ±adv_max.")
    requires_outcome: bool = Field(
        True, description="Policy samples only from episodes whose outcome came from outside the judge.")
    rm_slack: int = Field(2, ge=0, description="Won (or lost) live episodes that may lead the other side before "
                                               "the judge trains on that side no more (balance).")
    baselines_bucket: str = Field("critic_live", pattern=r"^[A-Za-z0-9_-]+$",
                                  description="JetStream KV bucket of the live baselines.")


class CriticServiceConfig(ServiceConfig):
    """The critic service: task groups, integrated advantages, consistency rewards, metrics."""

    lam: float = Field(
        1.0, ge=0, description="λ: weight of the RM's mean vote in the step reward r = O + λ·S̄ (0 = outcome-only).")
    group_timeout_s: float = Field(
        600.0, gt=0, description="Seconds after a group's first stored rollout before it is reported partial.")
    lone_rollout_advantage: Literal["zero", "raw"] = Field(
        "zero", description="Advantage of a step index only one rollout reaches: 0, or the reference's raw r.")
    advantage_scale: Literal["std", "none"] = Field(
        "std", description="Per-step-index advantage: 'std' = z-score (the paper), 'none' = r − mean (Dr. GRPO): "
                           "the judge's share of the advantage then stays λ-sized where one outcome remains.")
    policy_band: bool = Field(
        True, description="Train the policy only on tasks with a win and a loss (acc in [1/G, 1-1/G]).")
    candidate_samples: Literal["none", "accepted", "mixed"] = Field(
        "accepted", description="Do a candidate variant's validation rollouts train the models? 'accepted': when "
                                "the acceptance rule admits it (the paper: they train once it is accepted); 'none': "
                                "never; 'mixed': whatever the verdict. The policy and RM bands apply as for a drawn "
                                "task.")
    code_rewards: bool = Field(
        True, description="Groups of family 'code' or 'codeio': the policy's advantage is CURE's program reward (the share of "
                          "ground-truth tests the program passed, z-scored in the group) instead of O + λ·S̄, and the "
                          "group trains the policy only while its pass-all rate is in [code_keep_low, "
                          "code_keep_high] (docs/coding.md).")
    code_keep_low: float = Field(0.2, ge=0, le=1, description="Lowest pass-all rate of a code task that trains.")
    code_keep_high: float = Field(0.8, ge=0, le=1, description="Highest pass-all rate of a code task that trains.")
    unit_tests: bool = Field(
        False, description="The reward model writes unit tests (reward.kind: unit_tests): code groups run every "
                           "program on every generated test in critic.sandbox and train the RM with CURE's test "
                           "reward (docs/coding.md). Must match reward.kind.")
    sandbox: SandboxConfig = Field(
        default_factory=SandboxConfig, description="The sandbox that runs programs on generated tests (started only "
                                                   "with unit_tests).")
    rm_band_low: float = Field(0.2, ge=0, le=1, description="Lowest task acc whose steps train the RM.")
    rm_band_high: float = Field(0.8, ge=0, le=1, description="Highest task acc whose steps train the RM.")
    invalid_answer_penalty: float = Field(
        1.0, ge=0, description="Subtracted from the step reward of a policy answer that is no valid action (a "
                               "format reward; 0 = the paper's r = O + λ·S̄). Keeps the \\boxed{i} format.")
    invalid_vote_penalty: float = Field(
        -2.0, le=0, description="Consistency reward of an unparseable RM vote (format penalty), before z-scoring.")
    groups_bucket: str = Field(
        "critic_groups", pattern=r"^[A-Za-z0-9_-]+$", description="JetStream KV bucket of the open groups.")
    live: LiveCriticConfig = Field(default_factory=LiveCriticConfig)
    stats_bucket: str = Field(
        "critic_stats", pattern=r"^[A-Za-z0-9_-]+$",
        description="JetStream KV bucket of closed groups (task reports, round statistics).")

    def model_post_init(self, context: Any, /) -> None:
        """Reject an empty RM band (raised as a validation error naming the section)."""
        if self.rm_band_low > self.rm_band_high:
            raise ValueError(f"rm_band_low ({self.rm_band_low}) must not exceed rm_band_high ({self.rm_band_high})")
