"""Config of one-machine runs (`launcher:`): `rlanything up` and `rlanything run`."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field

from services.common.config.base import StrictModel

__all__ = ["LauncherConfig", "RestartConfig"]


class RestartConfig(StrictModel):
    """How the launcher restarts a process that exits (what Kubernetes does for a pod)."""

    enabled: bool = Field(True, description="Restart an exited service or NATS server; false = stop everything "
                                            "at the first exit (`--fail-fast`).")
    max_restarts: int = Field(5, ge=0, description="Restarts each process may use within restart_window_s; one "
                                                   "more exit inside the window stops the run.")
    restart_window_s: float = Field(
        600.0, ge=0, description="Seconds a restart counts against max_restarts and lengthens the back-off (as "
                                 "Kubernetes resets a pod's crash-loop back-off after 10 minutes of running): two "
                                 "broker outages an hour apart each get the whole budget. 0 = the whole run.")
    backoff_s: float = Field(1.0, ge=0, description="Seconds before the first restart; doubled for each further one.")
    backoff_max_s: float = Field(30.0, ge=0, description="Longest wait before a restart, in seconds.")
    unresponsive_s: float = Field(
        30.0, gt=0, description="A running service whose gRPC health checks got no answer at all for this many "
                                "seconds (frozen, e.g. SIGSTOPped or deadlocked) is stopped (SIGTERM, SIGKILL after "
                                "launcher.stop_timeout_s) and restarted like one that exited. NOT_SERVING is an "
                                "answer: a service waiting for NATS is left alone (nats.reconnect_budget_s ends it).")
    health_period_s: float = Field(2.0, gt=0, description="Seconds between two health checks of a running service.")
    health_check_timeout_s: float = Field(2.0, gt=0, description="Seconds one health check waits for its answer.")


class LauncherConfig(StrictModel):
    """How `rlanything up` runs the services locally."""

    services: list[Literal["env", "policy", "reward", "critic", "ingest"]] = Field(
        default_factory=lambda: ["env", "policy", "reward", "critic", "ingest"],  # type: ignore[arg-type]  # a list of the Literal names
        description="Services to start (ingest is the live-usage front door; it answers 401 until "
                    "ingest.tenants lists a product)."
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
    restart: RestartConfig = Field(default_factory=RestartConfig)
    nats_sync_interval: str = Field(
        "always", pattern=r"^(always|[1-9][0-9]*(ms|s|m|h))$",
        description="The local nats-server's JetStream sync_interval: 'always' fsyncs every write before the server "
                    "acknowledges it (a power loss loses nothing acknowledged; measured 1.7-4.1x fewer publishes per "
                    "second, bench/nats_sync.md), or a duration such as '2m' (NATS's default: a power loss can lose "
                    "up to that much acknowledged data).")
    replicas: dict[Literal["env", "rollout", "judge"], Annotated[int, Field(ge=1, le=16)]] = Field(
        default_factory=dict,
        description="Processes doing each scalable role, e.g. {env: 2, rollout: 2, judge: 2}: the env (policy, "
                    "reward) service itself plus N-1 processes env-<i> (of role rollout, judge), each on its own "
                    "ports with its own config file (config.<role>-<i>.yaml) and log, as Kubernetes runs replicas; "
                    "they share the role's durable consumer, so each job (trajectory, task report) goes to one of "
                    "them. Env replicas: one releases rounds (a lease in KV), and every rollout worker spreads its "
                    "Resets over all of them and sends a session's Steps to the one that opened it. 1 or absent: "
                    "the service alone. The trainers and the critic are not replicated.")
    nats_cluster_size: Literal[1, 3, 5] = Field(
        1, description="NATS servers the launcher starts: 1, or a JetStream cluster of 3 or 5 nodes joined by routes "
                       "on free loopback ports (services get every node's URL in nats.url). Set "
                       "nats.stream_replicas to the same number so every stream and KV bucket outlives a node: "
                       "3 nodes keep working with 2 up (docs/high-availability.md).")
    shadow_judge: dict[str, Any] = Field(
        default_factory=dict,
        description="A shadow judge started beside the running one: `reward:` overrides with at least `shadow` "
                    "(its name), e.g. {shadow: oracle, backend: oracle}; role is 'judge'. {} = none.")
