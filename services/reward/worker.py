"""Judge workers: completed trajectories in (rla.traj.completed), judged trajectories out; live
trajectories (rla.traj.live.completed.<tenant>.<episode>, durable ``reward-judges-live``) are judged
with the chat rubric and go out on rla.traj.live.judged.<tenant>.<episode>.

Per trajectory (durable consumer ``reward-judges`` on the TRAJ log): skip it when the marks
bucket says it was judged already → judge every step m times → publish `JudgedTrajectory` on
``rla.traj.judged`` with msg id ``<trajectory_id>/judged`` → mark it judged → ack. (Not the bare
trajectory id: JetStream de-duplicates per *stream*, and the completed trajectory was published on
the same TRAJ stream with exactly that id, so the judged event would be dropped.)

Exactly one judged event per trajectory id, under at-least-once delivery:

* a redelivery, or the same trajectory published twice, inside the stream's duplicate window
  (``nats.duplicate_window_s``) is judged again but its publish is dropped by JetStream (same
  judged msg id); this also covers a crash between publish and mark;
* after the window, the mark (KV bucket ``reward.judged_bucket``, kept as long as the TRAJ log
  keeps trajectories) skips it before any work. Only a crash between publish and mark followed by
  a redelivery later than the window could publish twice; the ack wait (30 s) is far below the
  window (120 s), so that needs a message held unacked across a restart for minutes.

Re-judging old trajectories with a newer judge is a replay: a new durable consumer and a fresh
marks bucket (``reward.judged_bucket``), never a change to this one.

A shadow judge (``reward.shadow``: a name) runs the same handler with ``shadow`` set: its own
durable consumers and marks bucket, votes published on ``rla.traj.shadow.<name>`` (live:
``rla.traj.live.shadow.<tenant>.<episode>.<name>``, erased with the episode) under msg id
``<trajectory_id>/shadow/<name>``. The critic reads only ``rla.traj.judged`` and
``rla.traj.live.judged.>``, so nothing trains from a shadow's votes.

Messages of one fetch are handled concurrently (``bus.consumer(..., concurrent=True)``), so their steps meet in
the shared `JudgeBatcher` and are judged in common generate batches.
"""

from __future__ import annotations

import hashlib
import logging
import re
from typing import TypeVar

from google.protobuf.message import Message
from nats.js import JetStreamContext
from nats.js.errors import KeyNotFoundError
from nats.js.kv import KeyValue
from prometheus_client import Counter
from rlanything.v1.events_pb2 import JudgedTrajectory, StepJudgement, Trajectory

from services.common.bus import Delivery, EventBus
from services.common.errors import InvalidEventError
from services.common.kv import escape_id, open_bucket
from services.common.rounds import judged_id
from services.common.streams import EVAL_SPLITS, STREAMS, Subjects
from services.reward.batcher import JudgeBatcher, Judged
from services.reward.judges import steps_of
from services.reward.votes import label_vote

__all__ = ["JudgedMarks", "TrajectoryJudger", "judged_subject", "mark_key", "MARK_TTL_S"]

log = logging.getLogger("rlanything.reward")
TRAJECTORIES = Counter("rla_reward_trajectories_total", "Completed trajectories by outcome (judged, duplicate).",
                       ["outcome"])
VOTES = Counter("rla_reward_votes_total", "Votes cast by judge workers, by value (good, bad, invalid).", ["value"])
LIVE_AGREEMENT = Counter("rla_reward_live_agreement_total", "Judged live turns that carry the user's thumbs, by "
                         "whether the judge's mean vote has the thumbs' sign (yes, no, tie: mean vote 0).", ["agree"])
MARK_TTL_S = next(s.max_age_s for s in STREAMS if s.name == "TRAJ")
"""Derived: seconds a judged mark is kept, as long as the TRAJ log keeps the trajectory."""
_KEY_OK = re.compile(r"^[-/_=.a-zA-Z0-9]+$")
_VOTE_NAME = {1: "good", -1: "bad", 0: "invalid"}
M = TypeVar("M", bound=Message)


def judged_subject(t: Trajectory, shadow: str = "") -> str:
    """Where the judged event of ``t`` goes: the running judge's subject, or the shadow's own."""
    live = t.source == "ingest"
    if shadow:
        return (f"{Subjects.TRAJ_LIVE_SHADOW}.{t.tenant}.{escape_id(t.episode_id)}.{shadow}" if live
                else f"{Subjects.TRAJ_SHADOW}.{shadow}")
    # one subject per live episode (…<tenant>.<escaped episode id>): erasing a user purges it
    return f"{Subjects.TRAJ_LIVE_JUDGED}.{t.tenant}.{escape_id(t.episode_id)}" if live else Subjects.TRAJ_JUDGED


def mark_key(trajectory_id: str) -> str:
    """A valid KV key for ``trajectory_id``: the id itself when NATS allows it, else a SHA-256 digest."""
    if (len(trajectory_id) <= 256 and _KEY_OK.match(trajectory_id) and not trajectory_id.startswith(".")
            and not trajectory_id.endswith(".")):
        return trajectory_id
    return "sha256." + hashlib.sha256(trajectory_id.encode()).hexdigest()


class JudgedMarks:
    """The set of judged trajectory ids (KV bucket; value = the RM version that judged it)."""

    def __init__(self, kv: KeyValue) -> None:
        self.kv = kv

    @classmethod
    async def open(cls, js: JetStreamContext, bucket: str, replicas: int = 1) -> "JudgedMarks":
        """Open (or create, with a TTL of `MARK_TTL_S`, on ``replicas`` nodes) the marks bucket."""
        return cls(await open_bucket(js, bucket, history=1, ttl_s=MARK_TTL_S, replicas=replicas))

    async def seen(self, trajectory_id: str) -> bool:
        """Whether ``trajectory_id`` was judged and published already."""
        try:
            entry = await self.kv.get(mark_key(trajectory_id))
        except KeyNotFoundError:
            return False
        return entry.value is not None

    async def mark(self, trajectory_id: str, version: int) -> None:
        """Record that ``trajectory_id`` was published (judged by RM ``version``)."""
        await self.kv.put(mark_key(trajectory_id), str(version).encode())

    async def forget(self, trajectory_id: str) -> None:
        """Purge the mark of ``trajectory_id`` (an erased episode's): the key and its history go, and
        the trajectory is judged again if it is posted again."""
        await self.kv.purge(mark_key(trajectory_id))


class TrajectoryJudger:
    """The handler of ``rla.traj.completed``: judge, publish, mark."""

    def __init__(self, bus: EventBus, batcher: JudgeBatcher, marks: JudgedMarks, votes: int,
                 temperature: float, judge_eval: bool = False, shadow: str = "") -> None:
        self.bus = bus
        self.shadow = shadow
        """A shadow judge's name (its votes go to its own subject); '' = the running judge."""
        self.batcher = batcher
        self.marks = marks
        self.votes = votes
        self.temperature = temperature
        self.judge_eval = judge_eval
        """Judge held-out/OOD rollouts too (``reward.judge_eval``); off: empty judgements."""

    async def on_trajectory(self, t: Trajectory, delivery: Delivery) -> None:
        """Consumer handler: publish the trajectory's `JudgedTrajectory` once.

        Raises:
            InvalidEventError: no trajectory id (dead-lettered: it could never be de-duplicated).
        """
        if not t.trajectory_id:
            raise InvalidEventError("trajectory without trajectory_id; the rollout worker must set "
                                    "'<job_id>/<rollout_index>'")
        if await self.marks.seen(t.trajectory_id):
            TRAJECTORIES.labels("duplicate").inc()
            log.info("already judged; skipped", extra={"trajectory_id": t.trajectory_id,
                                                      "deliveries": delivery.num_delivered})
            return
        if t.split in EVAL_SPLITS and not self.judge_eval:
            # Evaluation rollouts train nothing: pass them on with one empty judgement per step.
            judged = Judged([StepJudgement() for _ in t.steps], self.batcher.judge.model_version)
        else:
            judged = await self.batcher.judge_steps(steps_of(t), self.votes, self.temperature)
        for step, judgement in zip(t.steps, judged.judgements):
            judgement.step_index = step.index
            for v in judgement.votes:
                VOTES.labels(_VOTE_NAME[v.value]).inc()
        event = JudgedTrajectory(trajectory=t, judgements=judged.judgements,
                                 reward_model_version=judged.model_version, judge_s=judged.seconds)
        live = t.source == "ingest"
        if live:
            for step, judgement in zip(t.steps, judged.judgements):
                label = label_vote(step.oracle_label)
                if label and judgement.votes:
                    m = judgement.mean_vote
                    LIVE_AGREEMENT.labels("tie" if m == 0 else "yes" if (m > 0) == (label > 0) else "no").inc()
        ack = await self.bus.publish(judged_subject(t, self.shadow), event,
                                     msg_id=judged_id(t.trajectory_id, self.shadow))
        await self.marks.mark(t.trajectory_id, judged.model_version)
        TRAJECTORIES.labels("duplicate" if ack.duplicate else "judged").inc()
        log.info("judged", extra={"trajectory_id": t.trajectory_id, "steps": len(t.steps),
                                  "version": judged.model_version, "duplicate_publish": bool(ack.duplicate)})
