"""Config of the env service (`env:`): task families, the round scheduler, environment adaptation."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from services.common.config.base import ServiceConfig, StrictModel
from services.common.config.sandbox import SandboxConfig

__all__ = ["FamilyConfig", "SchedulerConfig", "AdaptationConfig", "ModelProposerConfig", "EnvServiceConfig", "TEXT_FAMILIES",
           "CODE_FAMILIES"]


class FamilyConfig(StrictModel):
    """One task family of the pool and the seed tasks it starts with."""

    type: Literal["gym_text", "textworld", "reasoning_gym", "gymnasium", "remote", "live", "web", "code",
                  "codeio"] = Field(
        description="Task family adapter ('gymnasium': any discrete-action Gymnasium env by env_id; 'remote': your "
                    "own Environment server at address; 'live': tasks from a product's real failures, added at run "
                    "time by the ingest service; it seeds no slots; 'web': MiniWoB++ pages in headless Chromium, "
                    "see docs/web.md; 'code': the policy writes a program, run on ground-truth tests in "
                    "env.sandbox, docs/coding.md; 'codeio': the same with reasoning-gym's CodeI/O problems).")
    knobs: dict[str, float] = Field(description="Difficulty knobs of the seed tasks, e.g. {size: 4, hole_prob: 0.2}.")
    train_slots: int = Field(8, ge=0, description="Slots trained on (their variants evolve).")
    heldout_slots: int = Field(0, ge=0, description="Slots never trained on, same knobs (evaluation).")
    ood_knobs: dict[str, float] = Field(default_factory=dict, description="Knobs of out-of-distribution slots.")
    ood_slots: int = Field(0, ge=0, description="Out-of-distribution evaluation slots (with ood_knobs).")
    dataset: str = Field("basic_arithmetic", description="reasoning_gym only: the dataset name.")
    env_id: str = Field("", description="gymnasium only: a registered Gymnasium id, e.g. Taxi-v4, CliffWalking-v1.")
    address: str = Field("", description="remote only: host:port of an Environment gRPC server (env.proto).")
    won_when: Literal["positive_reward", "terminated"] = Field(
        "positive_reward", description="gymnasium only: an episode is won when it ends with reward > 0, or whenever "
                                       "it ends inside the environment (CliffWalking: its only end is the goal).")
    max_steps: int = Field(0, ge=0, description="Steps per episode (0 = the family's default).")
    browsers: int = Field(2, ge=1, le=64, description="web only: headless Chromium browsers at most (one per open "
                                                      "episode, reused across episodes; more open episodes wait).")
    screenshots: bool = Field(False, description="web only: put the page as PNG bytes in every Reset and Step "
                                                 "response (screenshot_png; for vision models; costs a capture per "
                                                 "step). Off: the observation is text only.")
    distractor_ends_episode: bool = Field(
        False, description="web only: a click on (or typing into) one of the elements the distractors knob added "
                           "ends the episode as a failure; off: it changes nothing and the episode goes on.")
    observation: Literal["map", "window"] = Field(
        "map", description="gym_text only: 'map' = the whole map as text; 'window' = the 5x5 tiles around the "
                           "agent plus the goal's offset (a tiny model learns from it; see the README).")
    train_instances: Literal["task", "rollout"] = Field(
        "task", description="What one train task is. 'task': one instance (one map, one game) that all G rollouts of "
                            "its group play (the paper). 'rollout': each rollout plays its own instance drawn from the "
                            "task's knobs (its seed derived from the task's seed and the rollout's), so the group's acc "
                            "is the policy's success rate at those knobs and moves smoothly with them. Held-out and "
                            "OOD slots always stay one fixed instance each.")
    proposer: Literal["parametric", "model"] = Field(
        "parametric", description="Who writes this family's variants: 'parametric' moves a difficulty knob; 'model' "
                                  "(text families: live, code; web: the instruction) asks the OpenAI-compatible model of "
                                  "env.adaptation.model_proposer to write one as JSON.")

    @model_validator(mode="after")
    def _gymnasium_needs_an_id(self) -> "FamilyConfig":
        if self.type == "gymnasium" and not self.env_id:
            raise ValueError("type gymnasium needs env_id (a registered Gymnasium id, e.g. Taxi-v4)")
        if self.type == "remote" and not self.address:
            raise ValueError("type remote needs address (host:port of your Environment server)")
        if self.proposer == "model" and self.type not in TEXT_FAMILIES:
            raise ValueError(f"proposer 'model' writes text tasks: family type {self.type!r} has none "
                             f"(text families: {', '.join(sorted(TEXT_FAMILIES))})")
        return self


class SchedulerConfig(StrictModel):
    """The round scheduler (env service): which rollout jobs to publish, and when (the loop's
    ``mode`` and ``rounds`` are in the shared ``loop:`` section)."""

    @model_validator(mode="before")
    @classmethod
    def _moved_to_loop(cls, data: Any) -> Any:
        moved = sorted(k for k in ("mode", "rounds") if isinstance(data, dict) and k in data)
        if moved:
            raise ValueError(f"env.scheduler.{moved[0]} moved to loop.{moved[0]} (the loop section every service "
                             f"reads): write loop: {{{', '.join(f'{k}: {data[k]}' for k in moved)}}}")
        return data

    @field_validator("top_p")
    @classmethod
    def _full_distribution(cls, value: float) -> float:
        if value < 1:
            raise ValueError(
                f"env.scheduler.top_p={value}: rollouts are trained on, so they must sample the whole distribution "
                "(top_p 1). The behaviour log-probs and the trainer's π_old are those of the untruncated "
                "distribution (model.logprobs_mode raw_logprobs): a truncated sample's ratio to them is biased "
                "(measured at top_p 0.9: mean 0.886, 56 % of tokens outside [0.9, 1.1]). Lower the temperature "
                "instead.")
        return value

    enabled: bool = Field(True, description="Publish rollout jobs (off: the env only serves gRPC).")
    tasks_per_round: int = Field(16, ge=1, description="N: active train tasks sampled per round (plus pending candidates).")
    group_size: int = Field(8, ge=1, description="G: rollouts per task.")
    temperature: float = Field(0.8, ge=0, description="Policy sampling temperature.")
    top_p: float = Field(1.0, gt=0, le=1, description="Policy nucleus mass: 1 only (the rollouts are trained on; "
                                                      "see the check below).")
    max_new_tokens: int = Field(64, ge=1, description="Tokens per policy response.")
    out_of_band_weight: float = Field(
        1.0, gt=0, le=1, description="Sampling weight of a train task whose last acc is outside [band_low, band_high] "
                                     "(in-band and unmeasured tasks weigh 1; 1 = uniform, the paper).")
    skip_pending: bool = Field(
        False, description="Do not draw a train task whose slot has a pending candidate variant (its report already "
                           "asked for that variant, and its last group was out of band); tasks_per_round then caps "
                           "the draw. False = the paper (every active task may be drawn).")
    band_low: float = Field(0.2, ge=0, le=1, description="Lower edge of the band for out_of_band_weight.")
    band_high: float = Field(0.8, ge=0, le=1, description="Upper edge of the band for out_of_band_weight.")
    max_jobs_in_flight: int = Field(32, ge=1, description="async: jobs published and not yet reported.")
    max_staleness: int = Field(1, ge=0, description="async: policy versions a rollout may lag (0 = synchronous).")
    sync_report_wait_s: float = Field(
        60.0, ge=0, description="sync: seconds round r+1 waits, once both models trained on round r, for the env "
                                "to have handled the task report of every job of round r (the accs that weight the "
                                "next draw, the candidates it proposes); then it starts without the missing ones "
                                "(logged). Makes which tasks a round draws independent of timing.")
    eval_every: int = Field(4, ge=0, description="Every this many rounds (and the last), also roll out every "
                                                 "held-out and out-of-distribution slot (0 = never).")
    eval_group_size: int = Field(4, ge=1, description="Rollouts per evaluation task.")
    lease_ttl_s: float = Field(
        10.0, ge=1.0, le=300.0,
        description="Seconds the scheduler's leader lease lives without a renewal (KV bucket <pool_bucket>_leader): "
                    "of several env replicas only the lease holder releases rounds; it renews every "
                    "lease_ttl_s/4, and when it dies another replica takes over within lease_ttl_s "
                    "(docs/high-availability.md).")


TEXT_FAMILIES = frozenset({"live", "code", "web"})
"""Family types whose tasks are text a model can rewrite (`proposer: model`)."""
CODE_FAMILIES = frozenset({"code", "codeio"})
"""Family types whose answers are programs scored by ground-truth tests (docs/coding.md): the critic's
program reward and keep rule, and the unit-test writer, apply to their groups."""


class ModelProposerConfig(StrictModel):
    """The model that writes text-task variants (the paper's environment model): any
    OpenAI-compatible chat-completions server, e.g. the policy's own /v1 endpoint or a vLLM server."""

    base_url: str = Field("", description="The server's /v1 URL ('' = none: no family may use proposer 'model').")
    model: str = Field("", description="The model name to request.")
    api_key_env: str = Field("OPENAI_API_KEY", description="Environment variable holding the API key ('EMPTY' if unset).")
    temperature: float = Field(0.7, ge=0, le=2, description="Sampling temperature of the variant.")
    max_tokens: int = Field(400, ge=16, le=8192, description="Tokens of the model's answer (one JSON object).")
    timeout_s: float = Field(60.0, gt=0, description="Seconds per request.")
    max_failed_answers: int = Field(3, ge=0, le=16, description="Answers the judge called bad shown to the model.")


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
    reseed_tries: int = Field(
        0, ge=0, le=64, description="The first this many of variant_tries keep the knobs and draw another task whose "
                                    "oracle plan is strictly longer (harder) or shorter (easier): a smaller step than "
                                    "a knob move (0 = knob moves only).")
    retry_rejected: int = Field(
        0, ge=0, le=8, description="A rejected candidate's slot gets its next candidate at once (from the same parent "
                                   "acc and direction), at most this many times in a row; 0 = the paper: the slot "
                                   "waits until it is drawn and reported again.")
    model_proposer: ModelProposerConfig = Field(default_factory=ModelProposerConfig)
    same_task_first: bool = Field(
        False, description="Move a family's same-task knobs first (gym_text: slip, on the same map) and the others "
                           "only at their bounds: difficulty moves by a small step instead of a new task.")
    same_task_knobs: list[str] = Field(
        default_factory=list, description="With same_task_first: only these same-task knobs move (e.g. [head_start]: "
                                          "a start along the shortest path, no slippery luck); empty = all of them.")


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
    advertise_address: str = Field(
        "", pattern=r"^([A-Za-z0-9.\-\[\]:]+:[0-9]{1,5})?$",
        description="host:port at which rollout workers reach this very process (not a load-balanced Service): "
                    "it ends every session id this replica opens (<id>@<host:port>), so a worker sends the "
                    "session's Step and Close there; the scheduler lease names its holder by it. Empty: plain "
                    "session ids (one env process, or a client that reaches every replica through one address).")
    sandbox: SandboxConfig = Field(
        default_factory=SandboxConfig, description="The sandbox that runs the policy's programs (families 'code' and "
                                                   "'codeio'; started only when one of them is configured).")
    @model_validator(mode="after")
    def _model_proposer_has_a_server(self) -> "EnvServiceConfig":
        """A family with ``proposer: model`` needs ``adaptation.model_proposer.base_url``."""
        users = [f.type for f in self.families if f.proposer == "model"]
        if users and not self.adaptation.model_proposer.base_url:
            raise ValueError(f"families {users} use proposer 'model': set env.adaptation.model_proposer.base_url "
                             "(an OpenAI-compatible /v1 URL)")
        return self

    live_heldout_every: int = Field(
        10, ge=0, description="Family 'live': every n-th admitted real failure (by content hash) is held out, never "
                              "trained on, and measures whether failures get fixed (policy/success_live_heldout); "
                              "0 = none held out.")
