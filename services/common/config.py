"""Run configuration: one YAML file per run, dotted overrides, strict pydantic validation.

Every service reads only its own section. Unknown keys and wrong types fail at start-up with a
message that names the dotted field and the bad value. This module must
stay importable without torch or grpc.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from services.common.errors import ConfigError

__all__ = [
    "StrictModel",
    "NatsConfig",
    "ConsumerConfig",
    "ServerConfig",
    "ServiceConfig",
    "LauncherConfig",
    "FamilyConfig",
    "SchedulerConfig",
    "AdaptationConfig",
    "EnvServiceConfig",
    "CriticServiceConfig",
    "TinyModelConfig",
    "ModelConfig",
    "PPOConfig",
    "RolloutConfig",
    "SFTConfig",
    "PolicyServiceConfig",
    "JudgeSFTConfig",
    "RewardServiceConfig",
    "RunConfig",
    "SERVICE_NAMES",
    "load_config",
    "apply_overrides",
    "dump_config",
]

SERVICE_NAMES: tuple[str, ...] = ("env", "policy", "reward", "critic")


class StrictModel(BaseModel):
    """Base of every config model: unknown keys are errors, values are validated on assignment."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True)


class NatsConfig(StrictModel):
    """Where the NATS JetStream server is and how streams are set up."""

    url: str = Field("nats://127.0.0.1:4222", description="NATS server URL.")
    connect_timeout_s: float = Field(5.0, gt=0, description="Seconds to wait for a connection.")
    duplicate_window_s: float = Field(
        120.0, gt=0, description="Seconds during which a repeated Nats-Msg-Id is dropped."
    )
    stream_replicas: int = Field(1, ge=1, le=5, description="JetStream replicas per stream.")


class ConsumerConfig(StrictModel):
    """Delivery settings of durable pull consumers (every event handler)."""

    ack_wait_s: float = Field(30.0, gt=0, description="Seconds before an unacked message is redelivered.")
    max_deliveries: int = Field(
        5, ge=1, description="Deliveries after which a failing message goes to the dead-letter stream."
    )
    backoff_s: list[float] = Field(
        default_factory=lambda: [0.5, 2.0, 8.0],
        min_length=1,
        description="Nak delays in seconds for the 1st, 2nd, ... transient failure (last repeats).",
    )
    fetch_batch: int = Field(16, ge=1, le=1024, description="Messages fetched per pull request.")
    fetch_timeout_s: float = Field(1.0, gt=0, description="Seconds one pull request waits for messages.")


class ServerConfig(StrictModel):
    """Network endpoints of one service process."""

    host: str = Field("127.0.0.1", description="Address the gRPC and metrics servers bind to.")
    grpc_port: int = Field(0, ge=0, le=65535, description="gRPC port (0 = any free port).")
    metrics_port: int = Field(0, ge=0, le=65535, description="Prometheus /metrics port (0 = any free port).")
    grace_s: float = Field(
        5.0, gt=0, description="Seconds in-flight RPCs get on SIGTERM; keep below the pod's grace period."
    )


class ServiceConfig(StrictModel):
    """Settings every service has; each service's own knobs extend this class."""

    server: ServerConfig = Field(default_factory=ServerConfig)
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"


class FamilyConfig(StrictModel):
    """One task family of the pool and the seed tasks it starts with."""

    type: Literal["gym_text", "textworld", "reasoning_gym"] = Field(description="Task family adapter.")
    knobs: dict[str, float] = Field(description="Difficulty knobs of the seed tasks, e.g. {size: 4, hole_prob: 0.2}.")
    train_slots: int = Field(8, ge=0, description="Slots trained on (their variants evolve).")
    heldout_slots: int = Field(0, ge=0, description="Slots never trained on, same knobs (evaluation).")
    ood_knobs: dict[str, float] = Field(default_factory=dict, description="Knobs of out-of-distribution slots.")
    ood_slots: int = Field(0, ge=0, description="Out-of-distribution evaluation slots (with ood_knobs).")
    dataset: str = Field("basic_arithmetic", description="reasoning_gym only: the dataset name.")
    max_steps: int = Field(0, ge=0, description="Steps per episode (0 = the family's default).")
    observation: Literal["map", "window"] = Field(
        "map", description="gym_text only: 'map' = the whole map as text; 'window' = the 5x5 tiles around the "
                           "agent plus the goal's offset (a tiny model learns from it; see the README).")


class SchedulerConfig(StrictModel):
    """The round scheduler (env service): which rollout jobs to publish, and when."""

    enabled: bool = Field(True, description="Publish rollout jobs (off: the env only serves gRPC).")
    mode: Literal["sync", "async"] = Field(
        "sync", description="sync: round r+1 waits for both models trained on round r; async: bounded jobs in flight.")
    rounds: int = Field(0, ge=0, description="Rounds to release (0 = until stopped).")
    tasks_per_round: int = Field(16, ge=1, description="N: active train tasks sampled per round (plus pending candidates).")
    group_size: int = Field(8, ge=1, description="G: rollouts per task.")
    temperature: float = Field(0.8, ge=0, description="Policy sampling temperature.")
    top_p: float = Field(1.0, gt=0, le=1, description="Policy nucleus mass.")
    max_new_tokens: int = Field(64, ge=1, description="Tokens per policy response.")
    out_of_band_weight: float = Field(
        1.0, gt=0, le=1, description="Sampling weight of a train task whose last acc is outside [band_low, band_high] "
                                     "(in-band and unmeasured tasks weigh 1; 1 = uniform, the paper).")
    band_low: float = Field(0.2, ge=0, le=1, description="Lower edge of the band for out_of_band_weight.")
    band_high: float = Field(0.8, ge=0, le=1, description="Upper edge of the band for out_of_band_weight.")
    max_jobs_in_flight: int = Field(32, ge=1, description="async: jobs published and not yet reported.")
    max_staleness: int = Field(1, ge=0, description="async: policy versions a rollout may lag (0 = synchronous).")
    eval_every: int = Field(4, ge=0, description="Every this many rounds (and the last), also roll out every "
                                                 "held-out and out-of-distribution slot (0 = never).")
    eval_group_size: int = Field(4, ge=1, description="Rollouts per evaluation task.")


class AdaptationConfig(StrictModel):
    """Loop 3: harder/easier variants from the critic's task reports."""

    enabled: bool = Field(True, description="Propose variants (off: the 'no environment adaptation' ablation).")
    harder_at: float = Field(0.8, ge=0, le=1, description="acc at or above which a harder variant is requested.")
    easier_at: float = Field(0.2, ge=0, le=1, description="acc at or below which an easier variant is requested.")
    band_low: float = Field(0.2, ge=0, le=1, description="Acceptance band, lower edge (harder variants).")
    band_high: float = Field(0.8, ge=0, le=1, description="Acceptance band, upper edge (easier variants).")
    proposer: Literal["parametric"] = Field("parametric", description="How candidates are made.")
    variant_tries: int = Field(
        4, ge=1, le=64, description="Seeds tried per proposal until the candidate's oracle plan moves the asked way "
                                    "(harder: longer than the parent's). Each try builds the task (TextWorld: seconds).")
    bad_step_threshold: float = Field(
        0.3, ge=0, le=1, description="Share of bad steps at which the proposer switches knob order.")


class EnvServiceConfig(ServiceConfig):
    """The env service: task families, sessions, the task pool, adaptation and the scheduler."""

    families: list[FamilyConfig] = Field(
        default_factory=lambda: [FamilyConfig(type="gym_text", knobs={"size": 4, "hole_prob": 0.2},
                                              train_slots=16, heldout_slots=8,
                                              ood_knobs={"size": 5, "hole_prob": 0.25}, ood_slots=8)],
        min_length=1, description="Task families in the pool.")
    scheduler: SchedulerConfig = Field(default_factory=SchedulerConfig)
    adaptation: AdaptationConfig = Field(default_factory=AdaptationConfig)
    session_idle_timeout_s: float = Field(300.0, gt=0, description="Seconds before an idle episode session expires.")
    max_sessions: int = Field(4096, ge=1, description="Open sessions at most (oldest idle ones expire first).")
    cache_dir: str = Field(".cache/env", description="Where generated games are cached (by knobs and seed).")
    pool_bucket: str = Field("env_pool", description="JetStream KV bucket of the task pool.")


class TinyModelConfig(StrictModel):
    """A tiny Qwen2-style decoder built from scratch with a tokenizer trained on the family's text."""

    hidden_size: int = Field(128, ge=16, description="Model width.")
    layers: int = Field(2, ge=1, description="Decoder layers.")
    heads: int = Field(4, ge=1, description="Attention heads.")
    vocab_size: int = Field(512, ge=300, description="Byte-level BPE vocabulary (keep it small on CPU).")


class ModelConfig(StrictModel):
    """Which model a service runs, and through which generation backend."""

    backend: Literal["hf", "vllm", "openai"] = Field("hf", description="Generation backend.")
    source: str = Field(
        "", description="Local HF directory, hub id, 'smollm2', or '' for the tiny model built from the family.")
    cache_dir: str = Field(".cache/models", description="Where built/converted models are cached.")
    tiny: TinyModelConfig = Field(default_factory=TinyModelConfig)
    openai_base_url: str = Field("", description="openai backend: the server's /v1 URL.")
    openai_model: str = Field("", description="openai backend: the model name to request.")
    openai_api_key_env: str = Field("OPENAI_API_KEY", description="Env variable holding the API key.")
    threads: int = Field(0, ge=0, description="torch CPU threads (0 = torch's default).")
    device: str = Field("cpu", description="torch device for hf: 'cpu' or 'cuda'.")


class PPOConfig(StrictModel):
    """PPO-clip with the k3 KL term (docs/algorithm.md, training step); used by both trainers."""

    eps: float = Field(0.2, gt=0, lt=1, description="Clip range ε.")
    beta: float = Field(0.01, ge=0, description="KL coefficient β (k3 estimator).")
    ref_beta: float = Field(
        0.0, ge=0, description="Weight of a k3 KL to the starting weights (version 0), as GRPO's KL to its initial "
                               "model (0 = the paper: KL to π_old only). Anchors the answer format.")
    dual_clip: float = Field(
        3.0, ge=0, description="Dual-clip c for A < 0 (surrogate >= c·A; 0 = off, the paper's loss): bounds the "
                               "gradient of a token whose probability rose far within a round.")
    lr: float = Field(3e-4, gt=0, description="AdamW learning rate (tiny CPU models need ~1e-4..1e-3).")
    optimizer_steps: int = Field(4, ge=1, description="Optimizer steps per round: the data is split in this many minibatches.")
    epochs: int = Field(1, ge=1, le=64, description="Passes over the round's data (optimizer_steps minibatches each).")
    warmup_steps: int = Field(
        0, ge=0, description="Linear lr warm-up over the trainer's first optimizer steps (0 = none): Adam's first "
                             "steps move every weight by the full lr.")
    max_kl: float = Field(
        0.0, ge=0, description="Trust region: stop the update before a minibatch whose KL(π_old‖π_θ) exceeds this, "
                               "and undo a step that takes its minibatch above it (0 = off, the paper).")
    grad_clip: float = Field(1.0, gt=0, description="Gradient-norm clip.")
    max_length: int = Field(1024, ge=2, description="Samples longer than this (tokens) are dropped with their advantage.")
    min_samples_async: int = Field(64, ge=1, description="async mode: train once this many samples are stored.")

    @model_validator(mode="after")
    def _dual_clip_above_one(self) -> "PPOConfig":
        if 0 < self.dual_clip <= 1:
            raise ValueError(f"dual_clip must be 0 (off) or > 1, got {self.dual_clip}")
        return self


class RolloutConfig(StrictModel):
    """Rollout workers: prompts, parsing and how invalid answers are handled."""

    env_address: str = Field("127.0.0.1:50051", description="gRPC address of the env service.")
    history_steps: int = Field(2, ge=0, description="Past steps shown in each step prompt.")
    invalid_action: Literal["noop", "end_episode"] = Field(
        "noop", description="Unparseable answer: 'noop' keeps the state and counts the step; 'end_episode' loses.")
    version_wait_s: float = Field(120.0, gt=0, description="Seconds a job waits for its min_policy_version.")


class SFTConfig(StrictModel):
    """Cold start: supervised steps on the environment's expert trajectories."""

    episodes: int = Field(600, ge=1, description="Expert episodes (maps, games, questions) to learn from.")
    steps: int = Field(300, ge=0, description="Optimizer steps (stop short of mastery).")
    batch_size: int = Field(32, ge=1, description="Samples per step.")
    lr: float = Field(1e-3, gt=0, description="AdamW learning rate.")
    eval_episodes: int = Field(100, ge=1, description="Held-out episodes to measure success before/after.")


class PolicyServiceConfig(ServiceConfig):
    """The policy service: backends, rollout workers, the trainer, checkpoints, the OpenAI endpoint."""

    role: Literal["all", "rollout", "trainer"] = Field("all", description="Which parts this process runs.")
    model: ModelConfig = Field(default_factory=ModelConfig)
    ppo: PPOConfig = Field(default_factory=PPOConfig)
    rollout: RolloutConfig = Field(default_factory=RolloutConfig)
    sft: SFTConfig = Field(default_factory=SFTConfig)
    checkpoint_dir: str = Field("runs/checkpoints", description="Shared checkpoint store (a volume in k8s).")
    openai_port: int = Field(8000, ge=0, le=65535, description="OpenAI-compatible HTTP port (0 = free port).")
    max_batch: int = Field(64, ge=1, description="Chats per generate call.")


class CriticServiceConfig(ServiceConfig):
    """The critic service: task groups, integrated advantages, consistency rewards, metrics."""

    lam: float = Field(
        1.0, ge=0, description="λ: weight of the RM's mean vote in the step reward r = O + λ·S̄ (0 = outcome-only).")
    group_timeout_s: float = Field(
        600.0, gt=0, description="Seconds after a group's first stored rollout before it is reported partial.")
    lone_rollout_advantage: Literal["zero", "raw"] = Field(
        "zero", description="Advantage of a step index only one rollout reaches: 0, or the reference's raw r.")
    policy_band: bool = Field(
        True, description="Train the policy only on tasks with a win and a loss (acc in [1/G, 1-1/G]).")
    rm_band_low: float = Field(0.2, ge=0, le=1, description="Lowest task acc whose steps train the RM.")
    rm_band_high: float = Field(0.8, ge=0, le=1, description="Highest task acc whose steps train the RM.")
    invalid_answer_penalty: float = Field(
        1.0, ge=0, description="Subtracted from the step reward of a policy answer that is no valid action (a "
                               "format reward; 0 = the paper's r = O + λ·S̄). Keeps the \\boxed{i} format.")
    invalid_vote_penalty: float = Field(
        -2.0, le=0, description="Consistency reward of an unparseable RM vote (format penalty), before z-scoring.")
    groups_bucket: str = Field(
        "critic_groups", pattern=r"^[A-Za-z0-9_-]+$", description="JetStream KV bucket of the open groups.")
    stats_bucket: str = Field(
        "critic_stats", pattern=r"^[A-Za-z0-9_-]+$",
        description="JetStream KV bucket of closed groups (task reports, round statistics).")

    def model_post_init(self, context: Any, /) -> None:
        """Reject an empty RM band (raised as a validation error naming the section)."""
        if self.rm_band_low > self.rm_band_high:
            raise ValueError(f"rm_band_low ({self.rm_band_low}) must not exceed rm_band_high ({self.rm_band_high})")


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


class RewardServiceConfig(ServiceConfig):
    """The reward service: the generative step judge (m votes per step), the RM trainer, its checkpoints."""

    role: Literal["all", "judge", "trainer"] = Field(
        "all", description="Which parts this process runs: judge workers + gRPC JudgeSteps, the RM trainer, or both.")
    backend: Literal["llm", "oracle", "openai"] = Field(
        "llm", description="llm: the generative judge (trained); oracle: votes = the env's step labels (upper bound, "
                           "not trained); openai: an external judge at model.openai_base_url (not trained).")
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

    @model_validator(mode="after")
    def _backend_and_model_agree(self) -> "RewardServiceConfig":
        """Reject an openai judge without a URL, and an llm judge that could not be trained (no token ids)."""
        if self.backend == "openai" and not self.model.openai_base_url:
            raise ValueError("backend 'openai' needs model.openai_base_url (the server's /v1 URL)")
        if self.backend == "llm" and self.model.backend == "openai":
            raise ValueError("model.backend 'openai' returns no token ids to train on; use backend: openai "
                             "(a frozen external judge) instead")
        return self


class LauncherConfig(StrictModel):
    """How `rlanything up` runs the services locally."""

    services: list[Literal["env", "policy", "reward", "critic"]] = Field(
        default_factory=lambda: ["env", "policy", "reward", "critic"],  # type: ignore[arg-type]  # a list of the Literal names
        description="Services to start."
    )
    health_timeout_s: float = Field(60.0, gt=0, description="Seconds to wait for every service to be SERVING.")
    stop_timeout_s: float = Field(10.0, gt=0, description="Seconds to wait after SIGTERM before SIGKILL.")
    runs_dir: str = Field("runs", description="Folder that holds one sub-folder per run.")
    coldstart: bool = Field(True, description="`rlanything run`: cold-start the policy and judge by SFT (cached) "
                                              "when their model.source is ''.")
    coldstart_dir: str = Field(".cache/coldstart", description="Cache of cold-started models, by config hash.")
    round_timeout_s: float = Field(1800.0, gt=0, description="`rlanything run` fails when a round takes longer.")
    max_invalid_answer_rate: float = Field(
        0.5, gt=0, le=1, description="`rlanything run` stops (exit 3) when this share of the policy's answers is no "
                                     "valid \\boxed{i} for invalid_answer_patience rounds in a row (1 = never).")
    invalid_answer_patience: int = Field(2, ge=1, description="Consecutive rounds above max_invalid_answer_rate.")


class RunConfig(StrictModel):
    """One run: the whole system's configuration (one YAML file)."""

    run_name: str = Field("rlanything", min_length=1, description="Human-readable name of the run.")
    seed: int = Field(0, ge=0, description="Global random seed.")
    nats: NatsConfig = Field(default_factory=NatsConfig)
    consumer: ConsumerConfig = Field(default_factory=ConsumerConfig)
    env: EnvServiceConfig = Field(default_factory=EnvServiceConfig)
    policy: PolicyServiceConfig = Field(default_factory=PolicyServiceConfig)
    reward: RewardServiceConfig = Field(default_factory=RewardServiceConfig)
    critic: CriticServiceConfig = Field(default_factory=CriticServiceConfig)
    launcher: LauncherConfig = Field(default_factory=LauncherConfig)


def _format_validation_error(err: ValidationError, source: str) -> str:
    lines = [f"invalid config {source}:"]
    for e in err.errors():
        field = ".".join(str(p) for p in e["loc"]) or "<root>"
        value = e.get("input")
        shown = json.dumps(value, default=str) if not isinstance(value, dict) else "{...}"
        if e["type"] == "extra_forbidden":
            lines.append(f"  {field}: unknown key (value {shown}); check the spelling or remove it")
        else:
            lines.append(f"  {field}: {e['msg']} (got {shown})")
    return "\n".join(lines)


def apply_overrides(data: dict[str, Any], overrides: list[str]) -> dict[str, Any]:
    """Apply dotted ``key.sub=value`` overrides to a nested dict (values parsed as YAML).

    Raises:
        ConfigError: when an override has no ``=`` or walks through a non-mapping value.
    """
    result = json.loads(json.dumps(data))  # deep copy of plain data
    for item in overrides:
        key, sep, raw = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"override {item!r}: expected dotted.key=value")
        parts = key.strip().split(".")
        node: Any = result
        for i, part in enumerate(parts[:-1]):
            if isinstance(node, list):  # a list entry by its index: env.families.0.observation=window
                if not part.isdigit() or int(part) >= len(node):
                    raise ConfigError(f"override {item!r}: {'.'.join(parts[:i])} has {len(node)} entries, "
                                      f"no index {part!r}")
                child = node[int(part)]
            else:
                child = node.setdefault(part, {})
            if not isinstance(child, (dict, list)):
                where = ".".join(parts[: i + 1])
                raise ConfigError(f"override {item!r}: {where} is {child!r}, not a section")
            node = child
        if isinstance(node, list):
            raise ConfigError(f"override {item!r}: {'.'.join(parts[:-1])} is a list; name an entry's field")
        node[parts[-1]] = yaml.safe_load(raw) if raw.strip() else ""
    return result


def load_config(path: str | Path | None, overrides: list[str] | None = None) -> RunConfig:
    """Read a YAML run config, apply dotted overrides and validate it.

    Args:
        path: YAML file; ``None`` starts from the defaults.
        overrides: ``["policy.server.grpc_port=50052", ...]``, applied in order.

    Raises:
        ConfigError: the file is missing or not a mapping, or a field has a wrong type, a value
            out of range or an unknown key; the message names each dotted field and its value.
    """
    data: dict[str, Any] = {}
    source = "<defaults>"
    if path is not None:
        source = str(path)
        p = Path(path)
        if not p.is_file():
            raise ConfigError(f"config file {source} does not exist")
        try:
            loaded = yaml.safe_load(p.read_text()) or {}
        except yaml.YAMLError as exc:
            raise ConfigError(f"config file {source} is not valid YAML: {exc}") from exc
        if not isinstance(loaded, dict):
            raise ConfigError(f"config file {source}: top level must be a mapping, got {type(loaded).__name__}")
        data = loaded
    data = apply_overrides(data, overrides or [])
    try:
        return RunConfig.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(_format_validation_error(exc, source)) from None


def dump_config(config: RunConfig) -> str:
    """The resolved config as YAML (what a run directory stores and services re-read)."""
    return yaml.safe_dump(config.model_dump(mode="json"), sort_keys=False)
