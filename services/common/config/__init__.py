"""Run configuration, one module per owner: `base` (NATS, consumers, servers), `models` (what
both learners share), `env`, `policy`, `reward`, `critic`, `ingest`, `launcher`, `sandbox` (the
sandbox for model-written code, a section of whichever service runs code), and `run` (the whole
file, overrides, loading). Each service reads its own section (and the shared `loop:`).
"""

from services.common.config.base import StrictModel, NatsConfig, ConsumerConfig, LimitsConfig, MAX_MESSAGE_BYTES, ServerConfig, ServiceConfig, LoopConfig, SERVICE_NAMES
from services.common.config.critic import CriticServiceConfig, LiveCriticConfig
from services.common.config.ingest import IngestServiceConfig, RedactionConfig, TenantConfig
from services.common.config.env import FamilyConfig, SchedulerConfig, AdaptationConfig, EnvServiceConfig
from services.common.config.launcher import LauncherConfig
from services.common.config.tracking import LoggingConfig
from services.common.config.models import LoraSettings, TinyModelConfig, ModelConfig, PPOConfig, SFTConfig, VLLMConfig
from services.common.config.policy import RolloutConfig, PolicyServiceConfig
from services.common.config.reward import JudgeSFTConfig, RewardServiceConfig
from services.common.config.sandbox import SandboxConfig
from services.common.config.run import RunConfig, load_config, apply_overrides, dump_config

__all__ = [
    "StrictModel",
    "NatsConfig",
    "ConsumerConfig",
    "LimitsConfig",
    "MAX_MESSAGE_BYTES",
    "ServerConfig",
    "ServiceConfig",
    "LoopConfig",
    "SERVICE_NAMES",
    "CriticServiceConfig",
    "LiveCriticConfig",
    "IngestServiceConfig",
    "RedactionConfig",
    "TenantConfig",
    "FamilyConfig",
    "SchedulerConfig",
    "AdaptationConfig",
    "EnvServiceConfig",
    "LauncherConfig",
    "LoggingConfig",
    "TinyModelConfig",
    "VLLMConfig",
    "ModelConfig",
    "PPOConfig",
    "LoraSettings",
    "SFTConfig",
    "RolloutConfig",
    "PolicyServiceConfig",
    "JudgeSFTConfig",
    "RewardServiceConfig",
    "SandboxConfig",
    "RunConfig",
    "load_config",
    "apply_overrides",
    "dump_config",
]
