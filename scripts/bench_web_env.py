"""The web family's costs: episodes/s, Step latency over gRPC vs direct, browser processes before,
during and after 1,000 episodes, memory per browser.

Usage: ``python scripts/bench_web_env.py [OUT.md] [EPISODES]`` (default ``bench/web_env.md``, 1000).
Direct: a `WebFamily` with one browser in this process plays EPISODES scripted-expert episodes,
cycling through the six tasks (distractors 2); processes are counted below this process (/proc).
gRPC: the env service as its own process on loopback (a local nats-server), timed against the same
step done directly: typing the instruction's text into enter-text's field (a step that changes the
page and reads it back, without ending the episode).
"""

from __future__ import annotations

import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import grpc  # noqa: E402
import yaml  # noqa: E402

from rlanything.v1 import env_pb2, env_pb2_grpc  # noqa: E402
from services.common.grpc_runtime import check_health_sync  # noqa: E402
from services.common.nats_server import NatsServer, free_port  # noqa: E402
from services.env.families.base import TaskSpec  # noqa: E402
from services.env.families.web import WebFamily  # noqa: E402
from services.env.families.web_browser import descendants  # noqa: E402
from services.env.families.web_page import TASKS  # noqa: E402

STEPS = 200
TYPE_TASK = {"task": 3.0, "distractors": 2.0}  # enter-text


def memory_mib(pids: list[int]) -> tuple[float, float]:
    """(RSS, PSS) summed over ``pids``, MiB (/proc/<pid>/smaps_rollup)."""
    rss = pss = 0
    for pid in pids:
        try:
            for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
                if line.startswith("Rss:"):
                    rss += int(line.split()[1])
                elif line.startswith("Pss:"):
                    pss += int(line.split()[1])
        except OSError:
            continue
    return rss / 1024, pss / 1024


def direct(episodes: int) -> dict[str, float]:
    """Expert episodes in this process: rate, processes, memory, and the typing step's latency."""
    me = os.getpid()
    before = len(descendants(me))
    family = WebFamily(browsers=1)
    counts, won, start = [], 0, time.perf_counter()
    for i in range(episodes):
        spec = TaskSpec("web", {"task": float(i % len(TASKS)), "distractors": 2.0}, i)
        episode = family.make_episode(spec, 0)
        for action in episode.oracle_plan() or []:
            result = episode.step(action)
        won += int(result.won)
        episode.close()
        if i in (0, episodes // 2, episodes - 1):
            counts.append(len(descendants(me)) - before)
    elapsed = time.perf_counter() - start
    rss, pss = memory_mib(descendants(me))
    steps = []
    episode = family.make_episode(TaskSpec("web", TYPE_TASK, 1), 0)
    action = next(a for a in episode.admissible_actions if a.startswith("type"))
    for _ in range(STEPS):
        t0 = time.perf_counter()
        episode.step(action)
        steps.append(time.perf_counter() - t0)
    episode.close()
    family.close()
    return {"episodes": episodes, "won": won, "per_s": episodes / elapsed, "first": counts[0], "middle": counts[1],
            "last": counts[2], "after_close": len(descendants(me)) - before, "rss": rss, "pss": pss,
            "step_ms": statistics.median(steps) * 1e3}


def over_grpc() -> float:
    """Median ms of the same typing step as a `Step` RPC to the env service (own process, loopback)."""
    tmp = Path(tempfile.mkdtemp(prefix="rla-bench-web-"))
    port = free_port()
    family = {"type": "web", "knobs": TYPE_TASK, "train_slots": 1, "heldout_slots": 0, "browsers": 1}
    config = {"env": {"server": {"grpc_port": port}, "cache_dir": str(tmp / "cache"), "families": [family],
                      "scheduler": {"enabled": False}}}
    with NatsServer() as nats:
        config["nats"] = {"url": nats.url}
        (tmp / "run.yaml").write_text(yaml.safe_dump(config))
        proc = subprocess.Popen([sys.executable, "-m", "services.env", "--config", str(tmp / "run.yaml")],
                                stderr=open(tmp / "env.log", "wb"))
        try:
            address = f"127.0.0.1:{port}"
            while check_health_sync(address) != "SERVING":
                assert proc.poll() is None, (tmp / "env.log").read_text()
                time.sleep(0.1)
            stub = env_pb2_grpc.EnvironmentStub(grpc.insecure_channel(address))
            tasks: list[env_pb2.TaskInfo] = []
            while not tasks:
                tasks = list(stub.ListTasks(env_pb2.ListTasksRequest(family="web")).tasks)
                time.sleep(0.2)
            reset = stub.Reset(env_pb2.ResetRequest(task=tasks[0].ref, seed=0))
            action = next(a for a in reset.admissible_actions if a.startswith("type"))
            out: list[float] = []
            session, steps = reset.session_id, 0
            while len(out) < STEPS:
                if steps >= reset.max_steps - 1:
                    stub.Close(env_pb2.CloseRequest(session_id=session))
                    session, steps = stub.Reset(env_pb2.ResetRequest(task=tasks[0].ref, seed=0)).session_id, 0
                t0 = time.perf_counter()
                stub.Step(env_pb2.StepRequest(session_id=session, action=action))
                out.append(time.perf_counter() - t0)
                steps += 1
            stub.Close(env_pb2.CloseRequest(session_id=session))
        finally:
            proc.terminate()
            proc.wait()
    return statistics.median(out) * 1e3


def main(out_path: Path, episodes: int) -> None:
    """Run both parts and write the markdown report to ``out_path``."""
    drivers_before = subprocess.run(["pgrep", "-c", "-x", "chromedriver"], capture_output=True, text=True).stdout.strip()
    d = direct(episodes)
    print(d)
    remote = over_grpc()
    drivers_after = subprocess.run(["pgrep", "-c", "-x", "chromedriver"], capture_output=True, text=True).stdout.strip()
    print(f"gRPC step {remote:.2f} ms; chromedriver processes on the machine {drivers_before} -> {drivers_after}")
    lines = [
        "# The web family: episodes/s, Step latency, browser processes and memory", "",
        f"`python scripts/bench_web_env.py` on {platform.machine()}, {len(os.sched_getaffinity(0))} CPUs shared with "
        f"other jobs (load average {os.getloadavg()[0]:.1f} at the end: rates are indicative); Debian chromium + "
        "chromium-driver, miniwob 1.1.0. The episodes cycle the tasks, so every episode loads a page (the "
        "worst case for one browser); a browser that stays on one task only runs a script per episode.", "",
        f"Direct: one `WebFamily` browser plays {d['episodes']:.0f} scripted-expert episodes in turn, cycling the six "
        f"tasks (distractors 2): **{d['per_s']:.1f} episodes/s**; won {d['won']:.0f}/{d['episodes']:.0f}.", "",
        "| browser processes below the bench process | count |", "|---|---:|",
        "| before the family | 0 |", f"| after episode 1 | {d['first']:.0f} |",
        f"| after episode {d['episodes'] // 2:.0f} | {d['middle']:.0f} |",
        f"| after episode {d['episodes']:.0f} | {d['last']:.0f} |", f"| after `WebFamily.close()` | {d['after_close']:.0f} |",
        "", f"Memory of one browser (chromedriver + its Chromium processes, after the episodes): "
        f"RSS {d['rss']:.0f} MiB summed, PSS {d['pss']:.0f} MiB (shared pages counted once).", "",
        f"Step latency (median of {STEPS}; typing into enter-text's field, then reading the page back):", "",
        "| path | ms |", "|---|---:|", f"| direct `Episode.step` | {d['step_ms']:.2f} |",
        f"| gRPC `Step` (env service, loopback) | {remote:.2f} |", "",
        f"chromedriver processes on the machine before and after the whole bench: {drivers_before} and {drivers_after}.",
    ]
    out_path.parent.mkdir(parents=True, exist_ok=True)
    out_path.write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else Path("bench/web_env.md"),
         int(sys.argv[2]) if len(sys.argv) > 2 else 1000)
