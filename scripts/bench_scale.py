"""Throughput against replicas, and the critic's headroom.

Usage: ``python scripts/bench_scale.py [OUT.md] [--cold DIR] [--rounds R] [--repeats N]
[--critic-events E] [--only critic|runs]`` (default ``bench/scale.md``).

* **Runs**: the tiny run config of the system tests (`tests.launch.TINY`: 4 train + 2 held-out +
  2 OOD tasks a round, G = 4, tiny models) for R rounds, once with one process of each role and
  once with ``launcher.replicas: {env: 2, rollout: 2, judge: 2}``, alternated N times so both see
  the same load on the machine. Per round, from the driver's spans (`services.run.progress`):
  rollouts/s = trajectories / (round release → last rollout), judgements/s = judged trajectories /
  (release → last judgement).
* **Critic**: one critic process on its own nats-server; the script publishes E judged
  trajectories (jobs of G = 4 rollouts, 3 steps of 3 votes each) as fast as JetStream
  acknowledges them and measures how long the critic takes to acknowledge all of them, from the
  first publish: events/s at saturation (the backlog is larger than what it handles meanwhile).

``--cold DIR`` is the cold-start cache (default ``runs/bench-scale/coldstart``; the first run builds it).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import yaml  # noqa: E402

from rlanything.v1.events_pb2 import (JudgedTrajectory, StepJudgement, TaskRef, Trajectory,  # noqa: E402
                                      TrajectoryStep, Vote)
from services.common.bus import EventBus  # noqa: E402
from services.common.config import ConsumerConfig, NatsConfig  # noqa: E402
from services.common.nats_server import NatsServer, free_port  # noqa: E402
from services.common.service_start import Started, start_service, wait_serving  # noqa: E402
from services.common.streams import Subjects  # noqa: E402
from services.common.topology import Consumers  # noqa: E402
from tests.launch import RLANYTHING, rounds_of, write_config  # noqa: E402

REPLICAS = {1: [], 2: ["--set", "launcher.replicas.env=2", "--set", "launcher.replicas.rollout=2",
                       "--set", "launcher.replicas.judge=2"]}
G, STEPS, VOTES = 4, 3, 3


def run_once(work: Path, cold: Path, rounds: int, replicas: int, index: int) -> dict:
    """One `rlanything run` of the tiny config; returns its per-round rates and wall time."""
    run_dir = work / f"run-{replicas}x-{index}"
    subprocess.run(["rm", "-rf", str(run_dir)], check=True)
    config = write_config(work, rounds, cold)
    started = time.monotonic()
    subprocess.run([RLANYTHING, "run", str(config), "--run-dir", str(run_dir), "--set", "policy.openai_port=0",
                    "--set", "launcher.health_timeout_s=300", *REPLICAS[replicas]], check=True, stdout=subprocess.DEVNULL)
    wall_s = time.monotonic() - started
    rounds_ = rounds_of(run_dir)
    rollout_s = [r["time/span/rollout_s"] for r in rounds_]
    judged_s = [r["time/span/rollout_s"] + r["time/span/judge_tail_s"] for r in rounds_]
    return {"replicas": replicas, "index": index, "wall_s": wall_s, "load_1m_end": os.getloadavg()[0],
            "round_s": [r["time/round_s"] for r in rounds_],
            "rollouts_per_s": [r["counts/trajectories"] / s for r, s in zip(rounds_, rollout_s) if s > 0],
            "judgements_per_s": [r["counts/judged"] / s for r, s in zip(rounds_, judged_s) if s > 0],
            "trajectories": sum(r["counts/trajectories"] for r in rounds_),
            "policy_train_s_per_batch": sum(r.get("policy/time/train_s", 0.0) for r in rounds_)
            / max(1, sum(r["counts/policy_batches"] for r in rounds_)),
            "reward_train_s_per_batch": sum(r.get("reward/time/train_s", 0.0) for r in rounds_)
            / max(1, sum(r["counts/reward_batches"] for r in rounds_)),
            "trajectories_per_batch": sum(r["counts/trajectories"] for r in rounds_)
            / max(1, sum(r["counts/policy_batches"] for r in rounds_))}


def _judged(job: str, index: int, jobs_in_round: int) -> JudgedTrajectory:
    steps = [TrajectoryStep(index=k, prompt=f"prompt {index}/{k}", response=f"\\boxed{{{k}}}",
                            prompt_token_ids=[1000 + index, k] * 32, response_token_ids=[10 * k + 1, 10 * k + 2] * 6,
                            behaviour_logprobs=[-0.5] * 12, action=f"a{k}", action_index=k, valid=True)
             for k in range(STEPS)]
    votes = [[1 if (index + k + v) % 3 else -1 for v in range(VOTES)] for k in range(STEPS)]
    judgements = [StepJudgement(step_index=k, judge_prompt=f"judge {index}/{k}", prompt_token_ids=[2000 + index, k] * 32,
                                votes=[Vote(value=v, response=f"\\boxed{{{v}}}", response_token_ids=[3000, k] * 6,
                                            behaviour_logprobs=[-0.75] * 12) for v in votes[k]],
                                mean_vote=sum(votes[k]) / VOTES) for k in range(STEPS)]
    trajectory = Trajectory(trajectory_id=f"{job}/{index}", job_id=job, round=0,
                            task=TaskRef(slot_id=f"gym_text/{job}", version=0, family="gym_text"),
                            rollout_index=index, group_size=G, task_text="reach the goal", steps=steps,
                            outcome=1 if index % 2 else -1, policy_version=1, split="train", source="rollout",
                            jobs_in_round=jobs_in_round)
    return JudgedTrajectory(trajectory=trajectory, judgements=judgements, reward_model_version=1)


async def _drive_critic(url: str, events: int) -> dict:
    bus = await EventBus.connect(NatsConfig(url=url), ConsumerConfig(), name="bench-scale")
    jobs = events // G
    batch = [_judged(f"r0-train-{j:05d}", i, jobs) for j in range(jobs) for i in range(G)]
    durable = Consumers.CRITIC_JUDGED.binding()["durable"]
    started = time.monotonic()
    for start in range(0, len(batch), 256):  # 256 publishes in flight at a time
        await asyncio.gather(*(bus.publish(Subjects.TRAJ_JUDGED, j, msg_id=j.trajectory.trajectory_id)
                               for j in batch[start:start + 256]))
    published_s = time.monotonic() - started
    while True:
        info = await bus.js.consumer_info("TRAJ", durable)
        if info.num_pending == 0 and info.num_ack_pending == 0 and info.ack_floor.stream_seq >= len(batch):
            break
        await asyncio.sleep(0.1)
    drained_s = time.monotonic() - started
    await bus.close()
    return {"events": len(batch), "publish_s": published_s, "drain_s": drained_s, "load_1m_end": os.getloadavg()[0],
            "publish_per_s": len(batch) / published_s, "critic_per_s": len(batch) / drained_s,
            "bytes_per_event": len(batch[0].SerializeToString())}


def critic_saturation(work: Path, events: int) -> dict:
    """Start NATS and one critic process, push ``events`` judged trajectories, time the critic."""
    nats = NatsServer(store_dir=work / "nats-critic").start()
    config = work / "critic.yaml"
    port = free_port()
    config.write_text(yaml.safe_dump({"nats": {"url": nats.url},
                                      "critic": {"server": {"grpc_port": port, "metrics_port": free_port()},
                                                 "group_timeout_s": 600}}))
    log = work / "critic.log"
    proc = start_service("critic", config, log)
    try:
        wait_serving([Started("critic", f"127.0.0.1:{port}", proc, log)], 120)
        return asyncio.run(_drive_critic(nats.url, events))
    finally:
        proc.terminate()
        proc.wait(30)
        nats.stop()


def _mean(values: list[float]) -> str:
    return f"{statistics.fmean(values):.2f}" if values else "n/a"


def write(out: Path, runs: list[dict], critic: dict | None, args: argparse.Namespace) -> None:
    lines = ["# Throughput against replicas, and the critic's headroom", "",
             f"`python scripts/bench_scale.py` on {platform.node()} ({platform.processor() or platform.machine()}, "
             f"2 cores shared with other jobs while it ran), {time.strftime('%Y-%m-%d', time.gmtime())}.", ""]
    if runs:
        lines += [f"## Rollouts and judgements per second, 1 and 2 replicas ({args.rounds} rounds of the tiny "
                  "config, alternated)", "",
                  "| replicas (env, rollout, judge) | run | wall s | round s (each) | rollouts/s (each round) | "
                  "judgements/s (each round) |", "|---|---:|---:|---|---|---|"]
        for r in runs:
            lines.append(f"| {r['replicas']} | {r['index']} | {r['wall_s']:.0f} | "
                         + " / ".join(f"{v:.1f}" for v in r["round_s"]) + " | "
                         + " / ".join(f"{v:.2f}" for v in r["rollouts_per_s"]) + " | "
                         + " / ".join(f"{v:.2f}" for v in r["judgements_per_s"]) + " |")
        loads = [f"{r['load_1m_end']:.0f}" for r in runs if "load_1m_end" in r]
        if loads:
            lines += ["", f"The machine's 1-minute load average at the end of each run: {', '.join(loads)} "
                      "(2 cores: every process of a run competes with the others and with other jobs for them, "
                      "so a second replica adds processes, not cores)."]
        for n in (1, 2):
            mine = [r for r in runs if r["replicas"] == n]
            lines.append(f"\nMean over rounds with {n}: rollouts/s "
                         f"{_mean([v for r in mine for v in r['rollouts_per_s']])}, judgements/s "
                         f"{_mean([v for r in mine for v in r['judgements_per_s']])}; training per batch (one "
                         f"job's {_mean([r['trajectories_per_batch'] for r in mine])} trajectories on average): "
                         f"policy {_mean([1000 * r['policy_train_s_per_batch'] for r in mine])} ms, "
                         f"reward model {_mean([1000 * r['reward_train_s_per_batch'] for r in mine])} ms.")
    if critic:
        lines += ["", "## The critic at saturation", "",
                  f"{critic['events']} judged trajectories ({G} a job, {STEPS} steps of {VOTES} votes, "
                  f"{critic['bytes_per_event']} bytes each) published in {critic['publish_s']:.1f} s "
                  f"({critic['publish_per_s']:.0f}/s); the critic acknowledged the last one "
                  f"{critic['drain_s']:.1f} s after the first publish: **{critic['critic_per_s']:.0f} events/s**, "
                  f"{1000 / critic['critic_per_s']:.1f} ms of one process per judged trajectory (grouping, "
                  "advantages, samples and KV bookkeeping included)."]
    one = [r for r in runs if r["replicas"] == 1]
    if critic and one:
        lines += paper(one, critic)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("\n".join(lines) + "\n")
    (out.with_suffix(".json")).write_text(json.dumps({"runs": runs, "critic": critic}, indent=1))
    print(f"wrote {out}")


WORKERS = 64


def paper(one: list[dict], critic: dict) -> list[str]:
    """What ``WORKERS`` rollout workers, each as fast as the one measured, would ask of each singleton."""
    per_worker = statistics.fmean(v for r in one for v in r["rollouts_per_s"])
    demand = WORKERS * per_worker
    per_batch = statistics.fmean(r["trajectories_per_batch"] for r in one)
    batches = demand / per_batch
    policy_s = statistics.fmean(r["policy_train_s_per_batch"] for r in one)
    reward_s = statistics.fmean(r["reward_train_s_per_batch"] for r in one)
    publish_ms = 1000 * critic["publish_s"] / critic["events"]
    rows = [("critic", f"{demand:.0f} judged trajectories/s", f"{1000 / critic['critic_per_s']:.1f} ms each",
             demand / critic["critic_per_s"]),
            ("policy trainer", f"{batches:.1f} batches/s", f"{1000 * policy_s:.2f} ms each", batches * policy_s),
            ("reward trainer", f"{batches:.1f} batches/s", f"{1000 * reward_s:.2f} ms each", batches * reward_s),
            ("env scheduler (lease holder)", f"{batches:.1f} jobs/s published, as many reports",
             f"{publish_ms:.1f} ms a publish (upper bound: one client's acknowledged publishes)",
             batches * 2 * publish_ms / 1000)]
    lines = ["", f"## On paper: {WORKERS} rollout workers", "",
             f"Each worker as fast as the one measured here ({per_worker:.2f} rollouts/s: a tiny CPU model), "
             f"{WORKERS} of them produce {demand:.0f} trajectories/s, one batch per job of "
             f"{per_batch:.1f} trajectories. Judges scale with the workers; the singletons must keep up alone. "
             "Load = demand × cost per event, in busy processes (above 1: that singleton is the bottleneck by "
             "that factor):", "", "| singleton | demand | measured cost | load |", "|---|---|---|---:|"]
    lines += [f"| {name} | {need} | {cost} | {load:.2f} |" for name, need, cost, load in rows]
    lines += ["", "The trainers' row says little here: in the tiny config the cold-started policy's answers are "
              "mostly invalid, so its batches hold almost no samples to train on; with a real model the cost per "
              "batch is the trainer's step time (`bench/round_phases.md`), and in sync mode the trainers work "
              "between rounds, not alongside the workers. The critic's cost is per judged trajectory whatever the "
              "model (it does no model work), so its row carries over: at this cost one critic process keeps up "
              f"with about {critic['critic_per_s'] / per_worker:.0f} workers as fast as ours."]
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", nargs="?", default="bench/scale.md", type=Path)
    parser.add_argument("--cold", type=Path, default=Path("runs/bench-scale/coldstart"))
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--critic-events", type=int, default=2000)
    parser.add_argument("--only", choices=["critic", "runs"])
    parser.add_argument("--render", action="store_true", help="only write OUT.md again from OUT.json")
    args = parser.parse_args()
    if args.render:
        saved = json.loads(args.out.with_suffix(".json").read_text())
        write(args.out, saved["runs"], saved["critic"], args)
        return
    work = Path("runs/bench-scale")
    work.mkdir(parents=True, exist_ok=True)
    critic = critic_saturation(work, args.critic_events) if args.only != "runs" else None
    runs = []
    if args.only != "critic":
        for index in range(args.repeats):
            for replicas in ((1, 2) if index % 2 == 0 else (2, 1)):  # alternate which goes first
                runs.append(run_once(work, args.cold, args.rounds, replicas, index))
    write(args.out, runs, critic, args)


if __name__ == "__main__":
    main()
