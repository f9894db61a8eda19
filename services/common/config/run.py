"""The whole run config (one YAML file): sections by owner, dotted overrides, strict validation.

Unknown keys and wrong types fail at start-up with a message that names the dotted field and the
bad value. This package must stay importable without torch or grpc.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml
from pydantic import Field, ValidationError, model_validator

from services.common.config.base import ConsumerConfig, LimitsConfig, LoopConfig, NatsConfig, StrictModel
from services.common.config.critic import CriticServiceConfig
from services.common.config.ingest import IngestServiceConfig
from services.common.config.env import CODE_FAMILIES, EnvServiceConfig
from services.common.config.launcher import LauncherConfig
from services.common.config.policy import PolicyServiceConfig
from services.common.config.reward import RewardServiceConfig
from services.common.config.tracking import LoggingConfig
from services.common.errors import ConfigError

__all__ = ["RunConfig", "load_config", "apply_overrides", "dump_config"]


class RunConfig(StrictModel):
    """One run: the whole system's configuration (one YAML file)."""

    run_name: str = Field("rlanything", min_length=1, description="Human-readable name of the run.")
    seed: int = Field(0, ge=0, description="Global random seed.")
    nats: NatsConfig = Field(default_factory=NatsConfig)
    consumer: ConsumerConfig = Field(default_factory=ConsumerConfig)
    limits: LimitsConfig = Field(default_factory=LimitsConfig)
    loop: LoopConfig = Field(default_factory=LoopConfig)
    env: EnvServiceConfig = Field(default_factory=EnvServiceConfig)
    policy: PolicyServiceConfig = Field(default_factory=PolicyServiceConfig)
    reward: RewardServiceConfig = Field(default_factory=RewardServiceConfig)
    critic: CriticServiceConfig = Field(default_factory=CriticServiceConfig)
    ingest: IngestServiceConfig = Field(default_factory=IngestServiceConfig)
    launcher: LauncherConfig = Field(default_factory=LauncherConfig)
    logging: LoggingConfig = Field(default_factory=LoggingConfig)

    @model_validator(mode="after")
    def _reproducible_batches_of_one(self) -> "RunConfig":
        """``loop.reproducible``: generate calls of one chat each, in synchronous rounds."""
        if self.loop.reproducible:
            if self.loop.mode != "sync":
                raise ValueError(f"loop.reproducible needs loop.mode 'sync' (asynchronous rounds train on whatever "
                                 f"has arrived, which is timing), got loop.mode={self.loop.mode!r}")
            self.policy.max_batch = 1
            self.reward.max_batch = 1
        return self

    @model_validator(mode="after")
    def _web_browsers_cover_open_episodes(self) -> "RunConfig":
        """A ``web`` family's episodes each hold a browser, and a rollout job resets all its episodes
        before stepping any: fewer browsers than the episodes a policy worker opens at once would
        leave every job waiting for a browser another job holds."""
        if not self.env.scheduler.enabled:
            return self
        sched, jobs = self.env.scheduler, self.policy.rollout.concurrent_jobs
        episodes = jobs * max(sched.group_size, sched.eval_group_size)
        for family in self.env.families:
            if family.type == "web" and family.browsers < episodes:
                raise ValueError(
                    f"env.families[web].browsers={family.browsers} is below the episodes a policy worker opens at "
                    f"once: policy.rollout.concurrent_jobs={jobs} x max(env.scheduler.group_size="
                    f"{sched.group_size}, eval_group_size={sched.eval_group_size}) = {episodes}; raise browsers or "
                    "lower concurrent_jobs")
        return self

    @model_validator(mode="after")
    def _unit_tests_on_both_sides(self) -> "RunConfig":
        """``reward.kind: unit_tests`` (the RM writes tests) and ``critic.unit_tests`` (the critic runs
        them) go together: votes that are tests must not train as step verdicts, nor the reverse."""
        if (self.reward.kind == "unit_tests") != self.critic.unit_tests:
            raise ValueError(f"reward.kind is {self.reward.kind!r} but critic.unit_tests is {self.critic.unit_tests}: "
                             "set both (reward.kind: unit_tests with critic.unit_tests: true) or neither")
        others = sorted({f.type for f in self.env.families} - CODE_FAMILIES)
        if self.reward.kind == "unit_tests" and others:
            raise ValueError(f"reward.kind 'unit_tests' writes tests of code tasks; env.families also has {others}")
        return self

    @model_validator(mode="after")
    def _shadow_judge_is_a_judge(self) -> "RunConfig":
        """``launcher.shadow_judge`` must name the shadow and make a valid reward config."""
        if self.launcher.shadow_judge:
            if not self.launcher.shadow_judge.get("shadow"):
                raise ValueError("launcher.shadow_judge needs 'shadow' (the shadow judge's name), got "
                                 f"{self.launcher.shadow_judge!r}")
            self.shadow_reward()
        return self

    def shadow_reward(self) -> RewardServiceConfig:
        """The shadow judge's `reward:` section: this run's, with ``launcher.shadow_judge`` over it
        and role ``judge`` (its own ports: 0 = free ones).

        Raises:
            pydantic.ValidationError: the overrides make no valid reward config.
        """
        data = _merged(self.reward.model_dump(mode="json"), self.launcher.shadow_judge)
        data["role"] = "judge"
        data["server"] = {**data["server"], "grpc_port": 0, "metrics_port": 0}
        return RewardServiceConfig.model_validate(data)


def _merged(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    """``base`` with ``over`` on top, nested mappings merged key by key (pure)."""
    out = dict(base)
    for key, value in over.items():
        out[key] = _merged(out[key], value) if isinstance(value, dict) and isinstance(out.get(key), dict) else value
    return out


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
