"""Config of the reward service (`reward:`): the judge, its votes, its trainer and cold start."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from services.common.config.base import ServiceConfig
from services.common.config.models import ModelConfig, PPOConfig, SFTConfig, serve_lora_in_vllm

__all__ = ["JudgeSFTConfig", "RewardServiceConfig"]


class JudgeSFTConfig(SFTConfig):
    """Cold start of the judge: supervised steps on the environment's oracle step labels, made noisy."""

    episodes: int = Field(
        300, ge=1, description="Episodes played in-process (oracle-plan and random actions mixed) to train on.")
    steps: int = Field(150, ge=0, description="Optimizer steps (stop short of mastery).")
    eval_episodes: int = Field(
        60, ge=1, description="Held-out episodes whose steps measure step accuracy before/after.")
    expert_prob: float = Field(
        0.5, ge=0, le=1, description="Chance that a played step follows the oracle plan (else a random action).")
    label_noise: float = Field(
        0.3, ge=0, le=0.5, description="Chance that a training label is flipped, so the judge starts imperfect.")
    copy_share: float = Field(
        0.0, ge=0, le=1, description="reward.kind unit_tests only: share of the writer's cold-start tests that copy one "
                                     "of the statement's shown examples instead of a new input's output (docs/coding.md).")


class RewardServiceConfig(ServiceConfig):
    """The reward service: the generative step judge (m votes per step), the RM trainer, its checkpoints."""

    role: Literal["all", "judge", "trainer"] = Field(
        "all", description="Which parts this process runs: judge workers + gRPC JudgeSteps, the RM trainer, or both.")
    backend: Literal["llm", "oracle", "openai"] = Field(
        "llm", description="llm: the generative judge (trained); oracle: votes = the env's step labels (upper bound, "
                           "not trained); openai: an external judge at model.openai_base_url (not trained).")
    kind: Literal["step_judge", "unit_tests"] = Field(
        "step_judge", description="What the reward model writes: step_judge = m verdicts \\boxed{±1} per step; "
                                  "unit_tests = m unit tests per answer of a code task (\\boxed{INPUT => OUTPUT}), "
                                  "run by the critic against the group's programs (needs critic.unit_tests; "
                                  "backend llm, an empty model.source being the cold-started tiny writer, or "
                                  "openai; docs/coding.md).")
    model: ModelConfig = Field(default_factory=ModelConfig)
    ppo: PPOConfig = Field(default_factory=PPOConfig)
    sft: JudgeSFTConfig = Field(default_factory=JudgeSFTConfig)
    frozen: bool = Field(
        False, description="llm: announce a version per round but never update the weights (fixed-judge ablation).")
    votes: int = Field(3, ge=1, le=32, description="m: votes sampled per step.")
    temperature: float = Field(0.8, ge=0, le=2, description="Sampling temperature of the votes (0 = greedy).")
    max_new_tokens: int = Field(48, ge=1, le=4096, description="Tokens per vote (brief reasoning, then \\boxed{±1}).")
    max_batch: int = Field(64, ge=1, description="Judge chats (steps × votes) per generate call.")
    batch_wait_s: float = Field(
        0.01, ge=0, le=1, description="Seconds a judge request waits for concurrent ones to share its generate batch.")
    judge_eval: bool = Field(
        False, description="Also judge held-out/OOD evaluation rollouts (they train nothing; off = they pass "
                           "through with empty judgements, and RM step accuracy covers training rollouts only).")
    prompt_chars: int = Field(
        600, ge=40, description="Characters of the agent's step prompt shown to the judge (its end).")
    field_chars: int = Field(
        300, ge=20, description="Characters shown of the agent's response (its end) and next observation (its start).")
    checkpoint_dir: str = Field("runs/checkpoints", description="Shared checkpoint store (a volume in k8s).")
    judged_bucket: str = Field(
        "reward_judged", pattern=r"^[A-Za-z0-9_-]+$",
        description="JetStream KV bucket of judged trajectory ids (a redelivery after the dedup window is skipped).")
    shadow: str = Field(
        "", pattern=r"^[A-Za-z0-9_-]{0,32}$",
        description="Shadow mode: this judge's name. It judges every trajectory beside the running judge and "
                    "publishes on rla.traj.shadow.<name> (live: rla.traj.live.shadow.<tenant>.<episode>.<name>); "
                    "nothing trains from its votes. Needs role 'judge'; '' = the running judge.")

    @model_validator(mode="after")
    def _backend_and_model_agree(self) -> "RewardServiceConfig":
        """Reject an openai judge without a URL, an llm judge that could not be trained (no token ids), and a
        shadow judge that would train."""
        if self.backend == "openai" and not self.model.openai_base_url:
            raise ValueError("backend 'openai' needs model.openai_base_url (the server's /v1 URL)")
        if self.shadow and self.role != "judge":
            raise ValueError(f"reward.shadow={self.shadow!r} needs reward.role 'judge' (got {self.role!r}): a shadow "
                             "judge never trains")
        if self.backend == "llm" and self.model.backend == "openai":
            raise ValueError("model.backend 'openai' returns no token ids to train on; use backend: openai "
                             "(a frozen external judge) instead")
        if self.kind == "unit_tests" and self.backend == "oracle":
            raise ValueError("reward.kind 'unit_tests' needs a model that writes tests (backend llm or openai), "
                             "not backend 'oracle'")
        serve_lora_in_vllm("reward", self.model, self.ppo)  # a vllm engine starts with LoRA for trained adapters
        return self
