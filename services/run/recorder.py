"""Write the loop's events to ``runs/<id>/events/`` as JSON lines, for `rlanything view`.

Five files, each fed by a `StreamFollower` from the first stream message on (so a resumed run
re-reads the store and a restart of NATS loses nothing), one JSON object per line:

* ``judged.jsonl``: every `JudgedTrajectory` (the trajectory with its steps, and the m votes of
  each step with their text), without token ids and log-probs;
* ``tasks.jsonl``: every `TaskReport` (a closed group: acc, wins, the judge's bad steps);
* ``pool.jsonl``: every `TaskPoolEvent` (requested, proposed, accepted, rejected, with reasons);
* ``models.jsonl``: every `ModelVersion` announced (with the sample batches it was trained on);
* ``shadow.jsonl``: every `JudgedTrajectory` of a shadow judge (``launcher.shadow_judge``; empty
  without one), compared with the running judge's by ``rlanything replay RUN_DIR --shadow``.

A line may repeat after a resume (the follower replays the store): readers de-duplicate by id
(`read_events`). `EventRecorder.close` lets every file catch up with its stream before it stops,
so a run's log holds every event stored before the run ended.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from google.protobuf import json_format
from google.protobuf.message import Message
from nats.aio.client import Client as NATS
from nats.aio.msg import Msg
from rlanything.v1.events_pb2 import JudgedTrajectory, ModelVersion, TaskPoolEvent, TaskReport

from services.common.streams import Subjects
from services.common.task_stop import cancel_until_done
from services.run.monitor import StreamFollower, wait_caught_up

__all__ = ["record_events", "read_events", "EVENT_FILES", "to_json", "EventRecorder"]

log = logging.getLogger("rlanything.run")

EVENT_FILES = {"judged": ("TRAJ", Subjects.TRAJ_JUDGED, JudgedTrajectory),
               "tasks": ("REPORTS", Subjects.CRITIC_TASK, TaskReport),
               "pool": ("REPORTS", Subjects.ENV_POOL, TaskPoolEvent),
               "models": ("MODELS", "rla.models.>", ModelVersion),
               "shadow": ("TRAJ", f"{Subjects.TRAJ_SHADOW}.>", JudgedTrajectory)}
"""File stem → (stream, subject, message type)."""
_DROPPED = {"prompt_token_ids", "response_token_ids", "behaviour_logprobs"}


def _strip(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _strip(v) for k, v in value.items() if k not in _DROPPED}
    if isinstance(value, list):
        return [_strip(v) for v in value]
    return value


def to_json(message: Message) -> dict[str, Any]:
    """``message`` as a JSON-ready dict (proto field names, defaults included), token ids dropped."""
    return _strip(json_format.MessageToDict(message, preserving_proto_field_name=True,
                                            always_print_fields_with_no_presence=True))


@dataclass
class EventRecorder:
    """The followers writing ``events/*.jsonl`` and their tasks."""

    followers: dict[str, StreamFollower]
    """File stem → its follower."""
    tasks: list[asyncio.Task]
    handles: list[Any]
    """The open files (closed by `stop`, or when their task ends)."""

    async def close(self, timeout_s: float) -> list[str]:
        """Stop recording once every file holds every event its stream stored so far, waiting at
        most ``timeout_s`` seconds; the files are closed on return. Returns the stems of the files
        that had not caught up (logged as a warning; empty: the log is complete)."""
        lagging = await wait_caught_up(list(self.followers.values()), timeout_s)
        names = [stem for stem, f in self.followers.items() if f in lagging]
        if names:
            log.warning("event log may miss the last events", extra={"files": names, "timeout_s": timeout_s})
        await self.stop()
        return names

    async def stop(self, timeout_s: float = 5.0) -> None:
        """Stop recording now (an interrupted run: ``--resume`` replays the streams into the files,
        so nothing is lost), waiting at most ``timeout_s`` seconds for the followers to end; the
        files are closed on return. A cancellation can be lost inside the NATS client's fetch, so
        each follower is also told to stop and cancelled again until it ends."""
        for follower in self.followers.values():
            follower.stop()
        pending = await cancel_until_done(self.tasks, timeout_s)
        if pending:
            log.warning("event recorders did not stop", extra={"tasks": sorted(t.get_name() for t in pending)})
        for handle in self.handles:
            handle.close()


async def record_events(nc: NATS, run_dir: Path) -> EventRecorder:
    """Start following the subjects of `EVENT_FILES` into ``run_dir``/events (stop with
    `EventRecorder.close`). Each line is written and flushed as its message arrives."""
    out = run_dir / "events"
    out.mkdir(parents=True, exist_ok=True)
    tasks = []
    followers = {}
    handles = []
    for stem, (stream, subject, kind) in EVENT_FILES.items():
        handle = open(out / f"{stem}.jsonl", "a", encoding="utf-8")  # noqa: SIM115 - closed with its task

        def sink(msg: Msg, kind: Any = kind, handle: Any = handle) -> None:
            handle.write(json.dumps(to_json(kind.FromString(msg.data)), ensure_ascii=False) + "\n")
            handle.flush()

        follower = StreamFollower(nc, stream, subject, sink)
        task = asyncio.create_task(follower.run(), name=f"record {stem}")
        task.add_done_callback(_closer(handle))
        tasks.append(task)
        followers[stem] = follower
        handles.append(handle)
    return EventRecorder(followers, tasks, handles)


def _closer(handle: Any) -> Callable[[asyncio.Task], None]:
    return lambda _task: handle.close()


def read_events(path: Path, key: str) -> Iterator[dict[str, Any]]:
    """The JSON lines of ``path`` (none if missing), the first of each ``key`` value only (dotted
    paths, comma-separated for a compound key: ``"role,version"``); a line cut short by a crash
    mid-write is skipped."""
    if not path.exists():
        return
    seen: set[str] = set()
    with open(path, encoding="utf-8") as f:
        for line in f:
            try:
                event = json.loads(line)
            except ValueError:
                continue
            ident = "/".join(_dig(event, k) for k in key.split(","))
            if ident in seen:
                continue
            seen.add(ident)
            yield event


def _dig(event: dict[str, Any], dotted: str) -> str:
    value: Any = event
    for part in dotted.split("."):
        value = value.get(part, {}) if isinstance(value, dict) else {}
    return str(value)
