"""The live loop's value: a scripted product talks to the policy while `rlanything run` trains.

Usage: ``python scripts/bench_live_value.py [OUT.md] [--seeds 0 1 2] [--rounds R] [--arms fed,unfed]``
(default ``bench/live_value.md``; ``make bench-live-value``). Runs one seed and arm at a time; the report
covers every run recorded in ``--runs-dir`` (``--report-only`` rewrites it from them).

The product is a navigation helper: each user has FrozenLake positions (the 5×5 window the env's
``gym_text`` family shows, the same chat the policy's rollouts send) and asks which move to make;
its reference is the one move on a shortest path to the goal (positions with two such moves are left
out, so a reply is right exactly when it holds the reference — `live.answer_matches`, the rule the
live family scores with). Users are in three disjoint groups (no prompt is in two):

* **train users** talk with capture headers every product round (one conversation each, sampled at
  the loop's temperature) and press thumbs up or down from comparing the answer with the reference,
  flipped with probability ``--noise``; the product posts the transcript with that thumb as the
  user's outcome and the reference, then the thumbs feedback. Their served turns can train the
  policy, and their failures become live tasks (those the env would put in ``train``: their
  candidate hash is not a held-out one);
* **failure users** talk once, in the first product round, without capture (nothing of theirs
  trains the policy), and are posted like the train users; their tasks are those whose candidate
  hash the env holds out, so their failures become ``live_heldout`` tasks:
  ``policy/success_live_heldout`` in the run's metrics;
* **eval users** ask every product round without capture headers and nothing of theirs is posted:
  the product's own success rate on users the loop never learns from (greedy replies).

A product round runs at the start and after each completed loop round. Arm ``unfed`` is the control:
the same run config, seed and requests, but the train users' conversations are neither captured nor
posted (the failure users are posted as in ``fed``, so both arms hold out the same live tasks). Every run starts
from the policy and judge the first run cold-started (``--no-shared-coldstart``: each seed its own).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gymnasium.envs.toy_text.frozen_lake import generate_random_map  # noqa: E402
from rlanything.v1.ingest_pb2 import IngestMessage  # noqa: E402

from services.env.families.frozenlake import ACTIONS, FrozenLakeEpisode, shortest_path  # noqa: E402
from services.env.families.live import answer_matches  # noqa: E402
from services.env.live_tasks import is_heldout  # noqa: E402
from services.ingest.candidates import candidate_id  # noqa: E402

if TYPE_CHECKING:
    import httpx
from services.ingest.trajectories import render_context  # noqa: E402
from services.policy.prompting import step_chat  # noqa: E402

TENANT = "shop"
KEY = "shop-bench-key-0123456789"
TASK_TYPE = "navigate"
HELDOUT_EVERY = 2
_MOVES = {0: (0, -1), 1: (1, 0), 2: (0, 1), 3: (-1, 0)}

CONFIG = """
run_name: live-value
seed: SEED
loop: {rounds: ROUNDS}
env:
  families:
    - {type: gym_text, knobs: {size: 4, hole_prob: 0.2}, observation: window, train_slots: 16, heldout_slots: 8,
       max_steps: 12, train_instances: rollout}
    - {type: live, knobs: {hint: 0}, train_slots: 0}
  scheduler: {tasks_per_round: 6, group_size: 6, eval_every: 1, eval_group_size: 4, max_new_tokens: 12,
              temperature: 0.8}
  live_heldout_every: HELDOUT
policy:
  openai_port: 0
  model: {threads: 1}
  sft: {episodes: 400, steps: 50, batch_size: 32, lr: 0.001, eval_episodes: 20}
  rollout: {history_steps: 0}
  ppo: {lr: 0.0003, optimizer_steps: 4, epochs: 4, warmup_steps: 20, max_kl: 0.1, eps: 0.2, beta: 0.01, ref_beta: 0.1}
  capture: {enabled: true}
reward:
  model: {threads: 1}
  votes: 3
  max_new_tokens: 12
  sft: {episodes: 100, steps: 150, eval_episodes: 20, label_noise: 0.3}
critic: {advantage_scale: none, group_timeout_s: 300, live: {min_count: 4, max_staleness: 2}}
ingest:
  settle_window_s: 1.0
  sweep_every_s: 0.2
  tenants: {TENANT: {key: KEY, secret: shop-bench-secret}}
launcher: {round_timeout_s: 900, max_invalid_answer_rate: 1.0}
"""


# ---- the product's users and tasks (pure) ----

@dataclass(frozen=True)
class NavTask:
    """One question of a user: the chat sent to the policy and the reference move (``"1"``..``"4"``)."""

    messages: tuple[tuple[str, str], ...]
    """(role, content) pairs: the policy's system prompt and the step prompt."""
    reference: str

    def chat(self) -> list[dict[str, str]]:
        """The messages as the OpenAI API takes them."""
        return [{"role": r, "content": c} for r, c in self.messages]


@dataclass
class User:
    """A product user: an id and the tasks they ask, in turn."""

    user_id: str
    tasks: list[NavTask]


def optimal_moves(desc: list[str], row: int, col: int) -> list[int]:
    """0-based action ids (``ACTIONS``) whose move starts a shortest path to the goal from (row, col).

    A move into the edge leaves the agent in place and is never optimal; empty on the goal or when
    the goal is unreachable.
    """
    here = shortest_path(desc, row, col)
    if not here:
        return []
    best = []
    for action, (dr, dc) in _MOVES.items():
        r, c = row + dr, col + dc
        if not (0 <= r < len(desc) and 0 <= c < len(desc[0])) or desc[r][c] == "H":
            continue
        there = shortest_path(desc, r, c)
        if there is not None and len(there) == len(here) - 1:
            best.append(action)
    return best


def map_tasks(map_seed: int, size: int = 4, hole_prob: float = 0.2) -> list[NavTask]:
    """The positions along a shortest path of one map (Gymnasium's generator, ``map_seed``) that
    have exactly one optimal move, as the env's window view shows them at that point of an episode."""
    desc = list(generate_random_map(size=size, p=1.0 - hole_prob, seed=map_seed))
    episode = FrozenLakeEpisode(desc, 0, view="window")
    tasks = []
    for action in shortest_path(desc, 0, 0) or []:
        row, col = divmod(episode.state, episode.n)
        best = optimal_moves(desc, row, col)
        if len(best) == 1:
            chat = step_chat(episode.task_text, [], episode.observation, ACTIONS, 0)
            tasks.append(NavTask(tuple((m["role"], m["content"]) for m in chat), str(best[0] + 1)))
        episode.step(action)
    episode.close()
    return tasks


def task_candidate_id(task: NavTask, answer: str = "") -> str:
    """The live task candidate id the ingest service gives this conversation's failure (the hash of
    tenant, task type and the conversation before the reply, `candidates.candidate_id`)."""
    before = [IngestMessage(role=r, content=c) for r, c in task.messages]
    return candidate_id(TENANT, TASK_TYPE, render_context(before))


def heldout_task(task: NavTask, every: int = HELDOUT_EVERY) -> bool:
    """Would the env hold this task's failure out (``live_heldout``) rather than train on it?"""
    return is_heldout(task_candidate_id(task), every)


def make_users(seed: int, n_train: int, n_failure: int, n_eval: int, tasks_per_user: int) -> dict[str, list[User]]:
    """Three disjoint groups of users (``train``, ``failure``, ``eval``), ``tasks_per_user`` tasks each,
    on maps drawn from ``seed``; no prompt appears in two groups (or twice). Train users keep only
    tasks whose failure the env would train on, failure users only those it would hold out."""
    rng = random.Random(f"live-value/{seed}")
    seen: set[tuple[tuple[str, str], ...]] = set()
    groups: dict[str, list[User]] = {"train": [], "failure": [], "eval": []}
    wanted = {"train": n_train, "failure": n_failure, "eval": n_eval}
    keep = {"train": lambda t: not heldout_task(t), "failure": heldout_task, "eval": lambda t: True}
    for name in ("eval", "failure", "train"):
        while len(groups[name]) < wanted[name]:
            tasks: list[NavTask] = []
            while len(tasks) < tasks_per_user:
                for task in map_tasks(rng.randrange(2**31)):
                    if task.messages not in seen and keep[name](task) and len(tasks) < tasks_per_user:
                        seen.add(task.messages)
                        tasks.append(task)
            groups[name].append(User(f"{name}-{len(groups[name])}", tasks))
    return groups


def thumb(answer: str, reference: str, rng: random.Random, noise: float) -> int:
    """The user's thumb: +1 when the answer holds the reference (`answer_matches`), else −1; flipped
    with probability ``noise`` (a user who clicks the wrong one)."""
    right = answer_matches(answer, reference)
    if rng.random() < noise:
        right = not right
    return 1 if right else -1


@dataclass
class Tally:
    """Right answers out of asked, per user group, in one product round."""

    right: dict[str, int] = field(default_factory=dict)
    asked: dict[str, int] = field(default_factory=dict)

    def add(self, group: str, answer: str, reference: str) -> bool:
        """Count one reply; returns whether it holds the reference."""
        ok = answer_matches(answer, reference)
        self.asked[group] = self.asked.get(group, 0) + 1
        self.right[group] = self.right.get(group, 0) + int(ok)
        return ok

    def rate(self, group: str) -> float | None:
        """Share of right answers (None when the group asked nothing)."""
        n = self.asked.get(group, 0)
        return self.right.get(group, 0) / n if n else None


def before_after(values: list[float | None]) -> tuple[float | None, float | None]:
    """The first and the last measured value of a series (None where nothing was measured)."""
    seen = [v for v in values if v is not None]
    return (seen[0], seen[-1]) if seen else (None, None)


def summary_rows(results: list[dict]) -> list[tuple[str, str, float | None, float | None]]:
    """(arm, measure, mean before, mean after) over seeds, for each arm and measure in ``results``
    (each result: ``arm`` and ``before_after``: measure → (before, after))."""
    rows = []
    for arm in sorted({r["arm"] for r in results}):
        mine = [r for r in results if r["arm"] == arm]
        for measure in mine[0]["before_after"]:
            pairs = [r["before_after"][measure] for r in mine if None not in r["before_after"][measure]]
            if pairs:
                rows.append((arm, measure, statistics.mean(p[0] for p in pairs), statistics.mean(p[1] for p in pairs)))
            else:
                rows.append((arm, measure, None, None))
    return rows


def paired_rows(results: list[dict]) -> list[tuple[str, int, float, float]]:
    """(measure, seeds, mean change fed, mean change unfed) over the seeds run in both arms, for each
    measure both ends of which were measured in both arms of a seed (change = after − before)."""
    by = {(r["arm"], r["seed"]): r["before_after"] for r in results}
    seeds = sorted(s for a, s in by if a == "fed" and ("unfed", s) in by)
    rows = []
    for measure in by[("fed", seeds[0])] if seeds else []:
        pairs = [(by[("fed", s)][measure], by[("unfed", s)][measure]) for s in seeds]
        pairs = [(f, u) for f, u in pairs if None not in f and None not in u]
        if pairs:
            rows.append((measure, len(pairs), statistics.mean(f[1] - f[0] for f, _ in pairs),
                         statistics.mean(u[1] - u[0] for _, u in pairs)))
    return rows


# ---- the product talking to the endpoints (I/O) ----

class Product:
    """The scripted product: users ask through the official `openai` client; feedback over HTTP."""

    def __init__(self, openai_url: str, ingest_url: str, users: dict[str, list[User]], fed: bool, seed: int,
                 noise: float) -> None:
        import httpx
        from openai import OpenAI

        self.llm = OpenAI(base_url=openai_url, api_key=KEY, max_retries=2, timeout=60)
        self.ingest = httpx.Client(base_url=ingest_url, headers={"Authorization": f"Bearer {KEY}"}, timeout=30)
        self.users = users
        self.fed = fed
        self.noise = noise
        self.rng = random.Random(f"thumbs/{seed}")

    def _ask(self, task: NavTask, temperature: float, episode: str | None) -> tuple[str, str, str]:
        headers = {"X-RLA-Episode": episode, "X-RLA-Turn": "t1", "X-RLA-Consent": "training,tasks"} if episode else {}
        raw = self.llm.chat.completions.with_raw_response.create(
            model="policy", messages=task.chat(), temperature=temperature, max_tokens=12, extra_headers=headers)
        reply = raw.parse()
        if episode and raw.headers.get("x-rla-capture") != "queued":
            raise RuntimeError(f"capture of {episode}: {raw.headers.get('x-rla-capture')}")
        return reply.choices[0].message.content or "", reply.id, reply.system_fingerprint or ""

    def _post(self, user: User, task: NavTask, episode: str, answer: str, completion_id: str, value: int) -> None:
        messages = [{"role": r, "content": c} for r, c in task.messages]
        messages.append({"role": "assistant", "content": answer, "turnId": "t1", "completionId": completion_id})
        body = {"episodeId": episode, "revision": 0, "ended": True, "userRef": user.user_id, "taskType": TASK_TYPE,
                "consent": {"training": True, "taskGeneration": True}, "messages": messages,
                "outcome": {"value": value, "source": "OUTCOME_SOURCE_USER", "reference": task.reference}}
        self._accepted(self.ingest.post("/episodes", json=body), f"episode {episode}")
        fb = {"feedbackId": f"{episode}:thumb", "episodeId": episode, "turnId": "t1", "kind": "KIND_THUMBS",
              "value": value}
        self._accepted(self.ingest.post("/feedback", json=fb), f"feedback {episode}")

    @staticmethod
    def _accepted(r: "httpx.Response", what: str) -> None:
        """Raises httpx.HTTPStatusError (naming ``what``, the status and the body) unless ``r`` is a 202."""
        import httpx

        if r.status_code != 202:
            raise httpx.HTTPStatusError(f"{what}: {r.status_code} {r.text}", request=r.request, response=r)

    def round(self, k: int) -> dict:
        """Product round ``k``: eval users (greedy, nothing posted), then train users (and, in round 0,
        failure users) with thumbs; returns the round's tallies and the policy versions that answered."""
        tally = Tally()
        versions: set[str] = set()
        downs = 0
        for user in self.users["eval"]:
            for task in user.tasks:
                answer, _, version = self._ask(task, 0.0, None)
                tally.add("eval", answer, task.reference)
                versions.add(version)
        asks = [("train", user, user.tasks[k % len(user.tasks)]) for user in self.users["train"]]
        if k == 0:
            asks += [("failure", user, task) for user in self.users["failure"] for task in user.tasks]
        for i, (group, user, task) in enumerate(asks):
            episode = f"r{k}-{user.user_id}-{i}"
            capture = self.fed and group == "train"
            answer, completion_id, version = self._ask(task, 0.8, episode if capture else None)
            tally.add(group, answer, task.reference)
            versions.add(version)
            value = thumb(answer, task.reference, self.rng, self.noise)
            downs += value < 0
            if self.fed or group == "failure":
                self._post(user, task, episode, answer, completion_id if capture else "", value)
        return {"product_round": k, "versions": sorted(versions), "thumbs_down": downs,
                **{f"success_{g}": tally.rate(g) for g in ("eval", "train", "failure")}}


def _rounds(run_dir: Path) -> list[dict]:
    path = run_dir / "metrics.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def product_round(product: "Product", k: int, run_ended: Callable[[], bool]) -> dict | None:
    """Product round ``k``; None when a request failed because the run had ended meanwhile (its servers
    stop with it: the policy's endpoint and the ingest API alike).

    Raises:
        RuntimeError: a request failed while the run was still going.
    """
    import httpx
    import openai

    try:
        return product.round(k)
    except (openai.APIConnectionError, openai.APIStatusError, httpx.HTTPError) as exc:
        if run_ended():
            return None
        raise RuntimeError(f"product round {k}: {exc}") from exc


def run_one(seed: int, arm: str, rounds: int, out_dir: Path, noise: float, sizes: tuple[int, int, int, int],
            overrides: list[str] | None = None) -> dict:
    """One `rlanything run` (``overrides``: its ``--set`` options) with the product talking to it; returns
    what was measured (also written to ``out_dir/<arm>-s<seed>.json``)."""
    run_dir = out_dir / f"{arm}-s{seed}"
    run_dir.mkdir(parents=True, exist_ok=True)
    config = run_dir.parent / f"{arm}-s{seed}.yaml"
    config.write_text(CONFIG.replace("SEED", str(seed)).replace("ROUNDS", str(rounds))
                      .replace("HELDOUT", str(HELDOUT_EVERY)).replace("TENANT", TENANT).replace("KEY", KEY))
    users = make_users(seed, *sizes)
    cli = str(Path(sys.executable).parent / "rlanything")
    start = time.monotonic()
    with open(run_dir.parent / f"{arm}-s{seed}.out", "w") as log:
        sets = [arg for o in overrides or [] for arg in ("--set", o)]
        proc = subprocess.Popen([cli, "run", str(config), "--run-dir", str(run_dir), *sets], stdout=log, stderr=log)
        product_rounds: list[dict] = []
        try:
            manifest = run_dir / "services.json"
            while not manifest.exists():
                if proc.poll() is not None:
                    raise RuntimeError(f"run {arm}-s{seed} exited {proc.returncode} before serving")
                time.sleep(1)
            time.sleep(0.5)
            endpoints = json.loads(manifest.read_text())["endpoints"]
            product = Product(endpoints["openai"], endpoints["ingest"], users, arm == "fed", seed, noise)
            k = 0
            while proc.poll() is None:
                if len(_rounds(run_dir)) >= k:
                    result = product_round(product, k, lambda: proc.poll() is not None or len(_rounds(run_dir)) >= rounds)
                    if result is None:
                        break  # the run ended while this product round was under way
                    result["loop_rounds_done"] = len(_rounds(run_dir))
                    product_rounds.append(result)
                    print(f"{arm} seed {seed} product round {k}: {result}", flush=True)
                    k += 1
                time.sleep(1)
            if proc.wait() != 0:
                raise RuntimeError(f"run {arm}-s{seed} exited {proc.returncode}; see {log.name}")
        finally:
            if proc.poll() is None:
                proc.terminate()
                proc.wait(timeout=60)
    loop = _rounds(run_dir)
    live = [r.get("policy/success_live_heldout") for r in loop]
    result = {
        "seed": seed, "arm": arm, "wall_s": time.monotonic() - start, "product_rounds": product_rounds,
        "loop": [{k: r.get(k) for k in ("round", "policy/success_live_heldout", "policy/success_heldout",
                                         "policy/live_samples", "reward/live_samples")} for r in loop],
        "live_samples": sum(r.get("policy/live_samples", 0) or 0 for r in loop),
        "before_after": {
            "product success, eval users (greedy)": before_after([p["success_eval"] for p in product_rounds]),
            "product success, train users (T=0.8)": before_after([p["success_train"] for p in product_rounds]),
            "policy/success_live_heldout": before_after(live),
            "policy/success_heldout (env maps)": before_after([r.get("policy/success_heldout") for r in loop]),
        },
        "live_tasks": _live_decisions(run_dir),
    }
    (run_dir.parent / f"{arm}-s{seed}.json").write_text(json.dumps(result, indent=1))
    return result


def cold_started(runs_dir: Path) -> list[str]:
    """``--set`` overrides that reuse the policy and judge an earlier run in ``runs_dir`` cold-started
    (its resolved ``config.yaml``), so every seed and arm starts from the same models; [] when none."""
    import yaml

    for config in sorted(runs_dir.glob("*-s*/config.yaml")):
        cfg = yaml.safe_load(config.read_text())
        policy, judge = cfg["policy"]["model"]["source"], cfg["reward"]["model"]["source"]
        if policy and judge:
            return [f"policy.model.source={policy}", f"reward.model.source={judge}"]
    return []


def _live_decisions(run_dir: Path) -> dict[str, int]:
    """Live pool decisions in the env's log: admitted (by split: ``train``, ``live_heldout``) or the kind."""
    counts: dict[str, int] = {}
    log = run_dir / "logs" / "env.log"
    if not log.exists():
        return counts
    for line in log.read_text().splitlines():
        if not line.startswith("{"):
            continue
        rec = json.loads(line)
        if rec.get("msg") == "pool decision" and str(rec.get("slot", "")).startswith("live/"):
            reason = str(rec.get("reason", ""))
            key = reason.rsplit("admitted to ", 1)[1] if "admitted to " in reason else str(rec.get("kind"))
            counts[key] = counts.get(key, 0) + 1
    return counts


def _fmt(v: float | None) -> str:
    return "—" if v is None else f"{v:.3f}"


def write_report(results: list[dict], out: Path, rounds: int, noise: float, sizes: tuple[int, int, int, int]) -> None:
    """bench/live_value.md: per seed and arm before/after, and the means."""
    n_train, n_failure, n_eval, per_user = sizes
    lines = [
        "# The live loop's value: a scripted product while the loop trains", "",
        f"Measured with `scripts/bench_live_value.py` on {platform.machine()}, {len(os.sched_getaffinity(0))} CPUs, "
        f"one run at a time; `rlanything run` of {rounds} synchronous rounds, every service a process, the tiny policy "
        "and judge cold-started by SFT once and shared by every run (config: the script's `CONFIG`).", "",
        f"The product: {n_train} train users (capture on, thumbs flipped with probability {noise}), {n_failure} "
        f"failure users (asked once, no capture: their failures are the held-out live tasks), {n_eval} eval users "
        f"× {per_user} positions (no capture, nothing posted; greedy). Arm `unfed`: the same run and requests, "
        "the train users' conversations neither captured nor posted (the failure users posted as in `fed`).", "",
        "## Mean over seeds", "", "| arm | measure | before | after | change |", "|---|---|---:|---:|---:|",
    ]
    for arm, measure, b, a in summary_rows(results):
        change = "—" if b is None or a is None else f"{a - b:+.3f}"
        lines.append(f"| {arm} | {measure} | {_fmt(b)} | {_fmt(a)} | {change} |")
    paired = paired_rows(results)
    if paired:
        lines += ["", "## Fed vs unfed, seeds run in both arms (change = after − before)", "",
                  "| measure | seeds | change fed | change unfed | fed − unfed |", "|---|---:|---:|---:|---:|"]
        lines += [f"| {m} | {n} | {f:+.3f} | {u:+.3f} | {f - u:+.3f} |" for m, n, f, u in paired]
    lines += ["", "## Per seed", "", "| arm | seed | measure | before | after | live samples trained | wall s |",
              "|---|---:|---|---:|---:|---:|---:|"]
    for r in results:
        for measure, (b, a) in r["before_after"].items():
            lines.append(f"| {r['arm']} | {r['seed']} | {measure} | {_fmt(b)} | {_fmt(a)} | {r['live_samples']} | "
                         f"{r['wall_s']:.0f} |")
    lines += ["", "## Product rounds", ""]
    for r in results:
        lines.append(f"- {r['arm']} seed {r['seed']} (live task decisions {r['live_tasks']}): " + "; ".join(
            f"r{p['product_round']} {','.join(p['versions'])} eval {_fmt(p['success_eval'])} "
            f"train {_fmt(p['success_train'])}" for p in r["product_rounds"]))
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("\n".join(lines) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", nargs="?", default="bench/live_value.md", type=Path)
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--rounds", type=int, default=12)
    parser.add_argument("--arms", default="fed,unfed", help="comma-separated: fed, unfed")
    parser.add_argument("--noise", type=float, default=0.1, help="chance a user's thumb is flipped")
    parser.add_argument("--users", type=int, nargs=4, default=[24, 24, 16, 4],
                        metavar=("TRAIN", "FAILURE", "EVAL", "TASKS_PER_USER"))
    parser.add_argument("--runs-dir", type=Path, default=Path("runs/live-value"))
    parser.add_argument("--shared-coldstart", action=argparse.BooleanOptionalAction, default=True,
                        help="start every run from the first run's cold-started policy and judge")
    parser.add_argument("--report-only", action="store_true", help="rewrite OUT from the runs in --runs-dir")
    parser.add_argument("--set", action="append", default=[], dest="overrides", metavar="KEY=VALUE",
                        help="a run config override (as `rlanything run --set`), repeatable")
    args = parser.parse_args()
    n_train, n_failure, n_eval, per_user = args.users
    sizes = (n_train, n_failure, n_eval, per_user)
    for seed in [] if args.report_only else args.seeds:
        for arm in args.arms.split(","):
            shared = cold_started(args.runs_dir) if args.shared_coldstart else []
            run_one(seed, arm, args.rounds, args.runs_dir, args.noise, sizes, shared + args.overrides)
            # every finished run in the runs folder (earlier invocations too: arms and seeds can be run apart)
            results = [json.loads(p.read_text()) for p in sorted(args.runs_dir.glob("*-s*.json"))]
            write_report(results, args.out, args.rounds, args.noise, sizes)
    if args.report_only:
        results = [json.loads(p.read_text()) for p in sorted(args.runs_dir.glob("*-s*.json"))]
        write_report(results, args.out, args.rounds, args.noise, sizes)


if __name__ == "__main__":
    main()
