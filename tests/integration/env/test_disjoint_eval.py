"""Held-out and OOD are held out by construction: with the default config's families and seed, no
map a train rollout plays over gRPC equals a held-out or OOD map (identity: the map's rows, not
its seed; two seeds can build the same 4×4 map)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import grpc
import pytest
import yaml

from rlanything.v1 import env_pb2, env_pb2_grpc
from rlanything.v1.env_pb2 import SchedulerState, TaskSlot, TaskVersion
from rlanything.v1.events_pb2 import (DIRECTION_HARDER, BadSteps, ModelVersion, RoundMetrics, TaskPoolEvent,
                                      TaskReport)
from services.common.config import EnvServiceConfig
from services.common.errors import InvalidArgumentError
from services.common.kv import ProtoBucket
from services.common.streams import Subjects
from services.env.adaptation import Adaptation
from services.env.disjoint import keys_digest
from services.env.families.registry import build_family
from services.env.pool import TaskPool, slot_key, spec_of
from services.env.proposer import ParametricProposer
from services.env.scheduler import Scheduler
from services.env.slots import ref_of
from tests.support import events, wait_for_tasks

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[3]


def _default_env(cache: Path) -> dict:
    """The default config's env section, with the whole-map view (the observation then shows the
    map itself) and no scheduler (the test plays the episodes)."""
    config = yaml.safe_load((ROOT / "configs" / "default.yaml").read_text())
    env = config["env"]
    env["families"][0]["observation"] = "map"
    env["scheduler"] = {"enabled": False}
    env["cache_dir"] = str(cache)
    return {"seed": config["seed"], "env": env}


def _map(observation: str) -> str:
    """The map rows of a start observation (the agent's tile 'A' is the start tile 'S')."""
    rows = observation.splitlines()[1:-1]
    return "\n".join(rows).replace("A", "S")


@pytest.mark.slow
def test_no_train_rollout_of_the_default_config_plays_an_eval_map(spawn_service, tmp_path) -> None:
    config = _default_env(tmp_path / "cache")
    family = config["env"]["families"][0]
    svc = spawn_service("env", yaml.safe_dump(config))
    env = env_pb2_grpc.EnvironmentStub(grpc.insecure_channel(svc.address))
    slots = family["train_slots"] + family["heldout_slots"] + family["ood_slots"]
    tasks = wait_for_tasks(env, slots, timeout_s=120)

    def play(task, seed: int) -> str:
        reset = env.Reset(env_pb2.ResetRequest(task=task.ref, seed=seed))
        env.Close(env_pb2.CloseRequest(session_id=reset.session_id))
        return _map(reset.observation)

    eval_maps = {play(t, 0) for t in tasks if t.split in ("heldout", "ood")}
    assert len(eval_maps) > 150  # the 200 held-out slots hold ~150 distinct 4x4 maps, the 100 OOD ones 100 5x5 maps
    train = [t for t in tasks if t.split == "train"]
    played = [play(t, seed) for t in train for seed in range(8)]  # a round's G=8 rollouts of each train task
    assert len(played) == 64 * 8
    assert sorted(set(played) & eval_maps) == []


# In process, real NATS: the pool, the scheduler's `eval/overlap` and the adaptation's refusals.

async def _pool(bus, tmp_path, family: dict, scheduler: dict | None = None, adaptation: dict | None = None):
    cfg = EnvServiceConfig.model_validate({"cache_dir": str(tmp_path), "families": [family],
                                           "scheduler": {"eval_every": 0, **(scheduler or {})},
                                           "adaptation": adaptation or {}})
    families = {f.type: build_family(f, cfg.cache_dir) for f in cfg.families}
    return cfg, TaskPool(await ProtoBucket.open(bus.js, "pool", TaskSlot), families)


async def _release(bus, cfg, pool, per_rollout: frozenset[str]) -> dict[str, float]:
    ready = asyncio.Event()
    ready.set()
    scheduler = Scheduler(pool, bus, await ProtoBucket.open(bus.js, "pool_state", SchedulerState),
                          await ProtoBucket.open(bus.js, "pool_models", ModelVersion), cfg.scheduler, seed=0,
                          pool_ready=ready, per_rollout=per_rollout)
    assert await scheduler.tick() > 0
    (metrics,) = await events(bus, Subjects.METRICS_ENV, "METRICS", 1, RoundMetrics)
    assert metrics.round == 0
    return dict(metrics.values)


async def test_a_round_of_the_default_family_plays_no_eval_instance_and_says_so(bus, tmp_path) -> None:
    family = {"type": "gym_text", "knobs": {"size": 4, "hole_prob": 0.2}, "train_slots": 64, "heldout_slots": 200,
              "ood_knobs": {"size": 5, "hole_prob": 0.25}, "ood_slots": 100, "train_instances": "rollout"}
    cfg, pool = await _pool(bus, tmp_path, family, {"tasks_per_round": 12, "group_size": 8})
    assert await pool.seed(cfg, 0) == 364
    assert len(pool.held_out) == 252  # 152 distinct held-out 4x4 maps + 100 OOD 5x5 maps
    lake = pool.family("gym_text")
    train = [s for s in await pool.slots() if s.split == "train"]
    assert not any(lake.instance_key(spec_of(s.family, s.active)) in pool.held_out for s in train)
    values = await _release(bus, cfg, pool, frozenset({"gym_text"}))
    assert values["eval/overlap"] == 0.0 and values["env/train_instances"] == 96.0
    assert values["env/redrawn_instances"] > 20  # ~46 % of the plain draws were held-out maps: drawn again


async def test_a_train_slot_that_is_a_held_out_instance_is_counted(bus, tmp_path) -> None:
    """The guard's count: a pool stored before the rule (here written by hand) trains on a held-out map."""
    family = {"type": "gym_text", "knobs": {"size": 4, "hole_prob": 0.2}, "train_slots": 2, "heldout_slots": 2}
    cfg, pool = await _pool(bus, tmp_path, family, {"tasks_per_round": 3, "group_size": 2})
    await pool.seed(cfg, 0)
    held = await pool.slot("gym_text/heldout-0001")
    forged = TaskSlot(slot_id="gym_text/train-0009", family="gym_text", split="train", active=held.active,
                      next_version=1)
    await pool.bucket.kv.create(slot_key(forged.slot_id), forged.SerializeToString())
    values = await _release(bus, cfg, pool, frozenset())
    assert values == {"eval/overlap": 1.0, "env/train_instances": 3.0, "env/redrawn_instances": 0.0,
                      "eval/set_digest": float(int(keys_digest(pool.held_out), 16)),
                      "eval/set_instances": float(len(pool.held_out))}


async def test_train_knobs_with_only_eval_instances_are_refused_at_seeding(bus, tmp_path) -> None:
    family = {"type": "gym_text", "knobs": {"size": 4, "hole_prob": 0.0}, "train_slots": 1, "heldout_slots": 1}
    cfg, pool = await _pool(bus, tmp_path, family)
    with pytest.raises(InvalidArgumentError, match=r"env.families\[0\] train slot gym_text/train-0000: gym_text with "
                                                   r"hole_prob=0, size=4: 1001 seeds"):
        await pool.seed(cfg, 0)


@pytest.mark.parametrize("instances", ["task", "rollout"])
async def test_a_variant_that_is_an_eval_instance_is_refused_with_the_reason(bus, tmp_path, instances) -> None:
    """Easier than hole 0.05 is hole 0: the one empty 4x4 map, which is the OOD task here."""
    family = {"type": "gym_text", "knobs": {"size": 4, "hole_prob": 0.05}, "train_slots": 1,
              "ood_knobs": {"size": 4, "hole_prob": 0.0}, "ood_slots": 1, "train_instances": instances}
    cfg, pool = await _pool(bus, tmp_path, family, adaptation={"variant_tries": 1})
    await pool.seed(cfg, 0)
    per_rollout = frozenset({"gym_text"}) if instances == "rollout" else frozenset()
    adaptation = Adaptation(pool, bus, ParametricProposer(), cfg.adaptation, per_rollout=per_rollout)
    slot = await pool.slot("gym_text/train-0000")
    bad = BadSteps(trajectory_id="t", step_indices=[0, 1, 2], actions=["left", "left", "left"])  # share >= 0.3: holes first
    await adaptation.on_report(TaskReport(job_id="r0/gym_text/train-0000/v0", round=0, task=ref_of(slot, slot.active),
                                          group_size=4, rollouts=4, wins=0, acc=0.0, bad_steps=[bad]), None)
    requested, refused = await events(bus, Subjects.ENV_POOL, "REPORTS", 2, TaskPoolEvent)
    assert TaskPoolEvent.Kind.Name(refused.kind) == "KIND_REJECTED_UNDEPLOYABLE"
    assert refused.reason.startswith("easier: hole_prob 0.05 -> 0")
    expected = ("every instance of its knobs is a held-out or OOD instance" if instances == "rollout"
                else "it is a held-out or OOD instance (gym_text:SFFF/FFFF/FFFF/FFFG)")
    assert expected in refused.reason
    assert not (await pool.slot(slot.slot_id)).HasField("pending")


async def test_a_pending_candidate_that_is_an_eval_instance_is_rejected_whatever_its_acc(bus, tmp_path) -> None:
    family = {"type": "gym_text", "knobs": {"size": 4, "hole_prob": 0.2}, "train_slots": 1, "heldout_slots": 1}
    cfg, pool = await _pool(bus, tmp_path, family)
    await pool.seed(cfg, 0)
    held = await pool.slot("gym_text/heldout-0000")
    slot = await pool.add_candidate("gym_text/train-0000", TaskVersion(
        knobs=held.active.knobs, seed=held.active.seed, oracle_plan_length=held.active.oracle_plan_length,
        parent_version=0, parent_acc=1.0, direction=DIRECTION_HARDER))
    adaptation = Adaptation(pool, bus, ParametricProposer(), cfg.adaptation)
    await adaptation.on_report(TaskReport(job_id="r1/gym_text/train-0000/v1", round=1, is_candidate=True,
                                          task=ref_of(slot, slot.pending), group_size=4, rollouts=4, wins=2,
                                          acc=0.5), None)  # in band: the gate alone would accept it
    (rejected,) = await events(bus, Subjects.ENV_POOL, "REPORTS", 1, TaskPoolEvent)
    assert TaskPoolEvent.Kind.Name(rejected.kind) == "KIND_REJECTED"
    assert rejected.reason.startswith("refused whatever its acc: it is a held-out or OOD instance (gym_text:")
    after = await pool.slot("gym_text/train-0000")
    assert not after.HasField("pending") and after.active.version == 0 and after.rejected == 1


class _Writer:
    """Test double of the environment model: answers each request with the next of ``problems``."""

    name = "model:scripted"

    def __init__(self, problems: list) -> None:
        self.problems = list(problems)

    async def write_code(self, parent, direction: int, acc: float, failed_answers=()):
        return self.problems.pop(0)


@pytest.mark.skipif(__import__("os").geteuid() != 0, reason="the sandbox needs root (namespaces, per-run uids)")
async def test_written_problems_that_are_a_held_out_problem_are_refused_and_counted(bus, tmp_path) -> None:
    """Through the env's adaptation path (the model's rewrite → its checks → the pool): a copy of a
    held-out problem with other spacing, its reference with other names, a paraphrase with other test
    inputs, and a paraphrase whose tests do not show the function (so only running its reference on the
    held-out tests finds it) are each refused with the reason and counted; a new problem is proposed."""
    from services.env.adaptation import HELDOUT_REFUSED
    from services.env.families.code_problems import CodeProblem

    family = {"type": "code", "knobs": {"ops": 1}, "train_slots": 1, "heldout_slots": 2, "proposer": "model"}
    cfg, pool = await _pool(bus, tmp_path, family,  # the URL is never called: the writer is scripted
                            adaptation={"model_proposer": {"base_url": "http://127.0.0.1:9/v1"}})
    await pool.seed(cfg, 0)
    code = pool.family("code")
    held = code.problem(spec_of("code", (await pool.slot("code/heldout-0001")).active))
    f = held.reference.splitlines()[1].removeprefix("print(").removesuffix(")")  # e.g. "x * 3 + 2"
    ints = [(f"{x}\n", f"{eval(f, {'x': x})}\n") for x in (0, 1, 7)]  # noqa: S307 - our own reference's expression
    probes = [
        CodeProblem("  " + held.statement.replace(" ", "  "), held.reference, held.tests, "written"),
        CodeProblem(held.statement, held.reference.replace("x", "value"), held.tests, "written"),
        CodeProblem("Read n and print what the chain of steps gives for it.", held.reference, tuple(ints), "written"),
        CodeProblem("Print f(5) three times over.", held.reference,  # one input thrice: no line to fit
                    (("5\n", f"{eval(f, {'x': 5})}\n"),) * 3, "written"),  # noqa: S307
        CodeProblem("Print the input times 1000 plus 1.", "print(int(input()) * 1000 + 1)\n",
                    (("1\n", "1001\n"), ("2\n", "2001\n"), ("3\n", "3001\n")), "written"),
    ]
    before = {c: HELDOUT_REFUSED.labels("code", c)._value.get() for c in ("key", "behaviour")}
    adaptation = Adaptation(pool, bus, ParametricProposer(), cfg.adaptation, writer=_Writer(probes),
                            model_families=frozenset({"code"}))
    slot = await pool.slot("code/train-0000")
    for i in range(len(probes)):
        await adaptation._write_problem(TaskReport(job_id=f"r{i}/code/train-0000/v0", round=i,
                                                   task=ref_of(slot, slot.active), group_size=4, rollouts=4,
                                                   wins=4, acc=1.0), slot, DIRECTION_HARDER)
    got = await events(bus, Subjects.ENV_POOL, "REPORTS", 2 * len(probes), TaskPoolEvent)
    verdicts = [(TaskPoolEvent.Kind.Name(e.kind), e.reason) for e in got if e.kind != TaskPoolEvent.KIND_REQUESTED]
    assert [k for k, _ in verdicts] == ["KIND_REJECTED_UNDEPLOYABLE"] * 4 + ["KIND_PROPOSED"], verdicts
    assert all("held-out or OOD" in reason for _, reason in verdicts[:4]), verdicts
    assert "its reference passes every test of the held-out or OOD problem code:" in verdicts[3][1]
    after = {c: HELDOUT_REFUSED.labels("code", c)._value.get() for c in ("key", "behaviour")}
    assert (after["key"] - before["key"], after["behaviour"] - before["behaviour"]) == (3, 1)
