"""The event topology as data: who publishes each subject, which durable consumers read it, and
every JetStream KV bucket (name, owner, config key).

The streams and subject names themselves are in `services.common.streams`; this module adds who
is on either end. The services build their consumers' durable names, streams and filter subjects,
and their buckets' names, from the entries here, so a name is written once.
`tests/unit/test_topology.py` compares `CONSUMERS` with each service's `consumers()` for the
default config and for the configs that switch the optional ones on; `docs/architecture.md`
shows the tables (`python scripts/topology_doc.py` prints them).

Pure data and small helpers: imports nothing but `services.common.streams`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from string import Formatter
from typing import TYPE_CHECKING, Any, TypedDict

from services.common.streams import DLQ_PREFIX, STREAMS, StreamSpec, Subjects

if TYPE_CHECKING:
    from services.common.config import RunConfig

__all__ = ["SERVICES", "StreamUse", "STREAM_USES", "SubjectUse", "SUBJECTS", "ConsumerSpec", "Consumers",
           "CONSUMERS", "BucketSpec", "Buckets", "BUCKETS", "Step", "ROUND", "stream_of", "covers", "consumers_of",
           "subject_use"]

SERVICES = ("env", "policy", "reward", "critic", "ingest")
"""The five service processes (a shadow judge is a second reward process)."""


def covers(pattern: str, subject: str) -> bool:
    """Whether NATS subject ``pattern`` (``*``: one token, ``>``: one or more trailing tokens) matches
    every subject that ``subject`` (itself possibly with wildcards) matches."""
    p, s = pattern.split("."), subject.split(".")
    for i, token in enumerate(p):
        if token == ">":
            return len(s) > i
        if i >= len(s):
            return False
        if token == "*":
            if s[i] == ">":
                return False
        elif token != s[i]:
            return False
    return len(p) == len(s)


def stream_of(subject: str) -> str:
    """Name of the stream (`STREAMS`) that captures ``subject``.

    Raises:
        ValueError: no stream, or more than one, captures ``subject``.
    """
    names = [spec.name for spec in STREAMS if any(covers(p, subject) for p in spec.subjects)]
    if len(names) != 1:
        raise ValueError(f"subject {subject!r} is captured by {len(names)} streams ({names}), expected exactly one")
    return names[0]


# ---- streams -----------------------------------------------------------------------------------

_EVERY_STREAM = ("nats.duplicate_window_s", "nats.stream_replicas", "limits.max_message_bytes")


@dataclass(frozen=True)
class StreamUse:
    """What one stream of `STREAMS` is for, and the config keys that size it."""

    spec: StreamSpec
    why: str
    sized_by: tuple[str, ...] = _EVERY_STREAM
    """Config keys that set the stream's limits (``nats.*``: every stream; the message size bound
    is checked on publish and against the server's max_payload)."""


_WHY = {
    "JOBS": "each rollout job to exactly one rollout worker",
    "TRAJ": "replayable log of trajectories and their judgements: re-judging is a replay",
    "SAMPLES": "each training batch to exactly one trainer",
    "MODELS": "model version announcements",
    "REPORTS": "task reports and task-pool decisions",
    "METRICS": "per-round metrics",
    "INGEST": "live product usage (redacted), erasures",
    "DLQ": "dead letters: payload untouched, reason in headers",
}

STREAM_USES: tuple[StreamUse, ...] = tuple(StreamUse(spec, _WHY[spec.name]) for spec in STREAMS)
"""Every stream with its purpose, in `STREAMS` order."""


# ---- subjects ----------------------------------------------------------------------------------

@dataclass(frozen=True)
class SubjectUse:
    """One subject: its payload type and who publishes it (consumers are in `CONSUMERS`)."""

    constant: str
    """Attribute of `Subjects` holding the subject."""
    message: str
    """Payload type, a message of package ``rlanything.v1``."""
    publishers: tuple[str, ...]
    """``service: module:function`` of each publisher (paths under ``services/``)."""
    tail: str = ""
    """Tokens after the subject, when it is one subject per tenant, episode or judge name."""
    watched_by: tuple[str, ...] = ()
    """Readers that are not durable consumers (the launcher's progress feed, the run's event log)."""

    @property
    def subject(self) -> str:
        """The subject (its base, without `tail`)."""
        return str(getattr(Subjects, self.constant))

    @property
    def stream(self) -> str:
        """The stream that captures it."""
        return stream_of(self.subject + (".x" if self.tail else ""))


_PROGRESS = "run: run/monitor.py:subscribe_progress"
_RECORDER = "run: run/recorder.py:EVENT_FILES"

SUBJECTS: tuple[SubjectUse, ...] = (
    SubjectUse("ROLLOUT_JOBS", "RolloutJob", ("env: env/scheduler.py:Scheduler",), watched_by=(_PROGRESS,)),
    SubjectUse("TRAJ_COMPLETED", "Trajectory", ("policy: policy/service.py:PolicyService.on_job",),
               watched_by=(_PROGRESS,)),
    SubjectUse("TRAJ_JUDGED", "JudgedTrajectory", ("reward: reward/worker.py:TrajectoryJudger.on_trajectory",),
               watched_by=(_PROGRESS, _RECORDER)),
    SubjectUse("SAMPLES_POLICY", "PolicySampleBatch", ("critic: critic/service.py:CriticService._close",
                                                       "critic: critic/live.py:LiveCritic"), watched_by=(_PROGRESS,)),
    SubjectUse("SAMPLES_REWARD", "RewardSampleBatch", ("critic: critic/service.py:CriticService._close",
                                                       "critic: critic/live.py:LiveCritic"), watched_by=(_PROGRESS,)),
    SubjectUse("MODELS_POLICY", "ModelVersion", ("policy: common/checkpoints.py:VersionStore.announce",),
               watched_by=(_PROGRESS, _RECORDER)),
    SubjectUse("MODELS_REWARD", "ModelVersion", ("reward: common/checkpoints.py:VersionStore.announce",),
               watched_by=(_PROGRESS, _RECORDER)),
    SubjectUse("CRITIC_TASK", "TaskReport", ("critic: critic/service.py:CriticService._close",),
               watched_by=(_RECORDER,)),
    SubjectUse("ENV_POOL", "TaskPoolEvent", ("env: env/adaptation.py:Adaptation",), watched_by=(_PROGRESS, _RECORDER)),
    SubjectUse("METRICS_ROUND", "RoundMetrics", ("critic: critic/service.py:CriticService._close",),
               watched_by=(_PROGRESS,)),
    SubjectUse("METRICS_ENV", "RoundMetrics", ("env: env/scheduler.py:Scheduler",), watched_by=(_PROGRESS,)),
    SubjectUse("INGEST_EPISODE", "IngestEpisode", ("ingest: ingest/shell.py:IngestShell",), ".<tenant>"),
    SubjectUse("INGEST_FEEDBACK", "Feedback", ("ingest: ingest/shell.py:IngestShell",), ".<tenant>"),
    SubjectUse("INGEST_SETTLED", "SettledEpisode", ("ingest: ingest/shell.py:IngestShell",), ".<tenant>"),
    SubjectUse("INGEST_COMPLETION", "CapturedCompletion", ("policy: policy/capture.py:Capturer.run",),
               ".<tenant>.<episode>"),
    SubjectUse("INGEST_CANDIDATE", "LiveTaskCandidate", ("ingest: ingest/shell.py:IngestShell",), ".<tenant>"),
    SubjectUse("INGEST_ERASED", "EpisodesErased", ("ingest: ingest/shell.py:IngestShell",), ".<tenant>"),
    SubjectUse("TRAJ_LIVE", "Trajectory", ("ingest: ingest/shell.py:IngestShell",), ".<tenant>.<episode>"),
    SubjectUse("TRAJ_LIVE_JUDGED", "JudgedTrajectory", ("reward: reward/worker.py:TrajectoryJudger.on_trajectory",),
               ".<tenant>.<episode>"),
    SubjectUse("TRAJ_SHADOW", "JudgedTrajectory", ("reward (shadow): reward/worker.py:TrajectoryJudger.on_trajectory",),
               ".<judge>", watched_by=(_RECORDER,)),
    SubjectUse("TRAJ_LIVE_SHADOW", "JudgedTrajectory",
               ("reward (shadow): reward/worker.py:TrajectoryJudger.on_trajectory",), ".<tenant>.<episode>.<judge>"),
)
"""Every subject of `Subjects`, in its order. Besides these, every consumer publishes what it
dead-letters on ``rla.dlq.<original subject>`` (stream DLQ, `services.common.bus.Consumer`)."""

DLQ_SUBJECT = f"{DLQ_PREFIX}.<original subject>"
"""How the dead-letter subjects are named (`services.common.streams.dlq_subject`)."""


def subject_use(subject: str) -> SubjectUse:
    """The `SUBJECTS` entry whose subject is ``subject`` or has ``subject`` under it.

    Raises:
        KeyError: no entry matches.
    """
    found = [s for s in SUBJECTS if subject == s.subject or (s.tail and subject.startswith(s.subject + "."))]
    if not found:
        raise KeyError(f"no subject entry for {subject!r}")
    return max(found, key=lambda s: len(s.subject))  # rla.traj.live.judged before rla.traj.live.completed


# ---- durable consumers ---------------------------------------------------------------------------

Condition = Callable[["RunConfig"], bool]


def _always(config: "RunConfig") -> bool:
    return True


def _role(section: str, *roles: str) -> Condition:
    return lambda config: getattr(config, section).role in roles


def _live_family(config: "RunConfig") -> bool:
    return any(f.type == "live" for f in config.env.families)


def _running_judge(config: "RunConfig") -> bool:
    return config.reward.role in ("all", "judge") and not config.reward.shadow


def _shadow_judge(config: "RunConfig") -> bool:
    return bool(config.reward.shadow)


class Binding(TypedDict):
    """The keyword arguments of `EventBus.consumer` that the table fixes."""

    stream: str
    durable: str
    subject: str


@dataclass(frozen=True)
class ConsumerSpec:
    """One durable pull consumer (`services.common.bus.EventBus.consumer`)."""

    durable: str
    """Durable name, or a pattern with ``{shadow}`` (``reward.shadow``) or ``{role}`` (``reward.role``)."""
    subject: str
    """Filter subject."""
    message: str
    """Payload type (package ``rlanything.v1``)."""
    service: str
    handler: str
    """``module:function`` that handles each message (paths under ``services/``)."""
    when: str
    """The config under which the service runs it, in words."""
    exists: Condition = field(default=_always, compare=False, repr=False)
    """The same, as a test on the process's `RunConfig`."""

    @property
    def stream(self) -> str:
        """The stream whose subjects capture `subject`."""
        return stream_of(self.subject)

    def name(self, **params: str) -> str:
        """The durable name, its pattern filled with ``params`` (``shadow=``, ``role=``).

        Raises:
            KeyError: the pattern needs a parameter that ``params`` lacks.
        """
        return self.durable.format(**params)

    def binding(self, **params: str) -> "Binding":
        """``stream``, ``durable`` and ``subject`` for `EventBus.consumer` (``params`` as in `name`)."""
        return {"stream": self.stream, "durable": self.name(**params), "subject": self.subject}

    def resolved(self, config: "RunConfig") -> str:
        """The durable name in a process run with ``config``."""
        return self.name(shadow=config.reward.shadow, role=config.reward.role)


class Consumers:
    """Every durable consumer of the services; `CONSUMERS` lists them."""

    POLICY_ROLLOUT = ConsumerSpec(
        "policy-rollout-workers", Subjects.ROLLOUT_JOBS, "RolloutJob", "policy",
        "policy/service.py:PolicyService.on_job", "policy.role all or rollout", _role("policy", "all", "rollout"))
    POLICY_TRAINER = ConsumerSpec(
        "policy-trainer", Subjects.SAMPLES_POLICY, "PolicySampleBatch", "policy",
        "common/trainer.py:Trainer.on_batch", "policy.role all or trainer", _role("policy", "all", "trainer"))
    POLICY_ERASURES = ConsumerSpec(
        "policy-trainer-erasures", f"{Subjects.INGEST_ERASED}.>", "EpisodesErased", "policy",
        "policy/service.py:PolicyService._on_erased", "policy.role all or trainer", _role("policy", "all", "trainer"))
    REWARD_JUDGES = ConsumerSpec(
        "reward-judges", Subjects.TRAJ_COMPLETED, "Trajectory", "reward",
        "reward/worker.py:TrajectoryJudger.on_trajectory", "reward.role all or judge, no reward.shadow",
        _running_judge)
    REWARD_JUDGES_LIVE = ConsumerSpec(
        "reward-judges-live", f"{Subjects.TRAJ_LIVE}.>", "Trajectory", "reward",
        "reward/worker.py:TrajectoryJudger.on_trajectory", "reward.role all or judge, no reward.shadow",
        _running_judge)
    REWARD_SHADOW = ConsumerSpec(
        "reward-shadow-{shadow}", Subjects.TRAJ_COMPLETED, "Trajectory", "reward",
        "reward/worker.py:TrajectoryJudger.on_trajectory", "reward.shadow set (launcher.shadow_judge)", _shadow_judge)
    REWARD_SHADOW_LIVE = ConsumerSpec(
        "reward-shadow-{shadow}-live", f"{Subjects.TRAJ_LIVE}.>", "Trajectory", "reward",
        "reward/worker.py:TrajectoryJudger.on_trajectory", "reward.shadow set (launcher.shadow_judge)", _shadow_judge)
    REWARD_TRAINER = ConsumerSpec(
        "reward-trainer", Subjects.SAMPLES_REWARD, "RewardSampleBatch", "reward",
        "common/trainer.py:Trainer.on_batch", "reward.role all or trainer", _role("reward", "all", "trainer"))
    REWARD_ERASURES = ConsumerSpec(
        "reward-{role}-erasures", f"{Subjects.INGEST_ERASED}.>", "EpisodesErased", "reward",
        "reward/service.py:RewardService._on_erased", "no reward.shadow (one per reward.role)",
        lambda config: not config.reward.shadow)
    REWARD_SHADOW_ERASURES = ConsumerSpec(
        "reward-shadow-{shadow}-erasures", f"{Subjects.INGEST_ERASED}.>", "EpisodesErased", "reward",
        "reward/service.py:RewardService._on_erased", "reward.shadow set (launcher.shadow_judge)", _shadow_judge)
    ENV_LIVE_CANDIDATES = ConsumerSpec(
        "env-live-candidates", f"{Subjects.INGEST_CANDIDATE}.>", "LiveTaskCandidate", "env",
        "env/live_tasks.py:LiveTasks.on_candidate", "a family of type live in env.families", _live_family)
    ENV_TASK_REPORTS = ConsumerSpec(
        "env-task-reports", Subjects.CRITIC_TASK, "TaskReport", "env",
        "env/service.py:EnvService._on_report (adaptation, then scheduler)", "always")
    ENV_MODEL_VERSIONS = ConsumerSpec(
        "env-model-versions", "rla.models.>", "ModelVersion", "env",
        "env/scheduler.py:Scheduler.on_model_version", "always")
    CRITIC_JUDGED = ConsumerSpec(
        "critic-judged", Subjects.TRAJ_JUDGED, "JudgedTrajectory", "critic",
        "critic/service.py:CriticService._on_judged", "always")
    CRITIC_POLICY_VERSIONS = ConsumerSpec(
        "critic-policy-versions", Subjects.MODELS_POLICY, "ModelVersion", "critic",
        "critic/service.py:CriticService._on_policy_version", "always")
    CRITIC_LIVE = ConsumerSpec(
        "critic-live", f"{Subjects.TRAJ_LIVE_JUDGED}.>", "JudgedTrajectory", "critic",
        "critic/live.py:LiveCritic.on_judged", "always")
    CRITIC_ERASURES = ConsumerSpec(
        "critic-erasures", f"{Subjects.INGEST_ERASED}.>", "EpisodesErased", "critic",
        "critic/live.py:LiveCritic.forget", "always")
    INGEST_CAPTURES = ConsumerSpec(
        "ingest-captures", f"{Subjects.INGEST_COMPLETION}.>", "CapturedCompletion", "ingest",
        "ingest/shell.py:IngestShell.on_capture", "always")


CONSUMERS: tuple[ConsumerSpec, ...] = tuple(v for k, v in vars(Consumers).items() if isinstance(v, ConsumerSpec))
"""Every durable consumer, in `Consumers` order."""


def consumers_of(service: str, config: "RunConfig") -> list[ConsumerSpec]:
    """The consumers that ``service`` runs in a process started with ``config``."""
    return [c for c in CONSUMERS if c.service == service and c.exists(config)]


# ---- KV buckets --------------------------------------------------------------------------------

@dataclass(frozen=True)
class BucketSpec:
    """One JetStream KV bucket."""

    pattern: str
    """Name, or a pattern whose ``{field}`` is the value of `config_key` (``{role}``, ``{shadow}``:
    the trainer's role, the shadow judge's name)."""
    config_key: str
    """Config key naming the bucket ("" when the name is fixed)."""
    value: str
    """What a value is: a message of package ``rlanything.v1``, or the encoding."""
    owner: str
    """The service that writes it (``service: module``)."""
    holds: str
    readers: tuple[str, ...] = ()
    """Other readers (``service: module``)."""
    ttl: str = ""
    """How long an entry lives (empty: until deleted)."""

    def name(self, **params: str) -> str:
        """The bucket name, its pattern filled with ``params`` (the config value, ``role=``, ``shadow=``).

        Raises:
            KeyError: the pattern needs a parameter that ``params`` lacks.
        """
        return self.pattern.format(**params)

    def fields(self) -> tuple[str, ...]:
        """The ``{field}`` names in `pattern`."""
        return tuple(f for _, f, _, _ in Formatter().parse(self.pattern) if f)

    def default_name(self, config: "RunConfig", **params: str) -> str:
        """The bucket name under ``config`` (its `config_key` read from it), other fields from ``params``."""
        if self.config_key:
            field_name = self.config_key.rsplit(".", 1)[1]
            params = {field_name: str(_get(config, self.config_key)), **params}
        return self.name(**params)


def _get(config: Any, dotted: str) -> Any:
    for part in dotted.split("."):
        config = getattr(config, part)
    return config


class Buckets:
    """Every KV bucket the services open; `BUCKETS` lists them."""

    MODELS = BucketSpec(
        "models", "", "ModelVersion", "policy, reward: common/checkpoints.py:VersionStore",
        "the latest announced version per role (key policy, reward)",
        ("policy: version_follower.py", "reward: version_follower.py"))
    POLICY_SAMPLES = BucketSpec(
        "policy_samples", "", "PolicySampleBatch", "policy: common/trainer.py:Trainer",
        "policy sample batches stored until trained (key = batch id)")
    REWARD_SAMPLES = BucketSpec(
        "reward_samples", "", "RewardSampleBatch", "reward: common/trainer.py:Trainer",
        "RM sample batches stored until trained (key = batch id)")
    TRAINED = BucketSpec(
        "{role}_trained", "", "ModelVersion", "policy, reward: common/trainer.py:Trainer",
        "batch key → the version that trained it (role policy or reward)")
    ENV_POOL = BucketSpec(
        "{pool_bucket}", "env.pool_bucket", "TaskSlot", "env: env/pool.py:TaskPool", "the task pool, one slot a key")
    ENV_SCHEDULER = BucketSpec(
        "{pool_bucket}_scheduler", "env.pool_bucket", "SchedulerState", "env: env/scheduler.py:Scheduler",
        "the scheduler's state (key scheduler: next round, pending jobs)")
    ENV_HELD = BucketSpec(
        "{pool_bucket}_held", "env.pool_bucket", "TaskReport", "env: env/held_reports.py:HeldReports",
        "loop.reproducible: the open round's task reports, held to be applied in one fixed order (key = job id)")
    ENV_LEADER = BucketSpec(
        "{pool_bucket}_leader", "env.pool_bucket", "text: the holder's address", "env: env/lease.py:LeaderLease",
        "the scheduler's leader lease among env replicas (key scheduler)", ttl="env.scheduler.lease_ttl_s")
    ENV_MODELS = BucketSpec(
        "{pool_bucket}_models", "env.pool_bucket", "ModelVersion", "env: env/scheduler.py:Scheduler",
        "the latest version per role the scheduler has seen (key policy, reward)")
    LIVE_TASKS = BucketSpec(
        "live_tasks", "", "LiveTaskCandidate", "env: env/live_tasks.py:LiveTasks",
        "admitted real failures by content hash (a live family only)")
    CODE_PROBLEMS = BucketSpec(
        "code_problems", "", "JSON: statement, reference, tests", "env: env/code_tasks.py:CodeTasks",
        "model-written coding problems by task seed (a code family with proposer model only)")
    CRITIC_GROUPS = BucketSpec(
        "{groups_bucket}", "critic.groups_bucket", "JudgedTrajectory", "critic: critic/store.py:GroupStore",
        "the rollouts of open groups")
    CRITIC_STATS = BucketSpec(
        "{stats_bucket}", "critic.stats_bucket", "TaskReport, RoundMetrics, ModelVersion",
        "critic: critic/store.py:StatsStore", "closed groups' reports and statistics, the latest policy version")
    CRITIC_LIVE = BucketSpec(
        "{baselines_bucket}", "critic.live.baselines_bucket", "JSON", "critic: critic/live.py:LiveCritic",
        "live baselines per task and the trajectory ids already evaluated")
    REWARD_JUDGED = BucketSpec(
        "{judged_bucket}", "reward.judged_bucket", "RM version (text)", "reward: reward/worker.py:JudgedMarks",
        "judged trajectory ids (a late redelivery is skipped)", ttl="the TRAJ stream's max age")
    REWARD_SHADOW_JUDGED = BucketSpec(
        "{judged_bucket}_shadow_{shadow}", "reward.judged_bucket", "RM version (text)",
        "reward (shadow): reward/worker.py:JudgedMarks", "a shadow judge's own marks", ttl="the TRAJ stream's max age")
    INGEST_EPISODES = BucketSpec(
        "{episodes_bucket}", "ingest.episodes_bucket", "EpisodeRecord", "ingest: ingest/shell.py:IngestShell",
        "episode records (redacted); the sweeper deletes them after ingest.retention_days or their consent's")
    INGEST_ERASURES = BucketSpec(
        "{episodes_bucket}_erasures", "ingest.episodes_bucket", "integer (text)", "ingest: ingest/shell.py:IngestShell",
        "tenant → its erasure count (part of every message id)")
    INGEST_ORPHANS = BucketSpec(
        "{feedback_bucket}", "ingest.feedback_bucket", "Feedback", "ingest: ingest/shell.py:IngestShell",
        "feedback waiting for its episode (none when ingest.orphan_feedback_wait_s is 0)",
        ttl="ingest.orphan_feedback_wait_s")
    INGEST_CAPTURES = BucketSpec(
        "{captures_bucket}", "ingest.captures_bucket", "CapturedCompletion", "ingest: ingest/shell.py:IngestShell",
        "captured completions waiting for their episode",
        ttl="ingest.idle_close_s + settle_window_s + orphan_feedback_wait_s")


BUCKETS: tuple[BucketSpec, ...] = tuple(v for k, v in vars(Buckets).items() if isinstance(v, BucketSpec))
"""Every KV bucket, in `Buckets` order."""


# ---- one round, step by step ---------------------------------------------------------------------

@dataclass(frozen=True)
class Step:
    """One step of a training round: which process runs which function, reading and writing what."""

    phase: str
    process: str
    where: str
    """``module:function`` (paths under ``services/``)."""
    reads: str
    """The subject (or gRPC call) that starts it."""
    writes: str
    """What it publishes (subjects) or calls."""


ROUND: tuple[Step, ...] = (
    Step("plan", "env", "env/scheduler.py:Scheduler.tick", "pool ready, or both trainers' versions of the last round",
         f"{Subjects.ROLLOUT_JOBS} (G seeds a task), {Subjects.METRICS_ENV}"),
    Step("roll out", "policy (rollout worker)", "policy/service.py:PolicyService.on_job", Subjects.ROLLOUT_JOBS,
         "policy/rollout.py:run_group, gRPC Environment.Reset/Step to env"),
    Step("step", "env", "env/grpc_service.py:EnvironmentServicer", "gRPC Reset, Step", "observation, reward, done"),
    Step("rolled out", "policy (rollout worker)", "policy/rollout.py:run_group", "the G episodes end",
         Subjects.TRAJ_COMPLETED),
    Step("judge", "reward (judge)", "reward/worker.py:TrajectoryJudger.on_trajectory", Subjects.TRAJ_COMPLETED,
         f"reward/batcher.py:JudgeBatcher (m votes a step), then {Subjects.TRAJ_JUDGED}"),
    Step("group", "critic", "critic/service.py:CriticService._on_judged", Subjects.TRAJ_JUDGED,
         "KV critic_groups; the group closes when G are in or critic.group_timeout_s passed"),
    Step("score", "critic", "critic/service.py:CriticService._close", "a closed group",
         f"critic/group_eval.py:evaluate_group, then {Subjects.SAMPLES_POLICY}, {Subjects.SAMPLES_REWARD}, "
         f"{Subjects.CRITIC_TASK}, {Subjects.METRICS_ROUND}"),
    Step("adapt", "env", "env/adaptation.py:Adaptation.on_report", Subjects.CRITIC_TASK,
         f"env/decisions.py:decide (pure), then {Subjects.ENV_POOL} (accept, reject or propose a task)"),
    Step("train", "policy (trainer), reward (trainer)", "common/trainer.py:Trainer.on_batch",
         f"{Subjects.SAMPLES_POLICY}, {Subjects.SAMPLES_REWARD}",
         "the round's batches all in (sync: common/rounds.py:round_batches) or enough samples (async): "
         "learner.learn, then VersionStore.announce"),
    Step("announce", "policy (trainer), reward (trainer)", "common/checkpoints.py:VersionStore.announce",
         "a trained version", f"{Subjects.MODELS_POLICY}, {Subjects.MODELS_REWARD}, KV models"),
    Step("hot-load", "policy (rollout worker), reward (judge)", "common/version_follower.py:VersionFollower.run",
         "KV models", "the new weights, without a restart"),
    Step("next round", "env", "env/scheduler.py:Scheduler.on_model_version", "rla.models.>",
         "Scheduler.tick once both roles trained the round (sync)"),
)
"""A synchronous training round in order (`loop.mode: sync`; async rounds do not wait for versions)."""
