"""Config models every service shares: strictness, NATS, consumers, servers, the loop."""

from __future__ import annotations

import os
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from services.common.errors import ConfigError

__all__ = ["StrictModel", "NatsConfig", "ConsumerConfig", "LimitsConfig", "MAX_MESSAGE_BYTES", "ServerConfig", "ServiceConfig", "LoopConfig", "SERVICE_NAMES"]

SERVICE_NAMES: tuple[str, ...] = ("env", "policy", "reward", "critic", "ingest")


class StrictModel(BaseModel):
    """Base of every config model: unknown keys are errors, values are validated on assignment."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True)


class NatsConfig(StrictModel):
    """Where the NATS JetStream server is and how streams are set up."""

    url: str = Field("nats://127.0.0.1:4222", description="NATS server URL, or the URLs of a cluster's nodes "
                                                          "comma-separated (the client uses any node that is up).")
    user_env: str | None = Field(
        None, description="Name of the environment variable holding the NATS user (the Kubernetes way: from a "
                          "Secret). Credentials given so never appear on a command line, where any process of "
                          "the host could read them in /proc/<pid>/cmdline.")
    password_env: str | None = Field(
        None, description="Name of the environment variable holding the NATS password (with user_env).")
    connect_timeout_s: float = Field(5.0, gt=0, description="Seconds to wait for a connection.")
    duplicate_window_s: float = Field(
        120.0, gt=0, description="Seconds during which a repeated Nats-Msg-Id is dropped."
    )
    stream_replicas: int = Field(
        1, ge=1, le=5, description="JetStream replicas of every stream and KV bucket (at most the cluster's size; 3 "
                                   "on a 3-node cluster: writes go on while 2 of the 3 nodes are up, docs/high-availability.md).")
    ping_interval_s: float = Field(
        10.0, gt=0, description="Seconds between the client's PINGs to the server (nats-py ping_interval).")
    max_outstanding_pings: int = Field(
        2, ge=1, description="PINGs left unanswered after which the connection counts as dead and a reconnect "
                             "starts: a hung server is found within (max_outstanding_pings + 1) x ping_interval_s "
                             "seconds (30 s by default).")
    reconnect_time_wait_s: float = Field(2.0, gt=0, description="Seconds between two reconnect attempts.")
    reconnect_budget_s: float = Field(
        60.0, gt=0, description="Seconds the connection may stay lost (from the moment it was found dead); then the "
                                "process exits with code 69 naming NATS, so its supervisor (the launcher, "
                                "Kubernetes) restarts it. While lost, gRPC health says NOT_SERVING.")

    @field_validator("url")
    @classmethod
    def _urls_named(cls, value: str) -> str:
        if any(not part.strip() for part in value.split(",")):
            raise ValueError("nats.url has an empty URL between two commas (or before the first, after the last)")
        return value

    def credentials(self) -> dict[str, str]:
        """``{"user": ..., "password": ...}`` from the variables ``user_env`` and ``password_env`` name (the
        keyword arguments of nats-py's ``connect``); empty when neither is set.

        Raises:
            ConfigError: a named variable is not set in this process's environment.
        """
        found: dict[str, str] = {}
        for key, name in (("user", self.user_env), ("password", self.password_env)):
            if name is not None:
                if name not in os.environ:
                    raise ConfigError(f"nats.{key}_env={name!r} names an environment variable that is not set")
                found[key] = os.environ[name]
        return found

    @property
    def dead_connection_bound_s(self) -> float:
        """Longest time, in seconds, from a server that stops answering to the client counting the
        connection as lost: the ping timer fires every ``ping_interval_s`` and the connection is dropped
        at the first tick with more than ``max_outstanding_pings`` PINGs unanswered (nats-py's
        ``_ping_interval``), so at most ``(max_outstanding_pings + 1) * ping_interval_s``."""
        return (self.max_outstanding_pings + 1) * self.ping_interval_s


MAX_MESSAGE_BYTES = 8 * 1024 * 1024
"""Default message limit in bytes (8 MiB: trajectories carry token ids and log-probs)."""


class LimitsConfig(StrictModel):
    """Sizes every server and client of a run agree on (``limits:``)."""

    max_message_bytes: int = Field(
        MAX_MESSAGE_BYTES, ge=64 * 1024, le=64 * 1024 * 1024,
        description="Largest message in bytes: the local nats-server's max_payload (a remote server's "
                    "must be at least this), every publish, and gRPC send/receive on every server and "
                    "channel. 64 MiB is NATS's own ceiling.")


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


class LoopConfig(StrictModel):
    """The loop every service takes part in (``loop:``), the one section besides its own a service reads."""

    mode: Literal["sync", "async"] = Field(
        "sync", description="sync: round r+1 waits for both models trained on round r; async: bounded jobs in flight.")
    rounds: int = Field(0, ge=0, description="Rounds to release (0 = until stopped).")
    reproducible: bool = Field(
        False, description="A run as a function of its seed alone: every generate call (policy and judge) holds "
                           "one chat, so no float rounding depends on which chats happened to be batched together "
                           "(sets policy.max_batch and reward.max_batch to 1; needs mode sync), and the env applies a "
                           "round's task reports in one order once all are in. Costs generation speed: see "
                           "docs/results.md.")
