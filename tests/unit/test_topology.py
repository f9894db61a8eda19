"""The topology table (`services.common.topology`) against the services' real `consumers()`.

Each service is built with its own ``__init__`` from a config that loads no weights (policy:
the openai backend, reward: the oracle judge); what `on_start` would open on NATS (trainer,
judge handler, scheduler, ingest core) is a stand-in whose methods do nothing: `consumers()` only
takes bound handlers from them. The consumers are made by a real, unconnected `EventBus`.
"""

from __future__ import annotations

import ast
import asyncio
import importlib
from pathlib import Path
from typing import Any

import pytest
from rlanything.v1 import events_pb2, ingest_pb2

from services.common.bus import EventBus
from services.common.config import RunConfig, load_config
from services.common.streams import STREAMS, Subjects
from services.common.topology import (BUCKETS, CONSUMERS, ROUND, SUBJECTS, Buckets, Consumers, consumers_of,
                                      covers, stream_of, subject_use)

NO_WEIGHTS = ["policy.model.backend=openai", "policy.model.openai_base_url=http://127.0.0.1:9/v1",
              "reward.backend=oracle"]
LIVE_FAMILY = "env.families=[{type: gym_text, knobs: {size: 4, hole_prob: 0.2}}, {type: live, knobs: {hint: 0}}]"
CONFIGS = {  # name → overrides on the embedded default
    "default": [],
    "live family": [LIVE_FAMILY, "policy.capture.enabled=true"],
    "split roles rollout/judge": ["policy.role=rollout", "reward.role=judge"],
    "split roles trainer/trainer": ["policy.role=trainer", "reward.role=trainer"],
    "shadow judge": ["reward.role=judge", "reward.shadow=s1"],
    "shadow judge, live family": [LIVE_FAMILY, "reward.role=judge", "reward.shadow=candidate-2"],
}


class Inert:
    """Stands in for what `on_start` opens: every attribute is a handler that does nothing."""

    def __getattr__(self, name: str) -> Any:
        async def handler(*args: Any) -> None:
            return None
        handler.__qualname__ = f"Inert.{name}"
        return handler


def build(service: str, config: RunConfig) -> Any:
    """Service ``service`` as `__init__` leaves it, plus inert stand-ins for what `on_start` opens."""
    if service == "policy":
        from services.policy.service import PolicyService
        svc = PolicyService(config)
        svc.trainer = Inert()
    elif service == "reward":
        from services.reward.service import RewardService
        svc = RewardService(config)
        svc.handler, svc.trainer = Inert(), Inert()
    elif service == "env":
        from services.env.families.live import LiveFamily
        from services.env.service import EnvService
        svc = EnvService(config)
        svc.scheduler = Inert()
        svc.live = Inert() if isinstance(svc.families.get("live"), LiveFamily) else None  # as on_start decides
    elif service == "critic":
        from services.critic.service import CriticService
        svc = CriticService(config)
    else:
        from services.ingest.service import IngestService
        svc = IngestService(config)
        svc.shell = Inert()
    return svc


def actual_consumers(service: str, config: RunConfig) -> set[tuple[str, str, str, str]]:
    """(durable, stream, subject, payload type) of each consumer the service really makes."""
    bus = EventBus(None, None, config.nats, config.consumer)  # type: ignore[arg-type]  # never connected
    made = asyncio.run(build(service, config).consumers(bus))
    return {(c.durable, c.stream, c.subject, c.message_type.DESCRIPTOR.name) for c in made}


def table_consumers(service: str, config: RunConfig) -> set[tuple[str, str, str, str]]:
    return {(c.resolved(config), c.stream, c.subject, c.message) for c in consumers_of(service, config)}


@pytest.fixture(scope="module", params=list(CONFIGS), ids=list(CONFIGS))
def config(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> RunConfig:
    cache = tmp_path_factory.mktemp("env-cache")
    return load_config(None, NO_WEIGHTS + [f"env.cache_dir={cache}"] + CONFIGS[request.param])


@pytest.mark.parametrize("service", ["policy", "reward", "env", "critic", "ingest"])
def test_the_table_lists_exactly_the_consumers_each_service_makes(service: str, config: RunConfig) -> None:
    assert actual_consumers(service, config) == table_consumers(service, config)


def test_the_optional_consumers_exist_only_under_their_switches() -> None:
    default = load_config(None, NO_WEIGHTS)
    shadow = load_config(None, NO_WEIGHTS + ["reward.role=judge", "reward.shadow=s1"])
    live = load_config(None, NO_WEIGHTS + [LIVE_FAMILY])
    names = {name: {c.resolved(cfg) for c in CONSUMERS if c.exists(cfg)}
             for name, cfg in (("default", default), ("shadow", shadow), ("live", live))}
    assert "env-live-candidates" not in names["default"] and "env-live-candidates" in names["live"]
    assert {"reward-shadow-s1", "reward-shadow-s1-live", "reward-shadow-s1-erasures"} <= names["shadow"]
    assert "reward-judges" not in names["shadow"] and "reward-trainer" not in names["shadow"]
    assert {"reward-judges", "reward-judges-live", "reward-trainer", "reward-all-erasures"} <= names["default"]
    assert len(names["default"]) == 14  # of 18: not the live family's one nor the shadow's three


def test_every_subject_constant_has_exactly_one_entry_and_one_stream() -> None:
    constants = [k for k, v in vars(Subjects).items() if k.isupper() and isinstance(v, str)]
    assert sorted(s.constant for s in SUBJECTS) == sorted(constants)
    assert {s.stream for s in SUBJECTS} == {spec.name for spec in STREAMS} - {"DLQ"}


def test_payload_types_are_messages_of_the_contract() -> None:
    def exists(name: str) -> bool:
        return hasattr(events_pb2, name) or hasattr(ingest_pb2, name)

    assert [s.message for s in SUBJECTS if not exists(s.message)] == []
    assert [c.message for c in CONSUMERS if not exists(c.message)] == []


def test_each_consumer_reads_a_subject_of_the_table_with_its_payload_type() -> None:
    for c in CONSUMERS:
        if c.subject == "rla.models.>":  # both version subjects, one type
            assert {subject_use(s).message for s in (Subjects.MODELS_POLICY, Subjects.MODELS_REWARD)} == {c.message}
            continue
        assert subject_use(c.subject.removesuffix(".>")).message == c.message, c.durable


def test_durable_names_are_unique_per_stream_and_config() -> None:
    for cfg in (load_config(None, NO_WEIGHTS), load_config(None, NO_WEIGHTS + ["reward.shadow=x", "reward.role=judge"])):
        names = [(c.stream, c.resolved(cfg)) for c in CONSUMERS if c.exists(cfg)]
        assert len(names) == len(set(names))


@pytest.mark.parametrize("where", sorted({c.handler for c in CONSUMERS} | {p for s in SUBJECTS for p in s.publishers}
                                         | {s.where for s in ROUND} | {b.owner.split(", ")[-1] for b in BUCKETS}),
                         ids=lambda w: w)
def test_every_named_function_exists(where: str) -> None:
    """Each ``module:function`` the table names (handlers, publishers, bucket owners, the round's steps)."""
    module, _, qualname = where.split(": ")[-1].partition(":")
    obj: Any = importlib.import_module("services." + module.removesuffix(".py").replace("/", "."))
    for part in qualname.split(" ")[0].split("."):
        obj = getattr(obj, part)


def test_subject_matching_follows_nats_wildcards() -> None:
    assert covers("rla.traj.>", "rla.traj.live.judged.>") and covers("rla.traj.>", "rla.traj.judged")
    assert not covers("rla.traj.>", "rla.traj") and not covers("rla.jobs.*", "rla.jobs.>")
    assert covers("rla.*.x", "rla.y.x") and not covers("rla.*.x", "rla.y.x.z")
    assert stream_of("rla.ingest.erased.>") == "INGEST"
    with pytest.raises(ValueError, match="captured by 0 streams"):
        stream_of("other.subject")


def test_bucket_names_under_the_default_config() -> None:
    config = RunConfig()
    names = {b.default_name(config, role="policy", shadow="s1") for b in BUCKETS}
    assert names == {"models", "policy_samples", "reward_samples", "policy_trained", "env_pool", "env_pool_scheduler", "env_pool_held",
                     "env_pool_models", "env_pool_leader", "live_tasks", "code_problems", "critic_groups", "critic_stats", "critic_live", "reward_judged",
                     "reward_judged_shadow_s1", "ingest_episodes", "ingest_episodes_erasures", "ingest_orphans",
                     "ingest_captures"}
    assert Buckets.ENV_SCHEDULER.name(pool_bucket="p") == "p_scheduler"
    assert Consumers.REWARD_SHADOW.binding(shadow="s1") == {"stream": "TRAJ", "durable": "reward-shadow-s1",
                                                            "subject": "rla.traj.completed"}


def test_no_service_writes_a_durable_name_of_the_table_itself() -> None:
    """The services take durable names from the table: none appears as a string literal in their code."""
    root = Path(__file__).resolve().parents[2] / "services"
    fixed = [c.durable for c in CONSUMERS if "{" not in c.durable]
    found = [f"{path.relative_to(root)}: {name}" for path in sorted(root.rglob("*.py"))
             if path.name != "topology.py"
             for name in fixed if f'"{name}"' in path.read_text() or f"'{name}'" in path.read_text()]
    assert found == []


def published_in_code() -> set[tuple[str, str]]:
    """(module under ``services/``, `Subjects` constant) of every ``….publish(Subjects.X …)`` call whose
    subject names its constant (subjects picked by a helper, `judged_subject` or `checkpoints.ROLES`,
    are not seen here)."""
    root = Path(__file__).resolve().parents[2] / "services"
    found = set()
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "publish" \
                    and node.args:
                found |= {(str(path.relative_to(root)), n.attr) for n in ast.walk(node.args[0])
                          if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id == "Subjects"}
    return found


def test_every_publish_in_the_code_is_listed_under_its_subject() -> None:
    listed = {(p.split(": ")[-1].split(":")[0], s.constant) for s in SUBJECTS for p in s.publishers}
    found = published_in_code()
    assert len(found) >= 14  # the scan sees the services' publish calls
    assert found - listed == set()
