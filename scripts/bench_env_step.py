"""Step latency of each task family: over the env service's gRPC API vs a direct library call.

Usage: ``python scripts/bench_env_step.py [OUT.md]`` (default ``bench/env_step_latency.md``).
Starts a local nats-server and the env service as a real process (loopback gRPC), then, for each
family, times ``Step`` calls both ways in the same run and reports medians (ms) and the ratio.
"""

from __future__ import annotations

import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import grpc  # noqa: E402
import yaml  # noqa: E402

from rlanything.v1 import env_pb2, env_pb2_grpc  # noqa: E402
from services.common.nats_server import NatsServer, free_port  # noqa: E402
from services.common.service_start import Started, start_service, wait_serving  # noqa: E402
from services.env.families.registry import build_family  # noqa: E402
from services.common.config import FamilyConfig  # noqa: E402
from services.env.pool import spec_of  # noqa: E402

FAMILIES = [
    FamilyConfig(type="gym_text", knobs={"size": 4, "hole_prob": 0.2}, train_slots=1),
    FamilyConfig(type="textworld", knobs={"world_size": 2, "nb_objects": 3, "quest_length": 2}, train_slots=1),
    FamilyConfig(type="reasoning_gym", knobs={"level": 1}, train_slots=1),
]
STEPS = 200


def _action(family: str, admissible: list[str]) -> str:
    return {"gym_text": "left", "textworld": "look", "reasoning_gym": "42"}[family]


def time_direct(cfg: FamilyConfig, cache: Path, version: env_pb2.TaskVersion) -> list[float]:
    """Seconds per `Episode.step`, called in-process."""
    family = build_family(cfg, cache)
    spec = spec_of(cfg.type, version)
    out: list[float] = []
    episode = family.make_episode(spec, 0)
    steps = 0
    while len(out) < STEPS:
        if steps >= family.max_steps - 1 or (family.max_steps == 1 and steps):
            episode.close()
            episode, steps = family.make_episode(spec, 0), 0
        start = time.perf_counter()
        episode.step(_action(cfg.type, list(episode.admissible_actions)))
        out.append(time.perf_counter() - start)
        steps += 1
    episode.close()
    return out


def time_grpc(stub: env_pb2_grpc.EnvironmentStub, task: env_pb2.TaskInfo) -> list[float]:
    """Seconds per `Step` RPC (unary, loopback), new sessions as the step budget runs out."""
    out: list[float] = []
    session, max_steps, steps = None, 0, 0
    while len(out) < STEPS:
        if session is None or steps >= max_steps - 1 or (max_steps == 1 and steps):
            reset = stub.Reset(env_pb2.ResetRequest(task=task.ref, seed=0))
            session, max_steps, steps = reset.session_id, reset.max_steps, 0
        start = time.perf_counter()
        stub.Step(env_pb2.StepRequest(session_id=session, action=_action(task.ref.family, [])))
        out.append(time.perf_counter() - start)
        steps += 1
    return out


def main(out_path: Path) -> None:
    """Run the benchmark and write the markdown table to ``out_path``."""
    tmp = Path(tempfile.mkdtemp(prefix="rla-bench-"))
    port = free_port()
    config = {"env": {"server": {"grpc_port": port}, "cache_dir": str(tmp / "cache"),
                      "families": [f.model_dump() for f in FAMILIES], "scheduler": {"enabled": False}}}
    rows = []
    with NatsServer() as nats:
        config["nats"] = {"url": nats.url}
        (tmp / "run.yaml").write_text(yaml.safe_dump(config))
        proc = start_service("env", tmp / "run.yaml", tmp / "env.log")
        try:
            address = f"127.0.0.1:{port}"
            wait_serving([Started("env", address, proc, tmp / "env.log")], 300)
            stub = env_pb2_grpc.EnvironmentStub(grpc.insecure_channel(address))
            tasks: list[env_pb2.TaskInfo] = []
            while len(tasks) < len(FAMILIES):
                tasks = list(stub.ListTasks(env_pb2.ListTasksRequest()).tasks)
                time.sleep(0.2)
            for cfg in FAMILIES:
                task = next(t for t in tasks if t.ref.family == cfg.type)
                version = env_pb2.TaskVersion(knobs=task.knobs, seed=task.seed)
                direct = statistics.median(time_direct(cfg, tmp / "cache", version)) * 1e3
                remote = statistics.median(time_grpc(stub, task)) * 1e3
                rows.append((cfg.type, direct, remote, remote / direct))
                print(f"{cfg.type}: direct {direct:.3f} ms, gRPC {remote:.3f} ms, ratio {remote / direct:.1f}")
        finally:
            proc.terminate()
            proc.wait()
    lines = ["# Env Step latency: gRPC vs direct library call", "",
             f"Median of {STEPS} steps per family, measured side by side in one run; env service as its own "
             f"process on loopback; {platform.machine()}, {len(__import__('os').sched_getaffinity(0))} CPUs.", "",
             "| family | direct (ms) | gRPC Step (ms) | ratio |", "|---|---:|---:|---:|"]
    lines += [f"| {f} | {d:.3f} | {r:.3f} | {q:.1f}× |" for f, d, r, q in rows]
    out_path.parent.mkdir(parents=True, exist_ok=True)
    out_path.write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else Path("bench/env_step_latency.md"))
