"""Config of the policy service (`policy:`): rollout workers, model, PPO, cold start."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from services.common.config.base import ServiceConfig, StrictModel
from services.common.config.models import ModelConfig, PPOConfig, SFTConfig, serve_lora_in_vllm

__all__ = ["RolloutConfig", "CaptureConfig", "PolicySFTConfig", "PolicyServiceConfig"]


class RolloutConfig(StrictModel):
    """Rollout workers: prompts, parsing and how invalid answers are handled."""

    env_address: str = Field("127.0.0.1:50051", description="gRPC address of the env service.")
    history_steps: int = Field(2, ge=0, description="Past steps shown in each step prompt.")
    invalid_action: Literal["noop", "end_episode"] = Field(
        "noop", description="Unparseable answer: 'noop' keeps the state and counts the step; 'end_episode' loses.")
    version_wait_s: float = Field(120.0, gt=0, description="Seconds a job waits for its min_policy_version.")
    concurrent_jobs: int = Field(
        16, ge=1, description="Rollout jobs a worker plays at once; their steps share generate calls (up to "
                              "max_batch chats). 1 = one job at a time, each step a batch of its live episodes.")


class CaptureConfig(StrictModel):
    """Capture of live completions on the OpenAI endpoint (requests with an ``X-RLA-Episode`` header).

    Tenant keys are the run's ``ingest.tenants`` (one list of products for the whole run).
    """

    enabled: bool = Field(False, description="Capture completions of requests that ask for it.")
    queue_size: int = Field(256, ge=1, description="Captures waiting to be redacted and published; "
                                                   "beyond it a capture is dropped (counted), never the answer.")


class PolicySFTConfig(SFTConfig):
    """The policy's cold start: the shared SFT budget, and optionally a pretrained model to fine-tune."""

    source: str = Field(
        "", description="`rlanything run`: a pretrained model to cold-start by SFT ('smollm2', a local HF directory "
                        "or hub id); the run's policy.model.source becomes the fine-tuned copy (cached by config "
                        "hash). '' = the tiny model built from the family, when policy.model.source is ''.")
    lora_rank: int = Field(
        0, ge=0, le=1024, description="SFT of a pretrained source: 0 = full fine-tune; > 0 = LoRA adapters of this "
                                      "rank (alpha = 2·rank, ppo.lora's target modules) merged into the weights "
                                      "before saving, so the cold start is a full model either way.")
    skip_train_tasks: bool = Field(
        False, description="The cold start also skips the instances of the run's seeded train slots (it always skips "
                           "the held-out and OOD ones), so RL starts on tasks new to the policy (docs/coding.md).")
    target_success: float = Field(
        0.0, ge=0, le=1, description="Go on past `steps` until the cold start's success on its eval_episodes reaches "
                                     "this, measured every check_every steps, up to max_steps (0 = exactly `steps`): "
                                     "success jumps within a few dozen steps, at a step count that varies by seed.")
    max_steps: int = Field(0, ge=0, description="With target_success: the most SFT steps.")
    check_every: int = Field(10, ge=1, description="With target_success: steps between two measures of success.")

    @model_validator(mode="after")
    def _target_needs_room(self) -> "PolicySFTConfig":
        if self.target_success and self.max_steps <= self.steps:
            raise ValueError(f"policy.sft.target_success={self.target_success} needs max_steps above steps={self.steps}, "
                             f"got max_steps={self.max_steps}")
        return self


class PolicyServiceConfig(ServiceConfig):
    """The policy service: backends, rollout workers, the trainer, checkpoints, the OpenAI endpoint."""

    role: Literal["all", "rollout", "trainer"] = Field("all", description="Which parts this process runs.")
    model: ModelConfig = Field(default_factory=ModelConfig)
    ppo: PPOConfig = Field(default_factory=PPOConfig)
    rollout: RolloutConfig = Field(default_factory=RolloutConfig)
    sft: PolicySFTConfig = Field(default_factory=PolicySFTConfig)
    checkpoint_dir: str = Field("runs/checkpoints", description="Shared checkpoint store (a volume in k8s).")
    openai_port: int = Field(8000, ge=0, le=65535, description="OpenAI-compatible HTTP port (0 = free port).")
    openai_model_names: list[str] = Field(
        ["policy"], description="Names a request's `model` may use on the OpenAI endpoint besides policy.model.source "
                                "(all listed by GET /v1/models); any other name gets 404 model_not_found, a "
                                "missing or empty `model` means the served model.")
    max_batch: int = Field(64, ge=1, description="Chats per generate call.")
    max_pending_requests: int = Field(
        64, ge=1, description="Generation requests (HTTP and gRPC together) in progress at once; more are refused "
                              "with 429 / RESOURCE_EXHAUSTED instead of queueing in memory.")
    capture: CaptureConfig = Field(default_factory=CaptureConfig)

    @model_validator(mode="after")
    def _vllm_serves_lora(self) -> "PolicyServiceConfig":
        """A `vllm` engine starts with LoRA when the trainer trains adapters (`serve_lora_in_vllm`)."""
        serve_lora_in_vllm("policy", self.model, self.ppo)
        return self
