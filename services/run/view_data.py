"""What the run viewer shows, built from a run directory's files (no NATS needed).

Reads ``run-config.yaml``, ``metrics.jsonl``, the PNG curves and ``events/`` (written by
`services.run.recorder`) and returns one JSON-ready dict: the per-round metrics, the task pool's
history per slot, and the trajectories with their steps, the judge's m votes next to the oracle
label, and — for training groups — each step's advantage and each vote's consistency reward,
recomputed with the run's own λ and penalties by the critic's formulas (`services.common.algo`:
r = O + λ·S̄ − penalty·[invalid], advantages z-scored per step index across the group, paper
§3.1; consistency rewards z-scored over the m votes, §3.2).
"""

from __future__ import annotations

import base64
import json
from collections import defaultdict
from pathlib import Path
from typing import Any

from services.common.algo.consistency_reward import consistency_rewards
from services.common.algo.integrated_reward import mean_vote, step_rewards
from services.common.algo.step_advantage import step_advantages
from services.common.config import RunConfig, load_config
from services.run.recorder import read_events
from services.run.report import read_rounds

__all__ = ["build_view", "DEFAULT_LIMIT"]

DEFAULT_LIMIT = 2000
"""Trajectories embedded in the page at most (the rest are left out evenly over the run)."""
_LABELS = {"STEP_LABEL_GOOD": 1, "STEP_LABEL_BAD": -1}


def _config(run_dir: Path) -> RunConfig:
    """The run's config (``run-config.yaml``, as `rlanything run` saved it), else the defaults."""
    path = run_dir / "run-config.yaml"
    return load_config(path) if path.exists() else RunConfig()


def _steps(record: dict[str, Any], advantages: list[float] | None, cfg: RunConfig) -> list[dict[str, Any]]:
    t = record["trajectory"]
    judgements = {j.get("step_index", 0): j for j in record.get("judgements", [])}
    out = []
    for k, step in enumerate(t.get("steps", [])):
        j = judgements.get(step.get("index", k), {})
        votes = [int(v.get("value", 0)) for v in j.get("votes", [])]
        consistency = consistency_rewards(int(t["outcome"]), votes, cfg.critic.lam, cfg.critic.invalid_vote_penalty) \
            if votes and int(t.get("outcome", 0)) in (1, -1) and advantages is not None else None
        out.append({"index": step.get("index", k), "prompt": step.get("prompt", ""), "response": step.get("response", ""),
                    "action": step.get("action", ""), "valid": bool(step.get("valid", False)),
                    "observation": step.get("observation", ""), "next_observation": step.get("next_observation", ""),
                    "oracle": _LABELS.get(step.get("oracle_label", ""), 0),
                    "votes": [{"value": int(v.get("value", 0)), "text": v.get("response", "")} for v in j.get("votes", [])],
                    "mean_vote": mean_vote(votes) if votes else None,
                    "advantage": advantages[k] if advantages is not None and k < len(advantages) else None,
                    "consistency": consistency})
    return out


def _group_advantages(group: list[dict[str, Any]], cfg: RunConfig) -> dict[str, list[float]]:
    """Trajectory id → its steps' advantages, as the critic computes them for a training group."""
    rewards, ids = [], []
    for rec in group:
        t = rec["trajectory"]
        if int(t.get("outcome", 0)) not in (1, -1):
            return {}
        means = {j.get("step_index", 0): mean_vote([int(v.get("value", 0)) for v in j.get("votes", [])])
                 for j in rec.get("judgements", [])}
        steps = t.get("steps", [])
        rewards.append(step_rewards(int(t["outcome"]), [means.get(s.get("index", k), 0.0) for k, s in enumerate(steps)],
                                    cfg.critic.lam, [not s.get("valid", False) for s in steps],
                                    cfg.critic.invalid_answer_penalty))
        ids.append(t["trajectory_id"])
    return dict(zip(ids, step_advantages(rewards, cfg.critic.lone_rollout_advantage, scale=cfg.critic.advantage_scale)))


def _summary(record: dict[str, Any], steps: list[dict[str, Any]]) -> dict[str, Any]:
    t = record["trajectory"]
    task = t.get("task", {})
    split_votes = any(len({v["value"] for v in s["votes"]}) > 1 for s in steps)
    vs_oracle = any(s["oracle"] and s["mean_vote"] is not None and s["mean_vote"] != 0
                    and (s["mean_vote"] > 0) != (s["oracle"] > 0) for s in steps)
    return {"id": t["trajectory_id"], "round": int(t.get("round", 0)), "slot": task.get("slot_id", ""),
            "task_version": int(task.get("version", 0)), "split": t.get("split", "") or "train",
            "candidate": bool(t.get("is_candidate", False)), "outcome": int(t.get("outcome", 0)),
            "steps": len(steps), "policy_version": int(t.get("policy_version", 0)),
            "rm_version": int(record.get("reward_model_version", 0)), "task_text": t.get("task_text", ""),
            "split_votes": split_votes, "judge_vs_oracle": vs_oracle}


def _pool(run_dir: Path) -> list[dict[str, Any]]:
    """One entry per slot: its decisions in stream order (requested, proposed, accepted/rejected, why)."""
    slots: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for e in read_events(run_dir / "events" / "pool.jsonl", "event_id"):
        parent, cand = e.get("parent", {}), e.get("candidate", {})
        slots[parent.get("slot_id", "") or cand.get("slot_id", "")].append({
            "round": int(e.get("round", 0)), "kind": str(e.get("kind", "")).removeprefix("KIND_").lower(),
            "direction": str(e.get("direction", "")).removeprefix("DIRECTION_").lower(),
            "from_version": int(parent.get("version", 0)), "candidate_version": int(cand.get("version", 0)),
            "acc_prev": e.get("acc_prev"), "acc_new": e.get("acc_new"), "reason": e.get("reason", "")})
    return [{"slot": slot, "decisions": events,
             "versions": sorted({0} | {d["candidate_version"] for d in events if d["kind"] == "accepted"})}
            for slot, events in sorted(slots.items())]


def _images(run_dir: Path) -> dict[str, str]:
    return {p.stem: "data:image/png;base64," + base64.b64encode(p.read_bytes()).decode()
            for p in sorted(run_dir.glob("*.png"))}


def build_view(run_dir: Path, limit: int = DEFAULT_LIMIT) -> dict[str, Any]:
    """Everything the page shows for ``run_dir``; at most ``limit`` trajectories with their steps
    (every k-th in stream order beyond that, so each round keeps its share).

    Raises:
        FileNotFoundError: ``run_dir`` is not a directory.
    """
    if not run_dir.is_dir():
        raise FileNotFoundError(f"run directory {str(run_dir)!r} does not exist")
    cfg = _config(run_dir)
    rounds = read_rounds(run_dir / "metrics.jsonl")
    records = list(read_events(run_dir / "events" / "judged.jsonl", "trajectory.trajectory_id"))
    groups: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for rec in records:
        groups[rec["trajectory"].get("job_id", "")].append(rec)
    advantages: dict[str, list[float]] = {}
    for group in groups.values():
        t = group[0]["trajectory"]
        if (t.get("split", "") or "train") == "train" and not t.get("is_candidate", False):
            advantages.update(_group_advantages(group, cfg))
    total = len(records)
    stride = max(1, -(-total // limit)) if limit > 0 else 1
    kept = records[::stride][:limit] if limit > 0 else records
    trajectories, details = [], {}
    for rec in kept:
        tid = rec["trajectory"]["trajectory_id"]
        steps = _steps(rec, advantages.get(tid), cfg)
        trajectories.append(_summary(rec, steps))
        details[tid] = steps
    tasks = list(read_events(run_dir / "events" / "tasks.jsonl", "job_id"))
    planned = cfg.loop.rounds
    return {"run": run_dir.name, "rounds_planned": planned, "finished": (run_dir / "report.md").exists(),
            "rounds": rounds, "images": _images(run_dir), "pool": _pool(run_dir),
            "trajectories": trajectories, "details": details, "total_trajectories": total,
            "limit": limit, "tasks_reported": len(tasks),
            "events_recorded": (run_dir / "events").is_dir(),
            "config": json.loads(cfg.model_dump_json())}
