"""Config of the ingest service (`ingest:`): tenants, limits, settling, retention, redaction."""

from __future__ import annotations

import os

from pydantic import Field, field_validator, model_validator

from services.common.config.base import ServiceConfig, StrictModel
from services.common.redaction import DEFAULT_PHONE_REGIONS
from services.common.redaction_phones import check_regions

__all__ = ["TenantConfig", "RedactionConfig", "IngestServiceConfig"]


class TenantConfig(StrictModel):
    """One product allowed to post: its bearer key and the secret its user ids are hashed with.

    Each value is read from the named environment variable (``*_env``, the Kubernetes way: a
    Secret) or given inline (local runs and tests); the variable wins when both are set.
    """

    key: str = Field("", description="Bearer key of the tenant (prefer key_env).")
    key_env: str = Field("", description="Environment variable holding the bearer key.")
    secret: str = Field("", description="HMAC secret for user ids (prefer secret_env).")
    secret_env: str = Field("", description="Environment variable holding the HMAC secret.")

    def resolved_key(self) -> str:
        """The bearer key (from ``key_env`` when set)."""
        return os.environ.get(self.key_env, "") if self.key_env else self.key

    def resolved_secret(self) -> str:
        """The HMAC secret (from ``secret_env`` when set)."""
        return os.environ.get(self.secret_env, "") if self.secret_env else self.secret


class RedactionConfig(StrictModel):
    """The built-in redactor's settings (every tenant; the policy's capture uses the same)."""

    patterns: dict[str, str] = Field(default_factory=dict, description="Extra kind -> regular expression.")
    deny: list[str] = Field(default_factory=list, description="Literal terms always redacted (case-insensitive).")
    phone_regions: list[str] = Field(
        default_factory=lambda: list(DEFAULT_PHONE_REGIONS),
        description="ISO 3166-1 alpha-2 codes (e.g. US, GB, FR, DE) whose national phone forms are redacted, "
                    "such as 020 7946 0958 for GB; international +forms are redacted for every country.")

    @field_validator("phone_regions")
    @classmethod
    def _known_regions(cls, regions: list[str]) -> list[str]:
        return check_regions(regions)


class IngestServiceConfig(ServiceConfig):
    """The ingest service: the HTTP/gRPC front door for a product's conversations and feedback."""

    http_port: int = Field(0, ge=0, le=65535, description="HTTP port of the ingest API (0 = any free port).")
    tenants: dict[str, TenantConfig] = Field(
        default_factory=dict, description="Tenant name -> credentials; only these may post.")
    max_episode_bytes: int = Field(256 * 1024, ge=1024, description="Largest posted episode in bytes (413 above).")
    max_messages: int = Field(200, ge=1, description="Most messages in one episode (413 above).")
    max_open_episodes: int = Field(
        1000, ge=1, description="Open (not yet settled) episodes per tenant before new ones get 429.")
    settle_window_s: float = Field(
        3600.0, ge=0, description="Seconds after an episode ended during which feedback still counts.")
    idle_close_s: float = Field(
        86400.0, gt=0, description="Seconds without a new revision after which an episode that never said "
                                   "`ended` is closed.")
    orphan_feedback_wait_s: float = Field(
        600.0, ge=0, description="Seconds feedback for an unseen episode is kept waiting for it.")
    retention_days: int = Field(30, ge=1, description="Days an episode is kept unless its consent says fewer.")
    sweep_every_s: float = Field(1.0, gt=0, description="Seconds between settle/expiry sweeps.")
    episodes_bucket: str = Field("ingest_episodes", pattern=r"^[A-Za-z0-9_-]+$",
                                 description="JetStream KV bucket of episode records.")
    feedback_bucket: str = Field("ingest_orphans", pattern=r"^[A-Za-z0-9_-]+$",
                                 description="JetStream KV bucket of feedback waiting for its episode.")
    captures_bucket: str = Field("ingest_captures", pattern=r"^[A-Za-z0-9_-]+$",
                                 description="JetStream KV bucket of captured completions waiting for their episode.")
    redaction: RedactionConfig = Field(default_factory=RedactionConfig)

    def tenant_keys(self) -> dict[str, str]:
        """Bearer key → tenant name, for every tenant whose key is set (the ingest API and the
        policy's capture authenticate with the same keys)."""
        return {t.resolved_key(): name for name, t in self.tenants.items() if t.resolved_key()}

    @model_validator(mode="after")
    def _tenant_names(self) -> "IngestServiceConfig":
        for name in self.tenants:
            if not name or not name.replace("-", "").replace("_", "").isalnum():
                raise ValueError(f"ingest.tenants: name {name!r} must be letters, digits, '-' or '_' "
                                 "(it becomes a NATS subject token)")
        return self
