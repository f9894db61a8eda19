"""Faults under a running loop: `kill -9` of services and of the NATS server mid-run, and of the
whole machine (launcher and everything under it) followed by `--resume`. The run completes and
every round's counts are what an uninterrupted run gives: every job's trajectories judged once,
every group closed once, every round trained exactly once by each model."""

from __future__ import annotations

import asyncio
import json
import re
import os
import signal
import subprocess
import time
from pathlib import Path

import nats.errors
import pytest
from nats.js.errors import NotFoundError

from rlanything.v1.events_pb2 import (
    MODEL_ROLE_POLICY,
    MODEL_ROLE_REWARD_MODEL,
    ModelVersion,
    PolicySampleBatch,
    RewardSampleBatch,
    TaskPoolEvent,
)
from services.common.bus import EventBus
from services.common.config import ConsumerConfig, NatsConfig
from services.common.grpc_runtime import check_health_sync
from services.common.kv import ProtoBucket
from services.common.rounds import batch_key
from services.common.nats_server import NatsServer
from tests.launch import RLANYTHING, rounds_of, write_config

FULL = os.environ.get("RLA_CHAOS_FULL") == "1"
"""`make chaos`: every process is killed once (the env too) and the asynchronous run is longer;
`make test-all` (the heavy tier) kills critic, reward, NATS and policy."""
REPORT = os.environ.get("RLA_CHAOS_REPORT", "")
"""`make chaos` writes each run's per-round counts here (markdown); empty: no file."""
COUNT_KEYS = ("counts/jobs", "counts/trajectories", "counts/judged", "critic/groups_complete",
              "counts/policy_batches", "counts/reward_batches", "policy/version", "reward/version",
              "launcher/restarts")

pytestmark = [pytest.mark.heavy, pytest.mark.slow]


@pytest.fixture(scope="module")
def cold(tiny_cold: Path) -> Path:
    """The session's cold start of the tiny config (the system tier's too: SFT runs once)."""
    return tiny_cold


def _wait_rounds(run_dir: Path, proc: subprocess.Popen, n: int, timeout_s: float = 600.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not ((run_dir / "metrics.jsonl").exists() and len(rounds_of(run_dir)) >= n):
        assert proc.poll() is None, proc.stderr.read()[-3000:] if proc.stderr else proc.returncode
        assert time.monotonic() < deadline, f"fewer than {n} rounds after {timeout_s} s"
        time.sleep(0.2)


def _wait_for_file(path: Path, proc: subprocess.Popen, timeout_s: float = 600.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not path.exists():
        assert proc.poll() is None and time.monotonic() < deadline, f"{path} never written"
        time.sleep(0.2)


def _stderr_so_far(proc: subprocess.Popen) -> str:
    proc.kill()
    return proc.communicate(timeout=30)[1][-3000:]


def _manifest(run_dir: Path) -> dict:
    return json.loads((run_dir / "services.json").read_text())


def assert_exact_counts(rounds: list[dict]) -> None:
    """What every round of an uninterrupted run of the tiny config shows (`test_run_loop`)."""
    for r in rounds:
        jobs = r["critic/jobs_in_round"]
        assert jobs == 4 + 4 + r["critic/groups_candidate"], r  # 4 train + 2 held-out + 2 OOD (+ candidates)
        assert r["counts/jobs"] == jobs, r
        assert r["counts/trajectories"] == r["critic/trajectories"] == 4 * 4 + 4 * 2 + 4 * r["critic/groups_candidate"], r
        assert r["counts/judged"] == r["counts/trajectories"], r   # each trajectory judged once
        assert r["critic/groups_complete"] == jobs and r.get("critic/groups_partial", 0) == 0, r  # closed once, whole
        assert r["counts/policy_batches"] == r["counts/reward_batches"] == jobs, r  # every batch in one update
        assert r["policy/version"] == r["round"] + 1 and r["reward/version"] == r["round"] + 1, r  # trained once


def report(title: str, rounds: list[dict], note: str) -> None:
    """Append one run's per-round counts to ``REPORT`` (when set)."""
    if not REPORT:
        return
    lines = [f"## {title}", "", note, "", "| round | " + " | ".join(k.split("/", 1)[1] for k in COUNT_KEYS) + " |",
             "|---:|" + "---:|" * len(COUNT_KEYS)]
    for r in rounds:
        lines.append(f"| {int(r['round'])} | " + " | ".join(f"{r.get(k, float('nan')):g}" for k in COUNT_KEYS) + " |")
    with open(REPORT, "a") as f:
        f.write("\n".join(lines) + "\n\n")


ASYNC = ["--set", "env.families.0.observation=window", "--set", "policy.sft.steps=150",  # answers in format
         "--set", "loop.mode=async", "--set", "env.scheduler.max_staleness=1",
         "--set", "policy.ppo.min_samples_async=8", "--set", "reward.ppo.min_samples_async=8"]


def _wait_restarted(run_dir: Path, proc: subprocess.Popen, names: tuple[str, ...], killed: dict[str, int],
                    timeout_s: float = 120.0) -> None:
    """Until the manifest lists a new pid for every one of ``names`` (the launcher restarted it)
    and each says SERVING on its health check (up, connected to NATS)."""
    deadline = time.monotonic() + timeout_s
    while True:
        services = _manifest(run_dir)["services"]
        if all(services[n]["pid"] != killed[n] and check_health_sync(services[n]["address"], timeout_s=0.5) == "SERVING"
               for n in names):
            return
        assert proc.poll() is None, proc.stderr.read()[-3000:] if proc.stderr else proc.returncode
        assert time.monotonic() < deadline, f"{names} not restarted and serving after {timeout_s} s"
        time.sleep(0.2)


def _chaos_run(tmp_path: Path, cold: Path, extra: list[str], first: int = 1,
               rounds_n: int = 3) -> tuple[Path, list[dict], str]:
    """``rounds_n`` rounds of the tiny config with kill -9 of critic and reward once ``first`` rounds are done,
    and of NATS and the policy one round later; the run dir, its rounds and the launcher's stderr.

    ``first=0`` (asynchronous rounds, which overlap): critic and reward seconds after start-up, NATS and
    the policy as soon as the launcher has restarted those two. Waiting for a round there is racy: under
    load the rounds after round 0 can all finish within a second of it, and a kill after the last
    round is never seen (the CI run where the policy's restart went uncounted)."""
    run_dir = tmp_path / "run"
    proc = subprocess.Popen([RLANYTHING, "run", str(write_config(tmp_path, rounds_n, cold)), "--run-dir", str(run_dir),
                             "--set", "launcher.restart.backoff_s=0.2", *extra],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        if first:
            _wait_rounds(run_dir, proc, first)  # round `first` in flight
        else:
            _wait_for_file(run_dir / "services.json", proc)
            time.sleep(3.0)  # round 0's rollouts under way
        killed = {name: _manifest(run_dir)["services"][name]["pid"] for name in ("critic", "reward")}
        os.kill(killed["critic"], signal.SIGKILL)
        time.sleep(2.0)
        os.kill(killed["reward"], signal.SIGKILL)
        if first:
            _wait_rounds(run_dir, proc, first + 1)  # the next round in flight
        else:
            _wait_restarted(run_dir, proc, ("critic", "reward"), killed)
        os.kill(_manifest(run_dir)["nats_pid"], signal.SIGKILL)
        time.sleep(1.0)
        policy = _manifest(run_dir)["services"]["policy"]["pid"]
        try:
            os.kill(policy, signal.SIGKILL)
        except ProcessLookupError:
            raise AssertionError(f"policy (pid {policy}) had exited after the NATS restart; launcher said:\n"
                                 + _stderr_so_far(proc)) from None
        if FULL:  # the env too: its sessions die with it, the rollouts in flight are redone
            time.sleep(2.0)
            os.kill(_manifest(run_dir)["services"]["env"]["pid"], signal.SIGKILL)
        recorded = len(rounds_of(run_dir)) if (run_dir / "metrics.jsonl").exists() else 0
        assert recorded < rounds_n, "every round was recorded before the last kill: the test proves nothing"
        assert proc.wait(timeout=900) == 0, proc.stderr.read()[-3000:]
    finally:
        if proc.poll() is None:
            proc.kill()
    err = proc.stderr.read()
    rounds = rounds_of(run_dir)
    assert [r["round"] for r in rounds] == list(range(rounds_n))
    names = ("critic", "reward", "nats", "policy") + (("env",) if FULL else ())
    assert sum(r["launcher/restarts"] for r in rounds) == len(names), err[-3000:]
    for name in names:
        assert f"restarted {name} after exit code -9" in err
    return run_dir, rounds, err


TRAINS = ["--set", "policy.sft.steps=150"]
"""A cold start that answers in format often enough for the policy to train (with 30 steps every group's
rewards tie, no sample has an advantage and the weights never move: the lineage check would see nothing)."""


def test_run_survives_kill_9_of_services_and_nats(tmp_path: Path, cold: Path) -> None:
    run_dir, rounds, _ = _chaos_run(tmp_path, cold, TRAINS)
    assert f"The launcher restarted {5 if FULL else 4} processes" in (run_dir / "report.md").read_text()
    pool = asyncio.run(_pool_decisions(run_dir / "nats"))
    lineage = asyncio.run(_weight_lineage(run_dir / "nats"))
    assert lineage["policy"][0] == lineage["reward"][0] == 4, lineage
    assert lineage["policy"][1] > 1, f"the policy's weights never changed: the lineage check saw nothing ({lineage})"
    report(f"Synchronous: kill -9 of critic, reward (round 1), NATS, policy{', env' if FULL else ''} (round 2)", rounds,
           "Each of 3 rounds: jobs, trajectories, judgements and closed groups as in an uninterrupted run; "
           f"each model trained once per round (version = round + 1), each version from the weights of the one "
           f"before it, across the restarts. Task-pool decisions, each made once: {pool}.")
    assert_exact_counts(rounds)


async def _batch_fates(store: Path) -> dict[str, dict[str, set[str]]]:
    """Per role, where each job's sample batch ended up: trained (by the version whose announcement
    lists it), stored in the trainer's bucket, or still in the SAMPLES stream (delivered or not,
    never acked: the run stopped first). Asserts no batch is in two versions or trained and stored."""
    out = {}
    with NatsServer(store_dir=store) as server:
        bus = await EventBus.connect(NatsConfig(url=server.url), ConsumerConfig(), name="inspect")
        sub = await bus.js.pull_subscribe("rla.models.>", stream="MODELS")
        versions = [ModelVersion.FromString(m.data) for m in await sub.fetch(1000, timeout=2)]
        info = await bus.js.stream_info("SAMPLES")
        in_stream: list[tuple[str, bytes]] = []
        for seq in range(info.state.first_seq, info.state.last_seq + 1):
            try:
                msg = await bus.js.get_msg("SAMPLES", seq)
            except NotFoundError:
                continue  # acked (a work-queue stream forgets acked messages)
            in_stream.append((msg.subject, msg.data))
        for role, bucket, kind in (("policy", "policy_samples", PolicySampleBatch),
                                   ("reward", "reward_samples", RewardSampleBatch)):
            mine = [v for v in versions if (v.role == MODEL_ROLE_POLICY) == (role == "policy")]
            assert len({v.version for v in mine}) == len(mine), f"{role}: a version announced twice"
            trained = [k for v in mine for k in v.batch_keys]
            assert len(trained) == len(set(trained)), f"{role}: a batch trained in two versions"
            assert sum(v.metrics.get("batches", 0) for v in mine) == len(trained), role
            stored = set(await (await ProtoBucket.open(bus.js, bucket, kind)).keys())
            assert not stored & set(trained), f"{role}: trained and still stored: {stored & set(trained)}"
            waiting = {batch_key(b.round, b.batch_id) for b in (kind.FromString(d) for subj, d in in_stream
                                                                 if subj == f"rla.samples.{role}")}
            out[role] = {"trained": set(trained), "stored": stored, "in_stream": waiting - stored - set(trained)}
        await bus.close()
    return out


async def _weight_lineage(store: Path) -> dict[str, tuple[int, int]]:
    """Per role, how many versions were announced and how many distinct weights they hold; asserts that each version's update started from the
    weights the version before it ended with (``start_sha256`` = the previous ``weights_sha256``), across
    the kills: a restarted trainer goes on from the last announced weights, not from its source."""
    with NatsServer(store_dir=store) as server:
        bus = await EventBus.connect(NatsConfig(url=server.url), ConsumerConfig(), name="inspect")
        sub = await bus.js.pull_subscribe("rla.models.>", stream="MODELS")
        versions = [ModelVersion.FromString(m.data) for m in await sub.fetch(1000, timeout=2)]
        await bus.close()
    out = {}
    for role, enum in (("policy", MODEL_ROLE_POLICY), ("reward", MODEL_ROLE_REWARD_MODEL)):
        mine = sorted((v for v in versions if v.role == enum), key=lambda v: v.version)
        assert [v.version for v in mine] == list(range(len(mine))), role
        assert all(len(v.weights_sha256) == 64 for v in mine), (role, [v.weights_sha256 for v in mine])
        for before, after in zip(mine, mine[1:]):
            assert after.start_sha256 == before.weights_sha256, (
                f"{role} v{after.version} started from {after.start_sha256[:12]}, not from v{before.version}'s "
                f"{before.weights_sha256[:12]}")
        out[role] = (len(mine), len({v.weights_sha256 for v in mine}))
    return out


TERMINAL = (TaskPoolEvent.KIND_ACCEPTED, TaskPoolEvent.KIND_REJECTED)


async def _pool_decisions(store: Path) -> dict[str, int]:
    """The task pool's decisions on ``rla.env.pool``, checked to be made once each: every request
    answered by exactly one proposal (or undeployable rejection) and every candidate accepted or
    rejected at most once, and only after it was proposed. Returns the count per kind."""
    with NatsServer(store_dir=store) as server:
        bus = await EventBus.connect(NatsConfig(url=server.url), ConsumerConfig(), name="inspect")
        sub = await bus.js.subscribe("rla.env.pool", ordered_consumer=True, deliver_policy="all")
        events = []
        while True:
            try:
                events.append(TaskPoolEvent.FromString((await sub.next_msg(timeout=2)).data))
            except nats.errors.TimeoutError:
                break
        await bus.close()
    by_job: dict[str, list[int]] = {}
    for e in events:
        by_job.setdefault(e.event_id.rsplit("/", 1)[0], []).append(e.kind)
    for job, kinds in by_job.items():
        if TaskPoolEvent.KIND_REQUESTED in kinds:
            answers = [k for k in kinds if k in (TaskPoolEvent.KIND_PROPOSED, TaskPoolEvent.KIND_REJECTED_UNDEPLOYABLE)]
            assert kinds.count(TaskPoolEvent.KIND_REQUESTED) == 1 and len(answers) == 1, (job, kinds)
    proposed = {(e.candidate.slot_id, e.candidate.version) for e in events if e.kind == TaskPoolEvent.KIND_PROPOSED}
    decided = [(e.candidate.slot_id, e.candidate.version) for e in events if e.kind in TERMINAL]
    assert len(decided) == len(set(decided)), "a candidate decided twice"
    assert set(decided) <= proposed, set(decided) - proposed
    return {TaskPoolEvent.Kind.Name(k).removeprefix("KIND_").lower(): sum(e.kind == k for e in events)
            for k in sorted({e.kind for e in events})}


ASYNC_ROUNDS = 16
"""Asynchronous rounds of the tiny config overlap and can take 0.3 s each on an idle machine: a fresh-clone
run finished 4 of them within 5 s of start-up, before the reward, NATS and the policy were killed. 16
rounds outlast the faults (which take ~10 s) there, and cost a few seconds more under load."""


def test_async_run_survives_kill_9_of_services_and_nats(tmp_path: Path, cold: Path) -> None:
    run_dir, rounds, _ = _chaos_run(tmp_path, cold, ASYNC, first=0, rounds_n=ASYNC_ROUNDS)  # rounds overlap: strike early
    jobs = 0.0
    for r in rounds:
        assert r["counts/jobs"] == r["critic/jobs_in_round"], r
        assert r["counts/judged"] == r["counts/trajectories"] == r["critic/trajectories"] > 0, r
        assert r["critic/groups_complete"] == r["critic/jobs_in_round"] and r.get("critic/groups_partial", 0) == 0, r
        jobs += r["critic/jobs_in_round"]
    fates = asyncio.run(_batch_fates(run_dir / "nats"))
    pool = asyncio.run(_pool_decisions(run_dir / "nats"))
    asyncio.run(_weight_lineage(run_dir / "nats"))
    for role, where in fates.items():  # every job's batch in exactly one update, or still waiting for one
        assert len(where["trained"] | where["stored"] | where["in_stream"]) == jobs, (role, jobs, where)
    report(f"Asynchronous, {ASYNC_ROUNDS} rounds: kill -9 of critic, reward (round 0), then NATS, policy"
           f"{', env' if FULL else ''} once both are back", rounds,
           "Versions are not tied to rounds here; every round's trajectories judged once and groups closed once. "
           f"Of the {jobs:g} jobs' sample batches, per model (none in two versions, none trained and still stored): "
           + "; ".join(f"{role} {len(w['trained'])} trained, {len(w['stored'])} stored, {len(w['in_stream'])} "
                       "still in the stream" for role, w in fates.items()) + f". Task-pool decisions, each made once: {pool}.")


def test_resume_after_kill_9_of_the_whole_machine(tmp_path: Path, cold: Path) -> None:
    run_dir = tmp_path / "run"
    proc = subprocess.Popen([RLANYTHING, "run", str(write_config(tmp_path, 3, cold)), "--run-dir", str(run_dir),
                             *TRAINS], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        _wait_rounds(run_dir, proc, 1)
        time.sleep(3.0)  # into round 1
        manifest = _manifest(run_dir)
        for pid in [proc.pid, manifest["nats_pid"], *(s["pid"] for s in manifest["services"].values())]:
            os.kill(pid, signal.SIGKILL)  # no process gets to clean up or flush anything
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    before = rounds_of(run_dir)
    result = subprocess.run([RLANYTHING, "run", "--resume", str(run_dir)], capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, result.stderr[-3000:]
    rounds = rounds_of(run_dir)
    assert rounds[:len(before)] == before
    assert [r["round"] for r in rounds] == [0, 1, 2]  # none lost, none repeated
    pool = asyncio.run(_pool_decisions(run_dir / "nats"))
    lineage = asyncio.run(_weight_lineage(run_dir / "nats"))
    assert lineage["policy"][0] == lineage["reward"][0] == 4 and lineage["policy"][1] > 1, lineage
    report("Whole machine: kill -9 of the launcher, NATS and every service in round 1, then --resume", rounds,
           f"Rounds written before the kill: {len(before)}; the resumed run wrote the rest with the same counts, "
           "each version trained from the weights of the one before it. "
           f"Task-pool decisions, each made once: {pool}.")
    assert_exact_counts(rounds)


CLUSTER = ["--set", "launcher.nats_cluster_size=3", "--set", "nats.stream_replicas=3", "--set", "policy.openai_port=0"]
"""A local three-node JetStream cluster with every stream and KV bucket replicated on all three (and the
OpenAI port on a free port, not 8000: other runs on a shared machine may hold it)."""
NODE_DOWN_S = 25.0
"""Seconds the killed node stays down (the launcher's restart back-off): the run goes on with 2 of 3.
Measured here: the first new message 10 s after the kill (leader elections take 2-4 s, the requests
that were in flight to the killed node time out after 5 s and are retried); a CI run's window of
10 s saw none, so the test waits up to 23 s for one (and says how long it took)."""
CLUSTER_ROUNDS = 8
"""Rounds of the three-node run: it must still run when the killed node comes back. With 4, a CI run on a
quiet machine (5 s rounds) finished 20 s after the kill, before the restart, which it never saw."""


async def _replicas_and_leader(url: str) -> tuple[dict[str, int], str]:
    """(replicas of every stream, KV buckets' ``KV_*`` streams included; the JOBS stream's leader)."""
    nc = await nats.connect(url.split(","))
    try:
        js = nc.jetstream()
        replicas = {info.config.name: info.config.num_replicas for info in await js.streams_info()}
        leader = (await js.stream_info("JOBS")).cluster.leader
    finally:
        await nc.close()
    return replicas, leader


async def _stored_trajectories(url: str, within_s: float = 15.0) -> int:
    """Messages in the TRAJ stream (trajectories and judgements) as the nodes still up report them.

    Asked again until ``within_s``: right after its leader is killed the stream has none until the
    two nodes left elect one (a CI run's only ask timed out there after 5 s; a later CI run's asks
    for 6 s, 1 s after the kill, all timed out)."""
    deadline = time.monotonic() + within_s
    nc = await nats.connect(url.split(","), connect_timeout=2)
    try:
        while True:
            try:
                return int((await nc.jetstream(timeout=2).stream_info("TRAJ")).state.messages)
            except nats.errors.TimeoutError:
                if time.monotonic() > deadline:
                    raise
    finally:
        await nc.close()


def test_run_survives_kill_9_of_a_nats_node_of_three(tmp_path: Path, cold: Path) -> None:
    """Three NATS nodes, streams and buckets x3: `kill -9` of the node leading the JOBS stream in round
    1. JetStream elects new leaders on the two left (a quorum: 2 of 3), the services' connections move
    to them, the run goes on while the node is down and completes with exact counts."""
    run_dir = tmp_path / "run"
    started = time.monotonic()
    proc = subprocess.Popen([RLANYTHING, "run", str(write_config(tmp_path, CLUSTER_ROUNDS, cold)),
                             "--run-dir", str(run_dir), "--set", f"launcher.restart.backoff_s={NODE_DOWN_S:g}", *CLUSTER],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        _wait_rounds(run_dir, proc, 1)  # round 1 in flight
        manifest = _manifest(run_dir)
        replicas, leader = asyncio.run(_replicas_and_leader(manifest["nats_url"]))
        assert len(manifest["nats_nodes"]) == 3 and len(manifest["nats_url"].split(",")) == 3
        assert {"JOBS", "TRAJ", "SAMPLES", "KV_models"} <= set(replicas), replicas
        assert set(replicas.values()) == {3}, f"streams or buckets not replicated x3: {replicas}"
        victim = f"nats-{leader}"
        os.kill(manifest["nats_nodes"][victim]["pid"], signal.SIGKILL)
        killed_at = time.monotonic()
        recorded = len(rounds_of(run_dir))
        assert recorded < CLUSTER_ROUNDS, "every round was recorded before the kill: the test proves nothing"
        time.sleep(1.0)  # the streams led by the killed node elect new leaders
        traj_after_kill = traj_before_restart = asyncio.run(_stored_trajectories(manifest["nats_url"]))
        while traj_before_restart == traj_after_kill and time.monotonic() < killed_at + NODE_DOWN_S - 2.0:
            time.sleep(1.0)
            traj_before_restart = asyncio.run(_stored_trajectories(manifest["nats_url"]))
        first_new_s = time.monotonic() - killed_at
        assert _manifest(run_dir)["nats_nodes"][victim]["pid"] == manifest["nats_nodes"][victim]["pid"], "restarted early"
        assert traj_before_restart > traj_after_kill, (
            f"no trajectory or judgement stored in the {first_new_s:.0f} s after the kill while 2 of 3 nodes were up")
        while _manifest(run_dir)["nats_nodes"][victim]["pid"] == manifest["nats_nodes"][victim]["pid"]:
            assert proc.poll() is None, (f"the run ended {time.monotonic() - killed_at:.0f} s after the kill, before "
                                         f"{victim} came back ({NODE_DOWN_S:g} s): raise CLUSTER_ROUNDS")
            time.sleep(0.5)
        back_s = time.monotonic() - killed_at
        assert proc.wait(timeout=900) == 0, proc.stderr.read()[-3000:]
    finally:
        if proc.poll() is None:
            proc.kill()
    wall_s = time.monotonic() - started
    err = proc.stderr.read()
    rounds = rounds_of(run_dir)
    assert [r["round"] for r in rounds] == list(range(CLUSTER_ROUNDS))
    assert_exact_counts(rounds)  # nothing lost, nothing judged or trained twice
    assert f"restarted {victim} after exit code -9" in err, err[-3000:]
    assert sum(r["launcher/restarts"] for r in rounds) == 1, err[-3000:]
    report("Three-node NATS cluster: kill -9 of one node of 3 (the JOBS stream's leader) in round 1",
           rounds, f"`launcher.nats_cluster_size=3`, `nats.stream_replicas=3`: every stream and KV bucket "
           f"({len(replicas)}) on all three nodes. {victim} was killed {killed_at - started:.0f} s into the run "
           f"with {recorded} round(s) recorded and stayed down {NODE_DOWN_S:g} s (the launcher's back-off); on the 2 "
           f"nodes left the TRAJ stream grew from {traj_after_kill} to {traj_before_restart} messages (trajectories "
           f"and judgements) {first_new_s:.0f} s after the kill; {victim} was back {back_s:.0f} s after it, the run "
           f"still going. Each round's counts are those of an uninterrupted run. "
           f"Run wall time {wall_s:.0f} s (the launcher's own; same machine, 2 cores shared).")


HANG_S = 60.0
"""How long the NATS server stays SIGSTOPped (hung: its port accepts connections, nothing answers)."""
HANGS = {
    # Found within 3 s; each service gives NATS up after 20 s (exit 69), is restarted by the launcher,
    # fails to connect while the server still hangs (exit 1 after 3 x nats.connect_timeout_s), and
    # connects once it is continued.
    "budget": ["--set", "nats.ping_interval_s=1", "--set", "nats.max_outstanding_pings=2",
               "--set", "nats.reconnect_budget_s=20"],
    # Defaults: found within 30 s, the 60 s budget outlasts the hang, so every process rides it out.
    "defaults": [],
}


@pytest.mark.parametrize("variant", ["budget", "defaults"] if FULL else ["budget"])
def test_run_survives_a_60_s_sigstop_of_nats(tmp_path: Path, cold: Path, variant: str) -> None:
    """A hung broker mid-run: every service says NOT_SERVING within the configured bound, rides the
    hang out or ends itself (exit 69) and is restarted, and the run completes with exact counts."""
    from collections import Counter

    from services.common.config import NatsConfig

    extra = HANGS[variant]
    nats_cfg = NatsConfig(**{o.split("=")[0].removeprefix("nats."): float(o.split("=")[1])
                             for o in extra if o.startswith("nats.")})
    run_dir = tmp_path / "run"
    proc = subprocess.Popen([RLANYTHING, "run", str(write_config(tmp_path, 3, cold)), "--run-dir", str(run_dir),
                             "--set", "launcher.restart.backoff_s=0.2", *extra],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    first_down: dict[str, tuple[float, str]] = {}
    try:
        _wait_rounds(run_dir, proc, 1)  # round 1 in flight
        manifest = _manifest(run_dir)
        os.kill(manifest["nats_pid"], signal.SIGSTOP)
        stopped = time.monotonic()
        try:
            while time.monotonic() - stopped < HANG_S:
                for name, svc in manifest["services"].items():
                    if name not in first_down:
                        status = check_health_sync(svc["address"], timeout_s=0.5)
                        if status != "SERVING":
                            first_down[name] = (time.monotonic() - stopped, status)
                assert proc.poll() is None, proc.stderr.read()[-3000:] if proc.stderr else proc.returncode
                time.sleep(0.2)
        finally:
            os.kill(manifest["nats_pid"], signal.SIGCONT)
        recorded = len(rounds_of(run_dir))
        assert recorded < 3, "every round was recorded before the hang ended: the test proves nothing"
        assert proc.wait(timeout=900) == 0, proc.stderr.read()[-3000:]
    finally:
        if proc.poll() is None:
            proc.kill()
    err = proc.stderr.read()
    rounds = rounds_of(run_dir)
    assert [r["round"] for r in rounds] == [0, 1, 2]
    assert_exact_counts(rounds)  # nothing lost, nothing judged or trained twice
    bound = nats_cfg.dead_connection_bound_s
    assert set(first_down) == set(manifest["services"]), first_down
    for name, (after_s, status) in first_down.items():
        assert status == "NOT_SERVING" and after_s <= bound + 3.0, (name, after_s, status, bound)
    restarts = Counter((m.group(1), int(m.group(2))) for m in re.finditer(r"restarted (\w+) after exit code (-?\d+)", err))
    assert sum(r["launcher/restarts"] for r in rounds) == sum(restarts.values()), err[-3000:]
    if variant == "budget":  # each service gave NATS up itself first, naming it
        assert {name for (name, code) in restarts if code == 69} == set(manifest["services"]), restarts
    else:
        assert not restarts, restarts
    per_service = {name: sorted(code for (n, code), k in restarts.items() for _ in range(k) if n == name)
                   for name in manifest["services"]}
    trajectories = sum(r["counts/trajectories"] for r in rounds)
    report(f"Hung broker: SIGSTOP of NATS for {HANG_S:g} s in round 1 ({variant}: nats.ping_interval_s="
           f"{nats_cfg.ping_interval_s:g}, max_outstanding_pings={nats_cfg.max_outstanding_pings}, "
           f"reconnect_budget_s={nats_cfg.reconnect_budget_s:g}; found dead within {bound:g} s)", rounds,
           f"Rounds recorded before the hang ended: {recorded}. Seconds from SIGSTOP to NOT_SERVING on gRPC health: "
           + ", ".join(f"{n} {s:.1f}" for n, (s, _) in sorted(first_down.items()))
           + ". Restarts by the launcher, with each exit code (69: NATS given up; 1: NATS unreachable at start-up): "
           + ", ".join(f"{n} {len(c)} {c}" for n, c in sorted(per_service.items()))
           + f". {trajectories:g} trajectories published, each judged once and trained in exactly one update per "
           "model (counts as in an uninterrupted run); lost: 0.")
