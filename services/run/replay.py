"""`rlanything replay`: judge a finished run's stored trajectories again with another judge and
compare, without re-running any rollout.

The trajectories come from the run's event log (``events/judged.jsonl``); each is sent to the
RewardModel at the given address as the same `JudgeSteps` request the live judges build
(`services.reward.judges.steps_of`). The judge is a running server (``host:port``) or a run config
whose ``reward:`` section describes it (`services.run.judge_process.local_judge` starts it on a
private NATS server and stops it afterwards). A run with a shadow judge needs no new judging:
`shadow_pairs` pairs its stored votes (``events/shadow.jsonl``) with the running judge's. `compare` (pure) puts the stored and the new votes side by
side, per task family and overall: step accuracy against the oracle labels (sign of S̄ = the
label; S̄ = 0 is wrong, as in the run's metrics), the share of steps whose votes are identical,
the agreement of the two judges' signs, outcome accuracy (sign of the mean S̄ over a trajectory's
steps = its outcome) and the invalid-vote rate.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
from google.protobuf import json_format
from rlanything.v1 import reward_pb2, reward_pb2_grpc
from rlanything.v1.events_pb2 import STEP_LABEL_BAD, STEP_LABEL_GOOD, Trajectory

from services.reward.judges import steps_of
from services.run.recorder import read_events

__all__ = ["StepPair", "VoteDiff", "compare", "replay_run", "shadow_pairs", "report_markdown", "vote_diffs",
           "write_pairs"]


@dataclass(frozen=True)
class StepPair:
    """One judged step: its family, oracle label (+1, −1, 0 = none), the trajectory's outcome,
    the stored and the new votes, and its index in the trajectory."""

    family: str
    trajectory_id: str
    label: int
    outcome: int
    stored: tuple[int, ...]
    replayed: tuple[int, ...]
    step: int = 0


@dataclass(frozen=True)
class VoteDiff:
    """A step whose replayed votes differ from the stored ones: which vote positions (1-based) differ
    (a vote one side did not cast counts as differing)."""

    trajectory_id: str
    step: int
    family: str
    label: int
    stored: tuple[int, ...]
    replayed: tuple[int, ...]
    differing: tuple[int, ...]


def vote_diffs(pairs: Iterable[StepPair]) -> list[VoteDiff]:
    """Every step whose votes differ, in the order of ``pairs`` (pure)."""
    out = []
    for p in pairs:
        n = max(len(p.stored), len(p.replayed))
        differing = tuple(k + 1 for k in range(n)
                          if k >= len(p.stored) or k >= len(p.replayed) or p.stored[k] != p.replayed[k])
        if differing:
            out.append(VoteDiff(p.trajectory_id, p.step, p.family, p.label, p.stored, p.replayed, differing))
    return out


def _sign(values: Sequence[int]) -> int:
    mean = sum(values) / max(1, len(values))
    return 1 if mean > 0 else -1 if mean < 0 else 0


def _summary(pairs: Sequence[StepPair]) -> dict[str, float]:
    labelled = [p for p in pairs if p.label]
    by_traj: dict[str, list[StepPair]] = defaultdict(list)
    for p in pairs:
        by_traj[p.trajectory_id].append(p)

    def outcome_acc(which: str) -> float:
        hits = [_sign([_sign(getattr(p, which)) for p in ps]) == ps[0].outcome for ps in by_traj.values()]
        return sum(hits) / len(hits) if hits else float("nan")

    votes = [v for p in pairs for v in p.replayed]
    return {
        "steps": float(len(pairs)), "labelled_steps": float(len(labelled)),
        "step_accuracy_stored": sum(_sign(p.stored) == p.label for p in labelled) / len(labelled) if labelled else float("nan"),
        "step_accuracy_replayed": sum(_sign(p.replayed) == p.label for p in labelled) / len(labelled) if labelled else float("nan"),
        "identical_votes": sum(p.stored == p.replayed for p in pairs) / len(pairs) if pairs else float("nan"),
        "sign_agreement": sum(_sign(p.stored) == _sign(p.replayed) for p in pairs) / len(pairs) if pairs else float("nan"),
        "outcome_accuracy_stored": outcome_acc("stored"), "outcome_accuracy_replayed": outcome_acc("replayed"),
        "invalid_vote_rate_replayed": sum(v == 0 for v in votes) / len(votes) if votes else float("nan"),
    }


def compare(pairs: Iterable[StepPair]) -> dict[str, dict[str, float]]:
    """Per family (and ``"all"``): the figures of the module docstring."""
    pairs = list(pairs)
    families = sorted({p.family for p in pairs})
    return {"all": _summary(pairs), **{f: _summary([p for p in pairs if p.family == f]) for f in families}}


def _label(value: int) -> int:
    return 1 if value == STEP_LABEL_GOOD else -1 if value == STEP_LABEL_BAD else 0


def replay_run(run_dir: Path, address: str, votes: int = 0, temperature: float = 0.0, limit: int = 0,
               judge_version: int | None = None, timeout_s: float = 120.0, greedy: bool = False) -> list[StepPair]:
    """Judge the stored trajectories of ``run_dir`` again at ``address``; ``votes`` 0 = as many as
    each step had; ``temperature`` 0 = the judge's configured one; ``greedy``: every vote greedy
    (temperature 0 at the judge, whatever it is configured with; ``temperature`` must then be 0);
    ``judge_version``: only trajectories the run judged with that RM version.

    Raises:
        FileNotFoundError: the run has no ``events/judged.jsonl``.
        grpc.RpcError: the judge refused or failed a request.
    """
    path = run_dir / "events" / "judged.jsonl"
    if not path.exists():
        raise FileNotFoundError(f"{path} does not exist (runs record it since `logging.events`)")
    pairs: list[StepPair] = []
    with grpc.insecure_channel(address) as channel:
        stub = reward_pb2_grpc.RewardModelStub(channel)
        for n, record in enumerate(read_events(path, "trajectory.trajectory_id")):
            if limit and n >= limit:
                break
            if judge_version is not None and int(record.get("reward_model_version", 0)) != judge_version:
                continue
            trajectory = json_format.ParseDict(record["trajectory"], Trajectory(), ignore_unknown_fields=True)
            stored: list[Any] = record.get("judgements", [])
            m = votes or max((len(j.get("votes", [])) for j in stored), default=0)
            if not trajectory.steps or not m:
                continue
            response = stub.JudgeSteps(reward_pb2.JudgeStepsRequest(steps=steps_of(trajectory), votes=m,
                                                                     temperature=temperature, greedy=greedy),
                                       timeout=timeout_s)
            for k, (step, old, new) in enumerate(zip(trajectory.steps, stored, response.judgements)):
                pairs.append(StepPair(trajectory.task.family, trajectory.trajectory_id, _label(step.oracle_label),
                                      trajectory.outcome, _votes(old), tuple(v.value for v in new.votes), k))
    return pairs


def _votes(judgement: dict[str, Any]) -> tuple[int, ...]:
    return tuple(int(v.get("value", 0)) for v in judgement.get("votes", []))


def shadow_pairs(run_dir: Path) -> list[StepPair]:
    """The shadow judge's stored votes (``events/shadow.jsonl``) beside the running judge's, step by
    step, for every trajectory both judged with votes (evaluation rollouts carry none).

    Raises:
        FileNotFoundError: the run has no ``events/judged.jsonl`` or ``events/shadow.jsonl``.
    """
    paths = [run_dir / "events" / f"{stem}.jsonl" for stem in ("judged", "shadow")]
    for path in paths:
        if not path.exists():
            raise FileNotFoundError(f"{path} does not exist (a shadow judge records it: launcher.shadow_judge)")
    running = {r["trajectory"]["trajectory_id"]: r for r in read_events(paths[0], "trajectory.trajectory_id")}
    pairs: list[StepPair] = []
    for record in read_events(paths[1], "trajectory.trajectory_id"):
        stored = running.get(record["trajectory"]["trajectory_id"])
        if stored is None:
            continue
        t = json_format.ParseDict(record["trajectory"], Trajectory(), ignore_unknown_fields=True)
        for k, (step, old, new) in enumerate(zip(t.steps, stored.get("judgements", []), record.get("judgements", []))):
            if old.get("votes") and new.get("votes"):
                pairs.append(StepPair(t.task.family, t.trajectory_id, _label(step.oracle_label), t.outcome,
                                      _votes(old), _votes(new), k))
    return pairs


def report_markdown(figures: dict[str, dict[str, float]], run_dir: Path, address: str,
                    pairs: Sequence[StepPair] | None = None, max_diff_rows: int = 1000) -> str:
    """The comparison as a markdown table (one row per family, then all); ``address`` says which
    judge made the replayed votes. With ``pairs``, a second table lists the steps whose votes
    differ (`vote_diffs`: trajectory, step, family, oracle label, stored and replayed votes, the
    1-based positions that differ), at most ``max_diff_rows`` of them, then a count of the rest."""
    keys = list(next(iter(figures.values())).keys()) if figures else []
    lines = [f"# Replay of {run_dir.name} against {address}", "",
             "| family | " + " | ".join(keys) + " |", "|---|" + "---:|" * len(keys)]
    for family in [f for f in figures if f != "all"] + ["all"]:
        lines.append(f"| {family} | " + " | ".join(f"{figures[family][k]:.0f}" if k.endswith("steps") else
                                                    f"{figures[family][k]:.3g}" for k in keys) + " |")
    if pairs is not None:
        diffs = vote_diffs(pairs)
        lines += ["", "## Votes that differ", "",
                  f"{len(diffs)} of {len(pairs)} steps have votes that differ (votes: +1 good, -1 bad, 0 invalid; "
                  "step: its index in the trajectory; vote: 1-based positions that differ).", "",
                  "| trajectory | step | family | label | stored | replayed | vote |", "|---|---:|---|---:|---|---|---|"]
        for d in diffs[:max_diff_rows]:
            lines.append(f"| {d.trajectory_id} | {d.step} | {d.family} | {d.label} | {_vote_text(d.stored)} | "
                         f"{_vote_text(d.replayed)} | {', '.join(map(str, d.differing))} |")
        if len(diffs) > max_diff_rows:
            lines += ["", f"({len(diffs) - max_diff_rows} more steps differ.)"]
    return "\n".join(lines) + "\n"


def write_pairs(pairs: Iterable[StepPair], path: Path) -> None:
    """Every compared step as one JSON line (family, trajectory_id, step, label, outcome, stored,
    replayed), in the order judged: the report's tables in machine-readable form."""
    with path.open("w") as f:
        for p in pairs:
            f.write(json.dumps({"family": p.family, "trajectory_id": p.trajectory_id, "step": p.step,
                                "label": p.label, "outcome": p.outcome, "stored": list(p.stored),
                                "replayed": list(p.replayed)}) + "\n")


def _vote_text(votes: Sequence[int]) -> str:
    return " ".join(f"{v:+d}" if v else "0" for v in votes)
